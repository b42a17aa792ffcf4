"""``xharness releases RUNTIME VERSION...``: every scenario against each of several releases.

Each release gets its own cached environment (``harness.releases.envs``, built with an interpreter
it fits) and runs its checks there (``harness.releases.cells``): the catalog as the cell
``<runtime>-<release>``, and for a JAX release also the harness's own suites
(``<runtime>-<release>-suites``, the reference runtime on that JAX) and the invariants with JAX as
the runtime under test (``<runtime>-<release>-invariants``). A release that cannot be installed is
reported (an error record in its JUnit file and a row in the table) and the others still run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import project
from harness.errors import UsageError
from harness.executors import choose
from harness.executors.slurm import SlurmExecutor
from harness.executors.slurm_job import JobSpec
from harness.exits import EXIT_FAILED, EXIT_INSTALL, EXIT_INTERRUPTED, EXIT_NO_CLUSTER, EXIT_OK
from harness.matrix import schedule, test_files
from harness.matrix.config import RELEASED_RUNTIMES, Cell, Matrix
from harness.matrix.progress import Progress
from harness.matrix.supervisor import CellResult, RunSettings
from harness.releases import envs, interpreters, release_spec
from harness.releases.catalog import say
from harness.releases.cells import (
    ReleaseCellRun,
    ReleaseCheck,
    install_error_record,
    release_checks,
)
from harness.releases.release_spec import ReleaseSpec
from harness.report import properties as prop
from harness.report.properties import CHECK_CATALOG, CHECK_SUITES, CHECKS
from harness.scenarios.expected import (
    ExpectedTableError,
    shown_verdict,
)
from harness.scenarios.expected import load as load_table


# ------------------------------------------------------------------------------ releases
def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "releases",
        help="run the catalog against releases of a runtime, one cached environment each",
        description="For each release: build (or reuse) its virtual environment, run the "
        "catalog there as the supervised cell RUNTIME-RELEASE (JUnit in OUT/junit/), and judge "
        "each scenario against the expected-outcomes table. A JAX release also runs the "
        "harness's suites on that JAX (RUNTIME-RELEASE-suites) and the invariants against it "
        "(RUNTIME-RELEASE-invariants), each a cell of its own. Exit 0: every verdict as expected "
        "(or skipped) and every suite green; 1: some verdict or test is not; 2: usage error; "
        "3: a release could not be installed (the others still ran).",
    )
    p.add_argument("runtime", choices=RELEASED_RUNTIMES, help="runtime under test")
    p.add_argument("versions", nargs="+", metavar="VERSION",
                   help="releases, e.g. 2.5.1 2.9.0 (torch_xla) or 0.10.0 0.10.2 (jax); a release "
                   "may also be a wheel file, a directory of wheels (torch_xla with its torch) "
                   "or 'installed' (this interpreter's own)")
    p.add_argument("--out", type=Path, default=Path("reports"), help="output directory (default: reports)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="per-scenario time limit in seconds (default 900)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--checks", default=None, metavar="LIST",
                   help=f"comma-separated checks to run of {', '.join(CHECKS[:3])} (default: every check the "
                   "runtime has)")
    interpreters.add_argument(p)
    choose.add_arguments(p)
    p.set_defaults(handler=releases_command)


def releases_command(args: argparse.Namespace) -> int:
    from harness.matrix.interrupt import sigterm_interrupts
    from harness.report.api import finish_run

    specs = list({s.key: s for s in (release_spec.parse_argument(args.runtime, v) for v in args.versions)}.values())
    interpreters.apply_argument(args.python)
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    kinds = _checks(args.checks)
    try:
        load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    out: Path = args.out
    try:
        own = project.load()
    except project.ProjectError as exc:
        raise UsageError(str(exc)) from None
    try:
        executor = choose.executor_for(choose.executor_name(args, own.executor), own.slurm, args.deadline, out,
                                       Progress(0))
    except choose.NoCluster as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_NO_CLUSTER
    junit_dir = out / "junit"
    junit_dir.mkdir(parents=True, exist_ok=True)
    times = _previous_times(args.runtime, specs, args.timeout, junit_dir)
    for stale in junit_dir.glob("*.xml"):  # this run's directory describes this run only
        stale.unlink()
    started = time.monotonic()
    plan = _Plan(args.runtime, args.timeout, out, kinds, times)
    with sigterm_interrupts():
        try:
            if isinstance(executor, SlurmExecutor):
                releases, interrupted = _run_as_jobs(plan, specs, executor)
            else:
                releases, interrupted = _run_here(plan, specs)
        finally:
            executor.close()
    finish_run(out)
    wall = round(time.monotonic() - started, 1)
    code = EXIT_INTERRUPTED if interrupted else exit_code(releases)
    if args.json:
        print(json.dumps({"runtime": args.runtime, "releases": releases, "wall": wall,
                          "out": str(out), "exit_code": code}, indent=2))
    else:
        print(render_table(args.runtime, releases))
        print(f"total {wall:.1f} s; JUnit per cell in {junit_dir}/, dashboard {out / 'index.html'}")
    return code


def _checks(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    kinds = tuple(k.strip() for k in raw.split(",") if k.strip())
    unknown = [k for k in kinds if k not in CHECKS[:3]]
    if not kinds or unknown:
        raise UsageError(f"--checks: unknown check {', '.join(unknown) or repr(raw)} (known: {', '.join(CHECKS[:3])})")
    return kinds


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What every release of one ``releases`` command runs: its checks, and the last run's seconds
    per test path of each suites cell (for splitting it)."""

    runtime: str
    timeout: float
    out: Path
    kinds: tuple[str, ...] | None
    times: dict[str, dict[str, float]]

    def parts(self, check: ReleaseCheck) -> list[tuple[str, Cell, str]]:
        """The units a check runs as: (label, cell, shard). A release's suites are a long cell, split
        in two by the last run's seconds per path (``schedule.balance``); any other check is whole."""
        cell = check.cell
        files = _suite_files(cell)
        if check.kind != CHECK_SUITES or len(files) < 2:
            return [(cell.name, cell, "")]
        split = schedule.balance(files, self.times.get(cell.name, {}))
        return [(f"{cell.name}[{i}/{len(split)}]", dataclasses.replace(cell, paths=paths), f"part{i}")
                for i, paths in enumerate(split, start=1)]


def _suite_files(cell: Cell) -> tuple[str, ...]:
    """A suites cell's test files, less those its ``--ignore=`` arguments leave out: the units it
    is split by (its four directories are too coarse to balance two processes)."""
    ignored = tuple(a.split("=", 1)[1].rstrip("/") + "/" for a in cell.pytest_args if a.startswith("--ignore="))
    root = envs.project_root()
    return tuple(f for path in cell.paths for f in test_files.files_below(path, root) if not f.startswith(ignored))


def _previous_times(runtime: str, specs: list[ReleaseSpec], timeout: float, junit_dir: Path) -> dict[str, dict[str, float]]:
    """The last run's seconds per test file of each release's suites cell."""
    times = {}
    for spec in specs:
        for check in release_checks(runtime, spec.key, timeout):
            if check.kind == CHECK_SUITES:
                cell = check.cell
                files = dataclasses.replace(cell, paths=_suite_files(cell))
                times[cell.name] = schedule.previous_path_times(files, junit_dir / f"{cell.name}.xml")
    return times


def _run_here(plan: _Plan, specs: list[ReleaseSpec]) -> tuple[list[dict[str, Any]], bool]:
    """Each release in turn, each of its checks a supervised cell here (a split one in two
    processes at once)."""
    releases: list[dict[str, Any]] = []
    for spec in specs:
        entry, env, checks = _prepare(plan.runtime, spec, plan.timeout, plan.out, plan.kinds)
        releases.append(entry)
        t0 = time.monotonic()
        for check in checks if env is not None else []:
            result = _run_check(plan, shlex.quote(spec.text), check, env)
            _take(entry, check, result, plan.out / "junit")
            entry["seconds"] = round(entry["seconds"] + time.monotonic() - t0, 1)
            t0 = time.monotonic()
            if result.interrupted:
                return releases, True
    return releases, False


def _run_as_jobs(plan: _Plan, specs: list[ReleaseSpec], executor: SlurmExecutor) -> tuple[list[dict[str, Any]], bool]:
    """Every check of every release a job of the cluster at once (a split one two jobs); each
    release's environment is built here first, where the jobs find it (the shared filesystem)."""
    releases: list[dict[str, Any]] = []
    work: list[tuple[dict[str, Any], ReleaseCheck, list[JobSpec]]] = []
    for spec in specs:
        entry, env, checks = _prepare(plan.runtime, spec, plan.timeout, plan.out, plan.kinds)
        releases.append(entry)
        for check in checks if env is not None else []:
            settings = check_settings(plan.runtime, shlex.quote(spec.text), check, plan.out)
            work.append((entry, check, [JobSpec(cell, settings, shard, label, python=str(env.python),
                                                released=plan.runtime, check=check.kind)
                                        for label, cell, shard in plan.parts(check)]))
    progress = Progress(sum(len(jobs) for _, _, jobs in work))
    executor.progress = progress
    flat = [job for _, _, jobs in work for job in jobs]
    results = _all_at_once([lambda job=job: executor.run_job(job, progress.for_cell(job.label))[0] for job in flat],
                           executor.interrupt)
    interrupted = len(results) < len(flat) or any(r.interrupted for r in results.values())
    index = 0
    for entry, check, jobs in work:
        mine = [results[i] for i in range(index, index + len(jobs)) if i in results]
        index += len(jobs)
        if mine:
            result = mine[0] if len(jobs) == 1 else schedule.combine(check.cell, mine, max(r.wall for r in mine))
            _take(entry, check, result, plan.out / "junit")
            entry["seconds"] = round(entry["seconds"] + result.wall, 1)
    return releases, interrupted


def _all_at_once(calls: list[Callable[[], CellResult]], on_interrupt: Callable[[], None]) -> dict[int, CellResult]:
    """Every call in a thread of its own; their results by index. Ctrl-C or SIGTERM while they
    run calls ``on_interrupt`` (which makes them end) and keeps waiting for them."""
    results: dict[int, CellResult] = {}

    def one(index: int, call: Callable[[], CellResult]) -> None:
        results[index] = call()

    threads = [threading.Thread(target=one, args=(i, call), daemon=True) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            try:
                thread.join(timeout=0.5)
            except KeyboardInterrupt:
                on_interrupt()
    return results


def _prepare(runtime: str, spec: ReleaseSpec, timeout: float, out: Path, kinds: tuple[str, ...] | None
             ) -> tuple[dict[str, Any], envs.ReleaseEnv | None, list[ReleaseCheck]]:
    """One release's entry of the report, its environment (None: it could not be installed, and
    the entry and an error record say why) and the checks to run there. A release that is a
    wheel is the cell ``<runtime>-wheel-<digest>``; one on the index keeps its version."""
    from harness.report.junit import write_cell_xml

    junit_dir = out / "junit"
    every = release_checks(runtime, spec.key, timeout)
    checks = [c for c in every if kinds is None or c.kind in kinds]
    catalog = every[0].cell
    entry: dict[str, Any] = {"release": spec.label, "cell": catalog.name,
                             "junit": str(junit_dir / f"{catalog.name}.xml"), "rows": [], "checks": []}
    if spec.kind != release_spec.INDEX:
        entry["spec"] = spec.text
    t0 = time.monotonic()
    try:
        env = release_spec.ensure(spec, progress=say)
    except envs.ReleaseInstallError as exc:
        say(f"error: {exc}")
        records = [install_error_record(catalog, exc)]
        write_cell_xml(catalog.name, records, junit_dir / f"{catalog.name}.xml")
        entry.update(error=str(exc).splitlines()[0], installed=False, rows=_rows(records),
                     seconds=round(time.monotonic() - t0, 1))
        return entry, None, []
    entry.update(installed=True, env=str(env.path), env_built=env.built,
                 env_seconds=round(env.seconds, 1), seconds=round(time.monotonic() - t0, 1))
    return entry, env, checks


def _take(entry: dict[str, Any], check: ReleaseCheck, result: CellResult, junit_dir: Path) -> None:
    """One check's result into its JUnit file and its release's entry."""
    from harness.report.junit import write_cell_xml

    write_cell_xml(check.cell.name, result.records, junit_dir / f"{check.cell.name}.xml")
    if check.kind == CHECK_CATALOG:
        entry.update(rows=_rows(result.records), catalog_seconds=round(result.wall, 1))
    else:
        entry["checks"].append(check_summary(check, result.records, result.wall, junit_dir / f"{check.cell.name}.xml"))


def check_settings(runtime: str, version: str, check: ReleaseCheck, out: Path) -> RunSettings:
    """The settings a release's check runs under, here or in a job."""
    matrix = Matrix(path=envs.project_root() / "harness/scenarios/expected.toml",
                    root=envs.project_root(), cells={})
    return RunSettings(matrix=matrix, out_dir=out, runtime=check.under_test,
                       repro_prefix=f"xharness releases {runtime} {version}")


def _run_check(plan: _Plan, version: str, check: ReleaseCheck, env: envs.ReleaseEnv) -> CellResult:
    """One check of a release as a supervised cell in the release's environment; a split one's
    parts at once, each in its own processes, made one result again."""
    cell = check.cell
    settings = check_settings(plan.runtime, version, check, plan.out)
    parts = plan.parts(check)
    progress = Progress(len(parts))
    cancel = threading.Event()
    settings = dataclasses.replace(settings, cancel=cancel)

    def one(label: str, part: Cell, shard: str) -> CellResult:
        progress.cell_started(label, f"{check.kind}: {cell.description} in {env.path}"
                              + (f"; part of its paths: {' '.join(part.paths)}" if shard else ""))
        run = ReleaseCellRun(part, settings, progress.for_cell(label), str(env.python), released=plan.runtime,
                             check=check.kind)
        if shard:
            run.logs = run.logs / shard
        result = run.run()
        progress.cell_finished(label, f"{len(result.records)} record(s) in {result.wall:.1f}s")
        return result

    started = time.monotonic()
    if len(parts) == 1:
        return one(*parts[0])
    results = _all_at_once([lambda p=p: one(*p) for p in parts], cancel.set)
    return schedule.combine(cell, [results[i] for i in sorted(results)], time.monotonic() - started)


def check_summary(check: ReleaseCheck, records: list[Any], wall: float, junit: Path) -> dict[str, Any]:
    """What the table and ``--json`` say of a suites or invariants cell: its counts and the
    tests that failed or errored, with the first line of each one's message."""
    counts: dict[str, int] = {}
    failing = []
    for record in records:
        kind = record.classification
        counts[kind] = counts.get(kind, 0) + 1
        if kind in ("failed", "error"):
            message = record.final.message if record.attempts else ""
            failing.append({"id": record.nodeid, "outcome": kind,
                            "message": next(iter(message.splitlines()), ""),
                            prop.REPRO: record.properties.get(prop.REPRO, "")})
    return {"check": check.kind, "cell": check.cell.name, "runtime": check.under_test,
            "junit": str(junit), "counts": {k: counts.get(k, 0) for k in CHECK_COUNTS},
            "failing": failing, "seconds": round(wall, 1)}


#: the classifications a check's counts always name (a flaky test passed on a rerun)
CHECK_COUNTS = ("passed", "failed", "error", "skipped", "flaky", "xfailed")


def _rows(records: list[Any]) -> list[dict[str, str]]:
    """One row per record: the catalog's properties, or the record's own classification when
    the test never got to judge (a crash of the cell's pytest, an install error)."""
    rows = []
    for record in records:
        props = record.properties
        verdict = props.get(prop.VERDICT) or record.classification
        if record.classification in ("error", "failed") and "verdict" not in props:
            verdict = record.classification
        rows.append({
            prop.SCENARIO: props.get(prop.SCENARIO) or record.nodeid,
            prop.RELEASE: props.get(prop.RELEASE, ""),
            prop.EXPECTED: props.get(prop.EXPECTED, "-"),
            prop.ACTUAL: props.get(prop.ACTUAL, record.classification),
            "verdict": verdict,
            "message": next(iter((record.final.message or "").splitlines()), "")
            if record.attempts else "",
        })
    return rows


def exit_code(releases: list[dict[str, Any]]) -> int:
    from harness.scenarios.expected import GREEN

    if any(not r.get("installed", True) for r in releases):
        return EXIT_INSTALL
    bad = any(row["verdict"] not in GREEN for r in releases for row in r.get("rows", []))
    red = any(c["failing"] for r in releases for c in r.get("checks", []))
    return EXIT_FAILED if bad or red else EXIT_OK


def render_table(runtime: str, releases: list[dict[str, Any]]) -> str:
    """The release x scenario table (expected and actual outcome, and the verdict), then per
    release its environment, its suites' and invariants' counts and every failing test."""
    header = ("release", "scenario", "expected", "actual", "verdict")
    lines: list[tuple[str, ...]] = []
    notes = []
    for entry in releases:
        notes += _release_notes(runtime, entry)
        for row in entry.get("rows", []):
            # the table's verdict, shown as a known bug where the expectation is the bug itself
            lines.append((entry["release"], row["scenario"], row["expected"], row["actual"],
                          shown_verdict(row["verdict"], row["actual"])))
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h)
              for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    text = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths))]
    text += [fmt.format(*row).rstrip() for row in lines]
    return "\n".join([*text, "", *notes])


def _release_notes(runtime: str, entry: dict[str, Any]) -> list[str]:
    """The lines under the table for one release."""
    if not entry.get("installed", True):
        return [f"{runtime} {entry['release']}: NOT INSTALLED: {entry.get('error', '')}"]
    how = "built" if entry.get("env_built") else "reused"
    catalog = entry.get("catalog_seconds")
    if catalog is None:  # an entry of an older run: the release's seconds less its environment's
        catalog = entry.get("seconds", 0) - entry.get("env_seconds", 0)
    notes = [f"{runtime} {entry['release']}: environment {how} ({entry.get('env_seconds', 0):.0f} s), "
             f"catalog run {catalog:.0f} s"]
    for check in entry.get("checks", []):
        counts = ", ".join(f"{n} {k}" for k, n in check["counts"].items() if n) or "no tests"
        notes.append(f"{runtime} {entry['release']} {check['check']} ({check['cell']}): {counts} "
                     f"in {check['seconds']:.0f} s")
        for failure in check["failing"]:
            notes.append(f"  {failure['outcome'].upper()}: {failure['id']}: {failure['message']}")
    return notes

