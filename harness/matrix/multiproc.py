"""Launching the processes of one cell and watching them: the only code that sends signals.

Every rank (a single-process cell has one) is started in its own session, so its process group
holds pytest and anything the tests spawned; stopping a cell is ``killpg`` on each group, SIGTERM
first and SIGKILL after a grace period, and a final SIGKILL sweep guarantees no orphan survives.

The watchdog is needed because a process cannot always report its own death: a rank that dies
leaves its peers blocked in a collective forever (gloo has no timeout), and a test can hang in
native code. Bounds: a dead rank stops the cell at once; a test that outlives its time limit by
``grace`` seconds (the in-process faulthandler timer should have fired first) gets a stack dump
request (SIGUSR1) and is stopped; a rank with no event for ``idle_limit`` seconds outside a test
(import, ``jax.distributed`` start-up, collection) is stopped too.

Turn order (multi-process cells): the ranks of a launch reach start-up, ``jax.distributed``
initialization, backend initialization and their first topology discovery in an order drawn from
a seed (``HARNESS_TURN_SEED``, 0 by default), not in whatever order the OS schedules them. Each
rank runs under ``python -m harness.matrix.multiproc`` (``launch_rank``), which takes its turn at
each of those phases: it waits until every rank before it in the order has *entered* the phase,
then enters it itself. Only entry is ordered (the phases are collective: a rank cannot finish
initialization before its peers start theirs), and everything after the last of these phases
(module imports, collection, the tests, gloo's collectives, XLA's and the coordination service's
own threads) runs freely, bounded by the plugin's per-test barriers. The entries are logged in
order, and the supervisor puts the seed, the order and the log in every record of the launch.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness import hooks, settings
from harness.matrix.events import Event, EventReader

#: exit statuses of a pytest session that ended by itself
PYTEST_NORMAL_EXITS = (0, 1, 5)
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
DUMP_GRACE = 0.5  # seconds between the stack-dump request and SIGTERM
POLL = 0.05

EventCallback = Callable[[int, Event], None]

#: the phases whose entry the ranks of a multi-process launch take in turn, in the order reached
TURN_PHASES = ("start", "distributed", "backend", "discovery")
TURN_SEED_ENV = "HARNESS_TURN_SEED"
TURN_DIR_ENV = "HARNESS_TURN_DIR"
TURN_ORDER_ENV = "HARNESS_TURN_ORDER"
TURN_TIMEOUT_ENV = "HARNESS_TURN_TIMEOUT"
TURN_LOG = "turns.log"
TURN_POLL = 0.005


def turn_order(seed: int, ranks: int) -> list[int]:
    """The order in which ``ranks`` ranks take their turns, drawn from ``seed`` alone."""
    order = list(range(ranks))
    random.Random(f"turns:{seed}:{ranks}").shuffle(order)
    return order


class TurnTimeout(RuntimeError):
    """A rank waited too long for the ranks before it to reach a phase (one died or diverged)."""


@dataclass
class Turns:
    """One rank's side of a launch's turn order: a shared directory of entry markers."""

    directory: Path
    order: list[int]
    rank: int
    timeout: float = 120.0

    def take(self, phase: str) -> None:
        """Wait until every rank before this one in the order has entered ``phase``, then enter.

        A marker file per (phase, rank) says a rank has entered; the log line, appended with one
        ``write`` on an ``O_APPEND`` descriptor, records the order the entries really happened in.
        """
        before = self.order[: self.order.index(self.rank)]
        deadline = time.monotonic() + self.timeout
        for other in before:
            marker = self.directory / f"{phase}.{other}"
            while not marker.exists():
                if time.monotonic() > deadline:
                    raise TurnTimeout(
                        f"rank {self.rank} waited {self.timeout:g} s for rank {other} to enter "
                        f"{phase!r} (turn order {','.join(map(str, self.order))}): that rank died, "
                        "hung, or took another path"
                    )
                time.sleep(TURN_POLL)
        fd = os.open(self.directory / TURN_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{phase} {self.rank}\n".encode())
        finally:
            os.close(fd)
        (self.directory / f"{phase}.{self.rank}").touch()

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str]) -> Turns | None:
        directory = settings.raw(TURN_DIR_ENV, environ) or None
        if not directory:
            return None
        order = [int(r) for r in settings.raw(TURN_ORDER_ENV, environ).split(",")]
        timeout = float(settings.read(TURN_TIMEOUT_ENV, environ) or 120)
        return cls(Path(directory), order, int(settings.read("HARNESS_PROCESS_ID", environ)), timeout)


#: this process' turns, when ``launch_rank`` started it as one rank of a launch (never inherited:
#: a process the rank starts is not a rank)
_turns: Turns | None = None
_taken: set[str] = set()


def take_turn(phase: str) -> None:
    """Take this rank's turn at ``phase``, once per process; nothing outside a turn-ordered rank.

    The runtime calls it at its first discovery (``harness.runtime.topology``); the launcher at
    start-up, around ``jax.distributed.initialize`` and at backend initialization.
    """
    if _turns is None or phase in _taken:
        return
    _taken.add(phase)
    _turns.take(phase)


def read_turns(directory: Path) -> list[tuple[str, int]]:
    """The (phase, rank) entries of a launch, in the order they happened."""
    try:
        lines = (directory / TURN_LOG).read_text().splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        phase, _, rank = line.partition(" ")
        if rank.isdigit():
            entries.append((phase, int(rank)))
    return entries


def describe_turns(entries: list[tuple[str, int]]) -> str:
    """``start:1,0 distributed:1,0 ...``: each phase with its ranks in entry order."""
    by_phase: dict[str, list[int]] = {}
    for phase, rank in entries:
        by_phase.setdefault(phase, []).append(rank)
    return " ".join(f"{p}:{','.join(map(str, r))}" for p, r in by_phase.items())


def launch_rank(argv: list[str]) -> int:
    """``python -m harness.matrix.multiproc PYTEST_ARGS...``: one rank of a turn-ordered launch.

    Takes the start-up turn, orders ``jax.distributed.initialize`` (called by the plugin, with its
    own arguments) and the backend initialization right after it, then runs pytest in this
    process. The turn variables are removed from the environment, so that nothing this rank
    starts (a ``xharness repro`` child, a nested matrix run) takes turns of its own.
    """
    global _turns
    _turns = Turns.from_env(os.environ)
    for name in (TURN_DIR_ENV, TURN_ORDER_ENV, TURN_TIMEOUT_ENV):
        os.environ.pop(name, None)
    take_turn("start")
    if _turns is not None:
        import jax

        initialize = jax.distributed.initialize

        def ordered_initialize(*args: Any, **kwargs: Any) -> None:
            take_turn("distributed")
            initialize(*args, **kwargs)
            take_turn("backend")
            jax.devices()  # the backend starts here, in turn, not at whichever test asks first

        jax.distributed.initialize = ordered_initialize  # type: ignore[assignment]
    import pytest

    return int(pytest.main(argv))


def free_port() -> int:
    """A free TCP port on the loopback interface for the ``jax.distributed`` coordinator."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RankSpec:
    """How to start one rank: argv, environment and where its files go."""

    rank: int
    argv: list[str]
    env: dict[str, str]
    events: Path
    stack: Path
    log: Path


@dataclass
class RankState:
    spec: RankSpec
    proc: subprocess.Popen[bytes]
    reader: EventReader
    stack_offset: int
    log_offset: int
    started_at: float
    last_event: float
    current: str | None = None  # node id of the test in progress
    current_since: float = 0.0
    test_started: dict[str, float] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    ended: bool = False  # pytest reported the end of its session
    exitstatus: int | None = None
    returncode: int | None = None
    exited_at: float | None = None
    exited_epoch: float | None = None
    stopped: str = ""  # why the supervisor stopped this rank ("" if it did not)
    in_barrier: bool = False  # waiting for its peers (so not the rank that failed)
    timed_out: bool = False
    identity: dict[str, Any] = field(default_factory=dict)  # launcher, host, job, step (``rank`` event)

    @property
    def rank(self) -> int:
        return self.spec.rank

    @property
    def abnormal(self) -> bool:
        """Died mid-session or ended with a status pytest uses for internal/usage errors."""
        return self.returncode is not None and (not self.ended or self.returncode not in PYTEST_NORMAL_EXITS)

    def new_stack_text(self) -> str:
        return _read_from(self.spec.stack, self.stack_offset)

    def new_log_text(self) -> str:
        return _read_from(self.spec.log, self.log_offset)


@dataclass
class LaunchResult:
    ranks: list[RankState]
    failure: str = ""  # why the supervisor cut the launch short ("" if it did not)
    culprit: int | None = None  # the rank that failed first
    wall: float = 0.0
    interrupted: bool = False  # Ctrl-C or SIGTERM reached the supervisor


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Launch:
    """Start every rank of one cell launch, watch them, and stop them all if one fails."""

    def __init__(
        self,
        specs: list[RankSpec],
        cwd: Path,
        test_timeout: float,
        grace: float = 10.0,
        idle_limit: float = 300.0,
        on_event: EventCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.specs = specs
        self.cancel = cancel  # set by the run when it is interrupted (cells running in threads)
        self.cwd = cwd
        self.test_timeout = test_timeout
        self.grace = grace
        self.idle_limit = idle_limit
        self.on_event = on_event
        self.ranks: list[RankState] = []
        self._logs: list[IO[bytes]] = []
        self._failure = ""
        self._culprit: int | None = None
        self._term_at: float | None = None
        self._kill_at: float | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def run(self) -> LaunchResult:
        started = time.monotonic()
        interrupted = False
        try:
            self._start()
            self._watch()
        except KeyboardInterrupt:
            interrupted = True
            self._failure = self._failure or "interrupted (Ctrl-C or SIGTERM)"
        finally:
            if not interrupted:
                self.let_end()
            self._sweep()
        for state in self.ranks:  # events written just before exit
            self._drain(state)
        return LaunchResult(self.ranks, self._failure, self._culprit, time.monotonic() - started, interrupted)

    def _start(self) -> None:
        self.start_ranks()

    def start_ranks(self) -> None:
        """Start every rank, each in a session of its own (a launcher's launch starts them all
        with one command instead: ``harness.matrix.cluster_launch``)."""
        for spec in self.specs:
            spec.log.parent.mkdir(parents=True, exist_ok=True)
            stack_offset, log_offset = file_size(spec.stack), file_size(spec.log)
            log = open(spec.log, "ab")  # noqa: SIM115 - kept open for the child's lifetime
            self._logs.append(log)
            log.write(f"\n===== [xharness] rank {spec.rank}: {' '.join(spec.argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                spec.argv,
                cwd=self.cwd,
                env=spec.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killpg reaches its children
            )
            now = time.monotonic()
            self.ranks.append(
                RankState(spec, proc, EventReader(spec.events), stack_offset, log_offset, now, now)
            )

    def _watch(self) -> None:
        while True:
            if self.cancel is not None and self.cancel.is_set():
                raise KeyboardInterrupt("the run was interrupted")
            now = time.monotonic()
            for state in self.ranks:
                self._drain(state)
                if state.returncode is None:
                    code = state.proc.poll()
                    if code is not None:
                        state.returncode, state.exited_at, state.exited_epoch = code, now, time.time()
                        self._drain(state)
            if all(s.returncode is not None for s in self.ranks):
                return
            if self._term_at is None:
                self._check(now)
            else:
                self._escalate(now)
            time.sleep(POLL)

    def _drain(self, state: RankState) -> None:
        for event in state.reader.poll():
            state.last_event = time.monotonic()
            kind = event.get("event")
            nodeid = str(event.get("nodeid", ""))
            if kind == "start":
                state.current, state.current_since = nodeid, state.last_event
                state.test_started[nodeid] = float(event.get("time") or time.time())
            elif kind == "finish":
                state.finished.append(nodeid)
                if state.current == nodeid:
                    state.current = None
            elif kind == "barrier":
                state.in_barrier = event.get("state") == "enter"
            elif kind == "end":
                state.ended, state.exitstatus = True, int(event.get("exitstatus", 0))
            elif kind == "rank":  # a launched rank says who it is, as its launcher told it
                state.identity = {k: v for k, v in event.items() if k != "event"}
            if self.on_event is not None:
                self.on_event(state.rank, event)

    # -- the watchdog -----------------------------------------------------------------------------
    def _check(self, now: float) -> None:
        multi = len(self.ranks) > 1
        dead = [s for s in self.ranks if s.abnormal]
        if multi and dead:  # when several died at once, the one not waiting for the others is to blame
            first = self.blame(dead, now)
            self._stop(first, f"rank {first.rank} {self.describe_end(first)}")
            return
        for state in self.ranks:
            if state.returncode is not None:
                continue
            if state.current is not None:
                if now - state.current_since > self.test_timeout + self.grace:
                    state.timed_out = True
                    self._stop(
                        state,
                        f"rank {state.rank} hung: {state.current} ran past its {self.test_timeout:g}s limit",
                    )
                    return
            elif now - state.last_event > self.idle_limit:
                state.timed_out = True
                phase = "outside any test (start-up, collection or shutdown)"
                self._stop(state, f"rank {state.rank} made no progress for {self.idle_limit:g}s {phase}")
                return
        # a rank that finished cleanly waits for its peers only as long as one more test may take
        done = [s for s in self.ranks if s.returncode is not None]
        if multi and done and len(done) < len(self.ranks):
            first = min(s.exited_at or now for s in done)
            if now - first > self.test_timeout + self.grace:
                laggard = next(s for s in self.ranks if s.returncode is None)
                laggard.timed_out = True
                self._stop(laggard, f"rank {laggard.rank} did not finish {self.test_timeout:g}s after its peers")

    def _stop(self, culprit: RankState, reason: str) -> None:
        """Record why, ask every live rank for its stacks (they explain hangs), then SIGTERM."""
        self._failure, self._culprit = reason, culprit.rank
        live = [s for s in self.ranks if s.returncode is None]
        for state in live:
            state.stopped = reason
        self.signal_ranks(live, signal.SIGUSR1)  # faulthandler in the plugin dumps every thread
        now = time.monotonic()
        self._term_at = now + (DUMP_GRACE if live else 0.0)
        self._kill_at = None

    def _escalate(self, now: float) -> None:
        assert self._term_at is not None
        if self._kill_at is None and now >= self._term_at:
            self.signal_ranks([s for s in self.ranks if s.returncode is None], signal.SIGTERM)
            self._kill_at = now + TERM_GRACE
        elif self._kill_at is not None and now >= self._kill_at:
            self.signal_ranks([s for s in self.ranks if s.returncode is None], signal.SIGKILL)

    def signal_ranks(self, ranks: list[RankState], sig: int) -> None:
        """Deliver ``sig`` to these ranks: SIGUSR1 to the rank (a stack dump), SIGTERM and SIGKILL
        to its whole process group."""
        for state in ranks:
            if sig == signal.SIGUSR1:
                try:
                    os.kill(state.proc.pid, sig)
                except ProcessLookupError:
                    pass
            else:
                _killpg(state.proc.pid, sig)

    def blame(self, dead: list[RankState], now: float) -> RankState:
        """The rank to blame when ranks died: when several died at once, the one not waiting
        for the others."""
        return min(dead, key=lambda s: (s.in_barrier, s.exited_at or now, s.rank))

    def describe_end(self, state: RankState) -> str:
        """How a rank ended, for the record: ``died on SIGSEGV (...)``, ``exited with code 3``."""
        return describe_exit(state.returncode)

    def let_end(self) -> None:
        """Before the sweep: let what ends by itself end. Local ranks are the launch's own
        processes, already waited for; a launcher (``harness.matrix.cluster_launch``) may still be
        closing a step whose ranks all said they exited."""

    def _sweep(self) -> None:
        """No orphans: SIGKILL what is left of every group, reap every rank, close the logs."""
        self.signal_ranks(self.ranks, signal.SIGKILL)
        self.reap()

    def reap(self) -> None:
        """Wait for every rank (bounded), so each has an exit status, and close the logs."""
        for state in self.ranks:
            try:
                code = state.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # unkillable (D state): report, never block forever
                code = state.proc.poll()
            if state.returncode is None:
                state.returncode, state.exited_at, state.exited_epoch = code, time.monotonic(), time.time()
        for log in self._logs:
            log.close()


def describe_exit(returncode: int | None) -> str:
    """``died on SIGSEGV (Segmentation fault)`` / ``exited with code 3``."""
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        return f"died on {signal_label(-returncode)}"
    return f"exited with code {returncode}"


def signal_label(number: int) -> str:
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"signal {number}"
    return f"{sig.name} ({signal.strsignal(sig) or sig.name})"


if __name__ == "__main__":
    # run as ``-m`` this file is ``__main__``; the runtime looks for the rank's turns in the
    # imported module, so dispatch through it
    from harness.matrix import multiproc as _multiproc

    sys.exit(_multiproc.launch_rank(sys.argv[1:]))


def _first_discovery() -> None:
    take_turn("discovery")


# the runtime's first discovery in a rank of a turn-ordered launch takes that rank's turn
hooks.register("first-discovery", _first_discovery)
