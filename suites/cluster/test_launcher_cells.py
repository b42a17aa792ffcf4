"""The launcher cells (``ci/launchers.toml``) agree with their local twins of ``ci/matrix.toml``
test for test: the same suites, started by ``srun`` or ``mpirun`` with JAX detecting the launcher,
give the same outcomes as when the supervisor starts the ranks itself. A launcher that changes an
outcome is a finding about the launch path, not noise."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from cluster_helpers import ROOT, TWIN_CELLS, needs, required, xharness_run

from harness.matrix.cluster_launch import job_fields
from harness.matrix.launchers import MPI, SLURM, unavailable
from harness.report.junit import read_records

TWINS = {"cpu-2x4-slurm": "cpu-2x4", "cpu-2slice-slurm": "cpu-2slice", "cpu-2x4-mpi": "cpu-2x4"}


def _outcomes(junit: Path) -> dict[str, str]:
    return {r.nodeid: r.final.outcome for r in read_records(junit)}


def test_launcher_cells_agree_with_their_local_twins(tmp_path: Path, local_twins: Path) -> None:
    for launcher in (SLURM, MPI):
        needs(launcher)
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
    # a launch whose ranks all ended well lets srun close its step: the job completes, and no
    # kill reaches a step whose tasks are exiting (which once left a node draining under the next cell)
    for cell in (c for c in TWINS if c.endswith("-slurm")):
        log = (tmp_path / "launched" / "logs" / cell / "launch1.launcher.log").read_text()
        job = re.findall(r"srun: job (\d+) ", log)[-1]
        state = job_fields(job, dict(os.environ))
        assert state.get("JobState") == "COMPLETED", (cell, job, state.get("JobState"), state.get("Reason"))


def test_a_cell_that_selects_no_test_says_so_under_a_launcher_as_locally(tmp_path: Path) -> None:
    """Test files with no test marked ``multiprocess``: the local cell records
    ``xharness::no-tests``, and so must its srun and mpirun twins, run after run. Each rank's pytest
    ends with exit 5, and srun's --kill-on-bad-exit used to SIGTERM the rank still tearing down,
    which read as "rank 0 ... died on SIGTERM between tests" and hid that nothing was selected: seen
    in 1 of 4 runs of this very matrix before launched ranks reported such an end as a good exit."""
    needs(SLURM)
    launchers = [name for name in (SLURM, MPI) if name == SLURM or required() or not unavailable(name)]
    for name in launchers:
        needs(name)
    cells = "\n".join(
        f'[cells.twin-{name}]\ndevices = 4\nprocesses = 2\nlauncher = "{name}"\n' for name in ["local", *launchers]
    )
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(
        f'root = "{ROOT}"\n[defaults]\npaths = ["suites/properties/test_strategies.py", '
        '"suites/regression/test_judgement.py"]\npytest_args = ["-m", "multiprocess"]\n'
        f'timeout = 120\n{cells}'
    )
    local = {"xharness::no-tests": "error"}
    for attempt in range(4):
        out = tmp_path / f"out{attempt}"
        done = xharness_run(out, "--matrix", str(matrix), *(["--cells", ",".join(f"twin-{n}" for n in launchers)]
                                                             if attempt else []))
        if not attempt:
            assert _outcomes(out / "junit" / "twin-local.xml") == local
        for name in launchers:
            got = _outcomes(out / "junit" / f"twin-{name}.xml")
            assert got == local, (attempt, name, got, done.stdout[-3000:])
