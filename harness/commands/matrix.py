"""``xharness run`` and ``xharness cells``: the device matrix from the command line.

``run`` is the main job: every selected cell in fresh processes under the supervisor, one JUnit
file per cell written as soon as the cell ends (a partial run is readable), then the merged
report, dashboard and summary. Exit status: 0 all passed (flaky passes are listed), 1 a test
failed or errored in some cell, 2 a usage or matrix-file error, 3 a release named by ``--release``
or a cell's ``runtime.release`` could not be installed (that cell gets an error record, the others
run), 4 the runtime under test is not importable here and no release was named.

The runtime under test is ``--runtime`` when given, else the cell's ``runtime.name``, else the
reference runtime. A PyTorch/XLA or JAX release (``--release``, ``runtime.release``) runs in its own
cached environment (``harness.releases.envs``): the cell's pytest is that environment's Python.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import queue
import shlex
import sys
import threading
import time
from pathlib import Path

from harness import compile_cache, project
from harness.backends import Backend
from harness.commands import plugins
from harness.errors import UsageError
from harness.executors import LOCAL, choose
from harness.executors.slurm import SlurmExecutor
from harness.executors.unit import LocalExecutor, skipped_cell_record
from harness.exits import (
    EXIT_FAILED,
    EXIT_INSTALL,
    EXIT_INTERRUPTED,
    EXIT_NO_CLUSTER,
    EXIT_OK,
    EXIT_UNAVAILABLE,
)
from harness.matrix import durations, hosted, schedule, test_files
from harness.matrix.config import (
    RELEASED_RUNTIMES,
    RUNTIMES,
    Cell,
    Matrix,
    MatrixError,
    load_matrix,
    project_matrix,
)
from harness.matrix.interrupt import sigterm_interrupts
from harness.matrix.probe import probe
from harness.matrix.progress import Progress
from harness.matrix.supervisor import (
    SESSION_ID,
    CellResult,
    RunSettings,
    split_pytest_args,
)
from harness.releases import interpreters
from harness.report import properties as prop
from harness.report.records import ERROR, FAILED, FLAKY, SKIPPED, Attempt, TestRecord


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    run = sub.add_parser(
        "run",
        help="run the suites across the device matrix under supervision",
        description="Run the suites in every selected matrix cell, each in fresh processes, and "
        "write reports/junit/<cell>.xml, junit.xml, index.html and summary.md. "
        "Arguments after -- go to pytest; test paths or node ids there replace the cells' paths.",
    )
    run.add_argument("--cells", help="comma-separated cell names (default: every cell of the matrix)")
    run.add_argument("--matrix", type=Path,
                     help="matrix file (default: the project's: [tool.xharness] matrix or cells, else the "
                     "starter cells over its test paths)")
    run.add_argument("--out", type=Path, default=None,
                     help="output directory (default: [tool.xharness] reports, else reports/ of the project)")
    run.add_argument("--runtime", default=None,
                     help=f"runtime under test ({', '.join(RUNTIMES)}; default: each cell's runtime.name, "
                     "else [tool.xharness] runtime, else reference)")
    run.add_argument("--release", default=None,
                     help=f"a release of the runtime under test ({', '.join(RELEASED_RUNTIMES)}), run in its "
                     "own cached environment: a version, a wheel file, a directory of wheels, or "
                     "'installed' (this interpreter's)")
    interpreters.add_argument(run)
    run.add_argument("--reruns", type=int, default=0, help="rerun failed tests up to N times (flaky detection)")
    run.add_argument("--timeout", type=float, help="per-test time limit in seconds (default: the cell's)")
    run.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                     help=f"run up to N cells at once; a cell of P processes takes P of the N "
                     f"(default: one more than the machine's cores, {schedule.default_jobs()} here)")
    run.add_argument("--compile-cache", default=None, metavar="DIR|off",
                     help="JAX's persistent compilation cache, shared by the cells and kept across "
                     "runs (default: $XHARNESS_COMPILE_CACHE, else ~/.cache/xharness/jax)")
    run.add_argument("--durations", default=None, metavar="FILE|off",
                     help="the committed seconds per cell and test file that plan a run with no earlier "
                     f"run in --out (default: {durations.FILE_NAME} next to the matrix file; off: plan "
                     "from the cells' shapes); written by xharness durations")
    choose.add_arguments(run)
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then arguments for pytest")
    run.set_defaults(handler=run_command)

    cells = sub.add_parser("cells", help="list the matrix cells and whether this machine can run them")
    cells.add_argument("--matrix", type=Path, help="matrix file (default: the project's, as for run)")
    shown = cells.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print one JSON object")
    shown.add_argument("--names", action="store_true",
                       help="print the names of the matrix's cells as one JSON array on one line, probing "
                       "nothing (what a workflow's matrix reads: fromJSON of a job's output)")
    shown.add_argument("--github", action="store_true",
                       help="print the workflow plan job's outputs, name=value lines for $GITHUB_OUTPUT: "
                       "matrix (each cell a hosted runner can run, and each the project names runner "
                       "labels for in [tool.xharness.runners]: cell and runs-on), any (true when that "
                       "matrix has a cell) and not_run (the other cells, each with why, as JSON)")
    cells.set_defaults(handler=cells_command)


def _usage_error(message: str) -> Exception:

    return UsageError(message)


def _load(path: Path | None) -> Matrix:
    """``--matrix``, else the project's matrix (``[tool.xharness]``: ``harness.project``)."""
    try:
        return load_matrix(path) if path is not None else project_matrix(_project())
    except MatrixError as exc:
        raise _usage_error(f"--matrix: {exc}" if path is not None else str(exc)) from None


def _project() -> project.Project:
    try:
        return project.load()
    except project.ProjectError as exc:
        raise _usage_error(str(exc)) from None


def _shape(cell: Cell) -> str:
    if cell.all_devices:
        return "all"
    shape = f"{cell.processes}x{cell.devices}" if cell.multiprocess else str(cell.devices)
    if cell.slices > 1:
        shape += f", {cell.slices} slices"
    return shape


# -- cells -----------------------------------------------------------------------------------------
def cells_command(args: argparse.Namespace) -> int:
    """Every cell this machine has: a template (``devices = "all"``) shows as the cell of every
    device the probe finds (``gpu-8``), or as itself with the reason when there are fewer than two."""
    from harness import adapters

    own = _project()
    matrix = _load(args.matrix)
    if args.names:  # every name `run --cells` takes as the file declares it: a runner probes its own
        print(json.dumps(list(matrix.cells)))
        return EXIT_OK
    if args.github:  # as the file declares them: a runner probes its own
        stray = hosted.unknown_keys(matrix.cells.values(), own.runners)
        if stray:
            raise UsageError(
                f"[tool.xharness.runners] names {', '.join(repr(k) for k in stray)}: neither a cell of "
                f"{matrix.path} nor one of {', '.join(hosted.LACKS)}")
        placed = hosted.place(matrix.cells.values(), own.runners, own.executor)
        include = [{"cell": p.cell, "runs-on": list(p.runs_on)} for p in placed if p.runs_on]
        print(f"matrix={json.dumps({'include': include}, separators=(',', ':'))}")
        print(f"any={'true' if include else 'false'}")
        print(f"not_run={json.dumps([{'cell': p.cell, 'why': p.why} for p in placed if not p.runs_on], separators=(',', ':'))}")
        return EXIT_OK
    listed = matrix.listed()
    rows = []
    for cell in listed:
        found = probe(cell)
        runtime = cell.runtime_name or own.runtime or "reference"
        entry = adapters.origin(runtime)
        plugin = f"{entry.distribution} {entry.version}" if entry is not None and not entry.builtin else ""
        rows.append({**cell.as_dict(), "available": found.available, "reason": found.reason,
                     "runtime_under_test": runtime, "plugin": plugin})
    if args.json:
        print(json.dumps({"matrix": str(matrix.path), "cells": rows}, indent=2))
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    for row, cell in zip(rows, listed, strict=True):
        status = "runs here" if row["available"] else "SKIPPED  "
        runtime = row["runtime_under_test"] + (f" (from {row['plugin']})" if row["plugin"] else "")
        print(f"{cell.name:<{width}}  {cell.backend:<3}  {_shape(cell):<16} {cell.launcher:<6} "
              f"{cell.runtime_label(row['runtime_under_test']) or '-':<44} {status}  {row['reason']}"
              + (f"  [{runtime}]" if runtime != "reference" else ""))
    return EXIT_OK


# -- run -------------------------------------------------------------------------------------------
def run_command(args: argparse.Namespace) -> int:
    own = _project()
    plugins.require_loadable("xharness run")
    matrix = _load(args.matrix)
    if args.out is None:
        args.out = own.reports_dir()
    if args.runtime is not None and args.runtime not in RUNTIMES:
        raise _usage_error(f"--runtime: unknown runtime {args.runtime!r} (known: {', '.join(RUNTIMES)})")
    if args.release is not None and args.runtime not in RELEASED_RUNTIMES:
        raise _usage_error(
            f"--release names a release of a runtime that lives in its own environment: add --runtime "
            f"{' or '.join(RELEASED_RUNTIMES)}"
        )
    release = _release_text(args.runtime, args.release)
    if release is not None or any(c.release for c in matrix.cells.values()):
        interpreters.apply_argument(args.python)
    executor_name = _check_numbers(args, own)
    cache = compile_cache.choose(args.compile_cache)
    names = [n.strip() for n in (args.cells or "").split(",") if n.strip()]
    try:
        cells = matrix.select(names)
    except MatrixError as exc:
        raise _usage_error(str(exc)) from None
    pytest_args = list(args.pytest_args or [])
    if pytest_args and pytest_args[0] == "--":
        pytest_args = pytest_args[1:]

    prefix = "xharness run"
    if args.matrix is not None:
        prefix += f" --matrix {args.matrix}"
    if args.runtime is not None:
        prefix += f" --runtime {args.runtime}"
    if release is not None:
        prefix += f" --release {shlex.quote(release)}"
    given, options = split_pytest_args(tuple(pytest_args), matrix.root)
    if given:  # a suite named after --: it replaces the cells' paths, and is split like them
        cells = [dataclasses.replace(c, paths=test_files.foreign_paths(given, matrix.root)) for c in cells]
        pytest_args = options
    if own.runtime is not None:  # the project's runtime, where a cell names none of its own
        cells = [dataclasses.replace(c, runtime_name=c.runtime_name or own.runtime) for c in cells]
    cells = [_with_runtime(c, args.runtime, release) for c in cells]
    _check_loadable(cells)
    _check_importable(cells)
    out: Path = args.out
    known = _estimates(args.durations, matrix, cells, out, bool(given))
    progress = Progress(len(cells))
    executor = _executor(executor_name, own, args.deadline, out, progress)
    if executor is None:
        return EXIT_NO_CLUSTER
    jobs = args.jobs or (executor.capacity() if isinstance(executor, SlurmExecutor) else schedule.default_jobs())
    settings = RunSettings(
        matrix=matrix,
        out_dir=out,
        runtime=args.runtime or "reference",
        reruns=args.reruns,
        timeout=args.timeout,
        pytest_args=tuple(pytest_args),
        repro_prefix=prefix,
        compile_cache=cache,
        cancel=threading.Event(),
    )
    junit_dir = out / "junit"
    junit_dir.mkdir(parents=True, exist_ok=True)
    for stale in junit_dir.glob("*.xml"):  # this run's directory describes this run only
        stale.unlink()

    # a cancelled CI job sends SIGTERM: treat it like Ctrl-C, so every launch stops its process
    # groups (they run in their own sessions and would otherwise outlive us) and results are kept
    with sigterm_interrupts():
        try:
            return _run_cells(cells, settings, out, junit_dir, jobs, known.lengths, known.times, executor, progress,
                              _plan_note(known, out))
        finally:
            executor.close()


def _estimates(option: str | None, matrix: Matrix, cells: list[Cell], out: Path,
               foreign: bool) -> schedule.Estimates:
    """What the plan knows of the cells: the last run in ``out``, and the committed durations
    (``--durations``, else the matrix's own file) for the cells it lacks. A suite named after
    ``--`` is not the one the matrix's durations timed, so they are not read for it."""
    previous = schedule.previous_walls(out / "matrix.json")
    by_file = {c.name: dataclasses.replace(c, paths=test_files.cell_files(c, matrix.root)) for c in cells}
    path_times = {n: schedule.previous_path_times(c, out / "junit" / f"{n}.xml") for n, c in by_file.items()}
    off = option is not None and option.lower() in compile_cache.OFF
    path = Path(option) if option is not None and not off else durations.durations_path(matrix)
    if option is not None and not off and not path.is_file():
        raise _usage_error(f"--durations: {path}: no such file")
    try:
        committed = durations.Durations() if off or foreign else durations.load(path)
    except durations.DurationsError as exc:
        if option is not None:
            raise _usage_error(f"--durations: {exc}") from None
        print(f"xharness: warning: {exc}; the run is planned without it", file=sys.stderr)
        committed = durations.Durations()
    known = schedule.estimate(cells, previous, path_times, committed, matrix.root)
    return dataclasses.replace(known, note=str(path)) if committed else known


def _plan_note(known: schedule.Estimates, out: Path) -> str:
    """Where the run's start order and splits come from, said once at its start."""
    sources = set(known.sources.values())
    if schedule.DURATIONS in sources and schedule.LAST_RUN in sources:
        return f"start order and splits from the last run in {out}/, and {known.note} for the cells it lacks"
    if schedule.DURATIONS in sources:
        return f"start order and splits from {known.note} (no earlier run in {out}/)"
    if schedule.LAST_RUN in sources:
        return f"start order and splits from the last run in {out}/"
    return "start order and splits from the cells' shapes (no earlier run, no durations file)"


def _check_numbers(args: argparse.Namespace, own: project.Project) -> str:
    """The numeric flags checked; the executor the run uses (``--on``, else the project's)."""
    if args.reruns < 0:
        raise _usage_error("--reruns must be 0 or more")
    if args.timeout is not None and not args.timeout > 0:
        raise _usage_error("--timeout must be a positive number of seconds")
    if args.jobs is not None and args.jobs < 1:
        raise _usage_error("-j/--jobs must be 1 or more")
    return choose.executor_name(args, own.executor)


def _executor(name: str, own: project.Project, deadline: float | None, out: Path,
              progress: Progress) -> choose.Executor | None:
    """The executor ``--on`` (or the project) names; None, said on stderr, when no cluster answers."""
    try:
        return choose.executor_for(name, own.slurm, deadline, out, progress)
    except choose.NoCluster as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return None


def _release_text(runtime: str | None, release: str | None) -> str | None:
    """``--release`` as the cells carry it: a version as given, a wheel or a directory of wheels
    as its absolute path, ``installed`` (``harness.releases.release_spec``); a usage error when
    it names nothing usable."""
    if release is None or runtime is None:
        return release
    from harness.releases.release_spec import parse_argument

    return parse_argument(runtime, release, "--release").text


def _with_runtime(cell: Cell, runtime: str | None, release: str | None) -> Cell:
    """The cell with the runtime it runs: ``--runtime``/``--release`` override its own."""
    name = runtime or cell.runtime_name or "reference"
    if runtime is not None and runtime != cell.runtime_name:
        cell_release = release  # the cell's release belongs to its own runtime
    else:
        cell_release = release or cell.release
    return dataclasses.replace(cell, runtime_name=name, release=cell_release)


def _check_loadable(cells: list[Cell]) -> None:
    """Every runtime a cell tests has an adapter that loads: a plugin that cannot be loaded is a
    usage error naming its distribution, before any cell starts."""
    from harness import adapters

    for name in dict.fromkeys(c.runtime_name or "reference" for c in cells):
        try:
            adapters.adapter_class(name)
        except adapters.UnknownRuntime as exc:
            raise _usage_error(str(exc)) from None


def _check_importable(cells: list[Cell]) -> None:
    """A released runtime with no release named runs in this interpreter: it must be here."""
    from harness.releases.catalog import importable_here

    for cell in cells:
        if cell.runtime_name in RELEASED_RUNTIMES and not cell.release and not importable_here(cell.runtime_name):
            raise SystemExit(_unavailable(cell, EXIT_UNAVAILABLE))


def _unavailable(cell: Cell, code: int) -> int:
    print(
        f"xharness: error: cell {cell.name}: {cell.runtime_name} is not importable by {sys.executable}; "
        f"name a release (--release 2.9.0, or runtime.release in the matrix file) to run it in that "
        "release's own cached environment",
        file=sys.stderr,
    )
    return code


@dataclasses.dataclass(frozen=True)
class _Unit:
    """What runs in one process slot group: a cell, or one part of a long cell split in two."""

    label: str
    cell: Cell
    part: Cell
    shard: str  # the part's own output directory, "" for a whole cell


class _CellsInFlight:
    """The cells of one ``xharness run`` while they run: up to ``jobs`` process slots at once, each
    cell (or part) in a thread of its own that supervises its processes, and every result written
    as soon as its cell is whole. Ctrl-C or SIGTERM stops every running cell and keeps what ran."""

    def __init__(self, settings: RunSettings, junit_dir: Path, jobs: int, progress: Progress,
                 executor: choose.Executor) -> None:
        self.executor = executor
        self.cancel = settings.cancel or threading.Event()
        self.settings = dataclasses.replace(settings, cancel=self.cancel)
        self.junit_dir, self.jobs, self.progress = junit_dir, jobs, progress
        self.finished: queue.Queue[tuple[str, CellResult, bool]] = queue.Queue()
        self.free = jobs
        self.running: dict[str, int] = {}  # label -> slots it holds
        self.units: dict[str, _Unit] = {}
        self.parts_of: dict[str, int] = {}
        self.part_results: dict[str, list[CellResult]] = {}
        self.cell_started: dict[str, float] = {}
        self.results: dict[str, CellResult] = {}
        self.install_failed: list[str] = []
        self.interrupted = False

    def keep(self, cell: Cell, result: CellResult) -> None:
        from harness.report.junit import write_cell_xml

        write_cell_xml(cell.name, result.records, self.junit_dir / f"{cell.name}.xml")
        self.results[cell.name] = result

    def skip_unavailable(self, cells: list[Cell]) -> list[Cell]:
        """The cells this machine can run; each other one is recorded as skipped, with the reason."""
        runnable = []
        for cell in cells:
            if not self.executor.holds_devices and cell.backend != Backend.CPU and not cell.all_devices:
                runnable.append(cell)  # its devices are its job's node's: probed there (slurm_job)
                continue
            found = probe(cell)
            if found.available:
                runnable.append(cell)
                continue
            self.progress.cell_skipped(cell.name, found.reason)
            self.keep(cell, CellResult(cell, [skipped_cell_record(cell, found.reason)], skipped=found.reason))
        return runnable

    def plan(self, runnable: list[Cell], previous: dict[str, float],
             path_times: dict[str, dict[str, float]]) -> list[_Unit]:
        """The units in start order: each cell whole, or the parts of a long one."""
        units: list[_Unit] = []
        split = schedule.long_cells(runnable, self.jobs, previous)
        for cell in runnable:
            parts = (schedule.shards(cell, self.settings, self.jobs, path_times.get(cell.name, {}))
                     if cell.name in split else [cell])
            self.parts_of[cell.name] = len(parts)
            for i, part in enumerate(parts, start=1):
                whole = len(parts) == 1
                units.append(_Unit(cell.name if whole else f"{cell.name}[{i}/{len(parts)}]", cell, part,
                                   "" if whole else f"part{i}"))
        self.units = {u.label: u for u in units}
        self.progress.total_cells += len(units) - len(runnable)  # each part is counted as it starts and ends
        return units

    def drive(self, units: list[_Unit]) -> None:
        """Start what fits, take what finished, until nothing runs and nothing may start."""
        pending = list(units)
        while pending or self.running:
            try:
                if not self.interrupted:
                    self._start_fitting(pending)
                if not self.running:
                    break
                self._take_one()
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop every cell, keep what ran
                self._interrupt("interrupted: stopping every running cell and writing the partial results")

    def keep_partial(self, runnable: list[Cell]) -> None:
        """After an interrupt, a split cell whose parts did not all finish keeps those that did."""
        for cell in runnable:
            if cell.name not in self.results and self.part_results.get(cell.name):
                result = schedule.combine(cell, self.part_results[cell.name],
                                          time.monotonic() - self.cell_started[cell.name])
                result.interrupted = True
                self.keep(cell, result)

    def _start_fitting(self, pending: list[_Unit]) -> None:
        for unit in list(pending):
            need = schedule.slots(unit.cell, self.jobs)
            if need > self.free:
                continue
            if self.executor.holds_devices and schedule.exclusive(unit.cell) and any(
                    self.units[r].cell.backend == unit.cell.backend for r in self.running):
                continue
            pending.remove(unit)
            self.free -= need
            self.running[unit.label] = need
            self.cell_started.setdefault(unit.cell.name, time.monotonic())
            self.progress.cell_started(unit.label, _started_text(unit))
            threading.Thread(target=self._work, args=(unit,), name=f"cell-{unit.label}", daemon=True).start()

    def _work(self, unit: _Unit) -> None:
        try:
            result, not_installed = self.executor.run(unit.part, self.settings, self.progress.for_cell(unit.label),
                                                      unit.shard, unit.label)
        except BaseException as exc:  # noqa: BLE001 - a supervisor bug must not lose the other cells
            result = CellResult(unit.part, [_supervisor_error_record(unit.part, exc)])
            not_installed = False
        self.finished.put((unit.label, result, not_installed))

    def _take_one(self) -> None:
        try:
            label, result, not_installed = self.finished.get(timeout=0.2)
        except queue.Empty:
            return
        cell = self.units[label].cell
        self.free += self.running.pop(label)
        if not_installed:
            self.install_failed.append(cell.name)
        self.progress.cell_finished(label, _counts_text(result) + f" in {result.wall:.1f}s")
        parts = self.part_results.setdefault(cell.name, [])
        parts.append(result)
        if len(parts) == self.parts_of[cell.name]:
            if len(parts) > 1:
                result = schedule.combine(cell, parts, time.monotonic() - self.cell_started[cell.name])
                self.progress.note(f"{len(parts)} parts: " + _counts_text(result) + f" in {result.wall:.1f}s",
                                   cell=cell.name)
            self.keep(cell, result)
        if result.interrupted:  # a cell saw the interrupt first: stop the rest
            self._interrupt("interrupted: writing the partial results")

    def _interrupt(self, note: str) -> None:
        if not self.interrupted:
            self.interrupted = True
            self.cancel.set()
            self.executor.interrupt()
            self.progress.note(note, cell="run")


def _started_text(unit: _Unit) -> str:
    cell = unit.cell
    runtime = cell.runtime_name or "reference"
    if cell.release:
        runtime += f" {cell.release}"
    what = ", ".join(p for p in (f"{cell.backend} {_shape(cell)}", runtime, cell.runtime_label()) if p)
    if unit.shard:
        what += f"; part of its paths: {' '.join(unit.part.paths)}"
    return what


def _run_cells(cells: list[Cell], settings: RunSettings, out: Path, junit_dir: Path, jobs: int = 1,
               previous: dict[str, float] | None = None,
               path_times: dict[str, dict[str, float]] | None = None,
               executor: choose.Executor | None = None, progress: Progress | None = None,
               plan_note: str = "") -> int:
    """Every cell, up to ``jobs`` process slots at once (``_CellsInFlight``). Results are written
    and summarized in matrix order whatever order the cells finish in."""
    progress = progress or Progress(len(cells))
    executor = executor or LocalExecutor()
    cache = settings.compile_cache
    if cache is not None:
        progress.note(cache.note, cell="run")
    if jobs > 1:
        progress.note(f"up to {jobs} cell process(es) at once (-j {jobs})", cell="run")
        if plan_note:
            progress.note(plan_note, cell="run")
    started = time.monotonic()
    if executor.name != LOCAL:
        progress.note(f"cells run as jobs of the SLURM cluster; their files in {settings.out_dir / 'jobs'}",
                      cell="run")
    run = _CellsInFlight(settings, junit_dir, jobs, progress, executor)
    runnable = schedule.start_order(run.skip_unavailable(cells), jobs, previous or {})
    run.drive(run.plan(runnable, previous or {}, path_times or {}))
    run.keep_partial(runnable)
    wall = time.monotonic() - started
    ordered = [run.results[c.name] for c in cells if c.name in run.results]

    from harness.report.api import finish_run

    finish_run(out)
    _write_run_summary(out / "matrix.json", ordered, wall, jobs, executor.stats())
    code = _print_summary(ordered, wall, out)
    if cache is not None and cache.path is not None:
        compile_cache.trim(cache.path)
    if run.interrupted or any(r.interrupted for r in ordered):
        return EXIT_INTERRUPTED
    if run.install_failed:
        return EXIT_INSTALL
    return code


def _supervisor_error_record(cell: Cell, exc: BaseException) -> TestRecord:
    record = TestRecord(nodeid=SESSION_ID, cell=cell.name)
    record.attempts.append(Attempt(ERROR, message=f"the supervisor of cell {cell.name} failed: "
                                                  f"{type(exc).__name__}: {exc}"))
    return record


def _counts_text(result: CellResult) -> str:
    counts = result.counts()
    order = ("passed", FLAKY, FAILED, ERROR, SKIPPED)
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)) or "no tests"


def _write_run_summary(path: Path, results: list[CellResult], wall: float, jobs: int = 1,
                       executor: dict[str, object] | None = None) -> None:
    """Machine-readable timings: per-cell wall time, test time and the supervisor's overhead."""
    from harness.report.files import write_atomic

    cells = []
    for r in results:
        cells.append({
            "cell": r.cell.name,
            "skipped": r.skipped,
            "wall": round(r.wall, 3),
            "test_time": round(r.test_time, 3),
            "overhead": round(r.overhead, 3) if not r.skipped else 0.0,
            "launches": r.launches,
            "counts": r.counts(),
        })
    summary = {"wall": round(wall, 3), "jobs": jobs, "executor": executor or {"executor": LOCAL}, "cells": cells}
    write_atomic(path, (json.dumps(summary, indent=2) + "\n").encode())


def _print_summary(results: list[CellResult], wall: float, out: Path) -> int:
    failed = False
    flaky: list[str] = []
    for result in results:
        if result.skipped:
            print(f"{result.cell.name}: skipped ({result.skipped})")
            continue
        print(f"{result.cell.name}: {_counts_text(result)}; {result.wall:.1f}s wall, "
              f"{result.test_time:.1f}s in tests, {result.launches} launch(es)")
        for record in result.records:
            kind = record.classification
            if kind in (FAILED, ERROR):
                failed = True
                print(f"  {kind.upper()}: {record.nodeid}: {record.final.message.splitlines()[0] if record.final.message else ''}")
                print(f"    repro: {record.properties.get(prop.REPRO, '')}")
            elif kind == FLAKY:
                flaky.append(f"{result.cell.name}: {record.nodeid}")
    for item in flaky:
        print(f"  FLAKY (passed on rerun): {item}")
    print(f"total {wall:.1f}s; reports in {out}/ (junit.xml, index.html, summary.md)", file=sys.stdout)
    return EXIT_FAILED if failed else EXIT_OK
