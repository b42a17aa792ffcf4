"""The namespace cells (``ci/network.toml``) agree with their loopback twins of ``ci/matrix.toml``
test for test: the same suites, with each rank a host of its own, give the same outcomes as when
the ranks share the loopback. Needs root, iproute2 and nftables; skipped otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.network import fabric
from harness.report.junit import read_records

ROOT = Path(__file__).resolve().parents[2]
TWINS = {"cpu-2x4-netns": "cpu-2x4", "cpu-2slice-netns": "cpu-2slice"}

pytestmark = pytest.mark.skipif(bool(fabric.unavailable()), reason=fabric.unavailable() or "available")


def _run(out: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HARNESS_", "JAX_", "XLA_"))}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--out", str(out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _outcomes(junit: Path) -> dict[str, str]:
    return {r.nodeid: r.final.outcome for r in read_records(junit)}


def test_namespace_cells_agree_with_their_loopback_twins(tmp_path: Path) -> None:
    _run(tmp_path / "hosts", "--matrix", "ci/network.toml")
    _run(tmp_path / "loopback", "--cells", ",".join(TWINS.values()))
    for cell, twin in TWINS.items():
        mine = _outcomes(tmp_path / "hosts" / "junit" / f"{cell}.xml")
        theirs = _outcomes(tmp_path / "loopback" / "junit" / f"{twin}.xml")
        assert mine and mine == theirs, (cell, {n: (mine.get(n), theirs.get(n)) for n in {*mine, *theirs}
                                                if mine.get(n) != theirs.get(n)})
        assert mine["suites/selftest/matrix/test_matrix_cell.py::test_each_rank_is_the_host_the_cell_says"] == "passed"
    assert fabric.orphans() == []
