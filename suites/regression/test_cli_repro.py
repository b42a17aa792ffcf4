"""``xharness list`` and ``xharness repro`` as a user runs them (each repro is a child process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_xharness

from harness.cli import main
from harness.scenarios import registry

pytestmark = pytest.mark.own_process  # each repro is a fresh process of its own topology


@pytest.mark.jax_independent
def test_list_json_names_every_scenario(capsys) -> None:
    assert main(["list", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in records] == [s.id for s in registry.all_scenarios()]
    for r in records:
        # every scenario but one re-creates an upstream bug; stale-on-timeout was found in-house
        assert (bool(r["upstream"]) or r["id"] == "stale-on-timeout") and r["signatures"] and r["fault"] in r["id"]
        repos = {ref.split("#")[0] for ref in r["upstream"]}
        assert len(r["links"]) == len(r["upstream"])
        assert all(any(link.startswith(f"https://github.com/{repo}/issues/") for repo in repos) for link in r["links"])


@pytest.mark.jax_independent
def test_unknown_scenario_is_a_usage_error(capsys) -> None:
    assert main(["repro", "no-such-scenario"]) == 2
    assert "unknown scenario 'no-such-scenario'" in capsys.readouterr().err


@pytest.mark.jax_independent
def test_unknown_runtime_is_a_usage_error(capsys) -> None:
    assert main(["repro", "aliased-save", "--runtime", "nope"]) == 2
    assert "unknown runtime" in capsys.readouterr().err


@pytest.mark.jax_independent
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


# ---------------------------------------------------------------- races under schedule control


def test_race_names_its_schedule_and_that_schedule_replays(tmp_path: Path) -> None:
    proc = run_xharness("repro", "race-on-handles", "--inject", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["outcome"] == "reproduced" and out["signature"] == "placeholder-access"
    assert out["explore"] == "pct"
    assert out["repro"] == "xharness repro race-on-handles --inject --explore pct --seed 0"
    (found,) = [v["exploration"] for v in out["variants"]]
    assert found["strategy"] == "pct" and found["seed"] == 0 and found["schedules"] >= 1
    schedule = found["schedule"]
    assert schedule.startswith("s1:") and found["preemptions"] >= 0
    assert found["replay"] == f"xharness repro race-on-handles --inject --schedule {schedule} --seed 0"

    saved = tmp_path / "failure.txt"
    saved.write_text(f"race-on-handles failed\nschedule:\n{schedule}\n")
    for given in (schedule, str(saved)):
        again = run_xharness("repro", "race-on-handles", "--inject", "--schedule", given, "--json", cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        replayed = json.loads(again.stdout)
        assert replayed["outcome"] == "reproduced" and replayed["explore"] == "replay"
        (v,) = replayed["variants"]
        assert v["exploration"]["schedule"] == schedule and v["exploration"]["schedules"] == 1
        assert v["error"] == out["variants"][0]["error"]
        assert replayed["repro"].endswith(f"--schedule {schedule} --seed 0")


def test_race_fixed_survives_its_schedules_and_dfs_finds_it_injected(tmp_path: Path) -> None:
    fixed = run_xharness("repro", "race-on-handles", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    lines = fixed.stdout.strip().splitlines()
    assert "race-on-handles [fixed] passed" in lines[0]
    assert "pct (seed 0): 20 schedules explored" in fixed.stdout
    assert lines[-1] == "replay: xharness repro race-on-handles --explore pct --seed 0"

    dfs = run_xharness("repro", "race-on-handles", "--inject", "--explore", "dfs", cwd=tmp_path)
    assert dfs.returncode == 0, dfs.stdout + dfs.stderr
    assert "dfs: failed at run 1, schedule s1:" in dfs.stdout
    lines = dfs.stdout.strip().splitlines()
    assert lines[-2].startswith("replay schedule: xharness repro race-on-handles --inject --schedule s1:")
    assert lines[-1] == "replay: xharness repro race-on-handles --inject --explore dfs --seed 0"


@pytest.mark.jax_independent
def test_schedule_flags_are_checked_before_anything_runs(tmp_path: Path, capsys) -> None:
    assert main(["repro", "race-on-handles", "--schedule", "0x3.1"]) == 2
    assert "neither a schedule" in capsys.readouterr().err
    assert main(["repro", "race-on-handles", "--schedule", "s2:0x3"]) == 2
    assert "version 's2'" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("no schedule here\n")
    assert main(["repro", "race-on-handles", "--schedule", str(empty)]) == 2
    assert "no line holds a schedule" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["repro", "race-on-handles", "--explore", "pct", "--schedule", "s1:0"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["repro", "race-on-handles", "--explore", "chaos"])


@pytest.mark.jax_independent
def test_unknown_switch_from_the_command_line(tmp_path: Path) -> None:
    proc = run_xharness("repro", "aliased-save", cwd=tmp_path, env={"HARNESS_FAULTS": "typo"})
    assert proc.returncode == 2, proc.stderr
    assert "HARNESS_FAULTS='typo' (from the environment): unknown name(s) 'typo'" in proc.stderr
    assert "aliased-save, " in proc.stderr  # the switches it accepts
    assert "Traceback" not in proc.stderr


def test_forced_switch_from_the_command_line(tmp_path: Path) -> None:
    proc = run_xharness("repro", "unhashable-spec", cwd=tmp_path, env={"HARNESS_FAULTS": "unhashable-spec"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "note: fault switch 'unhashable-spec' was forced on by HARNESS_FAULTS" in proc.stdout
    assert "replay: HARNESS_FAULTS=unhashable-spec xharness repro unhashable-spec" in proc.stdout


def test_hung_child_dumps_its_stacks(tmp_path: Path) -> None:
    """A run past its limit shows where the child was. The hang is made certain, and placed after
    start-up, by a device that never finishes its first execution (a 600 s execution delay)."""
    proc = run_xharness(
        "repro", "lost-sharding", "--timeout", "6", cwd=tmp_path, timeout=120,
        env={"HARNESS_EXECUTION_DELAY": "600"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "hung: no result within 6 s" in proc.stdout
    assert "most recent call first" in proc.stderr, proc.stderr
    assert "b'" not in proc.stderr
    assert "replay: HARNESS_EXECUTION_DELAY=600 xharness repro lost-sharding --seed 0" in proc.stdout
