"""Fixtures shared by every suite.

Every test starts from the default runtime options and leaves nothing behind: options are restored,
a pending graph a test left (for example one that reproduced a bug) is forgotten, and a simulated
multi-slice topology is discovered afresh by the next test that needs one.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator

if "jax" not in sys.modules:  # the project plugin normally asks for the devices first
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")

import jax
import pytest

from harness.runtime.testing import isolated


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the process holds once collected (JAX, the harness, hypothesis, every test module
    and item) lives as long as the process: frozen out of the cyclic collector's way, so that
    each full collection during the tests walks only what the tests made. Measured on a cell of
    the matrix and on the test job's suites: the collector's time halved, 3 to 6% of the
    process's CPU (docs/explanation/performance.md). Reference counting still frees any of it."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def clean_runtime() -> Iterator[None]:
    with isolated():
        yield


@pytest.fixture
def ndev() -> int:
    return len(jax.devices())
