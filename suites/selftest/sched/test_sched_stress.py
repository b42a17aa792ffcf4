"""The free-running baseline: random naps at every point, no control, no schedule."""

from __future__ import annotations

import json

import pytest
import sched_bodies as bodies

import harness.sched as sched
from harness.sched import points


def test_stress_reports_runs_to_failure_on_the_lost_update() -> None:
    result = sched.stress(
        bodies.lost_update, runs=30, seed=0, max_sleep=0.0005, raise_on_failure=False
    )
    assert result.strategy == "stress" and result.seed == 0
    assert 1 <= result.schedules <= 30
    if result.failure is None:  # a free-running race may or may not be lost
        assert result.runs_to_failure is None and result.schedules == 30
    else:
        assert result.runs_to_failure == result.schedules
        assert result.failure.kind == "AssertionError" and result.failure.schedule is None
    json.dumps(result.to_dict())
    assert points.active() is None


def test_stress_reports_a_failing_thread_with_no_schedule() -> None:
    def body() -> None:
        def explode() -> None:
            sched.point("before")
            raise ValueError("always")

        thread = sched.Thread(target=explode, name="exploder")
        thread.start()
        thread.join()

    with pytest.raises(sched.ScheduleFailure) as info:
        sched.stress(body, runs=5, seed=1)
    error = info.value
    assert isinstance(error.original, ValueError) and error.thread_name == "exploder"
    assert error.schedule is None and "no schedule to replay" in str(error)
    assert error.result.runs_to_failure == 1


def test_stress_keeps_correct_code_correct() -> None:
    result = sched.stress(bodies.locked_update, runs=10, seed=2, max_sleep=0.0005)
    assert result.failure is None and result.schedules == 10 and result.runs_to_failure is None
