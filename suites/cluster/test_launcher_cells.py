"""The launcher cells (``ci/launchers.toml``) agree with their local twins of ``ci/matrix.toml``
test for test: the same suites, started by ``srun`` or ``mpirun`` with JAX detecting the launcher,
give the same outcomes as when the supervisor starts the ranks itself. A launcher that changes an
outcome is a finding about the launch path, not noise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix.launchers import MPI, SLURM, unavailable
from harness.report.junit import read_records

ROOT = Path(__file__).resolve().parents[2]
TWINS = {"cpu-2x4-slurm": "cpu-2x4", "cpu-2slice-slurm": "cpu-2slice", "cpu-2x4-mpi": "cpu-2x4"}


def _run(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "harness.cli", "run", "--out", str(out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _outcomes(junit: Path) -> dict[str, str]:
    return {r.nodeid: r.final.outcome for r in read_records(junit)}


def test_launcher_cells_agree_with_their_local_twins(tmp_path: Path) -> None:
    for launcher in (SLURM, MPI):
        if why := unavailable(launcher):
            pytest.skip(why)
    launched = _run(tmp_path / "launched", "--matrix", "ci/launchers.toml")
    assert launched.returncode == 0, launched.stdout[-4000:] + launched.stderr[-2000:]
    local = _run(tmp_path / "local", "--cells", ",".join(sorted(set(TWINS.values()))))
    assert local.returncode == 0, local.stdout[-4000:] + local.stderr[-2000:]
    walls = {}
    for out in ("launched", "local"):
        for cell in json.loads((tmp_path / out / "matrix.json").read_text())["cells"]:
            walls[cell["cell"]] = cell["wall"]
    for cell, twin in TWINS.items():
        mine = _outcomes(tmp_path / "launched" / "junit" / f"{cell}.xml")
        theirs = _outcomes(tmp_path / "local" / "junit" / f"{twin}.xml")
        assert mine and mine == theirs, (cell, {n: (mine.get(n), theirs.get(n)) for n in {*mine, *theirs}
                                                if mine.get(n) != theirs.get(n)})
        print(f"{cell}: {len(mine)} tests as {twin}; wall {walls[cell]:.1f}s against {walls[twin]:.1f}s")
