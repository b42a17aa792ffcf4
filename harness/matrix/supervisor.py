"""Runs one matrix cell under supervision and turns whatever happened into records.

Per cell: start pytest (one process per rank) with the cell's environment, follow the plugin's
event stream, and when a launch dies, attribute the death to the test that was running, record it
(kind, signal or exit code, faulthandler stacks, the native output since the test started), then
launch again for the tests not yet run, so one crash costs one test. Reruns (``--reruns N``) launch
the failed tests again and append attempts, which is how a flaky test is told from a broken one.

The full list of node ids comes from the first launch itself: the plugin reports the collected
items before the first test runs (so the cell does not pay for a separate ``--collect-only``
process), and a later launch is told exactly which of them to keep (``--xharness-select``).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shlex
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import stack_dumps
from harness.compile_cache import CacheChoice
from harness.errors import UsageError
from harness.matrix.cluster_launch import ClusterLaunch
from harness.matrix.config import OWNED_ENV, Cell, Matrix
from harness.matrix.events import Event
from harness.matrix.launched import EVENTS_ENV, LOG_ENV, SLICES_ENV
from harness.matrix.launchers import LOCAL, launcher_command
from harness.matrix.multiproc import (
    TURN_DIR_ENV,
    TURN_ORDER_ENV,
    TURN_SEED_ENV,
    TURN_TIMEOUT_ENV,
    Launch,
    LaunchResult,
    RankSpec,
    RankState,
    describe_exit,
    describe_turns,
    free_port,
    read_turns,
    turn_order,
)
from harness.matrix.outcomes import attempt_from_reports, merge_ranks, properties_from_reports
from harness.matrix.progress import CellProgress, Progress
from harness.matrix.startup_error import pytest_error_line
from harness.network.addresses import NAMESPACES
from harness.network.fabric import Fabric
from harness.network.job import COORDINATOR_PORT
from harness.report import properties as prop
from harness.report.records import (
    ERROR,
    FAILED,
    KIND_EXCEPTION,
    KIND_EXIT,
    KIND_RANK,
    KIND_SIGNAL,
    KIND_TIMEOUT,
    SKIPPED,
    Attempt,
    TestRecord,
)

#: node ids of records that stand for the cell rather than one test
STARTUP_ID, SESSION_ID, NO_TESTS_ID = "xharness::startup", "xharness::session", "xharness::no-tests"
MAX_LOG_CHARS = 20_000
#: variables of an enclosing pytest-xdist worker that must not leak into a cell's pytest
_SCRUBBED_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST")


@dataclass
class RunSettings:
    matrix: Matrix
    out_dir: Path
    runtime: str = "reference"
    reruns: int = 0
    timeout: float | None = None  # overrides the cells' per-test timeout
    pytest_args: tuple[str, ...] = ()
    repro_prefix: str = "xharness run"  # plus --matrix/--runtime when they are not the defaults
    grace: float = 10.0  # at most this long past a test's limit before the watchdog steps in
    idle_limit: float = 300.0
    #: JAX's persistent compilation cache for the cells' processes (None: leave the environment be)
    compile_cache: CacheChoice | None = None
    #: set when the run is interrupted: every cell running in a thread stops its launch
    cancel: threading.Event | None = None


@dataclass
class CellResult:
    cell: Cell
    records: list[TestRecord] = field(default_factory=list)
    wall: float = 0.0
    launches: int = 0
    skipped: str = ""  # why the cell did not run here
    interrupted: bool = False  # stopped by Ctrl-C: the records are partial
    #: a cell split into parts that ran at once: the parts' own overheads, summed (its in-test
    #: time then exceeds its wall time, so wall minus tests would be negative)
    parts_overhead: float | None = None

    @property
    def test_time(self) -> float:
        return sum(r.duration for r in self.records)

    @property
    def overhead(self) -> float:
        """Time the supervisor and start-up took beyond the tests themselves."""
        if self.parts_overhead is not None:
            return self.parts_overhead
        return self.wall - self.test_time

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for record in self.records:
            out[record.classification] = out.get(record.classification, 0) + 1
        return out


def _plugin_autoloaded() -> bool:
    try:
        return any(ep.value.startswith("harness.plugin") for ep in importlib.metadata.entry_points(group="pytest11"))
    except Exception:  # noqa: BLE001 - broken metadata: fall back to -p
        return False


def split_pytest_args(args: tuple[str, ...], root: Path) -> tuple[list[str], list[str]]:
    """Separate test paths/node ids from options, so given paths replace the cell's paths."""
    takes_value = {"-k", "-m", "-p", "-o", "-c", "-W", "--deselect", "--ignore", "--ignore-glob", "--rootdir",
                   "--maxfail", "--tb", "--junitxml", "--confcutdir", "--basetemp", "--log-level", "--durations"}
    paths: list[str] = []
    options: list[str] = []
    previous = ""
    for arg in args:
        if not arg.startswith("-") and previous not in takes_value and (root / arg.split("::")[0]).exists():
            paths.append(arg)
        else:
            options.append(arg)
        previous = arg
    return paths, options


class CellRun:
    def __init__(self, cell: Cell, settings: RunSettings, progress: Progress | CellProgress) -> None:
        self.cell = cell
        self.settings = settings
        self.progress = progress
        self.timeout = settings.timeout or cell.timeout
        # the in-process timer fires first; the watchdog is the backstop for when it cannot
        self.grace = min(settings.grace, max(1.0, self.timeout))
        self.logs = settings.out_dir / "logs" / cell.name
        self.records: dict[str, TestRecord] = {}
        self.items: dict[str, tuple[str, int | None]] = {}
        self.order: list[str] = []
        self.collected = False
        self.launches = 0
        self.versions: dict[str, str] = {}
        self.user_paths, self.user_options = split_pytest_args(settings.pytest_args, settings.matrix.root)
        self._finished_seen: set[str] = set()
        self._failing: dict[str, str] = {}  # node id -> failed/error on some rank (for progress)
        self.turn_seed: int | None = None  # multi-process cells: the ranks' turn order (multiproc)
        self.turns = ""  # the order the ranks of the last launch entered each phase in
        self.ranks_seen: list[dict[str, object]] = []  # launcher cells: who each rank was (host, job, step)

    # -- the whole cell ---------------------------------------------------------------------------
    def run(self) -> CellResult:
        """The cell's records; on Ctrl-C, those gathered so far (``interrupted`` set)."""
        started = time.monotonic()
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        interrupted = False
        try:
            self.execute(None)
            for round_no in range(1, self.settings.reruns + 1):
                todo = [n for n in self.order if n in self.records and self.records[n].final.outcome in (FAILED, ERROR)]
                if not todo:
                    break
                self.progress.rerun_started(round_no, len(todo))
                self._finished_seen.clear()
                self.execute(todo)
        except KeyboardInterrupt:  # the launch has already stopped its processes
            interrupted = True
        records = [self.finalize_record(r) for r in self.records.values()]
        return CellResult(self.cell, records, time.monotonic() - started, self.launches, interrupted=interrupted)

    def execute(self, select: list[str] | None) -> None:
        """Launch until every selected test has an attempt (or no launch can make progress)."""
        pending = select
        while True:
            result = self.launch(pending)
            first_collection = not self.collected
            self._take_collection(result)
            if pending is None:
                pending = list(self.order)
            completed = self._take_completed(result, set(pending))
            if result.interrupted:  # keep what finished; the test in progress was not at fault
                raise KeyboardInterrupt
            abnormal = bool(result.failure) or any(s.abnormal for s in result.ranks)
            crashed = self._take_crash(result) if abnormal else None
            pending = [n for n in pending if n not in completed and n != crashed]
            if not abnormal:
                if first_collection and not self.order and not self.records:
                    self._cell_record(NO_TESTS_ID, Attempt(
                        ERROR, kind=KIND_EXCEPTION,
                        message="the cell's test paths and pytest arguments selected no tests",
                        details=self._log_tail(result.ranks[0]),
                    ))
                return
            if not pending:
                return
            if not completed and crashed is None:
                reason = result.failure or "the cell's pytest could not run"
                for nodeid in pending:
                    self._add(nodeid, Attempt(ERROR, kind=KIND_RANK if self.cell.multiprocess else KIND_EXIT,
                                              message=f"not run: {reason}"))
                return
            self.progress.note(f"restarting pytest for the {len(pending)} remaining test(s)")

    # -- one launch -------------------------------------------------------------------------------
    def launch(self, select: list[str] | None) -> LaunchResult:
        self.launches += 1
        tag = f"launch{self.launches}"
        select_file: Path | None = None
        if select is not None:
            select_file = self.logs / f"{tag}.select.json"
            select_file.write_text(json.dumps(select))
        # nothing of an enclosing cell (xharness run inside a cell) may leak into this one
        scrubbed = (*_SCRUBBED_ENV, TURN_DIR_ENV, TURN_ORDER_ENV)
        base_env = {k: v for k, v in os.environ.items() if k not in scrubbed and k not in OWNED_ENV}
        base_env.update(self.cell.environment(self.settings.runtime))
        if self.settings.compile_cache is not None:
            base_env = self.settings.compile_cache.environment(base_env)
        base_env["PYTHONUNBUFFERED"] = "1"
        turns = None
        if self.cell.launcher != LOCAL:
            return self._launch_by_launcher(base_env, tag, select_file)
        with contextlib.ExitStack() as stack:
            # each rank a host of its own: the fabric lives as long as the launch, and takes with
            # it whatever a rank left running in its namespace
            hosts = stack.enter_context(Fabric(self.cell.processes)) if self.cell.network == NAMESPACES else None
            if self.cell.multiprocess:
                base_env["HARNESS_COORDINATOR"] = (f"{hosts.host(0).address}:{COORDINATOR_PORT}" if hosts
                                                   else f"127.0.0.1:{free_port()}")
                base_env.setdefault("HARNESS_HEARTBEAT_TIMEOUT", str(int(self.timeout + self.grace + 30)))
                turns = self._turn_env(base_env, tag)
            specs = []
            for rank in range(self.cell.processes):
                events = self.logs / f"{tag}.rank{rank}.events.jsonl"
                stack_file = self.logs / f"rank{rank}.stack"
                env = dict(base_env, HARNESS_PROCESS_ID=str(rank))
                argv = self.pytest_argv(events, stack_file, select_file)
                if turns is not None:  # the rank takes its turns, then runs the same pytest in-process
                    argv = [sys.executable, "-m", "harness.matrix.multiproc", *argv[3:]]
                if hosts is not None:
                    argv = hosts.exec_argv(rank, argv)
                specs.append(RankSpec(rank, argv, env, events, stack_file, self.logs / f"rank{rank}.log"))
            result = Launch(
                specs,
                cwd=self.settings.matrix.root,
                test_timeout=self.timeout,
                grace=self.grace,
                idle_limit=self.settings.idle_limit,
                on_event=self._on_event,
                cancel=self.settings.cancel,
            ).run()
        if turns is not None:
            self.turns = describe_turns(read_turns(turns))
        return result

    def _launch_by_launcher(self, env: dict[str, str], tag: str, select_file: Path | None) -> LaunchResult:
        """One launch whose ranks ``srun`` or ``mpirun`` starts: every rank runs the same command
        (``harness.matrix.launched``), which finds its rank in the launcher's variables and puts
        it into the per-rank paths. The ranks still take their turns (the markers are files next
        to the logs, shared by the ranks of one machine or of a shared filesystem)."""
        env.setdefault("HARNESS_HEARTBEAT_TIMEOUT", str(int(self.timeout + self.grace + 30)))
        turns = self._turn_env(env, tag) if self.cell.multiprocess else None
        events, log = self.logs / f"{tag}.rank{{rank}}.events.jsonl", self.logs / "rank{rank}.log"
        env[EVENTS_ENV], env[LOG_ENV] = str(events), str(log)
        if self.cell.slices > 1:
            env[SLICES_ENV] = "1"
        argv = self.pytest_argv(events, self.logs / "rank{rank}.stack", select_file)
        rank_argv = [sys.executable, "-m", "harness.matrix.launched", self.cell.launcher, *argv[3:]]
        specs = [RankSpec(rank, rank_argv, env, Path(str(events).replace("{rank}", str(rank))),
                          self.logs / f"rank{rank}.stack", self.logs / f"rank{rank}.log")
                 for rank in range(self.cell.processes)]
        job_name = f"xharness-{self.cell.name}-{os.getpid()}-{tag}"
        command = launcher_command(self.cell.launcher, self.cell.processes, self.cell.cluster, job_name,
                                   rank_argv, on_nodes=self.cell.network == NAMESPACES)
        result = ClusterLaunch(
            specs, self.cell.launcher, command, job_name, self.logs / f"{tag}.launcher.log",
            cwd=self.settings.matrix.root, test_timeout=self.timeout, grace=self.grace,
            idle_limit=self.settings.idle_limit, on_event=self._on_event, cancel=self.settings.cancel,
        ).run()
        self.ranks_seen = [dict(state.identity) for state in result.ranks]
        if turns is not None:
            self.turns = describe_turns(read_turns(turns))
        return result

    def _turn_env(self, env: dict[str, str], tag: str) -> Path:
        """The turn order of one launch's ranks, from ``HARNESS_TURN_SEED`` (0 when unset), and
        the directory their entry markers go to."""
        raw = env.get(TURN_SEED_ENV, "0") or "0"
        try:
            seed = int(raw)
        except ValueError:
            raise UsageError(f"{TURN_SEED_ENV}={raw!r} is not an integer") from None
        self.turn_seed = seed
        directory = self.logs / f"{tag}.turns"
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        env[TURN_DIR_ENV] = str(directory)
        env[TURN_ORDER_ENV] = ",".join(map(str, turn_order(seed, self.cell.processes)))
        env.setdefault(TURN_TIMEOUT_ENV, str(int(min(120.0, self.timeout + self.grace))))
        return directory

    def pytest_argv(self, events: Path, stack: Path, select_file: Path | None) -> list[str]:
        """The command a rank runs, ``python -m pytest`` first: overridable, so that a cell
        whose pytest runs in another interpreter (a release's environment) can say which."""
        argv = [sys.executable, "-m", "pytest"]
        if not _plugin_autoloaded():
            argv += ["-p", "harness.plugin"]
        argv += self.user_paths or list(self.cell.paths)
        argv += [
            "-q",
            "--capture=sys",  # native output stays in the rank log, where a crash leaves it readable
            "-p", "no:cacheprovider",  # never overwrite the user's --lf cache
            "--continue-on-collection-errors",
            f"--cell={self.cell.name}",
            f"--xharness-events={events}",
            f"--xharness-stack={stack}",
            f"--xharness-timeout={self.timeout:g}",
        ]
        if select_file is not None:
            argv.append(f"--xharness-select={select_file}")
        return argv + list(self.cell.pytest_args) + self.user_options

    def _on_event(self, rank: int, event: Event) -> None:
        kind = event.get("event")
        if kind == "session" and rank == 0:
            self.versions = {k: str(event.get(k) or "") for k in ("jax", "jaxlib", "python")}
        elif kind == "collected" and rank == 0:
            self.progress.collected(len(event.get("items") or []))
        elif kind == "report" and event.get("outcome") == "failed":
            error = event.get("when") != "call" or event.get("exc_type") == "MemoryError"
            self._failing.setdefault(str(event.get("nodeid")), ERROR if error else FAILED)
        elif kind == "finish" and rank == 0:
            nodeid = str(event.get("nodeid"))
            if nodeid not in self._finished_seen:
                self._finished_seen.add(nodeid)
                self.progress.test_done(nodeid, self._failing.get(nodeid, "passed"))
            self._failing.pop(nodeid, None)

    # -- turning a launch into records ------------------------------------------------------------
    def _take_collection(self, result: LaunchResult) -> None:
        if self.collected:
            return
        for state in result.ranks:
            events = state.reader.events
            collected = next((e for e in events if e.get("event") == "collected"), None)
            if collected is None:
                continue
            self.collected = True
            for item in collected.get("items") or []:
                nodeid = str(item["nodeid"])
                self.items[nodeid] = (str(item.get("file") or ""), item.get("line"))
                self.order.append(nodeid)
            for error in (e for e in events if e.get("event") == "collecterror"):
                nodeid = str(error.get("nodeid") or STARTUP_ID)
                self._add(nodeid, Attempt(ERROR, kind=KIND_EXCEPTION, message="collection failed",
                                          details=str(error.get("longrepr") or "")))
            # a module skipped at collection has no test items, and a record all the same: pytest
            # counts it as skipped, and a report that dropped it would say less than pytest does
            for skip in (e for e in events if e.get("event") == "collectskip"):
                nodeid = str(skip.get("nodeid") or STARTUP_ID)
                self._add(nodeid, Attempt(SKIPPED, message=str(skip.get("reason") or "skipped at collection")))
            return

    def _take_completed(self, result: LaunchResult, wanted: set[str]) -> set[str]:
        """Tests whose protocol finished on every rank: merge their per-rank attempts."""
        reports: dict[int, dict[str, list[Event]]] = {}
        for state in result.ranks:
            per_test: dict[str, list[Event]] = {}
            for event in state.reader.events:
                if event.get("event") == "report":
                    per_test.setdefault(str(event.get("nodeid")), []).append(event)
            reports[state.rank] = per_test
        finished = [set(s.finished) for s in result.ranks]
        done = set.intersection(*finished) & wanted if finished else set()
        for nodeid in [n for n in self.order if n in done]:
            per_rank = {r: attempt_from_reports(reports[r].get(nodeid, [])) for r in reports}
            record = self._add(nodeid, merge_ranks(per_rank))
            for rank in sorted(reports, reverse=True):  # rank 0's values win
                record.properties.update(properties_from_reports(reports[rank].get(nodeid, [])))
        return done

    def _take_crash(self, result: LaunchResult) -> str | None:
        """Record the launch's death against the test it interrupted; returns that node id."""
        culprit = self._culprit(result)
        nodeid = culprit.current if culprit is not None else None
        if nodeid is None:  # the culprit was between tests: a peer may be inside one
            nodeid = next((s.current for s in result.ranks if s.current is not None), None)
        state = culprit or result.ranks[0]
        attempt = self._crash_attempt(result, state, nodeid)
        if nodeid is not None:
            self._note_peer_failures(result, state, nodeid, attempt)
            self._add(nodeid, attempt)
            self.progress.test_done(nodeid, ERROR)
            self._finished_seen.add(nodeid)
            return nodeid
        if not self.collected:
            self._cell_record(STARTUP_ID, attempt)
        else:
            self._cell_record(SESSION_ID, attempt)
        return None

    def _note_peer_failures(self, result: LaunchResult, state: RankState, nodeid: str, attempt: Attempt) -> None:
        """A rank that failed the same test before the crash is often its cause (it left a peer
        alone in a collective): keep what it reported with the crash record."""
        for other in result.ranks:
            if other is state:
                continue
            failed = [e for e in other.reader.events
                      if e.get("event") == "report" and e.get("nodeid") == nodeid and e.get("outcome") == "failed"]
            if failed:
                first = failed[0]
                attempt.message += f"; rank {other.rank} had failed in {first.get('when')}: {first.get('message')}"
                attempt.details += f"\n\n--- rank {other.rank} failure ---\n{first.get('longrepr') or ''}"

    def _culprit(self, result: LaunchResult) -> RankState | None:
        if result.culprit is not None:
            return result.ranks[result.culprit]
        dead = [s for s in result.ranks if s.abnormal and not s.stopped]
        return min(dead, key=lambda s: s.exited_at or 0.0) if dead else None

    def _crash_attempt(self, result: LaunchResult, state: RankState, nodeid: str | None) -> Attempt:
        code = state.returncode
        stack = state.new_stack_text()
        # the plugin's timer dumps every thread and exits 1; a dump that crashed the process
        # (harness.stack_dumps) ends it by a signal instead, and the test is the hang all the same
        died_in_dump = code is not None and code < 0 and not state.ended and stack_dumps.died_in_timed_dump(stack)
        timed_out = state.timed_out or died_in_dump or (
            code == 1 and not state.ended and stack_dumps.timed_dump_began(stack))
        where = f"during {nodeid}" if nodeid else ("before any test started" if not self.collected else "between tests")
        if timed_out and state.timed_out and nodeid is None and state.stopped:
            # outside any test no test's limit ran out: the watchdog's own reason (no progress
            # for its idle limit, or still running a test's time after its peers ended)
            why = f"{state.stopped.removeprefix(f'rank {state.rank} ')}; stopped by the supervisor (stacks dumped on request)"
            kind, sig, exit_code = KIND_TIMEOUT, None, None
        elif timed_out and state.timed_out:
            why = (f"ran past its {self.timeout:g}s time limit and its own timer did not stop it; "
                   f"stopped by the supervisor {self.grace:g}s later (stacks dumped on request)")
            kind, sig, exit_code = KIND_TIMEOUT, None, None
        elif died_in_dump:
            why = (f"ran past its {self.timeout:g}s time limit and {describe_exit(code)} inside the dump "
                   "of its thread stacks, as CPython's dump of running threads can")
            kind, sig, exit_code = KIND_TIMEOUT, None, None
        elif timed_out:
            why = f"ran past its {self.timeout:g}s time limit (all thread stacks dumped)"
            kind, sig, exit_code = KIND_TIMEOUT, None, None
        elif state.identity.get("end"):  # a launched rank: its host, job, and the scheduler's word
            why = str(state.identity["end"])
            kind, sig, exit_code = KIND_SIGNAL, (-code if code is not None and code < 0 else None), None
        elif code is not None and code < 0:
            why = describe_exit(code)
            if code == -9 and not state.stopped:
                why += " (not sent by the harness: often the out-of-memory killer)"
            kind, sig, exit_code = KIND_SIGNAL, -code, None
        else:
            why = describe_exit(code)
            if state.ended and code is not None:
                why += " (pytest internal or usage error)"
            kind, sig, exit_code = KIND_EXIT, None, code
        if self.cell.multiprocess:
            # a peer whose launcher gave the same end (a job that never started, withdrawn whole)
            # was not signalled: it is named with it, not as stopped
            end = state.identity.get("end")
            alike = [s.rank for s in result.ranks if s is not state and end and s.identity.get("end") == end]
            peers = [s.rank for s in result.ranks if s.stopped and s is not state and s.rank not in alike]
            message = f"rank {state.rank} {why} {where}"
            if alike:
                message += f"; rank(s) {', '.join(map(str, alike))} the same"
            if peers:
                message += f"; rank(s) {', '.join(map(str, peers))} stopped by the supervisor (SIGTERM, then SIGKILL)"
            kind = KIND_RANK
        else:
            message = f"test {why}" if nodeid else f"pytest {why} {where}"
        if kind in (KIND_EXIT, KIND_RANK) and nodeid is None and not self.collected:
            said = pytest_error_line(state.new_log_text())
            if said:  # pytest's own reason, not only its exit code
                message += f": {said}"
        details = [message]
        for other in [state, *[s for s in result.ranks if s is not state]]:
            text = stack if other is state else other.new_stack_text()
            if text.strip():
                details.append(f"--- faulthandler, rank {other.rank} ---\n{text.strip()}")
        segment = _segment(state.new_log_text(), nodeid)
        started = state.test_started.get(nodeid or "", None)
        duration = max(0.0, (state.exited_epoch or time.time()) - started) if started else 0.0
        return Attempt(
            outcome=ERROR,
            duration=duration,
            message=message,
            details="\n\n".join(details),
            stderr=segment,
            kind=kind,
            signal=sig,
            exit_code=exit_code,
        )

    def _log_tail(self, state: RankState) -> str:
        return _segment(state.new_log_text(), None)

    # -- records ----------------------------------------------------------------------------------
    def _add(self, nodeid: str, attempt: Attempt) -> TestRecord:
        record = self.records.get(nodeid)
        if record is None:
            file, line = self.items.get(nodeid, (nodeid.partition("::")[0], None))
            record = TestRecord(nodeid=nodeid, cell=self.cell.name, file=file, line=line)
            self.records[nodeid] = record
        record.attempts.append(attempt)
        return record

    def _cell_record(self, nodeid: str, attempt: Attempt) -> None:
        """A record for the cell as a whole, pointing at the matrix file that defines it."""
        record = self._add(nodeid, attempt)
        record.file = _relative(self.settings.matrix.path, self.settings.matrix.root)
        record.line = self.cell.line

    def finalize_record(self, record: TestRecord) -> TestRecord:
        """The record as reported, with the cell's properties and a repro command: overridable,
        so that a kind of cell can add what its records must say (a release, its check)."""
        cell = self.cell
        props = {
            prop.CELL: cell.name,
            prop.BACKEND: cell.backend,
            prop.DEVICES: str(cell.total_devices),
            prop.DEVICES_PER_PROCESS: str(cell.devices),
            prop.PROCESSES: str(cell.processes),
            prop.SLICES: str(cell.slices),
            prop.RUNTIME: f"{self.settings.runtime} {cell.runtime_label(self.settings.runtime)}".strip(),
            prop.JAX: self.versions.get(prop.JAX, ""),
            prop.JAXLIB: self.versions.get(prop.JAXLIB, ""),
        }
        if cell.launcher != LOCAL:
            props.update(self._launcher_properties())
        if self.turn_seed is not None:
            props[prop.TURN_SEED] = str(self.turn_seed)
            props[prop.TURN_ORDER] = ",".join(map(str, turn_order(self.turn_seed, cell.processes)))
            props[prop.TURNS] = self.turns
        user = dict(record.properties)
        record.properties = {**props, **{k: v for k, v in user.items() if k not in props}}
        if "repro" not in record.properties:
            if record.nodeid in self.items:
                targets = [record.nodeid]
            else:  # a cell-level record: replay the whole cell with the same arguments
                targets = [*(self.user_paths or cell.paths), *self.user_options]
            quoted = " ".join(shlex.quote(t) for t in targets)
            # a seed that is not the default is part of what replays the run
            env = f"{TURN_SEED_ENV}={self.turn_seed} " if self.turn_seed else ""
            record.properties[prop.REPRO] = f"{env}{self.settings.repro_prefix} --cells {cell.name} -- {quoted}"
        return record


    def _launcher_properties(self) -> dict[str, str]:
        """Who ran the cell's last launch: the launcher, each rank's host, the job and step."""
        seen = self.ranks_seen
        return {
            prop.LAUNCHER: self.cell.launcher,
            prop.RANK_HOSTS: " ".join(f"{s.get('rank', i)}:{s.get('host', '?')}" for i, s in enumerate(seen))
                          or "no rank started",
            prop.JOB: next((str(s["job"]) for s in seen if s.get("job")), ""),
            prop.STEP: next((str(s["step"]) for s in seen if s.get("step") not in (None, "")), ""),
        }


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def _segment(log: str, nodeid: str | None) -> str:
    """The raw output of a rank since ``nodeid`` started (its tail, for a whole-launch failure)."""
    if nodeid is not None:
        marker = f"[xharness] start {nodeid}\n"
        at = log.rfind(marker)
        if at >= 0:
            log = log[at + len(marker):]
    if len(log) > MAX_LOG_CHARS:
        log = f"[... {len(log) - MAX_LOG_CHARS} characters dropped ...]\n" + log[-MAX_LOG_CHARS:]
    return log
