"""Cells as jobs of a SLURM cluster (``xharness run --on slurm``), with the supervisor's promises.

Each unit of the run (a cell, or a part of a long cell) is written as a batch script
(``harness.executors.slurm_script``) and submitted with ``sbatch``; inside the job the same
supervisor runs the unit (``harness.executors.slurm_job``) and writes its records to the unit's
directory below the run's output directory, which the nodes must share. Here, one thread follows
every job with one ``squeue`` a poll, says when each one waits, runs and ends, and hands each
unit's thread its job's end. What the run does with a unit's result (JUnit per cell, merge,
dashboard) is what it does locally.

The promises, each with a record that names the job, its node and the cause:

- a job that dies without a result (its node failed, its time limit passed, it ran out of
  memory, it was preempted or cancelled) becomes one error record of its unit;
- a requeued job is read from its last attempt only, so its records are neither lost nor doubled;
- Ctrl-C or SIGTERM cancels exactly the jobs this run submitted (``scancel`` by id), and what
  finished is kept;
- a job still waiting when the run's deadline passes is cancelled and recorded: nothing is
  waited for without bound.

Why ``sbatch`` and not submitit: a cell is already a command, not a Python callable, and the
records a dead job needs (its node, the controller's reason, SLURM's own words in the job's
output) are in the controller's answers, which a batch script and ``squeue`` show as they are;
the script beside each job's output is also what a user submits by hand to run it again.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.executors import SLURM, slurm_client
from harness.executors.slurm_client import JobState, SlurmError
from harness.executors.slurm_job import JobSpec, attempt_dir, read_result, write_spec
from harness.executors.slurm_script import OUTPUT_NAME, JobDefaults, job_name, script
from harness.matrix.config import Cell
from harness.matrix.progress import CellProgress, Progress
from harness.matrix.supervisor import CellResult, RunSettings
from harness.report import properties as prop
from harness.report.records import ERROR, KIND_EXIT, KIND_MEMORY, KIND_TIMEOUT, Attempt, TestRecord

#: the node id of the record a job that died without a result leaves
JOB_ID = "xharness::job"
#: how long a cancelled job may take to end before its unit is recorded without it
CANCEL_WAIT = 120.0
OUTPUT_TAIL_CHARS = 4_000
#: SLURM's own words for a job killed over its memory limit (where no cgroup says OUT_OF_MEMORY)
_MEMORY_WORDS = ("exceeded job memory limit", "exceeded memory limit", "oom-kill", "out of memory")


@dataclass(frozen=True)
class SlurmOptions:
    """How a run uses the cluster: the jobs' defaults, the deadline for waiting jobs, the poll."""

    defaults: JobDefaults = field(default_factory=JobDefaults)
    deadline: float = 7200.0  # seconds after the run starts; a job still waiting then is cancelled
    poll: float = 1.0  # seconds between two looks at the queue


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
    if state.state == slurm_client.GONE:
        return "the controller forgot the job before its end was seen (MinJobAge), and no result was written", KIND_EXIT
    if state.state == "COMPLETED":
        return f"the job ended{where} without writing its result", KIND_EXIT
    said = f", {state.reason}" if state.reason else ""
    code = f" (exit {state.exit_code})" if state.exit_code else ""
    return f"the job ended {state.state}{where}{code}{said}", KIND_EXIT


class SlurmExecutor:
    """Submits the units of one run and follows their jobs (see the module's docstring)."""

    name = SLURM
    #: the cluster gives each job its own devices (``--gres``): cells of one accelerator may run at once
    holds_devices = False

    def __init__(self, options: SlurmOptions, out_dir: Path, progress: Progress, workdir: Path | None = None,
                 python: str | None = None) -> None:
        self.options, self.progress = options, progress
        self.jobs_dir = out_dir / "jobs"
        self.workdir = workdir or Path.cwd()
        self.python = python or sys.executable
        self.started = time.monotonic()
        self.states: dict[str, JobState] = {}
        self.labels: dict[str, str] = {}  # job -> the unit it runs
        self.past_deadline: set[str] = set()
        self.cancelled: set[str] = set()
        self.poll_error = ""
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._last_summary = 0.0

    # -- the run's side ----------------------------------------------------------------------------
    def capacity(self) -> int:
        """How many single-process units may run at once: the cluster's CPUs (a SlurmError when
        no controller answers)."""
        return max(1, slurm_client.total_cpus(self.options.defaults.partition))

    def interrupt(self) -> None:
        """Cancel every job of this run that has not ended, by id."""
        with self._changed:
            alive = [j for j, s in self.states.items() if not s.terminal and j not in self.cancelled]
            self.cancelled.update(alive)
        if alive:
            self.progress.note(f"cancelling job(s) {' '.join(alive)}", cell="run")
            try:
                slurm_client.cancel(alive)
            except SlurmError as exc:
                self.progress.note(f"error: {exc}", cell="run")

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=10)

    # -- one unit ----------------------------------------------------------------------------------
    def run(self, cell: Cell, settings: RunSettings, progress: CellProgress, shard: str,
            label: str) -> tuple[CellResult, bool]:
        started = time.monotonic()
        unit_dir = self.jobs_dir / job_name(label)
        shutil.rmtree(unit_dir, ignore_errors=True)
        unit_dir.mkdir(parents=True)
        spec = write_spec(JobSpec(cell, settings, shard, label), unit_dir)
        batch = unit_dir / "job.sh"
        batch.write_text(script(cell, label, unit_dir, self.workdir,
                                [self.python, "-m", "harness.executors.slurm_job", str(spec)],
                                self.options.defaults), encoding="utf-8")
        try:
            job = slurm_client.submit(batch)
        except SlurmError as exc:
            return CellResult(cell, [self._record(cell, "", f"could not be submitted: {exc}", KIND_EXIT, "",
                                                  batch)], time.monotonic() - started), False
        with self._changed:
            self.labels[job] = label
            self.states[job] = JobState(job, "PENDING")
            self._start_polling()
        progress.note(f"job {job} submitted ({batch})")
        end = self._wait(job, settings)
        return self._result(cell, job, end, unit_dir, batch, time.monotonic() - started), False

    def _wait(self, job: str, settings: RunSettings) -> JobState:
        cancelled_at: float | None = None
        with self._changed:
            while not self.states[job].terminal:
                if settings.cancel is not None and settings.cancel.is_set() and job not in self.cancelled:
                    self._changed.release()
                    try:
                        self.interrupt()
                    finally:
                        self._changed.acquire()
                if job in self.cancelled:
                    cancelled_at = cancelled_at or time.monotonic()
                    if time.monotonic() - cancelled_at > CANCEL_WAIT:
                        break
                self._changed.wait(timeout=self.options.poll * 2)
            state = self.states[job]
        return slurm_client.with_details(state) if state.terminal else state

    def _result(self, cell: Cell, job: str, end: JobState, unit_dir: Path, batch: Path,
                wall: float) -> CellResult:
        output = _tail(unit_dir / OUTPUT_NAME.replace("%j", job))
        attempts = sorted((int(p.name.split("-")[1]) for p in unit_dir.glob("attempt-*")), reverse=True)
        last = end.restarts if end.state != slurm_client.GONE else (attempts[0] if attempts else 0)
        read = read_result(attempt_dir(unit_dir, last), cell)
        ours = job in self.cancelled and job not in self.past_deadline  # Ctrl-C or SIGTERM here
        result = CellResult(cell, [], wall)
        if read is not None:
            result, _, data = read
            node = str(data.get("node") or end.nodes)
            for record in result.records:
                record.properties.update({prop.EXECUTOR: SLURM, prop.EXECUTOR_JOB: job, prop.EXECUTOR_NODES: node})
                if last:
                    record.properties[prop.EXECUTOR_ATTEMPT] = str(last)
        if ours:
            result.interrupted = True
            return result
        if end.state == "COMPLETED" and read is not None:
            return result
        # the job died (a partial result, written on the time limit's SIGTERM, is kept beside its record)
        result.interrupted = False
        deadline = self.options.deadline if job in self.past_deadline else None
        text, kind = cause(end, output, deadline)
        result.records.append(self._record(cell, job, text, kind, output, batch, end))
        return result

    def _record(self, cell: Cell, job: str, text: str, kind: str, output: str, batch: Path,
                end: JobState | None = None) -> TestRecord:
        record = TestRecord(nodeid=JOB_ID, cell=cell.name)
        named = f"job {job}" if job else "the job"
        record.attempts.append(Attempt(ERROR, message=f"cell {cell.name}: {named} {text}", stderr=output,
                                       kind=kind))
        record.properties = {prop.CELL: cell.name, prop.BACKEND: cell.backend,
                             prop.DEVICES: str(cell.total_devices), prop.PROCESSES: str(cell.processes),
                             prop.SLICES: str(cell.slices), prop.EXECUTOR: SLURM,
                             prop.REPRO: f"sbatch {batch}"}
        if job:
            record.properties[prop.EXECUTOR_JOB] = job
        if end is not None:
            record.properties[prop.EXECUTOR_NODES] = end.nodes
            record.properties[prop.EXECUTOR_STATE] = end.state
            if end.restarts:
                record.properties[prop.EXECUTOR_ATTEMPT] = str(end.restarts)
        return record

    # -- following the queue -----------------------------------------------------------------------
    def _start_polling(self) -> None:
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll, name="slurm-poll", daemon=True)
            self._poller.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.options.poll):
            with self._changed:
                alive = [j for j, s in self.states.items() if not s.terminal]
            if not alive:
                continue
            try:
                seen = slurm_client.query(alive)
            except SlurmError as exc:  # a controller that stops answering: said once, then retried
                if str(exc) != self.poll_error:
                    self.poll_error = str(exc)
                    self.progress.note(f"error: {exc} (retrying)", cell="run")
                continue
            self.poll_error = ""
            self._take(seen)
            self._enforce_deadline()

    def _take(self, seen: dict[str, JobState]) -> None:
        with self._changed:
            changes = []
            for job, state in seen.items():
                before = self.states.get(job)
                if before is None or (before.state, before.nodes) != (state.state, state.nodes):
                    changes.append((job, before, state))
                self.states[job] = state
            self._changed.notify_all()
        for job, before, state in changes:
            self.progress.note(_change_text(job, before, state), cell=self.labels[job])
        if changes or time.monotonic() - self._last_summary > 30:
            self._summary()

    def _enforce_deadline(self) -> None:
        if time.monotonic() - self.started < self.options.deadline:
            return
        with self._changed:
            late = [j for j, s in self.states.items() if s.waiting and j not in self.past_deadline]
            self.past_deadline.update(late)
            self.cancelled.update(late)
        if late:
            self.progress.note(f"the run's deadline ({self.options.deadline:.0f} s) passed: cancelling the "
                               f"job(s) still waiting: {' '.join(late)}", cell="run")
            try:
                slurm_client.cancel(late)
            except SlurmError as exc:
                self.progress.note(f"error: {exc}", cell="run")

    def _summary(self) -> None:
        self._last_summary = time.monotonic()
        groups: dict[str, list[str]] = {"pending": [], "running": [], "done": []}
        with self._changed:
            for job, state in self.states.items():
                group = "done" if state.terminal else "pending" if state.waiting else "running"
                groups[group].append(f"{self.labels[job]} {job}")
        self.progress.note("jobs: " + "; ".join(f"{len(v)} {k}" + (f" ({', '.join(v)})" if v and k != "done" else "")
                                                for k, v in groups.items()), cell="run")


def _change_text(job: str, before: JobState | None, state: JobState) -> str:
    text = f"job {job} {state.state.lower()}"
    if state.nodes and not state.waiting:
        text += f" on {state.nodes}"
    if state.reason and state.state != "RUNNING":
        text += f" ({state.reason})"
    if before is not None and not before.waiting and state.waiting:
        text += ": back in the queue, its last attempt's result will be read"
    return text


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-OUTPUT_TAIL_CHARS:].decode("utf-8", "replace")
