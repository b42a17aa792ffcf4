"""One launch of a cell whose ranks a cluster launcher starts (``srun`` or ``mpirun``), under the
same watchdog as a local launch (``harness.matrix.multiproc.Launch``).

The supervisor starts one process, the launcher, and the launcher starts every rank
(``harness.matrix.launched``), on whichever hosts it chooses. So a rank is not a child of the
supervisor: it is seen through the files it writes (its events, with who it is and how it
ended), and reached through the launcher. What changes against a local launch:

- a rank's end is its ``exit`` event; a rank that ended without one was lost with its host or
  its task, and the scheduler says why (``scontrol show job``: NODE_FAIL, TIMEOUT, CANCELLED,
  OUT_OF_MEMORY, PREEMPTED), which goes into the record with the host, rank, job and step;
- signals go through the launcher: ``scancel --signal`` to the job step under SLURM (SIGUSR1 for
  stack dumps reaches every rank), the launcher process itself under Open MPI, which forwards them;
- nothing is left behind: the launcher's process group is killed, the job this launch requested
  is cancelled by its unique name, and the sweep waits, bounded, until the scheduler lists it no
  more; under Open MPI on this host the ranks' own processes are killed too.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from harness.matrix.events import EventReader
from harness.matrix.launchers import SLURM
from harness.matrix.multiproc import (
    Launch,
    LaunchResult,
    RankSpec,
    RankState,
    describe_exit,
    file_size,
    signal_label,
)

LOST = -signal.SIGKILL  # the exit status of a rank that ended without a word
CANCEL_WAIT = 30.0  # seconds the sweep waits for the scheduler to forget the job
#: seconds a launcher whose ranks all said they exited has to end by itself before the sweep
LAUNCHER_END_GRACE = 15.0
#: seconds a scheduler command may take: a controller that does not answer is not waited for
SCHEDULER_ASK_TIMEOUT = 15.0
_JOB_LINE = re.compile(r"srun: job (\d+) (?:queued|has been allocated)")


class _LaunchedRank:
    """A rank as far as the watchdog needs a process: whether and how it ended."""

    def __init__(self, launch: ClusterLaunch, index: int) -> None:
        self.launch, self.index = launch, index

    @property
    def pid(self) -> int:
        return self.launch.process.pid

    def poll(self) -> int | None:
        state = self.launch.ranks[self.index]
        if (reported := _exit_event(state)) is not None:
            return int(reported.get("returncode", LOST))
        if self.launch.process.poll() is None:
            return None
        state.reader.poll()  # a last look: the exit event may have landed with the launcher's end
        reported = _exit_event(state)
        return int(reported.get("returncode", LOST)) if reported is not None else LOST

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while (code := self.poll()) is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("rank", timeout or 0)
            time.sleep(0.05)
        return code


class ClusterLaunch(Launch):
    """Start every rank with one launcher command and watch them as a local launch is watched."""

    def __init__(self, specs: list[RankSpec], launcher: str, command: list[str], job_name: str,
                 launcher_log: Path, **kwargs: Any) -> None:
        super().__init__(specs, **kwargs)
        self.launcher, self.command, self.job_name, self.launcher_log = launcher, command, job_name, launcher_log
        self.process: subprocess.Popen[bytes]
        self.own_log: IO[bytes] | None = None
        self.scheduler_said = ""  # the scheduler's word on the job, once asked
        self.never_started: str | None = None  # why no rank ever started, asked once when given up on

    def run(self) -> LaunchResult:
        """The launch, then every rank that ended badly described with its host, job and the
        scheduler's word, even when all ranks ended at once and the watchdog blamed none."""
        result = super().run()
        settle_late_ends(result.ranks)
        dead = [s for s in result.ranks if s.abnormal]
        if dead and (result.culprit is None or self.scheduler_cause()):
            # the scheduler's word comes after the ranks it killed: it outranks the first death seen
            result.culprit = self.blame(dead, time.monotonic()).rank
        for state in dead:
            self.describe_end(state)
        if self.never_started:  # stopped for making no progress, yet no rank ever began
            for state in (s for s in result.ranks if not s.identity.get("host")):
                state.identity["end"], state.timed_out = self.never_started, False
        return result

    # -- starting ---------------------------------------------------------------------------------
    def start_ranks(self) -> None:
        self.launcher_log.parent.mkdir(parents=True, exist_ok=True)
        self.own_log = open(self.launcher_log, "ab")  # noqa: SIM115 - open for the launcher's lifetime
        self.own_log.write(f"\n===== [xharness] {self.launcher}: {' '.join(self.command)}\n".encode())
        self.own_log.flush()
        self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.specs[0].env,
                                        stdin=subprocess.DEVNULL, stdout=self.own_log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        now = time.monotonic()
        for index, spec in enumerate(self.specs):
            proc: Any = _LaunchedRank(self, index)
            # a rank's stack file is appended to by every launch of the cell: only this one's is read
            self.ranks.append(RankState(spec, proc, EventReader(spec.events), file_size(spec.stack),
                                        file_size(spec.log), now, now))

    # -- who, where, and why it ended -------------------------------------------------------------
    def job_id(self) -> str:
        """The SLURM job the ranks run in: as a rank said, else as srun printed it."""
        for state in self.ranks:
            if state.identity.get("job"):
                return str(state.identity["job"])
        try:
            found = _JOB_LINE.findall(self.launcher_log.read_text(errors="replace"))
        except OSError:
            found = []
        return found[-1] if found else ""

    def step_ref(self) -> str:
        """``JOB.STEP`` of the ranks' step, or the job alone before any rank said its step."""
        job = self.job_id()
        step = next((str(s.identity["step"]) for s in self.ranks if s.identity.get("step") not in (None, "")), "")
        return f"{job}.{step}" if job and step else job

    def blame(self, dead: list[RankState], now: float) -> RankState:
        """A rank on a node the scheduler marks down is to blame (its peers were killed because
        the job lost that node), whether or not its end has been seen yet; else as locally."""
        if self.launcher == SLURM and self.scheduler_cause():
            down = _down_nodes(self.specs[0].env)
            lost = [s for s in self.ranks if s.identity.get("host") in down]
            if lost:
                return lost[0]
        # the launcher ends the peers of a rank that ended badly (srun --kill-on-bad-exit,
        # mpirun), and the supervisor may read both ends in one look: the first to end, by the
        # time its rank wrote down, is the cause; a rank that wrote nothing was lost first
        return min(dead, key=lambda s: (s.in_barrier, _ended_at(s), s.rank))

    def describe_end(self, state: RankState) -> str:
        """The rank's host, job and step, how it ended, and what the scheduler says of the job
        when it ended it (kept with the rank for the record)."""
        host = state.identity.get("host") or "an unknown host"
        where = f"on {host}"
        if self.launcher == SLURM and self.job_id():
            where += f" (job {self.step_ref()})"
        cause = self.scheduler_cause()
        if _exit_event(state) is not None and state.returncode is not None:
            text = f"{where} {describe_exit(state.returncode)}"
        else:
            text = (f"{where} was lost: it ended without a word, and the {self.launcher} launcher "
                    f"{_launcher_end(self.process.poll())}")
        text += f"; {cause}" if cause else ""
        state.identity["end"] = text
        return text

    def scheduler_cause(self) -> str:
        """What SLURM says of a job it ended (state, reason, nodes); "" while the job runs, when
        it ended normally, or under another launcher. A final answer is kept."""
        if self.launcher != SLURM or self.scheduler_said:
            return self.scheduler_said
        job = self.job_id()
        fields = job_fields(job, self.specs[0].env) if job else {}
        state = fields.get("JobState", "")
        if state in _ENDED_BY_SCHEDULER:
            self.scheduler_said = (f"the scheduler ended job {job}: {state} (reason {fields.get('Reason', '?')}, "
                                   f"nodes {fields.get('NodeList', '?')})")
        return self.scheduler_said

    def queue_cause(self) -> str:
        """Why a job none of whose ranks ever started was still waiting, as SLURM says (state,
        reason, and the nodes that take no jobs, with their own reasons); "" once any rank said
        where it runs, or when the job is not waiting in the queue."""
        job = self.job_id()
        if not job or any(s.identity.get("host") for s in self.ranks):
            return ""
        env = self.specs[0].env
        fields = job_fields(job, env)
        if fields.get("JobState") not in ("PENDING", "CONFIGURING"):
            return ""
        text = (f"never started: the scheduler still held job {job} {fields['JobState']} when the supervisor "
                f"gave up on it (reason {fields.get('Reason', '?')})")
        unavailable = [f"{node} {state}" + (f": {why}" if why and why != "none" else "")
                       for node, (state, why) in sorted(_node_states(env).items())
                       if state.startswith(_NO_NEW_JOBS + ("drng",))]  # draining: finishing its jobs, taking none
        return text + (f"; nodes taking no jobs: {', '.join(unavailable)}" if unavailable else "")

    # -- signals go through the launcher ----------------------------------------------------------
    def signal_ranks(self, ranks: list[RankState], sig: int) -> None:
        if not ranks:
            return
        if self.launcher == SLURM and self.never_started is None:  # before a signal cancels a waiting job
            self.never_started = self.queue_cause()
        if self.never_started:  # no rank to signal (scancel retries a pending job for 11 s): withdraw it
            self._cancel_job()
            return
        if self.launcher == SLURM and (ref := self.step_ref()):
            _quiet(["scancel", f"--signal={signal.Signals(sig).name.removeprefix('SIG')}", ref], self.specs[0].env)
            if sig != signal.SIGKILL:
                return
        try:
            if sig == signal.SIGKILL:
                os.killpg(self.process.pid, sig)
            else:
                self.process.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def let_end(self) -> None:
        """When every rank has said it exited, the launcher is closing the step: srun collects
        its tasks' ends and the step completes. The sweep's SIGKILL to the step and to srun would
        cut that short; under SLURM a step killed while its tasks were exiting once kept its
        slurmstepd waiting past UnkillableStepTimeout, which drained the node ("Kill task
        failed") under the next cell. So wait for the launcher first, bounded."""
        if not self.ranks or any(_exit_event(s) is None for s in self.ranks):
            return
        try:
            self.process.wait(timeout=LAUNCHER_END_GRACE)
        except subprocess.TimeoutExpired:
            pass  # the sweep stops it

    def reap(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self.launcher == SLURM:
            self.scheduler_cause()  # before the cancel below rewrites the job's state
        if self.launcher == SLURM or self.command[:1] == ["salloc"]:  # mpirun in a job of its own
            self._cancel_job()
        self._kill_local_ranks()
        super().reap()
        if self.own_log is not None:
            self.own_log.close()

    def _cancel_job(self) -> None:
        """Cancel the job this launch requested (by its unique name), or the step it ran inside
        an allocation it did not request, and wait until the scheduler no longer runs it."""
        env = self.specs[0].env
        inside = bool(env.get("SLURM_JOB_ID"))
        target = ["--full", self.step_ref()] if inside and "." in self.step_ref() else [f"--name={self.job_name}"]
        _quiet(["scancel", "--quiet", *target], env)
        if inside:
            return
        deadline = time.monotonic() + CANCEL_WAIT
        while time.monotonic() < deadline:
            listed = _quiet(["squeue", "-h", f"--name={self.job_name}", "-o", "%i %T"], env)
            if listed is not None and not listed.strip():
                return
            time.sleep(0.5)

    def _kill_local_ranks(self) -> None:
        """A rank on this machine may outlive its launcher (mpirun killed, or a node whose
        ``slurmd`` died: nothing is left to stop its step); kill its group. A rank elsewhere is
        its scheduler's to stop (the job was cancelled above)."""
        here = socket.gethostname()
        for state in self.ranks:
            pid = state.identity.get("pid")
            if not isinstance(pid, int) or state.identity.get("machine") != here:
                continue
            try:
                group = os.getpgid(pid)
                if group != os.getpgrp():
                    os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


#: job states in which the scheduler, not the job, ended it
_ENDED_BY_SCHEDULER = ("NODE_FAIL", "TIMEOUT", "CANCELLED", "PREEMPTED", "OUT_OF_MEMORY", "DEADLINE",
                       "BOOT_FAIL", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED")


def _exit_event(state: RankState) -> dict[str, Any] | None:
    """How the rank's own parent (``harness.matrix.launched``) saw it end, or None: not yet, or
    never (the rank was lost with its host)."""
    return next((e for e in reversed(state.reader.events) if e.get("event") == "exit"), None)


def settle_late_ends(ranks: list[RankState]) -> None:
    """A rank taken for lost because the launcher ended first, whose parent's ``exit`` event
    landed after (it aborted when its peers went), ended as that event says, not as the stand-in
    ``LOST`` (SIGKILL) does."""
    for state in ranks:
        state.reader.poll()
        if state.returncode == LOST and (reported := _exit_event(state)) is not None:
            state.returncode = int(reported.get("returncode", LOST))


def _ended_at(state: RankState) -> float:
    """When the rank ended, as its ``exit`` event says; a rank with none ended before any that
    wrote one (its host went away first)."""
    reported = _exit_event(state)
    try:
        return float(reported["time"]) if reported is not None else 0.0
    except (KeyError, TypeError, ValueError):
        return 0.0


#: node states (``sinfo %t``) in which a node runs nothing: a rank there was lost with it
_NO_NEW_JOBS = ("down", "fail", "drain")


def job_fields(job: str, env: dict[str, str]) -> dict[str, str]:
    """``scontrol show job -o JOB`` as its fields (JobState, Reason, NodeList...); {} unanswered.
    The one reader of a job's fields, for the launch and for the suites that check a job's end."""
    return dict(re.findall(r"(\w+)=(\S*)", _quiet(["scontrol", "show", "job", "-o", job], env) or ""))


def _node_states(env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each node ``sinfo`` lists, with its state and the reason given for it (``none``)."""
    listed = _quiet(["sinfo", "-h", "-N", "-o", "%N %t %E"], env) or ""
    return {fields[0]: (fields[1], fields[2] if len(fields) > 2 else "")
            for fields in (line.split(maxsplit=2) for line in listed.splitlines()) if len(fields) >= 2}


def _down_nodes(env: dict[str, str]) -> set[str]:
    return {node for node, (state, _) in _node_states(env).items() if state.startswith(_NO_NEW_JOBS)}


def _launcher_end(code: int | None) -> str:
    if code is None:
        return "was still running"
    return f"died on {signal_label(-code)}" if code < 0 else f"exited with code {code}"


def _quiet(cmd: list[str], env: dict[str, str]) -> str | None:
    """Run a scheduler command, bounded; its output, or None when it could not be asked."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=SCHEDULER_ASK_TIMEOUT, env=env).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
