"""``xharness list`` and ``xharness repro`` as a user runs them (each repro is a child process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_xharness

from harness.cli import main
from harness.scenarios import registry


def test_list_json_names_every_scenario(capsys) -> None:
    assert main(["list", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in records] == [s.id for s in registry.all_scenarios()]
    for r in records:
        assert r["upstream"] and r["signatures"] and r["fault"] in r["id"]
        assert all(link.startswith("https://github.com/pytorch/xla/issues/") for link in r["links"])


def test_unknown_scenario_is_a_usage_error(capsys) -> None:
    assert main(["repro", "no-such-scenario"]) == 2
    assert "unknown scenario 'no-such-scenario'" in capsys.readouterr().err


def test_unknown_runtime_is_a_usage_error(capsys) -> None:
    assert main(["repro", "aliased-save", "--runtime", "nope"]) == 2
    assert "unknown runtime" in capsys.readouterr().err


def test_scenario_the_cell_cannot_host_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_xharness("repro", "double-discovery", cwd=tmp_path, env={"JAX_NUM_CPU_DEVICES": "1"})
    assert proc.returncode == 2, proc.stderr
    assert "needs at least 2 devices" in proc.stderr


@pytest.mark.parametrize("inject", [False, True])
def test_repro_json(inject: bool, tmp_path: Path) -> None:
    args = ["repro", "unhashable-spec", "--seed", "7", "--json"] + (["--inject"] if inject else [])
    proc = run_xharness(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["scenario"] == "unhashable-spec"
    assert out["mode"] == ("injected" if inject else "fixed")
    assert out["outcome"] == ("reproduced" if inject else "passed")
    assert out["signature"] == ("unhashable-list" if inject else "")
    assert out["seed"] == 7 and out["seconds"] > 0
    assert (
        out["repro"]
        == "xharness repro unhashable-spec " + ("--inject " if inject else "") + "--seed 7"
    )


def test_race_in_crash_mode_dies_on_a_real_sigsegv(tmp_path: Path) -> None:
    proc = run_xharness(
        "repro",
        "race-on-handles",
        "--inject",
        "--json",
        cwd=tmp_path,
        env={"HARNESS_CRASH_MODE": "signal"},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["outcome"] == "reproduced" and out["signature"] == "sigsegv"
    assert "SIGSEGV" in out["error"]
    assert out["repro"].startswith(
        "HARNESS_CRASH_MODE=signal xharness repro race-on-handles --inject"
    )


def test_human_output_prints_the_replay_line(tmp_path: Path) -> None:
    proc = run_xharness("repro", "aliased-save", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "aliased-save [fixed] passed" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "replay: xharness repro aliased-save --seed 0"
