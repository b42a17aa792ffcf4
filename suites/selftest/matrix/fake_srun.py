"""SLURM's ``srun`` and the commands the harness asks about a step (``scancel``, ``squeue``,
``scontrol``, ``sinfo``) as one script, which starts a step's tasks on this machine as the real
one starts them on nodes: each task in a process group of its own, with the variables SLURM gives
a task (those JAX's cluster detection reads included), ``--kill-on-bad-exit``'s end of the peers,
and signals passed on. The state of each step lives in files under ``$FAKE_SLURM_DIR``, so that
``scancel`` reaches the tasks ``srun`` started.

A test makes a node fail by writing ``down-NODE`` there, as a node whose ``slurmd`` died: ``srun``
gives up on the step, nothing reaches the tasks on that node any more (they live on), ``sinfo``
lists it down (or in the state the file holds, as ``drain`` or ``fail``) and ``scontrol`` says the
job ended NODE_FAIL. A node drained by its administrator, ``drain-NODE``, is only listed ``drain``
by ``sinfo``: it goes on running the jobs it has, and a job on it ends by itself; what the file
holds is the reason ``sinfo`` gives. While ``no-resources`` exists, a job is never allocated: it
waits PENDING, for the reason that file holds, until it is cancelled.
Run as ``python fake_srun.py TOOL ARGS...`` (the test puts a wrapper named TOOL on PATH).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_SLURM_DIR", "/nonexistent"))
NODES = ("fake1", "fake2")


def _jobs() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in STATE.glob("job-*.json")} if STATE.is_dir() else {}


def _save(job: dict) -> None:
    path = STATE / f"job-{job['id']}.json"
    path.with_suffix(".tmp").write_text(json.dumps(job))
    path.with_suffix(".tmp").replace(path)


def _signal_tasks(job: dict, sig: int) -> None:
    """Signal each task of ``job``, but for those on a failed node: nothing reaches them there."""
    down = _down()
    for rank, pid in enumerate(job["pids"]):
        if NODES[rank % len(job["nodes"].split(","))] in down:
            continue
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def srun(argv: list[str]) -> int:
    options = {}
    while argv and argv[0].startswith("--"):
        key, _, value = argv.pop(0)[2:].partition("=")
        options[key] = value
    tasks, nodes = int(options["ntasks"]), int(options.get("nodes") or options["ntasks"])
    inside = os.environ.get("SLURM_JOB_ID", "")
    job_id = inside or str(5000 + os.getpid() % 4000)
    if not inside:
        print(f"srun: job {job_id} queued and waiting for resources", file=sys.stderr, flush=True)
        if (STATE / "no-resources").exists():
            return _wait_in_queue(job_id, options.get("job-name", ""), (STATE / "no-resources").read_text().strip())
        print(f"srun: job {job_id} has been allocated resources", file=sys.stderr, flush=True)
    job = {"id": job_id, "name": options.get("job-name", ""), "state": "RUNNING", "pids": [],
           "nodes": ",".join(NODES[:nodes])}
    procs = []
    for rank in range(tasks):
        env = dict(os.environ, SLURM_JOB_ID=job_id, SLURM_STEP_ID="0", SLURM_PROCID=str(rank),
                   SLURM_LOCALID="0", SLURM_NODEID=str(rank % nodes), SLURM_NTASKS=str(tasks),
                   SLURM_STEP_NUM_NODES=str(nodes), SLURM_NNODES=str(nodes), SLURM_STEP_NODELIST="127.0.0.1",
                   SLURMD_NODENAME=NODES[rank % nodes])
        procs.append(subprocess.Popen(argv, env=env, start_new_session=True))
    job["pids"] = [p.pid for p in procs]
    _save(job)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, lambda signum, _frame: _signal_tasks(job, signum))
    first_bad = 0
    stop_at: float | None = None
    while any(p.poll() is None for p in procs):
        if lost := sorted(_down() & set(job["nodes"].split(","))):
            # the node stopped answering: srun gives up on the step, and its tasks there live on
            print(f"srun: error: Node failure on {lost[0]}", file=sys.stderr, flush=True)
            _signal_tasks(job, signal.SIGKILL)
            return 1
        for rank, proc in enumerate(procs):
            code = proc.poll()
            if code not in (None, 0) and not first_bad:
                first_bad = code
                said = f"Exited with exit code {code}" if code > 0 else signal.Signals(-code).name
                print(f"srun: error: {NODES[rank % nodes]}: task {rank}: {said}", file=sys.stderr, flush=True)
                _signal_tasks(job, signal.SIGTERM)  # --kill-on-bad-exit
                stop_at = time.monotonic() + 2.0
        if stop_at is not None and time.monotonic() > stop_at:
            _signal_tasks(job, signal.SIGKILL)
        time.sleep(0.02)
    job = json.loads((STATE / f"job-{job_id}.json").read_text())
    if job["state"] == "RUNNING":
        job["state"] = "COMPLETED" if not first_bad else "FAILED"
    _save(job)
    return 0 if not first_bad else (first_bad if first_bad > 0 else 128 - first_bad)


def _wait_in_queue(job_id: str, name: str, reason: str) -> int:
    """A job the scheduler holds: srun waits for an allocation that never comes, until cancelled."""
    _save({"id": job_id, "name": name, "state": "PENDING", "reason": reason or "Resources", "pids": [],
           "nodes": ""})
    while json.loads((STATE / f"job-{job_id}.json").read_text())["state"] == "PENDING":
        time.sleep(0.05)
    print("srun: Job has been cancelled", file=sys.stderr, flush=True)
    print("srun: error: Unable to allocate resources: Job/step already completing or completed", file=sys.stderr)
    return 1


def scancel(argv: list[str]) -> int:
    (STATE / "scancel.args").open("a").write(" ".join(argv) + "\n")
    sig = next((signal.Signals["SIG" + a.split("=", 1)[1]] for a in argv if a.startswith("--signal=")), None)
    name = next((a.split("=", 1)[1] for a in argv if a.startswith("--name=")), None)
    refs = [a.split(".")[0] for a in argv if not a.startswith("-")]
    for job in _jobs().values():
        if job["id"] in refs or job["name"] == name:
            _signal_tasks(job, sig or signal.SIGKILL)
            if sig is None and job["state"] in ("RUNNING", "PENDING", "REQUEUED", "SUSPENDED"):
                job["state"] = "CANCELLED"
                _save(job)
    return 0


def squeue(argv: list[str]) -> int:
    name = next((a.split("=", 1)[1] for a in argv if a.startswith("--name=")), None)
    if argv != ["-h", f"--name={name}", "-o", "%i %T"]:
        print(f"squeue: error: this fake answers the harness's own question only, not {argv}", file=sys.stderr)
        return 1
    for job in _jobs().values():
        if (name is None or job["name"] == name) and any(_alive(pid) for pid in job["pids"]):
            print(f"{job['id']} RUNNING")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _down() -> set[str]:
    return {p.name.removeprefix("down-") for p in STATE.glob("down-*")}


def scontrol(argv: list[str]) -> int:
    (STATE / "scontrol.args").open("a").write(" ".join(argv) + "\n")
    if (STATE / "silent-controller").exists():  # the controller does not answer: scontrol waits on
        time.sleep(60)
    if argv[:3] != ["show", "job", "-o"] or len(argv) != 4:
        print(f"scontrol: error: this fake answers the harness's own question only, not {argv}", file=sys.stderr)
        return 1
    job = _jobs().get(f"job-{argv[-1]}")
    if job is None:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        return 1
    state, reason = job["state"], job.get("reason", "None")
    if _down() & set(job["nodes"].split(",")):
        state, reason = "NODE_FAIL", "NodeDown"
    print(f"JobId={job['id']} JobName={job['name']} JobState={state} Reason={reason} NodeList={job['nodes']}")
    return 0


def sinfo(argv: list[str]) -> int:
    down = _down()
    asked = (["-h", "-N", "-o", "%N %t %E"], ["-h", "-N", "-o", "%N %o"], ["-h", "-o", "%t %D"])
    if argv not in asked:
        print(f"sinfo: error: this fake answers the harness's own questions only, not {argv}", file=sys.stderr)
        return 1
    if argv[-1] == "%N %t %E":
        drained = {p.name.removeprefix("drain-") for p in STATE.glob("drain-*")}
        for node in NODES:
            word = (STATE / f"down-{node}").read_text().strip() if node in down else ""
            reason = (STATE / f"drain-{node}").read_text().strip() if node in drained else ""
            state = word or ("down*" if node in down else "drain" if node in drained else "idle")
            print(f"{node} {state} {reason or 'none'}")
    else:
        print(f"idle {len(NODES)}")
    return 0


if __name__ == "__main__":
    tool, *rest = sys.argv[1:]
    sys.exit({"srun": srun, "scancel": scancel, "squeue": squeue, "scontrol": scontrol, "sinfo": sinfo}[tool](rest))
