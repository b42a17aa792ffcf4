"""The launcher cells (``ci/launchers.toml``) agree with their local twins of ``ci/matrix.toml``
test for test: the same suites, started by ``srun`` or ``mpirun`` with JAX detecting the launcher,
give the same outcomes as when the supervisor starts the ranks itself. A launcher that changes an
outcome is a finding about the launch path, not noise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cluster_helpers import ROOT, TWIN_CELLS, xharness_run

from harness.matrix.launchers import MPI, SLURM, unavailable
from harness.report.junit import read_records

TWINS = {"cpu-2x4-slurm": "cpu-2x4", "cpu-2slice-slurm": "cpu-2slice", "cpu-2x4-mpi": "cpu-2x4"}


def _outcomes(junit: Path) -> dict[str, str]:
    return {r.nodeid: r.final.outcome for r in read_records(junit)}


def test_launcher_cells_agree_with_their_local_twins(tmp_path: Path, local_twins: Path) -> None:
    for launcher in (SLURM, MPI):
        if why := unavailable(launcher):
            pytest.skip(why)
    assert set(TWINS.values()) == set(TWIN_CELLS)
    launched = xharness_run(tmp_path / "launched", "--matrix", "ci/launchers.toml")
    assert launched.returncode == 0, launched.stdout[-4000:] + launched.stderr[-2000:]
    walls = {}
    for out in (tmp_path / "launched", local_twins):
        for cell in json.loads((out / "matrix.json").read_text())["cells"]:
            walls[cell["cell"]] = cell["wall"]
    for cell, twin in TWINS.items():
        mine = _outcomes(tmp_path / "launched" / "junit" / f"{cell}.xml")
        theirs = _outcomes(local_twins / "junit" / f"{twin}.xml")
        assert mine and mine == theirs, (cell, {n: (mine.get(n), theirs.get(n)) for n in {*mine, *theirs}
                                                if mine.get(n) != theirs.get(n)})
        print(f"{cell}: {len(mine)} tests as {twin}; wall {walls[cell]:.1f}s against {walls[twin]:.1f}s")


def test_a_cell_that_selects_no_test_says_so_under_a_launcher_as_locally(tmp_path: Path) -> None:
    """A test file with no test marked ``multiprocess``: the local cell records
    ``xharness::no-tests``, and so must its srun and mpirun twins. (Each rank's pytest ends with
    exit 5; srun's --kill-on-bad-exit used to SIGTERM the slower rank, which read as a rank that
    died between tests and hid that nothing was selected.)"""
    launchers = [name for name in (SLURM, MPI) if not unavailable(name)]
    if not launchers:
        pytest.skip(unavailable(SLURM))
    cells = "\n".join(
        f'[cells.twin-{name}]\ndevices = 1\nprocesses = 2\nlauncher = "{name}"\n' for name in ["local", *launchers]
    )
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(
        f'root = "{ROOT}"\n[defaults]\npaths = ["suites/selftest/matrix/test_matrix_config.py"]\n'
        f'pytest_args = ["-m", "multiprocess"]\ntimeout = 120\n{cells}'
    )
    done = xharness_run(tmp_path / "out", "--matrix", str(matrix))
    outcomes = {cell: _outcomes(tmp_path / "out" / "junit" / f"twin-{cell}.xml") for cell in ["local", *launchers]}
    assert outcomes["local"] == {"xharness::no-tests": "error"}, outcomes["local"]
    for name in launchers:
        assert outcomes[name] == outcomes["local"], (name, outcomes[name], done.stdout[-3000:])
