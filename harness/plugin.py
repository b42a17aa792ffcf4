"""The pytest plugin (entry point ``pytest11: xharness``): loaded by every pytest run in this venv.

It makes ``pytest suites/`` a meaningful run on its own and is the in-process half of the matrix
supervisor:

* asks for 8 CPU devices before JAX initializes (the count cannot change afterwards), unless the
  user chose one through ``JAX_NUM_CPU_DEVICES`` or ``--xla_force_host_platform_device_count``;
* joins ``jax.distributed`` when the supervisor launched this process as one rank of a cell;
* markers ``devices(n)``, ``processes(n)``, ``slices(n)``, ``cell(name, ...)`` that skip with the
  reason when the current process cannot host the test, and fixtures ``mesh``, ``devices``,
  ``runtime`` and ``adapter`` (the runtime under test, whichever is registered);
* under the supervisor (``--xharness-events``): streams per-test events, writes fatal-error and
  timeout stacks with :mod:`faulthandler`, runs per-test start/end barriers across ranks, and keeps
  only the tests the supervisor selected (so a restart after a crash runs just the rest).
"""

from __future__ import annotations

import faulthandler
import importlib.metadata
import json
import os
import re
import signal
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any, TextIO

import pytest

from harness import hooks, project, settings
from harness.cell_shape import launched
from harness.project_items import ProjectChecks
from harness.report import properties as prop

DEFAULT_CPU_DEVICES = 8
_XLA_COUNT_RE = re.compile(r"(^|\s)--xla_force_host_platform_device_count(=|\s|$)")

_MARKERS = (
    "devices(n): needs at least n JAX devices (over all processes); skipped otherwise",
    "processes(n): needs at least n JAX processes (a multi-process matrix cell); skipped otherwise",
    "slices(n): needs at least n slices (real or simulated by the cell); skipped otherwise",
    "cell(name, ...): runs only in the named matrix cells (--cell or HARNESS_CELL); skipped otherwise",
    "multiprocess: exercises several processes or slices; multi-process cells select these with -m",
    "own_process: starts fresh Python processes without the cell's topology to check what does not "
    "depend on the cell; the shipped matrix runs these in cpu-8 only (-m 'not own_process' elsewhere)",
    "options_independent: the outcome does not depend on the runtime options a cell sets (the test "
    "sets both itself, from its examples or parameters, or uses no runtime); cells that differ only "
    "in those options would run it identically, so the shipped matrix leaves it out of cpu-8-nofunc",
    "cell_independent: the outcome depends on neither the device count nor the runtime options (a "
    "fake executable, a faked backend, a fixed exploration); the shipped matrix runs it in cpu-8 only",
    "jax_independent: the outcome does not depend on which JAX is installed (nothing it checks runs on JAX: "
    "a numpy-only plugin, a workflow's YAML, SLURM's commands as scripts, the project's own linters, a "
    "command line refused before anything starts, the supervisor over plain Python tests with the compile "
    "cache off, the report and history writers); "
    "a JAX release's suites cell (xharness releases jax V) leaves it out, the test job runs it once",
    "release_independent: the outcome is the same in every interpreter that runs the harness, whichever "
    "torch or torch_xla release it holds (release environments, pip, wheels and interpreters stood in "
    "for; bisection's search; the release commands' usage errors and tables); a PyTorch/XLA release's "
    "own run of suites/adapters (ci/releases.sh) leaves it out, the test job's main suites run it",
    "crash_points: kills writers at each file operation in child processes of its own (own_process "
    "too); the shipped matrix runs these in cpu-1, the shortest cell, and not in cpu-8",
)


# -- device count, before anything initializes a JAX backend ------------------------------------
def user_chose_device_count(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """True when the environment already fixes the CPU device count (wherever the flag stands)."""
    if settings.raw("JAX_NUM_CPU_DEVICES", environ).strip():
        return True
    return bool(_XLA_COUNT_RE.search(environ.get("XLA_FLAGS", "")))


def request_cpu_devices(count: int = DEFAULT_CPU_DEVICES) -> None:
    """Ask JAX for ``count`` CPU devices unless the user chose a count."""
    if user_chose_device_count():
        return
    os.environ["JAX_NUM_CPU_DEVICES"] = str(count)
    jax = sys.modules.get("jax")
    if jax is not None:  # imported before us: the env var was already read, set the option
        try:
            jax.config.update("jax_num_cpu_devices", count)
        except Exception:  # noqa: BLE001 - backend already up; keep what it has
            pass


request_cpu_devices()  # at import: entry-point plugins load before conftest files and tests


def _dup_stderr() -> int | None:
    """The terminal's stderr, kept before pytest's capture redirects fd 2 (for time-limit dumps)."""
    try:
        return os.dup(2)
    except OSError:
        return None


_TERMINAL_STDERR = _dup_stderr()


# -- options, markers, hypothesis profiles --------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("xharness", "xharness device matrix")
    group.addoption(
        "--cell",
        default=settings.raw("HARNESS_CELL") or None,
        help="matrix cell this process represents (default: $HARNESS_CELL; none for a plain run)",
    )
    group.addoption(
        "--xharness-timeout",
        type=float,
        default=None,
        help="per-test time limit in seconds: dump all thread stacks and exit the process",
    )
    group.addoption("--xharness-events", default=None, help="(supervisor) append JSON-line events here")
    group.addoption("--xharness-stack", default=None, help="(supervisor) faulthandler output file")
    group.addoption("--xharness-select", default=None, help="(supervisor) JSON list of node ids to run")


def _hypothesis_profiles(config: pytest.Config) -> None:
    """Deterministic by default (a failure replays from its printed blob), no deadline (XLA
    compile times vary); ``--hypothesis-profile xharness-explore`` searches wider."""
    try:
        from hypothesis import settings
    except ImportError:
        return
    settings.register_profile("xharness", deadline=None, derandomize=True, print_blob=True, database=None)
    settings.register_profile("xharness-explore", deadline=None, max_examples=500, print_blob=True)
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile("xharness")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    request_cpu_devices()
    _hypothesis_profiles(config)
    _bound_runtime_waits(config.getoption("xharness_timeout"))
    _project_checks(config)
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):  # a cell of `xharness run`, or the user's own
        from harness import compile_cache

        compile_cache.install()  # entries written atomically: other processes read them meanwhile
    if _is_xdist_worker(config):
        timeout = config.getoption("xharness_timeout")
        if timeout:  # each worker guards its own tests
            config.pluginmanager.register(_TimeLimit(timeout), "xharness-time-limit")
        return
    if settings.raw("HARNESS_COORDINATOR") or launched():
        _join_distributed(config)
    events = config.getoption("xharness_events")
    if events:
        config.pluginmanager.register(_Supervised(config, Path(events)), "xharness-supervised")
    elif config.getoption("xharness_timeout") and not _uses_xdist(config):
        config.pluginmanager.register(_TimeLimit(config.getoption("xharness_timeout")), "xharness-time-limit")


def _project_checks(config: pytest.Config) -> None:
    """In a maintainer's repository (a ``[tool.xharness]`` at or above pytest's root): its runtime
    is the one under test unless the environment names one (``harness.project``), and its own
    scenarios and invariants are items of the run (``harness.project_items``). A project file
    that does not parse is left to the ``xharness`` commands, which report it with its line."""
    try:
        own = project.load(config.rootpath)
    except project.ProjectError:
        return
    if not own.configured:
        return
    if own.runtime is not None and not settings.raw("HARNESS_RUNTIME").strip():
        os.environ["HARNESS_RUNTIME"] = own.runtime
    config.pluginmanager.register(ProjectChecks(own), "xharness-project-checks")


#: the share of the per-test limit a wait on one execution may take: a stuck execution then ends
#: in the runtime's own error, which names it, before the limit kills the process
WAIT_SHARE = 0.5


def _bound_runtime_waits(timeout: float | None) -> None:
    """Under a per-test limit, the reference runtime's waits get a deadline inside it (unless
    ``HARNESS_WAIT_TIMEOUT`` says otherwise)."""
    if not timeout or settings.raw("HARNESS_WAIT_TIMEOUT"):
        return
    deadline = f"{max(1.0, timeout * WAIT_SHARE):g}"
    os.environ["HARNESS_WAIT_TIMEOUT"] = deadline
    # a runtime already imported read its options from the old environment
    hooks.call("wait-timeout", float(deadline))


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _uses_xdist(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None))


class _TimeLimit:
    """``--xharness-timeout`` outside the supervisor: dump every thread to stderr and exit."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        target = _TERMINAL_STDERR if _TERMINAL_STDERR is not None else sys.__stderr__
        faulthandler.dump_traceback_later(self.seconds, exit=True, file=target)

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        faulthandler.cancel_dump_traceback_later()


def _join_distributed(config: pytest.Config) -> None:
    """One rank of a multi-process cell: must run before any JAX call initializes a backend.

    The supervisor's own ranks are told the coordinator, the process count and their rank. A rank
    a cluster launcher started is told nothing: ``jax.distributed.initialize()`` finds all three
    in the launcher's environment, as a user's job does, so that detection is under test. Only
    the bounds are given, which detection does not read."""
    import jax

    bounds = {
        "initialization_timeout": int(settings.read("HARNESS_INIT_TIMEOUT")),
        # a dead peer is noticed by the supervisor first; this only bounds a lost supervisor
        "heartbeat_timeout_seconds": int(settings.read("HARNESS_HEARTBEAT_TIMEOUT")),
    }
    if launched():
        jax.distributed.initialize(**bounds)
    else:
        jax.distributed.initialize(
            coordinator_address=settings.raw("HARNESS_COORDINATOR"),
            num_processes=settings.read("HARNESS_PROCESSES"),
            process_id=settings.read("HARNESS_PROCESS_ID"),
            **bounds,
        )
    if config.getoption("xharness_events"):
        # jax.distributed installs a preemption notifier that swallows SIGTERM; under the
        # supervisor SIGTERM means "stop now" (a peer rank died), so restore the default action
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# -- markers ---------------------------------------------------------------------------------------
def current_cell(config: pytest.Config) -> str | None:
    return config.getoption("cell", None) or settings.raw("HARNESS_CELL") or None


def _slice_count() -> int:
    """Real slices where devices carry distinct ``slice_index`` values, else the cell's simulated ones.

    (CPU devices of a multi-process run have ``slice_index`` too, all 0, so its mere presence
    does not mean the platform has slices.)
    """
    import jax

    real = {getattr(d, "slice_index", 0) for d in jax.devices()}
    simulated = int(settings.read("HARNESS_NUM_SLICES"))
    return max(len(real), simulated, 1)


def _marker_count(marker: pytest.Mark) -> int:
    value = marker.args[0] if marker.args else marker.kwargs.get("n")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise pytest.UsageError(f"@pytest.mark.{marker.name} needs a positive integer, got {value!r}")
    return value


def _unmet_requirement(item: pytest.Item) -> str | None:
    """Why the current process cannot host ``item`` (None when it can)."""
    cell_marker = item.get_closest_marker("cell")
    if cell_marker is not None:
        wanted = [str(a) for a in cell_marker.args]
        here = current_cell(item.config)
        if here not in wanted:
            where = f"cell {here!r}" if here else "a run outside the matrix (no --cell)"
            return f"runs only in cell(s) {', '.join(wanted)}; this is {where}"
    needs = {m.name: _marker_count(m) for m in item.iter_markers() if m.name in ("devices", "processes", "slices")}
    if not needs:
        return None
    import jax

    have = {
        "devices": lambda: jax.device_count(),
        "processes": lambda: jax.process_count(),
        "slices": _slice_count,
    }
    for name, need in needs.items():
        got = have[name]()
        if got < need:
            return f"needs {need} {name}, this process has {got}"
    return None


# -- fixtures --------------------------------------------------------------------------------------
@pytest.fixture
def devices() -> list[Any]:
    """All JAX devices of the cell (every process's devices in a multi-process cell)."""
    import jax

    return list(jax.devices())


@pytest.fixture
def runtime() -> Any:
    """The runtime under test (the reference runtime, ``harness.runtime``)."""
    import harness.runtime

    return harness.runtime


@pytest.fixture
def adapter() -> Any:
    """The runtime under test through its adapter (``harness.api.Adapter``): the cell's runtime
    (``HARNESS_RUNTIME``; a project's ``[tool.xharness] runtime``), the reference runtime by
    default. A suite written against it runs unchanged against every registered runtime."""
    from harness.adapters import current

    return current()


@pytest.fixture
def nemesis() -> Any:
    """Run a job of hosts of their own under faults and judge it: ``nemesis(faults, spec)``
    returns ``harness.network.run_faulted``'s ``Outcome`` (history and verdicts). Skipped with
    the reason where no network namespaces can be made (not root, iproute2 or nftables missing);
    every namespace it makes is gone when the call returns."""
    from harness import network

    why = network.unavailable()
    if why:
        pytest.skip(f"no network of hosts here: {why}")
    return network.run_faulted


@pytest.fixture
def mesh(runtime: Any, devices: list[Any]) -> Any:
    """A 1-D mesh over every device, axis ``data``."""
    n = len(devices)
    return runtime.Mesh(list(range(n)), (n,), ("data",))


# -- per-test hooks that apply in every run -------------------------------------------------------
_BLOB_RE = re.compile(r"@reproduce_failure\((.*?)\)")


def falsified_properties(exc: BaseException) -> list[tuple[str, str]]:
    """What a JUnit record needs to replay a property hypothesis falsified: the shrunk example
    (hypothesis' own report of it, one per distinct failure), its ``@reproduce_failure`` blob, and
    how the example was chosen (the ``xharness`` profile is derandomized: the same test id finds
    the same example on any machine)."""
    leaves = [exc]
    while any(isinstance(e, BaseExceptionGroup) for e in leaves):
        leaves = [x for e in leaves for x in (e.exceptions if isinstance(e, BaseExceptionGroup) else (e,))]
    examples, blobs = [], []
    for leaf in [exc, *leaves]:
        notes = "\n".join(str(n) for n in getattr(leaf, "__notes__", ()))
        if "Falsifying" not in notes and "Failing test case" not in notes and "state = " not in notes:
            continue
        shown = "\n".join(
            line for line in notes.splitlines()
            if not line.startswith(("You can reproduce", "@reproduce", "Explanation:", "    These lines", "        /"))
        ).strip()
        if shown and shown not in examples:
            examples.append(shown)
        blobs += [b for b in _BLOB_RE.findall(notes) if b not in blobs]
    if not examples:
        return []
    from hypothesis import settings

    chosen = settings.default
    seed = "derandomized" if chosen.derandomize else "random (see the blob)"
    return [
        (prop.HYPOTHESIS_EXAMPLE, "\n\n".join(examples)),
        (prop.HYPOTHESIS_BLOB, "; ".join(blobs)),
        (prop.HYPOTHESIS_SEED, seed),
    ]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.excinfo is not None and call.when == "call" and "hypothesis" in sys.modules:
        for name, value in falsified_properties(call.excinfo.value):
            report.user_properties.append((name, value))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = _unmet_requirement(item)
    if reason:
        pytest.skip(reason)


# -- the supervised half ---------------------------------------------------------------------------
class _Supervised:
    """Registered only when the supervisor launched this pytest (``--xharness-events``)."""

    def __init__(self, config: pytest.Config, events_path: Path) -> None:
        from harness.matrix.events import EventWriter

        self.config = config
        self.writer = EventWriter(events_path)
        self.rank = int(settings.read("HARNESS_PROCESS_ID"))
        self.timeout: float | None = config.getoption("xharness_timeout")
        self.stack_file: TextIO | None = None
        self.barriers = int(settings.read("HARNESS_PROCESSES")) > 1 and bool(
            settings.raw("HARNESS_COORDINATOR") or launched()
        )
        self.counter = 0
        select = config.getoption("xharness_select")
        self.select: list[str] | None = json.loads(Path(select).read_text()) if select else None

    # session
    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        stack = self.config.getoption("xharness_stack")
        if stack:  # after pytest's own faulthandler plugin, so ours wins
            self.stack_file = open(stack, "a", buffering=1)  # noqa: SIM115 - open for the session
            faulthandler.enable(file=self.stack_file, all_threads=True)
            faulthandler.register(signal.SIGUSR1, file=self.stack_file, all_threads=True)
        self.writer.emit(
            "session",
            pid=os.getpid(),
            rank=self.rank,
            cell=current_cell(self.config),
            python=sys.version.split()[0],
            jax=_version("jax"),
            jaxlib=_version("jaxlib"),
            time=time.time(),
        )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        faulthandler.cancel_dump_traceback_later()
        self.writer.emit("end", exitstatus=int(exitstatus), time=time.time())

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.writer.close()

    # collection
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.writer.emit("collecterror", nodeid=report.nodeid, longrepr=str(report.longrepr))
        elif report.skipped:  # a module skipped as it is imported (``pytest.importorskip``)
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
            self.writer.emit("collectskip", nodeid=report.nodeid, reason=str(reason))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.select is None:
            return
        wanted = set(self.select)
        kept = [i for i in items if i.nodeid in wanted]
        dropped = [i for i in items if i.nodeid not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        listed = []
        for item in session.items:
            path, line, _ = item.location
            listed.append({"nodeid": item.nodeid, "file": path, "line": None if line is None else line + 1})
        self.writer.emit("collected", items=listed)

    # tests
    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.writer.emit("start", nodeid=nodeid, time=time.time())
        self.counter += 1  # barrier names are unique per test even when setup is skipped
        try:  # a marker in the raw log, so a crash can be matched with its native output
            os.write(2, f"\n[xharness] start {nodeid}\n".encode("utf-8", "replace"))
        except OSError:
            pass
        if self.timeout and self.stack_file is not None:
            faulthandler.dump_traceback_later(self.timeout, exit=True, file=self.stack_file)

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        faulthandler.cancel_dump_traceback_later()
        self.writer.emit("finish", nodeid=nodeid, time=time.time())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if call.excinfo is not None:
            report.xharness_exc_type = call.excinfo.typename  # type: ignore[attr-defined]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        message = ""
        crash = getattr(report.longrepr, "reprcrash", None)
        if crash is not None:
            message = str(crash.message)
        elif isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
            message = str(report.longrepr[2])  # a skip: (path, line, reason)
        self.writer.emit(
            "report",
            nodeid=report.nodeid,
            when=report.when,
            outcome=report.outcome,
            duration=report.duration,
            message=message,
            longrepr=report.longreprtext if report.failed else "",
            wasxfail=getattr(report, "wasxfail", None),
            exc_type=getattr(report, "xharness_exc_type", None),
            stdout=report.capstdout,
            stderr=report.capstderr,
            properties=[[str(k), str(v)] for k, v in report.user_properties],
        )

    # cross-rank barriers
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.barriers:
            self._barrier(f"start-{self.counter}")

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
        try:
            return (yield)
        finally:
            if self.barriers:
                # the time limit is the test's, not the wait for a slow peer: a rank that finished
                # must not time out before the rank that actually hangs
                faulthandler.cancel_dump_traceback_later()
                self._barrier(f"end-{self.counter}")

    def _barrier(self, name: str) -> None:
        """Announced in the event stream, so the supervisor can tell a waiting rank from a stuck one."""
        self.writer.emit("barrier", name=name, state="enter")
        # longer than the supervisor's limit: it stops the cell (and names the culprit) first
        _barrier(name, (self.timeout or 300) * 2 + 30)
        self.writer.emit("barrier", name=name, state="leave")


def _barrier(name: str, timeout: float | None) -> None:
    """Wait until every rank reaches ``name``; raises after ``timeout`` seconds.

    Uses the coordination service's key-value barrier (milliseconds, and it can time out) when the
    installed JAX exposes it, else a device-level sync.
    """
    limit_ms = int(1000 * (timeout or 300))
    try:
        from jax._src import distributed

        client = distributed.global_state.client
    except (ImportError, AttributeError):
        client = None
    if client is not None and hasattr(client, "wait_at_barrier"):
        client.wait_at_barrier(f"xharness-{name}", limit_ms)
        return
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices(f"xharness-{name}")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""
