"""Fixtures shared by every suite.

Every test starts from the default runtime options and leaves nothing behind: options are restored,
a pending graph a test left (for example one that reproduced a bug) is forgotten, and a simulated
multi-slice topology is discovered afresh by the next test that needs one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

if "jax" not in sys.modules:  # the project plugin normally asks for the devices first
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")

import jax
import pytest

from harness.runtime.testing import isolated


@pytest.fixture(autouse=True)
def clean_runtime() -> Iterator[None]:
    with isolated():
        yield


@pytest.fixture
def ndev() -> int:
    return len(jax.devices())
