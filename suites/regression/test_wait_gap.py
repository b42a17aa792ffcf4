"""The two-step ``wait_device_ops`` under schedule control: the fixed order holds in the whole
bounded space, the late registration of ``wait-gap`` is found, and neither leaves anything behind
for the next wait (a count that never drops would hang every later ``wait_device_ops``)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import harness.runtime as xr
import harness.sched as sched
from harness.runtime import faults, worker
from harness.scenarios import registry, runner, wait_gap
from harness.scenarios.base import Context


def _body(inject: bool) -> sched.CheckResult:
    body = runner.controlled(wait_gap.step_then_wait, Context(0, inject, len(jax.devices())))
    return sched.check_dfs(body, max_preemptions=2, raise_on_failure=False)


def test_fixed_wait_holds_in_the_whole_bounded_space() -> None:
    result = _body(inject=False)
    assert result.failure is None, result.failure
    assert result.exhausted and result.schedules > 10, result.schedules
    assert result.threads == 2  # the caller and the executor thread, no closure
    assert worker.operations.running == 0


def test_late_registration_is_found_and_replays() -> None:
    with faults.inject(faults.WAIT_GAP):
        result = _body(inject=True)
        failure = result.failure
        assert failure is not None and failure.kind == "InvariantViolation"
        assert isinstance(failure.error, sched.ScheduleFailure)
        assert wait_gap.SCENARIO.signature_for(failure.error.original) is not None
        assert failure.schedule is not None
        body = runner.controlled(wait_gap.step_then_wait, Context(0, True, len(jax.devices())))
        again = sched.replay(body, failure.schedule, raise_on_failure=False)
        assert again.failure is not None and again.failure.message == failure.message
    assert worker.operations.running == 0  # the torn-down closure was settled
    xr.wait_device_ops()
    np.testing.assert_allclose((xr.tensor(np.ones(3, np.float32)) * 2).numpy(), 2.0)


def test_completed_counts_every_execution_once_waited() -> None:
    launched, completed = xr.metrics.executions, xr.metrics.completed
    kept = []
    for _ in range(3):
        kept.append(xr.tensor(np.ones((2, 2), np.float32)).tanh())
        xr.mark_step()
    xr.wait_device_ops()
    assert xr.metrics.executions - launched == xr.metrics.completed - completed == 3
    assert all(not t.node.data.is_placeholder for t in kept)


@pytest.mark.parametrize("inject", [False, True], ids=["fixed", "injected"])
def test_race_on_handles_does_not_depend_on_the_wait_gap(inject: bool) -> None:
    """The handle race is about fills, which the barrier covers: its verdicts stay the same."""
    race = registry.get("race-on-handles")
    with faults.inject(faults.WAIT_GAP):
        result = runner.run(race, inject, seed=0, devices=len(jax.devices()))
    assert result.outcome == (runner.REPRODUCED if inject else runner.PASSED), result.variants
