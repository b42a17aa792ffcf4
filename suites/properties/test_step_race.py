"""The step-bookkeeping invariant (``harness.properties.step_race``): another thread creating,
writing and dropping tensors while ``mark_step`` prunes, collects and hands out results, under a
hypothesis-drawn schedule.

The runtime's own locks and schedule points decide it, not the device count: one cell (cpu-8)
runs it, and the test job."""

from __future__ import annotations

import pytest

from harness.properties.step_race import STEP_BOOKKEEPING, check_step_bookkeeping

pytestmark = pytest.mark.cell_independent

test_step_bookkeeping = STEP_BOOKKEEPING.hypothesis_test()


@pytest.mark.parametrize("param_aliasing", [False, True])
def test_a_write_during_the_step_is_kept(param_aliasing: bool) -> None:
    """Found by the invariant: a write another thread made while the step was launching was
    overwritten by the step's result (the old value), and a value it derived read a buffer the
    step donated. Every interleaving of one write and one derivation with the step, at most two
    preemptions, keeps both."""
    from harness import sched

    result = sched.check_random(
        lambda: check_step_bookkeeping(1, [("write", 0), ("derive", 0)], 1, param_aliasing),
        iterations=30,
        seed=7,
    )
    assert result.schedules == 30 and result.failure is None
