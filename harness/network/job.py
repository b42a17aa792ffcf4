"""A job of ranks, each a host of its own, run under a nemesis: the history it leaves.

The ranks run ``harness.network.worker`` in a fresh fabric; their coordinator is rank 0's
address. The job releases the ranks' points (a point is reached when every live rank has
reached it; the faults due there start first), starts and heals the faults on time, records every
event, and kills what is still running at the hard ``limit``: a hang becomes a record, never a
stuck test. Processes are killed with SIGKILL, since JAX catches SIGTERM (its preemption
notifier) and a rank blocked in a collective ignores it.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness.network.fabric import Fabric
from harness.network.faults import At, AtPoint, Fault, Flap, Late
from harness.network.history import History, RankEnd
from harness.network.nemesis import Nemesis

#: the directory that holds this harness's package, put first on the ranks' path
CHECKOUT = Path(__file__).resolve().parents[2]
#: the coordination service's port: every job has a fabric of its own, so it never collides
COORDINATOR_PORT = 8476
STDERR_KEPT = 6000
#: what a rank must not inherit from the process that runs the job (a matrix cell's device count,
#: its turn order): a rank is a host of one device unless the spec says otherwise
INHERITED_NOT = ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "HARNESS_TURN_DIR", "HARNESS_TURN_ORDER",
                 "HARNESS_PROCESS_ID", "HARNESS_PROCESSES", "HARNESS_COORDINATOR")


@dataclass(frozen=True)
class JobSpec:
    """What a faulted job runs: ``ranks`` ranks, ``collectives`` all-gathers of ``size`` floats."""

    ranks: int = 2
    collectives: int = 3
    size: int = 1024
    heartbeat: float = 10.0  # JAX's heartbeat timeout, seconds
    init_timeout: float = 60.0
    runtime: str = "jax"  # or "reference": the reference runtime's sharded tensors
    checkpoint: bool = False
    limit: float = 120.0  # the hard limit: what still runs then is killed and recorded
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)


def _reader(rank: int, stream: IO[str], sink: queue.Queue[tuple[int, str | None]]) -> None:
    for line in stream:
        sink.put((rank, line))
    sink.put((rank, None))


class _Run:
    def __init__(self, spec: JobSpec, faults: Sequence[Fault], fabric: Fabric, workdir: Path) -> None:
        self.spec, self.faults, self.fabric, self.workdir = spec, list(faults), fabric, workdir
        self.history = History(spec.ranks, spec.heartbeat, [f.describe() for f in faults])
        self.procs: dict[int, subprocess.Popen[str]] = {}
        self.readers: list[threading.Thread] = []
        self.exited: set[int] = set()
        self.lines: queue.Queue[tuple[int, str | None]] = queue.Queue()
        self.timers: list[tuple[float, int, Callable[[], None]]] = []
        self.seq = itertools.count()
        self.at_point: dict[str, set[int]] = {}
        self.fired: set[str] = set()
        self.nemesis = Nemesis(fabric, COORDINATOR_PORT, self.pid_of)
        self.t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def pid_of(self, rank: int) -> int | None:
        proc = self.procs.get(rank)
        return proc.pid if proc is not None and proc.poll() is None else None

    def later(self, seconds: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.timers, (self.now() + seconds, next(self.seq), action))

    # ------------------------------------------------------------------------------ faults
    def start_fault(self, index: int, fault: Fault) -> None:
        if isinstance(fault, Flap):  # the first cut now, before the ranks go on; the rest on time
            for cut, (down_at, up_at) in enumerate(fault.cuts()):
                if cut == 0:
                    self._flap_cut(index, 0, up_at - down_at)
                else:
                    self.later(down_at, lambda i=index, c=cut, d=up_at - down_at: self._flap_cut(i, c, d))
            return
        done = self.nemesis.start(fault)
        self.history.add(self.now(), "fault-start", fault.rank, fault=index, what=fault.describe(), action=done)
        if fault.heal_after is not None and not isinstance(fault, Late):
            self.later(fault.heal_after, lambda: self._heal(index, fault, done))

    def _flap_cut(self, index: int, cut: int, down: float) -> None:
        fault = self.faults[index]
        done = self.nemesis.start(fault)
        self.history.add(self.now(), "fault-start", fault.rank, fault=index, what=fault.describe(),
                         action=done, cut=cut)
        self.later(down, lambda: self._heal(index, fault, done, cut=cut))

    def _heal(self, index: int, fault: Fault, started: str, **more: Any) -> None:
        done = self.nemesis.heal(fault, started)
        self.history.add(self.now(), "fault-heal", fault.rank, fault=index, action=done, **more)

    # ------------------------------------------------------------------------------ ranks
    def spawn(self, rank: int) -> None:
        coordinator = f"{self.fabric.host(0).address}:{COORDINATOR_PORT}"
        argv = [self.spec.python, "-m", "harness.network.worker", "--rank", str(rank),
                "--ranks", str(self.spec.ranks), "--coordinator", coordinator,
                "--heartbeat", str(self.spec.heartbeat), "--init-timeout", str(self.spec.init_timeout),
                "--collectives", str(self.spec.collectives), "--size", str(self.spec.size),
                "--runtime", self.spec.runtime]
        if self.spec.checkpoint:
            argv += ["--checkpoint", str(self.workdir / "checkpoints")]
        env = {k: v for k, v in os.environ.items() if k not in INHERITED_NOT}  # one device a rank
        env.update({"PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "1", **self.spec.env})
        # the ranks run this harness's worker whatever interpreter runs them (a release's
        # environment may hold another checkout's): its JAX is the interpreter's, its code ours
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(CHECKOUT), env.get("PYTHONPATH"))))
        stderr = open(self.workdir / f"rank{rank}.stderr", "w")  # noqa: SIM115 (the child owns it)
        proc = subprocess.Popen(self.fabric.exec_argv(rank, argv), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                                start_new_session=True)
        stderr.close()
        self.procs[rank] = proc
        host = self.fabric.host(rank)
        self.history.add(self.now(), "rank-start", rank, pid=proc.pid, host=host.hostname, address=host.address)
        assert proc.stdout is not None
        reader = threading.Thread(target=_reader, args=(rank, proc.stdout, self.lines), daemon=True)
        reader.start()
        self.readers.append(reader)

    def release(self, rank: int) -> None:
        proc = self.procs[rank]
        try:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def live(self) -> set[int]:
        return {r for r in self.procs if r not in self.exited}

    def check_points(self) -> None:
        for name, waiting in list(self.at_point.items()):
            if name not in self.fired and self.live() and self.live() <= waiting:
                self.fired.add(name)
                self.history.add(self.now(), "point", None, name=name)
                for index, fault in enumerate(self.faults):
                    if isinstance(fault.start, AtPoint) and fault.start.name == name:
                        self.start_fault(index, fault)
            if name in self.fired:
                for rank in sorted(waiting):
                    self.release(rank)
                waiting.clear()

    def on_line(self, rank: int, line: str) -> None:
        try:
            data = json.loads(line)
        except ValueError:
            self.history.add(self.now(), "rank-event", rank, event="output", text=line.strip()[:500])
            return
        if "point" in data:
            self.at_point.setdefault(data["point"], set()).add(rank)
            return
        data["rank_t"] = data.pop("t", None)  # the rank's own clock, beside the job's
        self.history.add(self.now(), "rank-event", rank, **data)

    def reap(self) -> None:
        for rank, proc in self.procs.items():
            if rank not in self.exited and proc.poll() is not None:
                self.exited.add(rank)
                self.history.add(self.now(), "rank-exit", rank, code=proc.returncode)
                self.history.ends[rank] = RankEnd(rank, proc.returncode, round(self.now(), 3),
                                                  self._stderr(rank))

    def _stderr(self, rank: int) -> str:
        try:
            text = (self.workdir / f"rank{rank}.stderr").read_text(errors="replace")
        except OSError:
            return ""
        return text[-STDERR_KEPT:]

    # ------------------------------------------------------------------------------ the loop
    def run(self) -> History:
        self.history.add(0.0, "job-start", None, ranks=self.spec.ranks, heartbeat=self.spec.heartbeat)
        late = {f.rank: f for f in self.faults if isinstance(f, Late)}
        for rank in range(self.spec.ranks):
            if rank in late:
                self.later(late[rank].seconds, lambda r=rank: self.spawn(r))
            else:
                self.spawn(rank)
        for index, fault in enumerate(self.faults):
            if isinstance(fault.start, At) and not isinstance(fault, Late):
                self.later(fault.start.seconds, lambda i=index, f=fault: self.start_fault(i, f))
        while self.now() < self.spec.limit:
            while self.timers and self.timers[0][0] <= self.now():
                heapq.heappop(self.timers)[2]()
            try:
                rank, line = self.lines.get(timeout=0.02)
                if line is not None:
                    self.on_line(rank, line)
            except queue.Empty:
                pass
            self.reap()
            self.check_points()
            if len(self.exited) == self.spec.ranks and self.lines.empty():
                break
        self.finish()
        return self.history

    def finish(self) -> None:
        running = [(r, p) for r, p in self.procs.items() if p.poll() is None]
        for rank, proc in running:  # all at once: a peer killed first would make the rest speak
            self.history.add(self.now(), "killed", rank,
                             why=f"still running at the hard limit ({self.spec.limit:g} s)")
            proc.kill()
        for rank, proc in running:
            proc.wait()
            self.exited.add(rank)
            self.history.ends[rank] = RankEnd(rank, None, None, self._stderr(rank))
        for rank in range(self.spec.ranks):
            if rank not in self.procs:
                self.history.ends[rank] = RankEnd(rank, None, None, "never started")
        for reader in self.readers:  # every rank has ended: its output ends soon after
            reader.join(timeout=5)
        while True:  # what the readers still hold
            try:
                rank, line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.on_line(rank, line)
        if self.spec.checkpoint:
            for rank in range(self.spec.ranks):
                path = self.workdir / "checkpoints" / f"rank{rank}.json"
                self.history.checkpoints[rank] = path.read_text() if path.exists() else None
        self.history.add(self.now(), "job-end", None)
        for proc in self.procs.values():  # every rank has ended: its pipes are ours to close
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except BrokenPipeError:  # a line to a killed rank, still buffered: it is gone
                        pass


def run_job(spec: JobSpec, faults: Sequence[Fault] = (), workdir: Path | None = None) -> History:
    """Run ``spec`` under ``faults`` in a fabric of its own; the fabric is gone when it returns."""
    for fault in faults:
        if fault.rank >= spec.ranks:
            raise ValueError(f"{fault.describe()}: the job has ranks 0..{spec.ranks - 1}")
    with tempfile.TemporaryDirectory(prefix="xh-job-") as scratch:
        where = workdir or Path(scratch)
        where.mkdir(parents=True, exist_ok=True)
        with Fabric(spec.ranks) as fabric:
            return _Run(spec, faults, fabric, where).run()
