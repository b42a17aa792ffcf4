"""A controlled run does not depend on how fast the device is or whether a compile is cold.

On an accelerator a dispatch returns before the device has finished, and the first run after a
change of JAX's compile-cache key compiles inside the controlled run. Neither may change what a
schedule point observes: that is the schedule's decision alone. ``completion_delay`` makes every
execution complete later than its dispatch (a slow device), and emptying the runtime's program
cache makes the first explored schedule compile while the later ones hit the cache; the explored
space, the verdicts and the failing schedules must come out exactly as on a fast device with
warm caches.
"""

from __future__ import annotations

import contextlib

import jax
import pytest

import harness.runtime as xr
import harness.sched as sched
from harness.runtime import faults, plan_cache
from harness.scenarios import race_on_handles, runner, wait_gap
from harness.scenarios.base import Context

#: none of these depends on the cell's device count or options: the matrix runs them in cpu-8
pytestmark = pytest.mark.cell_independent

NAP = 0.003  # seconds from dispatch to completion: far longer than a tiny step takes on a CPU


def _explore(variant, inject: bool, nap: float, strategy: str) -> sched.CheckResult:
    xr.configure(completion_delay=nap)
    plan_cache.clear_cache()  # the first schedule compiles, inside the run, as a cold cache would
    body = runner.controlled(variant, Context(0, inject, len(jax.devices())))
    if strategy == "dfs":
        return sched.check_dfs(body, max_preemptions=2, raise_on_failure=False)
    return sched.check_pct(body, iterations=15, seed=3, raise_on_failure=False)


def _outcome(result: sched.CheckResult) -> tuple:
    failure = result.failure
    return (result.schedules, None if failure is None else (failure.kind, failure.schedule))


def test_the_wait_gap_space_is_the_same_on_a_slow_device() -> None:
    fast = _explore(wait_gap.step_then_wait, False, 0.0, "dfs")
    slow = _explore(wait_gap.step_then_wait, False, NAP, "dfs")
    assert fast.failure is None and slow.failure is None, (fast.failure, slow.failure)
    assert slow.exhausted and slow.schedules == fast.schedules, (fast.schedules, slow.schedules)
    with faults.inject(faults.WAIT_GAP):
        found_fast = _explore(wait_gap.step_then_wait, True, 0.0, "dfs")
        found_slow = _explore(wait_gap.step_then_wait, True, NAP, "dfs")
    assert found_slow.failure is not None and found_slow.failure.kind == "InvariantViolation"
    assert _outcome(found_slow) == _outcome(found_fast), "a slow device changed the failing schedule"


@pytest.mark.parametrize("inject", [False, True], ids=["fixed", "injected"])
def test_race_on_handles_under_pct_is_the_same_on_a_slow_device(inject: bool) -> None:
    with faults.inject(faults.RACE_ON_HANDLES) if inject else contextlib.nullcontext():
        fast = _explore(race_on_handles.accumulate, inject, 0.0, "pct")
        slow = _explore(race_on_handles.accumulate, inject, NAP, "pct")
    if inject:
        assert slow.failure is not None, "the race was not found on a slow device"
        assert race_on_handles.SCENARIO.signature_for(slow.failure.error.original) is not None
    else:
        assert slow.failure is None, slow.failure
    assert _outcome(slow) == _outcome(fast), "a slow device changed what the schedule explored"


class _InFlight:
    """A buffer whose device work is still running, as a transferred or computed buffer is on
    an accelerator right after JAX returned: its pointer cannot be read until it is ready."""

    def __init__(self, real: jax.Array) -> None:
        self._real = real
        self.ready = False

    def is_deleted(self) -> bool:
        return self._real.is_deleted()

    def block_until_ready(self) -> _InFlight:
        self.ready = True
        return self

    @property
    def addressable_shards(self) -> list:
        if not self.ready:
            raise RuntimeError("INVALID_ARGUMENT: the buffer's definition event has not happened yet")
        return self._real.addressable_shards


def test_a_handle_of_a_buffer_still_in_flight_is_read_once_it_is_there() -> None:
    """A handle read at a schedule point waits for the device (always the same outcome) rather
    than seeing "not ready" in one run and "ready" in the next."""
    import numpy as np

    t = xr.tensor(np.ones((2, 3), np.float32))
    (data,) = xr.device_data([t])
    settled = data.handle()
    data._array = _InFlight(data._array)  # the transfer has not finished on the device
    assert data.handle() == settled
