"""Test isolation for suites that exercise the runtime in one long-lived process.

A test can leave state behind that a fresh process would not have: changed options, a pending
graph that failed on purpose (a reproduced bug would then fail every later ``mark_step``), or a
simulated multi-slice topology. ``isolated()`` undoes all three; the project's suites use it as an
autouse fixture, and so can a user's own suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from harness.runtime import config, executor, step, topology


@contextmanager
def isolated(reset_topology: bool = False) -> Iterator[None]:
    """Run a block, then restore options, drop pending values and, if asked or if the block
    simulated a different slice count, forget the discovered topology."""
    previous = config.configure()
    try:
        yield
    finally:
        try:
            executor.wait_device_ops(raise_errors=False)
        finally:
            step.forget_pending()
            config.restore(previous)
            found = topology._topology
            if reset_topology or (found is not None and found.num_slices != max(1, config.options.num_slices)):
                topology.reset()


def aligned_empty(shape: tuple[int, ...], dtype: Any = np.float32, alignment: int = 64) -> np.ndarray:
    """A writeable array whose data starts on an ``alignment`` boundary, as data loaders' (pinned)
    buffers do. XLA's CPU client adopts such a buffer instead of copying it, so a check of host
    copies needs one: numpy's own allocations are 64-byte aligned only by chance."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(size + alignment, np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + size].view(dtype).reshape(shape)
