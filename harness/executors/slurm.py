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

from harness.backends import Backend
from harness.executors import SLURM, slurm_client
from harness.executors.job_result import job_record, unit_result
from harness.executors.slurm_client import JobState, SlurmError
from harness.executors.slurm_job import JobSpec, write_spec
from harness.executors.slurm_script import JobDefaults, job_name, per_node_devices, script
from harness.executors.unit import skipped_cell_record
from harness.matrix.config import Cell
from harness.matrix.progress import CellProgress, Progress
from harness.matrix.supervisor import CellResult, RunSettings
from harness.report.records import KIND_EXIT


@dataclass(frozen=True)
class SlurmOptions:
    """How a run uses the cluster: the jobs' defaults, the deadline for waiting jobs, the poll."""

    defaults: JobDefaults = field(default_factory=JobDefaults)
    deadline: float = 7200.0  # seconds after the run starts; a job still waiting then is cancelled
    poll: float = 1.0  # seconds between two looks at the queue
    #: seconds the controller may go unanswering before the run stops waiting for its jobs
    patience: float = 300.0
    #: seconds a cancelled job may take to end (and write what it finished) before its unit is
    #: recorded without it
    cancel_wait: float = 120.0


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
        self._failing_since: float | None = None
        self.submitted: dict[str, tuple[float, float]] = {}  # job -> (when sbatch was called, its seconds)
        self.running_seen: dict[str, float] = {}  # job -> when it was first seen running
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._last_summary = 0.0
        self._capacity: int | None = None
        self._gres: dict[str, tuple[str, dict[str, int]]] = {}  # partition -> sinfo's generic resources

    # -- the run's side ----------------------------------------------------------------------------
    def capacity(self) -> int:
        """How many single-process units may run at once: the cluster's CPUs (a SlurmError when
        no controller answers)."""
        if self._capacity is None:
            self._capacity = max(1, slurm_client.total_cpus(self.options.defaults.partition))
        return self._capacity

    def cannot_serve(self, cell: Cell) -> str:
        """Why no node of the cluster can give ``cell`` the GPUs it asks for ("" when one can, or
        when the cluster does not say): a cell the cluster cannot serve is skipped with what sinfo
        reports, as a local run skips a GPU cell on a machine without one, never sent to fail."""
        if cell.backend != Backend.GPU:
            return ""
        partition = cell.cluster.partition or self.options.defaults.partition
        if partition not in self._gres:
            try:
                self._gres[partition] = slurm_client.generic_resources(partition)
            except SlurmError:
                return ""  # sbatch will say what is wrong
        said, most = self._gres[partition]
        need = per_node_devices(cell)
        if most.get("gpu", 0) >= need:
            return ""
        where = f"partition {partition}" if partition else "the cluster"
        return (f"it asks for --gres=gpu:{need} per node, and no node of {where} has that many: "
                f"sinfo reports generic resources {said}")

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

    def stats(self) -> dict[str, object]:
        """What the cluster cost this run, for ``matrix.json``: the jobs, sbatch's seconds per
        submission, and the seconds from submission until a job was seen running (the queue's
        wait, to within one poll)."""
        with self._changed:
            submit = [seconds for _, seconds in self.submitted.values()]
            start = [self.running_seen[j] - self.submitted[j][0] for j in self.running_seen if j in self.submitted]
        return {"executor": SLURM, "jobs": len(submit), "poll": self.options.poll,
                "submit_mean": round(sum(submit) / len(submit), 4) if submit else None,
                "submit_max": round(max(submit), 4) if submit else None,
                "start_mean": round(sum(start) / len(start), 3) if start else None,
                "start_max": round(max(start), 3) if start else None}

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(timeout=10)

    # -- one unit ----------------------------------------------------------------------------------
    def run(self, cell: Cell, settings: RunSettings, progress: CellProgress, shard: str,
            label: str) -> tuple[CellResult, bool]:
        return self.run_job(JobSpec(cell, settings, shard, label), progress)

    def run_job(self, unit: JobSpec, progress: CellProgress) -> tuple[CellResult, bool]:
        """Submit one unit as a job and wait for its end: its result (and, as ``run``, whether
        its release could not be installed)."""
        cell, settings, label = unit.cell, unit.settings, unit.label
        started = time.monotonic()
        if why := self.cannot_serve(cell):
            progress.note(f"skipped: {why}")
            return CellResult(cell, [skipped_cell_record(cell, why)], skipped=why), False
        unit_dir = self.jobs_dir / job_name(label)
        shutil.rmtree(unit_dir, ignore_errors=True)
        unit_dir.mkdir(parents=True)
        spec = write_spec(unit, unit_dir)
        batch = unit_dir / "job.sh"
        batch.write_text(script(cell, label, unit_dir, self.workdir,
                                [self.python, "-m", "harness.executors.slurm_job", str(spec)],
                                self.options.defaults), encoding="utf-8")
        called = time.monotonic()
        try:
            job = slurm_client.submit(batch)
        except SlurmError as exc:
            record = job_record(cell, "", f"could not be submitted: {exc}", KIND_EXIT, "", batch)
            return CellResult(cell, [record], time.monotonic() - started), False
        with self._changed:
            self.labels[job] = label
            self.states[job] = JobState(job, "PENDING")
            self.submitted[job] = (called, time.monotonic() - called)
            self._start_polling()
        progress.note(f"job {job} submitted ({batch})")
        end = self._wait(job)
        with self._changed:
            ours = job in self.cancelled and job not in self.past_deadline  # Ctrl-C or SIGTERM here
            late = job in self.past_deadline
        logs = settings.out_dir / "logs" / cell.name / unit.shard if unit.shard else settings.out_dir / "logs" / cell.name
        return unit_result(cell, end, unit_dir, batch, time.monotonic() - started, interrupted=ours,
                           deadline=self.options.deadline if late else None, logs=logs)

    def _wait(self, job: str) -> JobState:
        cancelled_at: float | None = None
        with self._changed:
            while not self.states[job].terminal:
                if job in self.cancelled:  # by interrupt(), which the run calls on Ctrl-C or SIGTERM
                    cancelled_at = cancelled_at or time.monotonic()
                    if time.monotonic() - cancelled_at > self.options.cancel_wait:
                        break
                self._changed.wait(timeout=self.options.poll * 2)
            state = self.states[job]
        return slurm_client.with_details(state) if state.terminal else state

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
                self._unanswered(alive, exc)
                continue
            self.poll_error, self._failing_since = "", None
            self._take(seen)
            self._enforce_deadline()

    def _unanswered(self, alive: list[str], exc: SlurmError) -> None:
        """The controller did not answer: retried until its patience runs out, then every job
        still followed ends as unreachable (its unit gets a record that says so)."""
        now = time.monotonic()
        if str(exc) != self.poll_error:
            self.poll_error = str(exc)
            self.progress.note(f"error: {exc} (retrying for up to {self.options.patience:.0f} s)", cell="run")
        self._failing_since = self._failing_since or now
        if now - self._failing_since < self.options.patience:
            return
        gone = {job: JobState(job, slurm_client.UNREACHABLE, self.states[job].nodes,
                              f"no answer for {now - self._failing_since:.0f} s: {exc}") for job in alive}
        self._take(gone)

    def _take(self, seen: dict[str, JobState]) -> None:
        with self._changed:
            changes = []
            for job, state in seen.items():
                before = self.states.get(job)
                if before is None or (before.state, before.nodes) != (state.state, state.nodes):
                    changes.append((job, before, state))
                if job not in self.running_seen and not state.waiting:
                    self.running_seen[job] = time.monotonic()
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
    if requeued(before, state):
        text += ": back in the queue, its last attempt's result will be read"
    return text


def requeued(before: JobState | None, state: JobState) -> bool:
    """Whether the job went back to the queue between two looks: it waits again after it ran, or
    it runs again after it was completing (a requeue whose time in the queue fell between two
    polls: a job that ends goes from completing to a final state, never back to running)."""
    if before is None:
        return False
    return (not before.waiting and state.waiting) or (before.state == "COMPLETING" and state.state == "RUNNING")
