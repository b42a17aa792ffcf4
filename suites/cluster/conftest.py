"""What the cluster suites share: one local run of the default matrix's multi-process cells, the
twins that the launcher cells and the cells run as jobs are compared with test for test."""

from __future__ import annotations

from pathlib import Path

import pytest
from cluster_helpers import TWIN_CELLS, xharness_run


@pytest.fixture(scope="session")
def local_twins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of one local run of :data:`TWIN_CELLS`."""
    out = tmp_path_factory.mktemp("twins") / "local"
    done = xharness_run(out, "--cells", ",".join(TWIN_CELLS))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return out
