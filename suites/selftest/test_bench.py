"""``xharness bench`` runs end to end and reports what it promises.

Only the structure is checked (ratios, step times, compile counts, the loss cross-check): timing
targets belong in the bench output, and a timed assertion would flake on a shared machine.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from harness import bench, cli
from harness.matrix import probe as probe_mod


def test_bench_tiny_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bench", "--steps", "5", "--warmup", "2", "--only", "tiny", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["devices"] == 4
    assert report["backend"] == "cpu" and report["device_kind"] == "cpu"
    assert report["steps"] == 5 and report["warmup"] == 2
    assert [c["name"] for c in report["cases"]] == ["tiny"]
    case = report["cases"][0]
    assert "error" not in case, case
    assert (case["backend"], case["platform"], case["devices"], case["batch"]) == ("cpu", "cpu", 4, 64)
    assert isinstance(case["ratio"], float) and case["ratio"] > 0
    for side in ("runtime_ms", "jax_ms"):
        assert case[side]["median"] > 0
        assert case[side]["p10"] <= case[side]["median"] <= case[side]["p90"]
    assert case["runtime_compiles"]["warmup"] >= 1
    assert case["runtime_compiles"]["timed"] == 0
    assert case["jax_compiles"]["timed"] == 0
    # both sides start from the same parameters and data, so the first losses agree
    assert case["loss_abs_diff"] < 1e-4
    assert isinstance(case["meets_target"], bool)
    # the runtime's step by phase: each took time, and together they are about the step
    phases = case["runtime_phases_ms"]
    assert set(phases) == {"record", "mark_step", "wait"} and all(v > 0 for v in phases.values())
    assert sum(phases.values()) <= case["runtime_ms"]["p90"] * 1.5
    assert case["wait_over_jax"] == pytest.approx(phases["wait"] / case["jax_ms"]["median"])
    # live device bytes per side after the steady state, against parameter + optimizer state
    memory = case["memory"]
    assert memory["param_opt_bytes"] > 0
    assert memory["jax_bytes"] >= memory["param_opt_bytes"]
    assert memory["runtime_bytes"] <= memory["jax_bytes"], memory  # param aliasing is on


def test_bench_table_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bench", "--steps", "3", "--warmup", "1", "--only", "tiny"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "tiny" in out and "ratio" in out
    assert "record" in out and "mark_step" in out and "jax.jit's step" in out
    assert cli.main(["bench", "--steps", "0"]) == cli.EXIT_USAGE


@pytest.mark.jax_independent
def test_bench_cases_are_named_and_step_is_the_default() -> None:
    assert {"step", "race"} <= set(bench.BENCHES)
    for name, case in bench.BENCHES.items():
        assert case.name == name and case.help.strip() and callable(case.run)
    args = cli.build_parser().parse_args(["bench"])
    assert args.case == "step"
    assert cli.main(["bench", "race", "--seeds", "0"]) == cli.EXIT_USAGE


def test_bench_race_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bench", "race", "--seeds", "2", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["name"] == "race" and report["seeds"] == 2
    assert report["command"] == "xharness bench race --seeds 2"
    assert set(report["scenarios"]) == {"race-on-handles", "wait-gap"}
    kinds = {"race-on-handles": ["PlaceholderAccessError"], "wait-gap": ["InvariantViolation"]}
    for scenario, result in report["scenarios"].items():
        injected, fixed, goals = result["injected"], result["fixed"], result["goals"]
        for name in ("pct", "dfs", "random", "hypothesis", "stress"):
            assert injected[name]["found"] == 2, (scenario, name, injected[name])
            assert 1 <= injected[name]["median"] <= injected[name]["max"]
        for name in ("pct", "dfs", "random", "hypothesis"):
            assert injected[name]["replayed"] == 2, (scenario, name)
        assert injected["failure_kinds"] == kinds[scenario]
        assert injected["hypothesis"]["max_preemptions"] <= 2
        assert fixed["failures"] == 0 and fixed["explored"] >= 500, scenario
        assert fixed["dfs"]["exhausted"] is True and fixed["dfs"]["schedules"] > 1
        assert (
            goals["every_schedule_replays"] and goals["dfs_exhausted"] and goals["pct_every_seed"]
        )
    assert report["points"]["points_per_step"] > 0 and report["points"]["ns_per_point"] >= 0


@pytest.mark.jax_independent
def test_every_case_has_a_description_and_target() -> None:
    assert set(bench.CASES) == {"tiny", "medium", "vit"}
    assert bench.CASES["tiny"].target == 1.3
    assert bench.CASES["vit"].target == 1.3
    assert bench.CASES["medium"].target == 1.05
    for name, case in bench.CASES.items():
        assert case.name == name
        assert case.description.strip(), f"{name}: no description"
        assert case.target_text.strip(), f"{name}: no target text"
        assert case.target is None or case.target > 0, f"{name}: target {case.target!r}"


# -- --backend ---------------------------------------------------------------------------------------
def _no_accelerator_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    real = probe_mod._has_module
    plugins = set(probe_mod._GPU_PLUGINS) | set(probe_mod._TPU_PLUGINS)
    monkeypatch.setattr(probe_mod, "_has_module", lambda name: False if name in plugins else real(name))


@pytest.mark.jax_independent
@pytest.mark.parametrize(("backend", "reason"), [("gpu", "no JAX GPU plugin"), ("tpu", "libtpu is not installed")])
def test_an_absent_backend_exits_with_its_own_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], backend: str, reason: str
) -> None:
    _no_accelerator_plugins(monkeypatch)
    assert cli.main(["bench", "--backend", backend, "--json"]) == bench.EXIT_NO_BACKEND
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"xharness bench: {backend} backend not available: {reason}" in captured.err
    assert "Traceback" not in captured.err
    assert bench.EXIT_NO_BACKEND not in (cli.EXIT_OK, cli.EXIT_FAILED, cli.EXIT_USAGE, 3, 4)


@pytest.mark.jax_independent
def test_backend_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "race", "--backend", "gpu"]) == cli.EXIT_USAGE
    assert "--backend applies to the step case" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:  # argparse: not a backend at all
        cli.main(["bench", "--backend", "xpu"])
    assert caught.value.code == cli.EXIT_USAGE
    assert cli.build_parser().parse_args(["bench"]).backend == "cpu"


def _fake_case(name: str, **where: Any) -> dict[str, Any]:
    """A child's result line, as ``_measure`` prints it."""
    stats = {"median": 1.0, "mean": 1.0, "p10": 1.0, "p90": 1.0, "min": 1.0}
    return {
        "name": name, "description": bench.CASES[name].description, **where,
        "runtime_ms": stats, "jax_ms": stats, "ratio": 1.0, "target": "<= 1.3", "meets_target": True,
        "param_aliasing": True, "runtime_compiles": {"warmup": 1, "timed": 0},
        "runtime_phases_ms": {"record": 0.1, "mark_step": 0.1, "wait": 0.8}, "wait_over_jax": 0.8,
        "memory": {"param_opt_bytes": 10, "runtime_bytes": 10, "jax_bytes": 10, "runtime_over_jax": 1.0},
        "loss_abs_diff": 0.0,
    }


@pytest.mark.jax_independent
def test_the_child_gets_the_backend_and_every_device_of_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--backend gpu``: the child selects the CUDA platform, is not held to a CPU count, and the
    report names the device it measured."""
    calls: list[tuple[list[str], dict[str, str]]] = []
    where = {"backend": "gpu", "platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3", "devices": 2, "batch": 64}

    def child(cmd: list[str], env: dict[str, str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append((cmd, env))
        return subprocess.CompletedProcess(cmd, 0, json.dumps(_fake_case(cmd[cmd.index("--child") + 1], **where)), "")

    monkeypatch.setattr(bench, "backend_absent", lambda backend: None)
    monkeypatch.setattr(bench.subprocess, "run", child)
    assert cli.main(["bench", "--backend", "gpu", "--only", "tiny", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    ((cmd, env),) = calls
    assert cmd[cmd.index("--backend") + 1] == "gpu" and "--devices" not in cmd
    assert env["JAX_PLATFORMS"] == "cuda"
    assert (report["backend"], report["devices"], report["device_kind"]) == ("gpu", 2, "NVIDIA H100 80GB HBM3")
    assert cli.main(["bench", "--backend", "gpu", "--only", "tiny"]) == 0
    assert "xharness bench: 2 GPU device(s), NVIDIA H100 80GB HBM3, data-parallel" in capsys.readouterr().out
    calls.clear()
    assert cli.main(["bench", "--only", "tiny", "--json"]) == 0  # the default: 4 CPU devices, as before
    ((cmd, env),) = calls
    assert cmd[cmd.index("--backend") + 1] == "cpu" and cmd[cmd.index("--devices") + 1] == "4"
    assert (env["JAX_PLATFORMS"], env["JAX_NUM_CPU_DEVICES"]) == ("cpu", "4")


@pytest.mark.jax_independent
def test_a_backend_jax_cannot_start_is_reported_as_absent(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plugin is installed but the backend does not start (a driver too old): the child says
    so on its JSON line and the command ends as for an absent backend, not as a failed measurement."""
    line = json.dumps({"name": "tiny", "error": "JAX could not start its gpu backend (RuntimeError: no CUDA driver)"})
    monkeypatch.setattr(bench, "backend_absent", lambda backend: None)
    monkeypatch.setattr(
        bench.subprocess, "run",
        lambda cmd, **_: subprocess.CompletedProcess(cmd, bench.EXIT_NO_BACKEND, line, "Traceback (most recent call last)"),
    )
    assert cli.main(["bench", "--backend", "gpu"]) == bench.EXIT_NO_BACKEND
    captured = capsys.readouterr()
    assert "gpu backend not available: JAX could not start its gpu backend (RuntimeError: no CUDA driver)" in captured.err
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.skipif(any(probe_mod._has_module(m) for m in probe_mod._GPU_PLUGINS), reason="a GPU plugin is installed")
def test_the_child_on_a_platform_jax_lacks_exits_with_the_reason() -> None:
    result = bench._run_child("tiny", 1, 1, "gpu", None)
    assert result["no_backend"] is True
    assert result["error"].startswith("JAX could not start its gpu backend"), result


@pytest.mark.parametrize(("devices", "batch"), [(1, 64), (3, 66)])
def test_a_mesh_of_any_size_measures(devices: int, batch: int) -> None:
    """The step on a one-device mesh (one GPU is a valid mesh) and on an odd one, whose batch is
    rounded up to a multiple of the count; both sides still compute the same first loss."""
    result = bench._run_child("tiny", 3, 1, "cpu", devices)
    assert "error" not in result, result
    assert (result["devices"], result["batch"], result["device_kind"]) == (devices, batch, "cpu")
    assert result["loss_abs_diff"] < 1e-4
    assert result["runtime_compiles"]["timed"] == 0


@pytest.mark.jax_independent
def test_the_batch_is_a_multiple_of_the_devices() -> None:
    assert [bench._fit(64, n) for n in (1, 2, 3, 4, 8)] == [64, 64, 66, 64, 64]
    assert [bench._fit(bench.VIT_BATCH, n) for n in (1, 2, 4, 8, 6)] == [16, 16, 16, 16, 18]
