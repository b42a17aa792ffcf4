"""Invariant: a read whose wait times out is an error, never a value.

A bounded wait is the runtime's promise that nothing hangs (``wait_timeout``); what it hands back
when the bound passes is the other half of that promise. The device may be slow, or a peer process
cut off in the middle of a gather: either way the value is not known, and the only right answers
are the value or ``ExecutionTimeoutError``. A runtime that answers with something it has at hand
(the last value it read in that layout, the buffer an in-place update aliases) turns an outage
into a silent wrong result, which no later check can tell from a right one.

An example is a tensor of a drawn shape, a few in-place steps each read back (fast), then one
step on a device slower than the wait's bound, read at once. The network checks judge the same
promise across processes (``harness.network``: silent).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness.adapters import base
from harness.properties.base import Invariant
from harness.properties.strategies import ints
from harness.runtime import config, faults
from harness.runtime.errors import ExecutionTimeoutError
from harness.runtime.step import mark_step, wait_device_ops
from harness.runtime.tensor import tensor

#: the wait's bound and the slow device's delay, seconds: the delay well past the bound, both short
BOUND, DELAY = 0.02, 0.12


def check_timed_out_read(shape: tuple[int, ...], steps: int, slow: bool) -> None:
    """After ``steps`` fast in-place steps, one step on a device that is ``slow`` (past the
    wait's bound) or not: its read is the right value or ``ExecutionTimeoutError``."""
    x = tensor(np.zeros(shape, np.float32))
    for k in range(1, steps + 1):
        x.add_(1.0)
        mark_step()
        assert np.array_equal(x.numpy(), np.full(shape, float(k), np.float32))
    previous = config.configure(wait_timeout=BOUND, execution_delay=DELAY if slow else 0.0)
    try:
        x.add_(1.0)
        mark_step()
        try:
            got = x.numpy()
        except ExecutionTimeoutError:
            return
        finally:
            config.restore(previous)
            if slow:
                time.sleep(DELAY)  # the given-up execution ends before the next example starts
                wait_device_ops()
        want = np.full(shape, float(steps + 1), np.float32)
        assert np.array_equal(got, want), (
            f"a read whose wait {'timed out' if slow else 'did not time out'} returned "
            f"{got.ravel()[:4].tolist()}..., not {want.ravel()[:4].tolist()}... (after {steps} step(s)): "
            "a value that is not the tensor's"
        )
    finally:
        config.restore(previous)


@st.composite
def _examples(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "shape": tuple(draw(st.lists(ints(1, 4), min_size=1, max_size=2))),
        "steps": draw(ints(1, 3)),
        "slow": draw(st.booleans()),
    }


def _size(example: dict[str, Any]) -> int:
    return example["steps"] - 1 + len(example["shape"]) - 1


TIMED_OUT_READS = Invariant(
    id="timed-out-reads",
    title="a read whose wait times out raises ExecutionTimeoutError; it never hands back another value",
    check=check_timed_out_read,
    examples=_examples,
    catches=(faults.STALE_ON_TIMEOUT,),
    size=_size,
    max_size=1,
    max_examples=12,
    needs=(base.FAULT_SWITCHES,),  # slow-device and timeout options are the reference runtime's
)
