"""What the harness asks a SLURM controller, through SLURM's own commands: ``sbatch`` to submit,
``squeue`` (and ``scontrol``, ``sacct`` for a job squeue no longer lists) to follow, ``scancel``
to cancel, ``sinfo`` for the cluster's size.

The commands are the interface every site has and every user already reads; their output is
parsed by the pure functions here (``parse_squeue``, ``parse_scontrol``), so the parsing is tested
without a cluster. A command that cannot run, or a controller that does not answer, is a
:class:`SlurmError` whose message says which command and what it printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

#: the states a job leaves no more (``squeue --states``' names); every other state is still alive
TERMINAL = frozenset({
    "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "CANCELLED",
    "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED",
})
#: a job waiting to start (a requeued job waits again, with its restart count raised)
WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"})
#: a job the controller no longer knows (past its MinJobAge, with no accounting to ask)
GONE = "GONE"
#: a job whose controller stopped answering before its end was seen
UNREACHABLE = "UNREACHABLE"
COMMAND_TIMEOUT = 30.0  # seconds a controller has to answer one command


class SlurmError(Exception):
    """A SLURM command failed; the message names the command and what it printed."""


@dataclass(frozen=True)
class JobState:
    """A job as the controller reports it."""

    job: str
    state: str
    nodes: str = ""  # the job's node list, as SLURM writes it (``xh-node[1-2]``)
    reason: str = ""  # why it waits, or why it ended
    restarts: int = 0  # times it was requeued
    exit_code: str = ""  # ``EXIT:SIGNAL``

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL or self.state in (GONE, UNREACHABLE)

    @property
    def waiting(self) -> bool:
        return self.state in WAITING


def _run(argv: Sequence[str], what: str) -> str:
    if shutil.which(argv[0]) is None:
        raise SlurmError(f"{argv[0]} not found: {what} needs SLURM's client commands on PATH")
    # SLURM's commands wait up to a minute for a configuration file that is not there, retrying
    # every second, before they say so: a SLURM_CONF that names nothing is told at once
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        raise SlurmError(f"{' '.join(argv)}: SLURM_CONF={conf} names no file (the cluster's slurm.conf)")
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(argv)}: the controller did not answer in {COMMAND_TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        raise SlurmError(f"{' '.join(argv)}: {said}")
    return done.stdout


def submit(script: Path, options: Sequence[str] = ()) -> str:
    """Submit a batch script; its job id. ``options`` come before the script, as sbatch reads them."""
    out = _run(["sbatch", "--parsable", *options, str(script)], "submitting a cell as a job").strip()
    job = out.split(";")[0].strip()  # "ID" or "ID;CLUSTER"
    if not job.isdigit():
        raise SlurmError(f"sbatch answered {out!r}, not a job id")
    return job


def parse_squeue(text: str) -> dict[str, JobState]:
    """``squeue --noheader --format=%i|%T|%N|%r`` lines, by job id."""
    jobs: dict[str, JobState] = {}
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4 or not fields[0]:
            continue
        job, state, nodes, reason = (f.strip() for f in fields)
        jobs[job] = JobState(job, state, nodes, "" if reason in ("None", "(null)") else reason)
    return jobs


_SCONTROL_FIELD = re.compile(r"(\w+)=(\S*)")


def parse_scontrol(text: str) -> JobState | None:
    """One job of ``scontrol show job --oneliner``; None when it names none."""
    fields = dict(_SCONTROL_FIELD.findall(text))
    if "JobId" not in fields or "JobState" not in fields:
        return None
    nodes = fields.get("NodeList", "")
    return JobState(
        job=fields["JobId"],
        state=fields["JobState"],
        nodes="" if nodes == "(null)" else nodes,
        reason="" if fields.get("Reason", "None") == "None" else fields.get("Reason", ""),
        restarts=int(fields.get("Restarts", "0") or 0),
        exit_code=fields.get("ExitCode", ""),
    )


def query(jobs: Iterable[str]) -> dict[str, JobState]:
    """The state of each job: squeue for all at once, and for a job it no longer lists,
    scontrol, then sacct (where the site keeps accounting), else :data:`GONE`."""
    wanted = list(dict.fromkeys(jobs))
    if not wanted:
        return {}
    try:
        found = parse_squeue(_run(["squeue", "--noheader", "--states=all", f"--jobs={','.join(wanted)}",
                                   "--format=%i|%T|%N|%r"], "following the cells' jobs"))
    except SlurmError as exc:
        if "Invalid job id" not in str(exc):
            raise
        found = {}
    for job in wanted:
        if job not in found:
            found[job] = details(job) or _from_accounting(job) or JobState(job, GONE)
    return found


def details(job: str) -> JobState | None:
    """The controller's full view of a job (its restarts and exit code); None once it forgot it."""
    try:
        return parse_scontrol(_run(["scontrol", "show", "job", "--oneliner", job], "reading a job"))
    except SlurmError:
        return None


def _from_accounting(job: str) -> JobState | None:
    if shutil.which("sacct") is None:
        return None
    try:
        text = _run(["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={job}",
                     "--format=JobID,State,NodeList,Reason,ExitCode"], "reading a job's accounting")
    except SlurmError:
        return None
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) == 5 and fields[0] == job:
            state = fields[1].split()[0]  # "CANCELLED by 0"
            return JobState(job, state, fields[2], fields[3] if fields[3] != "None" else "", exit_code=fields[4])
    return None


def with_details(state: JobState) -> JobState:
    """``state`` completed by scontrol's restart count and exit code, where it still knows the job."""
    full = details(state.job)
    if full is None:
        return state
    return replace(full, nodes=full.nodes or state.nodes, reason=full.reason or state.reason)


def cancel(jobs: Iterable[str]) -> None:
    """Cancel exactly these jobs, by id."""
    ids = list(jobs)
    if ids:
        _run(["scancel", *ids], "cancelling the run's jobs")


def total_cpus(partition: str = "") -> int:
    """The CPUs of the cluster (or of one partition): how many single-CPU cells may run at once."""
    argv = ["sinfo", "--noheader", "--format=%C"]
    if partition:
        argv.append(f"--partition={partition}")
    text = _run(argv, "sizing the cluster").split()
    total = 0
    for cpus in text:  # "ALLOCATED/IDLE/OTHER/TOTAL" per partition line
        parts = cpus.split("/")
        if len(parts) == 4 and parts[3].isdigit():
            total = max(total, int(parts[3]))
    return total


def parse_gres(text: str) -> dict[str, int]:
    """The most of each generic resource one node offers, from ``sinfo --format=%G`` lines:
    ``gpu:4``, ``gpu:a100:4(S:0-1)``, ``gpu:2,mps:100``, ``(null)`` (none)."""
    most: dict[str, int] = {}
    for line in text.split():
        for item in line.split(","):
            item = item.split("(", 1)[0].strip()
            if not item:  # "(null)": none
                continue
            parts = item.split(":")
            count = int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
            most[parts[0]] = max(most.get(parts[0], 0), count)
    return most


def generic_resources(partition: str = "") -> tuple[str, dict[str, int]]:
    """What the cluster's nodes (or one partition's) offer as generic resources: sinfo's own
    words, and the most of each kind one node has."""
    argv = ["sinfo", "--noheader", "--format=%G"]
    if partition:
        argv.append(f"--partition={partition}")
    text = _run(argv, "asking the cluster for its generic resources")
    said = ", ".join(sorted(set(text.split()))) or "nothing"
    return said, parse_gres(text)
