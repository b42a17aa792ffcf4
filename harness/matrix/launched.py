"""``python -m harness.matrix.launched LAUNCHER ARGV...``: one rank of a cell that a cluster
launcher started (``srun``, ``mpirun``).

The launcher starts the same command on every rank, so this process first learns which rank it is
from the launcher's own variables (``harness.matrix.launchers.identity``), puts its rank into the
per-rank paths of ``ARGV`` (``{rank}``) and into ``HARNESS_PROCESS_ID``, tells the supervisor who
it is (launcher, host, rank, job and step, a ``rank`` event in its events file), and then runs
the rank's pytest as its child, with output in the rank's own log. It stays the parent for one
reason: a rank can die in a way that writes nothing (a segfault, a SIGKILL), and a parent can
still record how it ended (an ``exit`` event) before the launcher reports the task. Signals the
launcher delivers (SIGTERM, SIGINT, SIGUSR1 for stack dumps) are passed on to the child.

On a multi-slice cell, the slices are the launcher's nodes: ``HARNESS_NUM_SLICES`` and this
rank's slice come from ``SLURM_STEP_NUM_NODES`` and ``SLURM_NODEID``, as a multi-slice job's slice
variables come from its launcher, and a cell that declares another slice count fails loudly.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.matrix.events import EventReader, EventWriter
from harness.matrix.launchers import LAUNCHERS, identity
from harness.matrix.multiproc import PYTEST_NORMAL_EXITS

#: what the supervisor tells a launched rank, besides the cell's environment
EVENTS_ENV = "HARNESS_RANK_EVENTS"  # the events file, with ``{rank}``
LOG_ENV = "HARNESS_RANK_LOG"  # the rank's log, with ``{rank}``
SLICES_ENV = "HARNESS_SLICES_FROM_NODES"  # "1": a multi-slice cell, one slice per node
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
UNCATCHABLE = (signal.SIGKILL, signal.SIGSTOP)


def _rank_path(template: str, rank: int) -> Path:
    return Path(template.replace("{rank}", str(rank)))


def _slices(env: dict[str, str], nodes: int, node_index: int) -> None:
    declared = int(env.get("HARNESS_NUM_SLICES") or 1)
    if declared != nodes:
        raise SystemExit(f"xharness: the cell declares {declared} slices, but the launcher gave "
                         f"{nodes} node(s): a slice is a node under a launcher")
    env["HARNESS_NUM_SLICES"] = env["HARNESS_SLICES"] = str(nodes)
    env["HARNESS_SLICE_ID"] = str(node_index)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in LAUNCHERS:
        print(f"usage: python -m harness.matrix.launched {{{','.join(LAUNCHERS)}}} ARGV...", file=sys.stderr)
        return 2
    launcher, rest = argv[0], argv[1:]
    me = identity(launcher, os.environ, socket.gethostname())
    env = dict(os.environ, HARNESS_PROCESS_ID=str(me.rank), HARNESS_LAUNCHER=launcher)
    if env.pop(SLICES_ENV, "") == "1":
        _slices(env, me.nodes, me.node_index)
    events_path = _rank_path(env.pop(EVENTS_ENV), me.rank)
    events = EventWriter(events_path, durable=True)  # read by a supervisor on another host
    events.emit("rank", pid=os.getpid(), machine=socket.gethostname(), **me.fields())
    log_path = _rank_path(env.pop(LOG_ENV), me.rank)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    child_argv = [sys.executable, "-m", "harness.matrix.multiproc",
                  *(a.replace("{rank}", str(me.rank)) for a in rest)]
    with open(log_path, "ab") as log:
        log.write(f"\n===== [xharness] rank {me.rank} on {me.host} ({launcher}, job {me.job or '-'} "
                  f"step {me.step or '-'}): {' '.join(child_argv)}\n".encode())
        log.flush()
        child = subprocess.Popen(child_argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT)

        def forward(signum: int, _frame: object) -> None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

        for sig in FORWARDED:
            signal.signal(sig, forward)
        code = child.wait()
    # when it ended, by this host's clock: the supervisor sees every rank's end only when it reads
    # the files, often several in one look, and the first to end is the one to blame
    events.emit("exit", returncode=code, host=me.host, time=time.time())
    events.close()
    if code < 0:  # die the way the child did, so that the launcher reports the same signal
        if -code not in UNCATCHABLE:  # these two always act by default, and refuse a handler
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    if code in PYTEST_NORMAL_EXITS and _session_ended(events_path):
        # a session that ended by itself (tests failed, or none selected: 1, 5) is no reason to
        # end the other ranks: the launcher sees a good exit (srun's --kill-on-bad-exit would
        # SIGTERM them mid-teardown), and the supervisor reads the real status from the event
        return 0
    return code if code >= 0 else 128 - code


def _session_ended(path: Path) -> bool:
    """Whether the rank's pytest reported the end of its session (the plugin's ``end`` event)."""
    return any(event.get("event") == "end" for event in EventReader(path).poll())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
