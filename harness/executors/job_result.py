"""What an ended job means for its unit: the records its last attempt wrote, and for a job that
ended without finishing, one record that says which job, on which node, and why.

Kept apart from following the queue (``harness.executors.slurm``) so that every way a job can end
is read, and tested, from files and a :class:`JobState` alone.
"""

from __future__ import annotations

from pathlib import Path

from harness.executors import SLURM
from harness.executors.slurm_client import GONE, UNREACHABLE, JobState
from harness.executors.slurm_job import attempt_dir, read_result
from harness.executors.slurm_script import OUTPUT_NAME
from harness.matrix.config import Cell
from harness.matrix.events import Event, EventReader
from harness.matrix.outcomes import attempt_from_reports, merge_ranks, properties_from_reports
from harness.matrix.supervisor import CellResult
from harness.report import properties as prop
from harness.report.records import ERROR, KIND_EXIT, KIND_MEMORY, KIND_TIMEOUT, Attempt, TestRecord

#: the node id of the record a job that died leaves
JOB_ID = "xharness::job"
OUTPUT_TAIL_CHARS = 4_000
#: SLURM's own words for a job killed over its memory limit (where no cgroup says OUT_OF_MEMORY)
_MEMORY_WORDS = ("exceeded job memory limit", "exceeded memory limit", "oom-kill", "out of memory")


def cause(state: JobState, output: str, deadline: float | None = None) -> tuple[str, str]:
    """Why a job ended without a result, in words, and the record's kind."""
    lowered = output.lower()
    where = f" on {state.nodes}" if state.nodes else ""
    if deadline is not None:
        waited = f" (waiting for: {state.reason})" if state.reason else ""
        return (f"still waiting to start when the run's deadline ({deadline:.0f} s) passed{waited}: "
                "cancelled", KIND_TIMEOUT)
    if state.state == "OUT_OF_MEMORY" or any(w in lowered for w in _MEMORY_WORDS):
        line = next((x.strip() for x in output.splitlines() if "memory limit" in x.lower()), "")
        return f"out of memory{where}: killed over its memory limit" + (f" ({line})" if line else ""), KIND_MEMORY
    if state.state == "NODE_FAIL":
        return f"node failure: {state.nodes or 'its node'} stopped answering the controller", KIND_EXIT
    if state.state == "TIMEOUT":
        return f"the job's time limit passed{where}", KIND_TIMEOUT
    if state.state == "PREEMPTED":
        return f"preempted{where} by a job of a higher priority, and not requeued", KIND_EXIT
    if state.state == "CANCELLED":
        return f"cancelled{where} (scancel, or the cluster's administrator)", KIND_EXIT
    if state.state == UNREACHABLE:
        return f"was left unfollowed: the controller stopped answering ({state.reason})", KIND_EXIT
    if state.state == GONE:
        return "the controller forgot the job before its end was seen (MinJobAge), and no result was written", KIND_EXIT
    if state.state == "COMPLETED":
        return f"the job ended{where} without writing its result", KIND_EXIT
    said = f", {state.reason}" if state.reason else ""
    code = f" (exit {state.exit_code})" if state.exit_code else ""
    return f"the job ended {state.state}{where}{code}{said}", KIND_EXIT


def unit_result(cell: Cell, end: JobState, unit_dir: Path, batch: Path, wall: float, *,
                interrupted: bool = False, deadline: float | None = None,
                logs: Path | None = None) -> tuple[CellResult, bool]:
    """The unit's result from its job's end, and whether its release could not be installed
    (the job says so in its result, as ``run_unit`` does here). Only the last attempt is read (``end.restarts``; the
    newest one written when the controller forgot the job), so a requeue neither loses nor
    doubles a record. ``interrupted``: this run cancelled the job (what it wrote is kept, and the
    run ends as interrupted). A job that did not complete keeps what it wrote, or where it wrote
    nothing (its node failed, it was killed over its memory) the tests its event stream in
    ``logs`` shows finished, and gets a record of its end; ``deadline`` says it was cancelled
    still waiting when the run's deadline passed."""
    job = end.job
    output = _tail(unit_dir / OUTPUT_NAME.replace("%j", job))
    attempts = sorted((int(p.name.split("-")[1]) for p in unit_dir.glob("attempt-*")), reverse=True)
    last = end.restarts if end.state != GONE else (attempts[0] if attempts else 0)
    read = read_result(attempt_dir(unit_dir, last), cell)
    result, not_installed = CellResult(cell, [], wall), False
    if read is not None:
        result, not_installed, data = read
        node = str(data.get("node") or end.nodes)
        for record in result.records:
            record.properties.update({prop.EXECUTOR: SLURM, prop.EXECUTOR_JOB: job, prop.EXECUTOR_NODES: node})
            if last:
                record.properties[prop.EXECUTOR_ATTEMPT] = str(last)
    if interrupted:
        result.interrupted = True
        return result, not_installed
    if read is not None and (end.state == "COMPLETED" or (end.state == GONE and not result.interrupted)):
        return result, not_installed  # a forgotten job whose last attempt finished is as good as completed
    result.interrupted = False  # the job's own SIGTERM (its time limit) is not the run's interrupt
    if read is None and logs is not None:
        result.records = finished_tests(logs, cell, end)
    text, kind = cause(end, output, deadline)
    result.records.append(job_record(cell, job, text, kind, output, batch, end))
    return result, not_installed


def finished_tests(logs: Path, cell: Cell, end: JobState) -> list[TestRecord]:
    """The tests a job that died had finished on every rank, from the supervisor's event streams
    in its logs (written and fsynced before each test goes on, so a killed job leaves them whole):
    what it finished is not lost with it. Each says which job it came from and how that ended."""
    reports: dict[int, dict[str, list[Event]]] = {}
    finished: dict[int, set[str]] = {}
    order: list[str] = []
    for path in sorted(logs.glob("launch*.rank*.events.jsonl")):
        rank = int(path.name.split(".rank")[1].split(".")[0])
        reader = EventReader(path)
        for event in reader.poll():
            nodeid = str(event.get("nodeid"))
            if event.get("event") == "report":
                reports.setdefault(rank, {}).setdefault(nodeid, []).append(event)
            elif event.get("event") == "finish":
                finished.setdefault(rank, set()).add(nodeid)
                order.append(nodeid)
    done = set.intersection(*finished.values()) if finished else set()
    records = []
    for nodeid in dict.fromkeys(n for n in order if n in done):
        attempt = merge_ranks({r: attempt_from_reports(reports.get(r, {}).get(nodeid, [])) for r in finished})
        record = TestRecord(nodeid=nodeid, cell=cell.name, file=nodeid.partition("::")[0])
        record.attempts.append(attempt)
        record.properties = {prop.CELL: cell.name, prop.BACKEND: cell.backend, prop.EXECUTOR: SLURM,
                             prop.EXECUTOR_JOB: end.job, prop.EXECUTOR_NODES: end.nodes,
                             prop.EXECUTOR_STATE: end.state}
        for rank in sorted(reports, reverse=True):  # rank 0's values win
            record.properties.update(properties_from_reports(reports[rank].get(nodeid, [])))
        records.append(record)
    return records


def job_record(cell: Cell, job: str, text: str, kind: str, output: str, batch: Path,
               end: JobState | None = None) -> TestRecord:
    """The error record of a unit whose job ended badly (or was never submitted: ``job`` "")."""
    record = TestRecord(nodeid=JOB_ID, cell=cell.name)
    named = f"job {job}" if job else "the job"
    record.attempts.append(Attempt(ERROR, message=f"cell {cell.name}: {named} {text}", stderr=output, kind=kind))
    record.properties = {prop.CELL: cell.name, prop.BACKEND: cell.backend,
                         prop.DEVICES: str(cell.total_devices), prop.PROCESSES: str(cell.processes),
                         prop.SLICES: str(cell.slices), prop.EXECUTOR: SLURM, prop.REPRO: f"sbatch {batch}"}
    if job:
        record.properties[prop.EXECUTOR_JOB] = job
    if end is not None:
        record.properties[prop.EXECUTOR_NODES] = end.nodes
        record.properties[prop.EXECUTOR_STATE] = end.state
        if end.restarts:
            record.properties[prop.EXECUTOR_ATTEMPT] = str(end.restarts)
    return record


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-OUTPUT_TAIL_CHARS:].decode("utf-8", "replace")
