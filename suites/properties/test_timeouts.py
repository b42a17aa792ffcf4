"""The timed-out-reads invariant (``harness.properties.timeouts``) and the runtime's answer to a
wait that passes its bound, read by read.

One unsharded tensor and the runtime's own timeout path: nothing here depends on the cell's
device count or options, so one cell (cpu-8) runs it, and the test job."""

from __future__ import annotations

import numpy as np
import pytest

from harness.properties.timeouts import BOUND, DELAY, TIMED_OUT_READS, check_timed_out_read
from harness.runtime import config, faults
from harness.runtime.errors import ExecutionTimeoutError
from harness.runtime.step import mark_step, wait_device_ops
from harness.runtime.tensor import tensor

pytestmark = pytest.mark.cell_independent

test_timed_out_reads = TIMED_OUT_READS.hypothesis_test()


def test_a_read_on_a_slow_device_raises_with_the_evidence() -> None:
    x = tensor(np.zeros((2,), np.float32))
    x.add_(1.0)
    mark_step()
    previous = config.configure(wait_timeout=BOUND, execution_delay=DELAY)
    try:
        x.add_(1.0)
        mark_step()
        with pytest.raises(ExecutionTimeoutError, match="within 0.02 s"):
            x.numpy()
    finally:
        config.restore(previous)
    wait_device_ops()


def test_the_switch_hands_back_the_last_value_read() -> None:
    with faults.inject(faults.STALE_ON_TIMEOUT), pytest.raises(AssertionError, match=r"returned \[1.0, 1.0, 1.0\]"):
        check_timed_out_read((3,), 1, True)
    check_timed_out_read((3,), 1, True)  # and the fixed runtime raises, which the check accepts
