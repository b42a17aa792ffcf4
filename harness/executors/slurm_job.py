"""Inside a cell's SLURM job: run the unit the submitting run described, and leave its result
where that run reads it.

``python -m harness.executors.slurm_job SPEC`` is the last line of the job's batch script. SPEC
is the unit (its cell, the run's settings, its part) pickled by the submitting run, which is the
same installation of the harness on a filesystem the nodes share. Each attempt of the job writes
into a directory of its own, ``attempt-<SLURM_RESTART_COUNT>``: a JUnit file, then ``result.json``
(the marker that the attempt finished, written last and atomically). A requeued job's earlier
attempt is never read, so a requeue cannot double a record, and one that dies leaves no marker.

SIGTERM (``scancel``, or the time limit's warning) is handled as Ctrl-C is locally: the running
cell stops its processes and writes what finished.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from harness.executors.unit import run_unit, skipped_cell_record
from harness.matrix.config import Cell
from harness.matrix.interrupt import sigterm_interrupts
from harness.matrix.progress import CellProgress, Progress
from harness.matrix.supervisor import CellResult, RunSettings

SPEC_NAME, RESULT_NAME, JUNIT_NAME = "unit.pickle", "result.json", "junit.xml"


@dataclass(frozen=True)
class JobSpec:
    """What one job runs: a cell (or part of one), the run's settings, and the part's name; for a
    check of ``xharness releases``, the release environment's interpreter, the released runtime
    and the check (the environment was built by the submitting run, on the shared filesystem)."""

    cell: Cell
    settings: RunSettings
    shard: str
    label: str
    python: str = ""
    released: str = ""
    check: str = ""


def attempt_dir(unit_dir: Path, attempt: int) -> Path:
    return unit_dir / f"attempt-{attempt}"


def write_spec(spec: JobSpec, unit_dir: Path) -> Path:
    path = unit_dir / SPEC_NAME
    with path.open("wb") as handle:
        pickle.dump(replace(spec, settings=replace(spec.settings, cancel=None)), handle)
    return path


def write_result(directory: Path, result: CellResult, not_installed: bool) -> None:
    """The attempt's records (JUnit) and then its marker with the rest of the cell's result."""
    from harness.report.files import write_atomic
    from harness.report.junit import write_cell_xml

    directory.mkdir(parents=True, exist_ok=True)
    write_cell_xml(result.cell.name, result.records, directory / JUNIT_NAME)
    data = {"wall": result.wall, "launches": result.launches, "skipped": result.skipped,
            "interrupted": result.interrupted, "parts_overhead": result.parts_overhead,
            "not_installed": not_installed, "host": socket.gethostname(),
            "node": os.environ.get("SLURMD_NODENAME", "")}
    write_atomic(directory / RESULT_NAME, (json.dumps(data, indent=2) + "\n").encode())


def read_result(directory: Path, cell: Cell) -> tuple[CellResult, bool, dict[str, object]] | None:
    """An attempt's result, or None when it did not finish (no marker)."""
    from harness.report.junit import read_records

    marker = directory / RESULT_NAME
    if not marker.is_file():
        return None
    data = json.loads(marker.read_text(encoding="utf-8"))
    records = read_records(directory / JUNIT_NAME)
    result = CellResult(cell, records, float(data["wall"]), int(data["launches"]), str(data["skipped"]),
                        bool(data["interrupted"]), data["parts_overhead"])
    return result, bool(data["not_installed"]), data


def _probed(spec: JobSpec, progress: CellProgress) -> tuple[CellResult, bool]:
    """The unit run on this node, if this node can run its cell (an accelerator cell is probed
    here, where its devices are, not where the run was started); else its skipped record."""
    from harness.matrix.probe import probe

    found = probe(spec.cell)
    if not found.available:
        reason = f"on node {os.environ.get('SLURMD_NODENAME', socket.gethostname())}: {found.reason}"
        progress.note(f"skipped: {reason}")
        return CellResult(spec.cell, [skipped_cell_record(spec.cell, reason)], skipped=reason), False
    return run_unit(spec.cell, spec.settings, progress, spec.shard)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m harness.executors.slurm_job SPEC", file=sys.stderr)
        return 2
    spec_path = Path(argv[0])
    with spec_path.open("rb") as handle:
        spec: JobSpec = pickle.load(handle)  # noqa: S301 - written by the run that submitted this job
    attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    progress = Progress(1, stream=sys.stdout).for_cell(spec.label)
    progress.note(f"job {os.environ.get('SLURM_JOB_ID', '?')} attempt {attempt} on "
                  f"{os.environ.get('SLURMD_NODENAME', socket.gethostname())}")
    with sigterm_interrupts():
        if spec.check:
            from harness.releases.cells import ReleaseCellRun

            run = ReleaseCellRun(spec.cell, spec.settings, progress, spec.python, released=spec.released or None,
                                 check=spec.check)
            if spec.shard:
                run.logs = run.logs / spec.shard
            result = run.run()
            not_installed = False
        else:
            result, not_installed = _probed(spec, progress)
    write_result(attempt_dir(spec_path.parent, attempt), result, not_installed)
    progress.note(f"attempt {attempt} wrote {len(result.records)} record(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
