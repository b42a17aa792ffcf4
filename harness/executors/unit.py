"""One unit of a run (a cell, or a part of a long cell) run to its records in this process'
machine: in this interpreter, or in its release's cached environment (built if needed).

The local executor calls this for every unit; a SLURM job calls it for its own unit
(``harness.executors.slurm_job``), so a cell's records are made the same way wherever it runs.
"""

from __future__ import annotations

import dataclasses
import threading

from harness.matrix.config import Cell
from harness.matrix.progress import CellProgress
from harness.matrix.supervisor import CellResult, CellRun, RunSettings
from harness.report import properties as prop
from harness.report.records import SKIPPED, Attempt, TestRecord

#: the node id of the record of a cell the machine it was to run on cannot run
CELL_ID = "xharness::cell"
#: two cells of one release must not build its environment at once
_ENV_LOCK = threading.Lock()


def run_unit(cell: Cell, settings: RunSettings, progress: CellProgress, shard: str = "") -> tuple[CellResult, bool]:
    """Run one cell (or part): its result, and whether its release could not be installed (the
    cell then has an error record). ``shard`` names a part of a cell split over several
    processes (its logs go below the cell's)."""
    name = cell.runtime_name or "reference"
    cell_settings = dataclasses.replace(settings, runtime=name)
    if not cell.release:
        run = CellRun(cell, cell_settings, progress)
        if shard:
            run.logs = run.logs / shard
        return run.run(), False
    from harness.releases import envs, release_spec
    from harness.releases.cells import ReleaseCellRun, install_error_record

    try:
        with _ENV_LOCK:
            try:
                spec = release_spec.parse(name, cell.release)
            except release_spec.ReleaseSpecError as exc:  # a wheel removed since the run began
                raise envs.ReleaseInstallError(name, cell.release, str(exc)) from None
            env = release_spec.ensure(spec, progress=progress.note)
    except envs.ReleaseInstallError as exc:
        progress.note(f"error: {exc}")
        return CellResult(cell, [install_error_record(cell, exc)]), True
    return ReleaseCellRun(cell, cell_settings, progress, str(env.python)).run(), False


class LocalExecutor:
    """Every unit in processes of this machine (``xharness run``'s default)."""

    name = "local"
    #: an accelerator's devices are this machine's: no two cells of one accelerator at once
    holds_devices = True

    def run(self, cell: Cell, settings: RunSettings, progress: CellProgress, shard: str,
            label: str) -> tuple[CellResult, bool]:
        return run_unit(cell, settings, progress, shard)

    def stats(self) -> dict[str, object]:
        return {"executor": self.name}

    def interrupt(self) -> None:
        """Nothing to do: each running unit sees the run's cancel event and stops its processes."""

    def close(self) -> None:
        pass


def skipped_cell_record(cell: Cell, reason: str) -> TestRecord:
    """The one record of a cell that cannot run where it was to run, with the reason."""
    record = TestRecord(nodeid=CELL_ID, cell=cell.name)
    record.attempts.append(Attempt(SKIPPED, message=f"cell {cell.name} not runnable here: {reason}"))
    record.properties = {prop.CELL: cell.name, prop.BACKEND: cell.backend, prop.DEVICES: str(cell.total_devices),
                         prop.PROCESSES: str(cell.processes), prop.SLICES: str(cell.slices)}
    return record
