"""The runner's verdicts: a scenario without teeth, or one catching the wrong bug, fails."""

from __future__ import annotations

import contextlib

import pytest
from synthetic import synthetic_scenario

import harness.runtime as xr
import harness.sched as sched
from harness.scenarios import runner
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature


def _scenario(variant) -> Scenario:
    return synthetic_scenario({"only": variant})


def passes(ctx: Context) -> None:
    return None


def breaks(ctx: Context) -> None:
    raise InvariantViolation("broken on purpose")


def wrong_bug(ctx: Context) -> None:
    raise ValueError("something else")


def broken_only_when_injected(ctx: Context) -> None:
    if xr.faults.active(xr.faults.UNHASHABLE_SPEC):
        raise InvariantViolation("broken by the switch")


@pytest.mark.parametrize(
    ("variant", "inject", "expected"),
    [
        (passes, False, runner.PASSED),
        (passes, True, runner.NOT_REPRODUCED),  # no teeth
        (breaks, False, runner.FAILED),
        (wrong_bug, True, runner.FAILED),  # caught something, not its bug
        (broken_only_when_injected, True, runner.REPRODUCED),
        (broken_only_when_injected, False, runner.PASSED),
    ],
)
def test_verdict(variant, inject: bool, expected: str, monkeypatch) -> None:
    for name in runner.REPLAY_ENV + runner.RUNTIME_ENV:
        monkeypatch.delenv(name, raising=False)
    result = runner.run(_scenario(variant), inject, seed=3, devices=1)
    assert result.outcome == expected
    assert result.ok == (expected in (runner.PASSED, runner.REPRODUCED))
    assert result.repro == f"xharness repro synthetic{' --inject' if inject else ''} --seed 3"


def test_fault_switch_is_off_again_after_a_run(monkeypatch) -> None:
    for name in runner.REPLAY_ENV + runner.RUNTIME_ENV:  # no switch from the calling environment
        monkeypatch.delenv(name, raising=False)
    result = runner.run(_scenario(broken_only_when_injected), True, seed=0, devices=1)
    assert result.outcome == runner.REPRODUCED, result.variants
    assert not xr.faults.active(xr.faults.UNHASHABLE_SPEC)


def test_needs() -> None:
    needs = Needs(devices=2, device_multiple=2)
    assert needs.unmet(1) and "at least 2" in needs.unmet(1)
    assert needs.unmet(3) and "multiple of 2" in needs.unmet(3)
    assert needs.unmet(4) is None


def test_upstream_links() -> None:
    assert _scenario(passes).upstream_links() == ["https://github.com/example/repo/issues/1"]


def test_reproducing_another_signature_of_the_scenario_fails() -> None:
    base = _scenario(broken_only_when_injected)
    strict = Scenario(
        **{
            **base.__dict__,
            "signatures": (*base.signatures, Signature("other", ValueError)),
            "expected": {"only": ("other",)},
        }
    )
    result = runner.run(strict, True, seed=0, devices=1)
    assert result.outcome == runner.FAILED
    assert "expected signature other, saw invariant" in result.variants[0].error


def test_replay_line_carries_the_environment_switches(monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_FAULTS", "aliased-save")
    monkeypatch.setenv("HARNESS_CRASH_MODE", "signal")
    line = runner.repro_command("aliased-save", False, 4, "cpu-4")
    assert (
        line
        == "HARNESS_FAULTS=aliased-save HARNESS_CRASH_MODE=signal xharness repro aliased-save --seed 4 --cell cpu-4"
    )


# ---------------------------------------------------------------- under schedule control


def lost_update(ctx: Context) -> None:
    """Two threads increment a counter; the switch drops the lock around read-modify-write."""
    lock = sched.Lock(name="counter")
    state = {"n": 0}
    racy = xr.faults.active(xr.faults.UNHASHABLE_SPEC)

    def increment() -> None:
        with contextlib.nullcontext() if racy else lock:
            value = state["n"]
            sched.point("between read and write")
            state["n"] = value + 1

    threads = [sched.Thread(target=increment, name=f"inc{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if state["n"] != 2:
        raise InvariantViolation(f"broken: lost an update ({state['n']})")


def opposite_locks(ctx: Context) -> None:
    first, second = sched.Lock(name="first"), sched.Lock(name="second")

    def forward() -> None:
        with first, second:
            pass

    def backward() -> None:
        with second, first:
            pass

    threads = [sched.Thread(target=f) for f in (forward, backward)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# The two tests below explore threads of plain Python on one device (``devices=1``): their outcome
# depends on neither the cell's device count nor its runtime options, so the matrix runs them once.
@pytest.mark.cell_independent
@pytest.mark.parametrize("strategy", ["random", "pct", "dfs", "hypothesis"])
def test_an_explored_race_reproduces_with_its_schedule(strategy: str) -> None:
    scenario = _scenario(lost_update)
    fixed = runner.run(scenario, False, seed=3, devices=1, strategy=strategy)
    assert fixed.outcome == runner.PASSED and fixed.explore == strategy
    found = fixed.variants[0].exploration
    assert found is not None and found["schedule"] is None and found["schedules"] >= 1
    injected = runner.run(scenario, True, seed=3, devices=1, strategy=strategy)
    assert injected.outcome == runner.REPRODUCED, injected.variants[0].error
    found = injected.variants[0].exploration
    assert found is not None and found["strategy"] == strategy and found["schedule"]
    assert found["replay"].endswith(f"--schedule {found['schedule']} --seed 3")
    # a matrix cell's runtime options (HARNESS_...) lead the line when they are set
    assert injected.repro.endswith(f"xharness repro synthetic --inject --explore {strategy} --seed 3")
    again = runner.run(scenario, True, seed=3, devices=1, schedule=found["schedule"])
    assert again.outcome == runner.REPRODUCED and again.explore == "replay"
    assert again.variants[0].error == injected.variants[0].error


@pytest.mark.cell_independent
def test_a_deadlock_under_exploration_fails_whatever_the_mode() -> None:
    for inject in (False, True):
        result = runner.run(_scenario(opposite_locks), inject, seed=0, devices=1, strategy="dfs")
        assert result.outcome == runner.FAILED
        (v,) = result.variants
        assert v.error.startswith("DeadlockError") and "<sched.Lock first" in v.error
        assert v.exploration is not None and v.exploration["schedule"]


def test_a_scenario_names_its_own_strategy() -> None:
    from harness.scenarios import registry

    races = {"race-on-handles", "wait-gap"}
    assert all(registry.get(r).explore == "pct" for r in races)
    assert all(s.explore is None for s in registry.all_scenarios() if s.id not in races)
