"""What a scenario expects is stated per backend: a variant whose mechanism a backend lacks is
skipped there with the reason (in the runner's result, the cell's JUnit record and ``xharness
list --json``), and a race variant's trial count makes its outcome independent of luck.

No GPU is needed: the runner learns its backend from ``jax.default_backend()``, which the tests
replace, so the GPU paths run here on the CPU (where the injected bug, aliasing, hits every trial
and the fixed runtime's copy keeps every trial clean).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import pytest
from synthetic import synthetic_scenario

import harness.runtime as xr
from harness.cli import main
from harness.report.junit import read_records
from harness.scenarios import host_aliasing, runner, upstream_jax
from harness.scenarios import upstream_torch_xla as upstream
from harness.scenarios.base import (
    Context,
    InvariantViolation,
    Needs,
    Scenario,
    current_backend,
    trials_for,
)

#: none of these depends on the cell's device count or options: the matrix runs them in cpu-8
pytestmark = pytest.mark.cell_independent

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process reads as a GPU one wherever the harness asks JAX for its backend."""
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in runner.REPLAY_ENV + runner.RUNTIME_ENV:
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------------------------ Needs
def test_a_backend_need_names_the_backends_and_why() -> None:
    needs = Needs(backends=("cpu",), why="the host buffer is adopted only there")
    assert needs.unmet(1, backend="cpu") is None
    reason = needs.unmet(1, backend="gpu")
    assert reason == "runs on cpu only, this run is on gpu (the host buffer is adopted only there)"
    # a caller that has not started JAX does not name a backend: devices are still checked
    assert needs.unmet(1) is None
    assert Needs(devices=2, why="two halves").unmet(1) == "needs at least 2 devices, the cell has 1 (two halves)"
    assert Needs().unmet(1, backend="tpu") is None  # no backends named: any


def test_a_misspelled_backend_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="unknown backend 'cuda'"):
        Needs(backends=("cuda",))


def test_variant_needs_must_name_variants() -> None:
    with pytest.raises(ValueError, match="variant_needs names no variant: nope"):
        _scenario(variant_needs={"nope": Needs(backends=("cpu",))})


def test_the_backend_is_jaxs_default(on_gpu: None) -> None:
    assert current_backend() == "gpu"


# ------------------------------------------------------------------------------ the runner
def _caught(ctx: Context) -> None:
    if xr.faults.active(xr.faults.UNHASHABLE_SPEC):
        raise InvariantViolation("broken by the switch")


ANYWHERE = Needs()


def _scenario(
    variant_needs: dict[str, Needs] | None = None, needs: Needs = ANYWHERE, seen: list[str] | None = None
) -> Scenario:
    def anywhere(ctx: Context) -> None:
        if seen is not None:
            seen.append(f"anywhere on {ctx.backend}")
        _caught(ctx)

    def cpu_mechanism(ctx: Context) -> None:
        if seen is not None:
            seen.append(f"cpu-mechanism on {ctx.backend}")
        _caught(ctx)

    return synthetic_scenario(
        {"anywhere": anywhere, "cpu-mechanism": cpu_mechanism}, needs=needs, variant_needs=variant_needs or {}
    )


CPU_ONLY = Needs(backends=("cpu",), why="the mechanism is the CPU client's")


@pytest.mark.parametrize(("inject", "outcome"), [(False, runner.PASSED), (True, runner.REPRODUCED)])
def test_a_variant_the_backend_lacks_is_skipped_with_its_reason(on_gpu: None, inject: bool, outcome: str) -> None:
    seen: list[str] = []
    result = runner.run(_scenario({"cpu-mechanism": CPU_ONLY}, seen=seen), inject, seed=0, devices=1)
    assert seen == ["anywhere on gpu"]  # the skipped variant never ran
    assert result.backend == "gpu"
    assert result.outcome == outcome  # the scenario's outcome is the variants that ran
    (skipped,) = result.skipped
    assert skipped.variant == "cpu-mechanism" and skipped.outcome == runner.SKIPPED
    assert skipped.error == "runs on cpu only, this run is on gpu (the mechanism is the CPU client's)"
    assert result.to_json()["variants"][1]["outcome"] == "skipped"


def test_on_its_own_backend_the_variant_runs() -> None:
    seen: list[str] = []
    result = runner.run(_scenario({"cpu-mechanism": CPU_ONLY}, seen=seen), True, seed=0, devices=1)
    assert result.backend == "cpu" and not result.skipped
    assert seen == ["anywhere on cpu", "cpu-mechanism on cpu"]
    assert result.outcome == runner.REPRODUCED


def test_a_backend_named_by_the_caller_wins() -> None:
    result = runner.run(_scenario({"cpu-mechanism": CPU_ONLY}), False, seed=0, devices=1, backend="tpu")
    assert result.backend == "tpu" and [v.variant for v in result.skipped] == ["cpu-mechanism"]


def test_a_scenario_no_variant_of_which_can_run_is_skipped(on_gpu: None) -> None:
    result = runner.run(_scenario(needs=CPU_ONLY), True, seed=0, devices=1)
    assert result.outcome == runner.SKIPPED and not result.ok
    assert all("runs on cpu only" in v.error for v in result.variants)


# ------------------------------------------------------------------------------ host-aliasing
def test_host_aliasing_declares_write_after_tensor_cpu_only() -> None:
    scenario = host_aliasing.SCENARIO
    assert scenario.unmet("write-after-tensor", 1, backend="cpu") is None
    assert "runs on cpu only" in (scenario.unmet("write-after-tensor", 1, backend="gpu") or "")
    assert scenario.unmet("loader-buffer-reuse", 1, backend="gpu") is None


@pytest.mark.parametrize(("inject", "outcome"), [(False, runner.PASSED), (True, runner.REPRODUCED)])
def test_host_aliasing_on_a_gpu_runs_the_transfer_race_and_skips_the_cpu_variant(
    on_gpu: None, inject: bool, outcome: str
) -> None:
    result = runner.run(host_aliasing.SCENARIO, inject, seed=0, devices=len(jax.devices()))
    by_name = {v.variant: v for v in result.variants}
    assert result.outcome == outcome, by_name
    skipped = by_name["write-after-tensor"]
    assert skipped.outcome == runner.SKIPPED and "XLA's CPU client" in skipped.error
    loader = by_name["loader-buffer-reuse"]
    if inject:  # the GPU wording, never the CPU's
        assert loader.signature == "transfer-race", loader.error
        assert "the transfer to the gpu read the loader's buffer" in loader.error
        assert "aliases" not in loader.error
    else:
        assert loader.outcome == runner.PASSED


def test_host_aliasing_on_the_cpu_is_unchanged() -> None:
    for inject, outcome in ((False, runner.PASSED), (True, runner.REPRODUCED)):
        result = runner.run(host_aliasing.SCENARIO, inject, seed=0, devices=len(jax.devices()))
        assert result.outcome == outcome and not result.skipped
        if inject:
            assert {v.signature for v in result.variants} == {"aliased-host-buffer"}


# ------------------------------------------------------------------------------ trials
def test_trials_for_the_field_figures() -> None:
    assert trials_for(43 / 50, 1e-13) == 16 == host_aliasing.RACE_TRIALS
    assert 0.14**16 < 1e-13 <= 0.14**15


@pytest.mark.parametrize("hit_rate", [0.01, 0.14, 0.5, 0.75, 0.86, 0.94, 0.999])
@pytest.mark.parametrize("miss", [0.5, 1e-3, 1e-9, 1e-13])
def test_trials_for_is_the_least_k_that_misses_below_the_target(hit_rate: float, miss: float) -> None:
    k = trials_for(hit_rate, miss)
    assert (1 - hit_rate) ** k < miss
    assert k == 1 or (1 - hit_rate) ** (k - 1) >= miss


def test_trials_for_edges() -> None:
    assert trials_for(1.0, 1e-13) == 1  # a race that always hits needs one trial
    assert trials_for(0.5, 0.25) == 3  # 0.5 ** 2 is exactly the target: not below it
    assert trials_for(0.9, 0.5) == 1
    for bad in ((0.0, 1e-3), (1.5, 1e-3), (0.5, 0.0), (0.5, 1.0)):
        with pytest.raises(ValueError):
            trials_for(*bad)
    assert math.isclose(host_aliasing.RACE_BYTES, 4 * 2**20)


# ------------------------------------------------------------------------------ xharness list
def test_list_json_shows_per_variant_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json"]) == 0
    records = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    record = records["host-aliasing"]
    assert record["needs"]["backends"] == []  # the scenario itself runs anywhere
    (only,) = record["variant_needs"].items()
    assert only[0] == "write-after-tensor"
    assert only[1]["backends"] == ["cpu"] and "XLA's CPU client" in only[1]["why"]
    assert set(record["variant_needs"]) <= set(record["variants"])
    stale = records["stale-on-timeout"]["variant_needs"]  # a need of devices, not of a backend
    assert list(stale) == ["sharded-slow-device"] and stale["sharded-slow-device"]["devices"] == 2
    assert stale["sharded-slow-device"]["backends"] == []
    assert all(r["variant_needs"] == {} for i, r in records.items() if i not in ("host-aliasing", "stale-on-timeout"))


def test_list_names_a_gated_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    assert "variant write-after-tensor: cpu only (" in capsys.readouterr().out


# ------------------------------------------------------------------------------ JAX's own GPU trigger
def _has_gpu() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def test_the_jax_gpu_reproducer_lacks_a_gpu_here_in_process() -> None:
    if _has_gpu():
        pytest.skip("this process has a GPU: the reproducer runs the race instead")
    with pytest.raises(upstream.MachineLacks, match="needs a GPU"):
        upstream_jax.device_put_then_write_gpu()


def test_the_jax_gpu_reproducer_is_a_machine_skip_here(monkeypatch: pytest.MonkeyPatch) -> None:
    rep = upstream.find("host-aliasing", "device-put-gpu-transfer-race")
    assert rep.runtime == "jax" and [s.name for s in rep.signatures] == ["transfer-race"]
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # no GPU for the child, whatever this machine has
    outcome = upstream.run_variant(rep, timeout=120)
    assert outcome.outcome == upstream.SKIPPED and outcome.machine_skip, outcome
    assert "needs a GPU" in outcome.error and outcome.release == jax.__version__


def test_the_transfer_race_signature_is_not_the_cpu_wording() -> None:
    race = upstream_jax.TransferRace("jax.device_put(x, gpu) returned before the transfer read x: ...")
    aliased = upstream_jax.HostAliased("jax.device_put(x) shares the numpy buffer: ...")
    (gpu,) = upstream.find("host-aliasing", "device-put-gpu-transfer-race").signatures
    (cpu,) = upstream.find("host-aliasing", "device-put").signatures
    assert gpu.matches_exception(race) and not gpu.matches_exception(aliased)
    assert cpu.matches_exception(aliased) and not cpu.matches_exception(race)


# ------------------------------------------------------------------------------ the cell's JUnit
_FAKE_GPU_PLUGIN = """
    # a pytest plugin for the test below: the process reads as a GPU one
    import jax

    jax.default_backend = lambda: "gpu"
"""


@pytest.mark.skipif(
    os.environ.get("HARNESS_CELL") not in (None, "", "cpu-8"),
    reason="starts its own matrix run; runs in cpu-8 or outside the matrix",
)
def test_a_skipped_variant_and_its_reason_reach_the_cells_junit(tmp_path: Path) -> None:
    (tmp_path / "fake_gpu_backend.py").write_text(textwrap.dedent(_FAKE_GPU_PLUGIN))
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(
        textwrap.dedent(
            f"""
            root = "{ROOT}"
            [cells.as-gpu]
            backend = "cpu"
            devices = 1
            paths = ["suites/regression/test_catalog.py"]
            pytest_args = ["-p", "fake_gpu_backend", "-k", "host-aliasing"]
            timeout = 120
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HARNESS_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH", "")]))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--matrix", str(matrix), "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = {r.nodeid.rsplit("[", 1)[-1]: r for r in read_records(out / "junit" / "as-gpu.xml")}
    for mode in ("fixed", "injected"):
        record = records[f"host-aliasing-{mode}]"]
        assert record.classification == "passed", record.final.message
        assert record.properties["skipped-variants"].startswith("write-after-tensor: runs on cpu only")
