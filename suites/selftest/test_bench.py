"""``xharness bench`` runs end to end and reports what it promises.

Only the structure is checked (ratios, step times, compile counts, the loss cross-check): timing
targets belong in the bench output, and a timed assertion would flake on a shared machine.
"""

from __future__ import annotations

import json

import pytest

from harness import bench, cli


def test_bench_tiny_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bench", "--steps", "5", "--warmup", "2", "--only", "tiny", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["devices"] == 4
    assert report["steps"] == 5 and report["warmup"] == 2
    assert [c["name"] for c in report["cases"]] == ["tiny"]
    case = report["cases"][0]
    assert "error" not in case, case
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
