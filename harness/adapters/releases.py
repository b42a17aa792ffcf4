"""The catalog against real PyTorch/XLA releases: one scenario (``xharness repro --runtime
torch_xla``), or every scenario against each of several releases (``xharness releases``).

A scenario's outcome is its variants' (``harness.scenarios.upstream_torch_xla``): ``failed`` if
any broke in a way that is not the bug, else ``reproduced`` if any showed the bug's signature,
else ``passed`` if any ran, else ``skipped``. The outcome is then judged against the expected
table (``harness.adapters.expected``) for the release the variants actually imported, which is
not always the one asked for.

``releases`` gives each release its own cached environment (``harness.adapters.envs``) and runs
the catalog there as a supervised matrix cell named ``<runtime>-<release>``, so an abort in the
release is a record, and each release gets its own JUnit file. A release that cannot be installed
is reported (an error record in its JUnit file and a row in the table) and the others still run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.adapters import envs
from harness.adapters.expected import (
    FAILED,
    PASSED,
    REPRODUCED,
    SKIPPED,
    VERDICT_SKIPPED,
    ExpectedTable,
    ExpectedTableError,
    Verdict,
)
from harness.adapters.expected import load as load_table
from harness.errors import UsageError
from harness.matrix.config import RELEASED_RUNTIMES, Cell, Matrix
from harness.matrix.supervisor import CellRun
from harness.scenarios import upstream_torch_xla as upstream
from harness.scenarios.upstream_torch_xla import VariantOutcome

#: exit codes beyond the CLI's 0/1/2
EXIT_INSTALL = 3  # a release could not be installed (the others still ran)
EXIT_UNAVAILABLE = 4  # the runtime cannot be loaded by this interpreter (and no --release given)
#: what a release cell runs: the catalog, one test per scenario
CATALOG_TESTS = "suites/adapters/test_upstream_catalog.py"
RELEASE_CELL_DEVICES = upstream.CPU_DEVICES
#: runtimes ``xharness repro --runtime`` runs upstream triggers for: releases of the first are
#: installed on demand (``--release``); JAX is the one of this interpreter
UPSTREAM_RUNTIMES = (*RELEASED_RUNTIMES, "jax")
INSTALL_ID = "xharness::install"


class RuntimeUnavailable(Exception):
    """The runtime is not importable by the interpreter that would run it."""


@dataclass
class ScenarioRun:
    runtime: str
    release: str  # as imported by the variants (torch_xla.__version__)
    scenario: str
    outcome: str
    verdict: Verdict
    variants: list[VariantOutcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def machine_skip(self) -> bool:
        return self.outcome == SKIPPED and all(v.machine_skip for v in self.variants)

    def properties(self) -> dict[str, str]:
        """What the JUnit record carries (and the dashboard's release table reads)."""
        return {
            "runtime": self.runtime,
            "release": self.release,
            "scenario": self.scenario,
            "expected": self.verdict.expected or "(no row)",
            "actual": self.outcome,
            "verdict": self.verdict.verdict,
            "reason": self.verdict.reason,
            "variants": "; ".join(
                f"{v.variant}: {v.outcome}" + (f" ({v.signature})" if v.signature else "")
                for v in self.variants
            ),
            "repro": f"xharness repro {self.scenario} --runtime {self.runtime} --release {self.release}",
        }

    def message(self) -> str:
        """The verdict and what each variant saw, for a failed record and the terminal."""
        lines = [f"{self.verdict.verdict}: {self.verdict.reason}"]
        for v in self.variants:
            lines.append(f"  {v.variant}: {v.outcome}" + (f" - {v.error}" if v.error else ""))
        return "\n".join(lines)

    def details(self) -> str:
        """Tracebacks and crash tails of the variants that did not pass, with their commands."""
        parts = []
        for v in self.variants:
            if v.outcome in (PASSED, SKIPPED) and not v.details:
                continue
            parts.append(f"--- {v.variant}: {v.outcome}\n$ {v.command}\n{v.details}".rstrip())
        return "\n\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "release": self.release,
            "scenario": self.scenario,
            "outcome": self.outcome,
            "expected": self.verdict.expected,
            "verdict": self.verdict.verdict,
            "reason": self.verdict.reason,
            "machine_skip": self.machine_skip,
            "seconds": self.seconds,
            "variants": [v.to_json() for v in self.variants],
        }


def aggregate(variants: list[VariantOutcome]) -> str:
    outcomes = {v.outcome for v in variants}
    for outcome in (FAILED, REPRODUCED, PASSED):
        if outcome in outcomes:
            return outcome
    return SKIPPED


def run_scenario(
    scenario: str,
    python: str | None = None,
    table: ExpectedTable | None = None,
    timeout: float = upstream.DEFAULT_TIMEOUT,
    runtime: str = "torch_xla",
) -> ScenarioRun:
    """Every variant of ``scenario`` in a fresh process of ``python``, judged. A catalog
    scenario nobody has written a reproducer for yet is skipped, saying so."""
    started = time.monotonic()
    if not upstream.reproducers(scenario, runtime):
        verdict = Verdict(VERDICT_SKIPPED, None, SKIPPED,
                          f"no {runtime} reproducer of {scenario} yet (harness/scenarios/upstream_{runtime}.py)")
        return ScenarioRun(runtime, "", scenario, SKIPPED, verdict, [], 0.0)
    variants = [upstream.run_variant(r, python, timeout) for r in upstream.reproducers(scenario, runtime)]
    outcome = aggregate(variants)
    release = next((v.release for v in variants if v.release), "")
    machine_skip = outcome == SKIPPED and all(v.machine_skip for v in variants)
    table = table or load_table()
    if release:
        verdict = table.judge(runtime, release, scenario, outcome, machine_skip)
    else:  # no variant said which release it ran: nothing to compare with
        from harness.adapters.expected import judge

        verdict = judge(None, outcome, machine_skip)
    return ScenarioRun(runtime, release, scenario, outcome, verdict, variants,
                       round(time.monotonic() - started, 3))


def importable_here(module: str = "torch_xla", python: str | None = None) -> bool:
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        return importlib.util.find_spec(module) is not None
    import subprocess

    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def python_for(runtime: str, release: str | None, progress: Any = None) -> str:
    """The interpreter that runs ``runtime``: ``release``'s environment (built or reused), or
    this one when no release is named (then the runtime must be importable here)."""
    if release:
        return str(envs.ensure_env(runtime, release, progress=progress).python)
    if not importable_here(runtime):
        raise RuntimeUnavailable(
            f"{runtime} is not importable by {sys.executable}; name a release (--release "
            f"2.9.0) to run it in that release's own cached environment, or install it here"
        )
    return sys.executable


def _say(message: str) -> None:
    print(f"xharness: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ repro
def repro(args: argparse.Namespace) -> int:
    """``xharness repro SCENARIO --runtime torch_xla [--release V] [--json]``."""
    from harness.scenarios import registry

    try:
        registry.get(args.scenario)
    except registry.UnknownScenario as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "inject", False):
        raise UsageError(
            f"--inject turns a fault switch on, and runtime {args.runtime} has none: against a "
            "real runtime the upstream trigger runs as written (drop --inject)"
        )
    if args.runtime not in UPSTREAM_RUNTIMES:
        raise UsageError(f"runtime {args.runtime!r} has no upstream reproducers here")
    if args.release and args.runtime not in RELEASED_RUNTIMES:
        raise UsageError(
            f"--release installs a release of {', '.join(RELEASED_RUNTIMES)}; runtime "
            f"{args.runtime} under test is the one this interpreter imports (drop --release)"
        )
    if not upstream.reproducers(args.scenario, args.runtime):
        raise UsageError(f"scenario {args.scenario!r} has no {args.runtime} reproducer")
    try:
        table = load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    try:
        python = python_for(args.runtime, args.release, progress=_say)
    except envs.ReleaseInstallError as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_INSTALL
    except RuntimeUnavailable as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    run = run_scenario(args.scenario, python, table, timeout=args.timeout, runtime=args.runtime)
    replay = f"xharness repro {args.scenario} --runtime {args.runtime}"
    if args.release:
        replay += f" --release {args.release}"
    if args.json:
        print(json.dumps({**run.to_json(), "python": python, "repro": replay}))
    else:
        release = run.release or "(unknown release)"
        expected = run.verdict.expected or "no row"
        print(f"{run.scenario} [{run.runtime} {release}] {run.outcome} "
              f"(expected: {expected}) -> {run.verdict.verdict} ({run.seconds:.1f} s)")
        print(f"  {run.verdict.reason}")
        for v in run.variants:
            seen = f" [{v.signature}]" if v.signature else ""
            print(f"  {v.variant}: {v.outcome}{seen}" + (f" - {v.error}" if v.error else ""))
        if not run.verdict.green:
            details = run.details()
            if details:
                print(details, file=sys.stderr)
        print(f"replay: {replay}")
    return 0 if run.verdict.green else 1


# ------------------------------------------------------------------------------ cells
class ReleaseCellRun(CellRun):
    """A supervised cell whose pytest runs in another interpreter (a release's environment)."""

    def __init__(self, cell: Cell, settings: Any, progress: Any, python: str) -> None:
        super().__init__(cell, settings, progress)
        self.python = python

    def _argv(self, events: Path, stack: Path, select_file: Path | None) -> list[str]:
        rest = super()._argv(events, stack, select_file)[3:]  # after "python -m pytest"
        if rest[:2] == ["-p", "harness.plugin"]:  # decided for this interpreter, not that one
            rest = rest[2:]
        plugin = [] if _autoloads_plugin(self.python) else ["-p", "harness.plugin"]
        return [self.python, "-m", "pytest", *plugin, *rest]

    def _finalize(self, record: Any) -> Any:
        record = super()._finalize(record)
        if self.cell.release:
            record.properties.setdefault("release", self.cell.release)
        return record


_AUTOLOAD: dict[str, bool] = {}


def _autoloads_plugin(python: str) -> bool:
    """Whether ``python``'s pytest loads the harness plugin by itself (its entry point)."""
    if python not in _AUTOLOAD:
        import subprocess

        code = ("import importlib.metadata as m, sys; sys.exit(not any(e.value.startswith("
                "'harness.plugin') for e in m.entry_points(group='pytest11')))")
        _AUTOLOAD[python] = subprocess.run([python, "-c", code], capture_output=True).returncode == 0
    return _AUTOLOAD[python]


def release_cell(runtime: str, release: str, timeout: float) -> Cell:
    return Cell(
        name=f"{runtime}-{release}",
        backend="cpu",
        devices=RELEASE_CELL_DEVICES,
        paths=(CATALOG_TESTS,),
        timeout=timeout,
        description=f"the catalog against {runtime} {release}",
        runtime_name=runtime,
        release=release,
    )


def install_error_record(cell: Cell, error: envs.ReleaseInstallError) -> Any:
    from harness.report.records import ERROR, KIND_EXIT, Attempt, TestRecord

    record = TestRecord(nodeid=INSTALL_ID, cell=cell.name, file="harness/adapters/envs.py")
    record.attempts.append(Attempt(
        ERROR, kind=KIND_EXIT, message=f"cannot install {error.runtime} {error.release}: {error.reason}",
        details=error.output[-20_000:],
    ))
    record.properties = {
        "cell": cell.name, "runtime": error.runtime, "release": error.release,
        "verdict": "not-installed",
        "repro": f"xharness releases {error.runtime} {error.release}",
    }
    return record


# ------------------------------------------------------------------------------ releases
def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "releases",
        help="run the catalog against releases of a runtime, one cached environment each",
        description="For each release: build (or reuse) its virtual environment, run the "
        "catalog there as the supervised cell RUNTIME-RELEASE (JUnit in OUT/junit/), and judge "
        "each scenario against the expected-outcomes table. Exit 0: every verdict as expected "
        "(or skipped); 1: some verdict is not; 2: usage error; 3: a release could not be "
        "installed (the others still ran).",
    )
    p.add_argument("runtime", choices=RELEASED_RUNTIMES, help="runtime under test")
    p.add_argument("versions", nargs="+", metavar="VERSION", help="releases, e.g. 2.5.1 2.9.0")
    p.add_argument("--out", type=Path, default=Path("reports"), help="output directory (default: reports)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="per-scenario time limit in seconds (default 900)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.set_defaults(handler=releases_command)


def releases_command(args: argparse.Namespace) -> int:
    from harness.matrix.commands import _interrupt
    from harness.matrix.progress import Progress
    from harness.matrix.supervisor import CellResult, RunSettings
    from harness.report.api import finish_run
    from harness.report.junit import write_cell_xml

    versions = list(dict.fromkeys(args.versions))
    bad = [v for v in versions if not _looks_like_release(v)]
    if bad:
        raise UsageError(f"not a release version: {bad[0]!r} (like 2.9.0)")
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    try:
        load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    root = envs.project_root()
    out: Path = args.out
    junit_dir = out / "junit"
    junit_dir.mkdir(parents=True, exist_ok=True)
    for stale in junit_dir.glob("*.xml"):  # this run's directory describes this run only
        stale.unlink()
    matrix = Matrix(path=root / "harness/scenarios/expected.toml", root=root, cells={})
    started = time.monotonic()
    releases: list[dict[str, Any]] = []
    previous = signal.signal(signal.SIGTERM, _interrupt)
    interrupted = False
    try:
        for version in versions:
            cell = release_cell(args.runtime, version, args.timeout)
            entry: dict[str, Any] = {"release": version, "cell": cell.name,
                                     "junit": str(junit_dir / f"{cell.name}.xml")}
            t0 = time.monotonic()
            try:
                env = envs.ensure_env(args.runtime, version, progress=_say)
            except envs.ReleaseInstallError as exc:
                _say(f"error: {exc}")
                entry.update(error=str(exc).splitlines()[0], installed=False)
                records = [install_error_record(cell, exc)]
                write_cell_xml(cell.name, records, junit_dir / f"{cell.name}.xml")
                entry.update(rows=_rows(records), seconds=round(time.monotonic() - t0, 1))
                releases.append(entry)
                continue
            entry.update(installed=True, env=str(env.path), env_built=env.built,
                         env_seconds=round(env.seconds, 1))
            settings = RunSettings(matrix=matrix, out_dir=out, runtime=args.runtime,
                                   repro_prefix=f"xharness releases {args.runtime} {version}")
            progress = Progress(1)
            progress.cell_started(cell.name, f"{args.runtime} {version} in {env.path}")
            result: CellResult = ReleaseCellRun(cell, settings, progress, str(env.python)).run()
            progress.cell_finished(cell.name, f"{len(result.records)} record(s) in {result.wall:.1f}s")
            write_cell_xml(cell.name, result.records, junit_dir / f"{cell.name}.xml")
            entry.update(rows=_rows(result.records), seconds=round(time.monotonic() - t0, 1))
            releases.append(entry)
            if result.interrupted:
                interrupted = True
                break
    finally:
        signal.signal(signal.SIGTERM, previous)
    finish_run(out)
    wall = round(time.monotonic() - started, 1)
    code = _exit_code(releases)
    if interrupted:
        code = 130
    if args.json:
        print(json.dumps({"runtime": args.runtime, "releases": releases, "wall": wall,
                          "out": str(out), "exit_code": code}, indent=2))
    else:
        print(render_table(args.runtime, releases))
        print(f"total {wall:.1f} s; JUnit per release in {junit_dir}/, dashboard {out / 'index.html'}")
    return code


def _looks_like_release(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


def _rows(records: list[Any]) -> list[dict[str, str]]:
    """One row per record: the catalog's properties, or the record's own classification when
    the test never got to judge (a crash of the cell's pytest, an install error)."""
    rows = []
    for record in records:
        props = record.properties
        verdict = props.get("verdict") or record.classification
        if record.classification in ("error", "failed") and "verdict" not in props:
            verdict = record.classification
        rows.append({
            "scenario": props.get("scenario") or record.nodeid,
            "release": props.get("release", ""),
            "expected": props.get("expected", "-"),
            "actual": props.get("actual", record.classification),
            "verdict": verdict,
            "message": next(iter((record.final.message or "").splitlines()), "")
            if record.attempts else "",
        })
    return rows


def _exit_code(releases: list[dict[str, Any]]) -> int:
    from harness.adapters.expected import GREEN

    if any(not r.get("installed", True) for r in releases):
        return EXIT_INSTALL
    bad = any(row["verdict"] not in GREEN for r in releases for row in r.get("rows", []))
    return 1 if bad else 0


def render_table(runtime: str, releases: list[dict[str, Any]]) -> str:
    """The release x scenario table: expected and actual outcome, and the verdict."""
    header = ("release", "scenario", "expected", "actual", "verdict")
    lines: list[tuple[str, ...]] = []
    notes = []
    for entry in releases:
        if not entry.get("installed", True):
            notes.append(f"{runtime} {entry['release']}: NOT INSTALLED: {entry.get('error', '')}")
        else:
            how = "built" if entry.get("env_built") else "reused"
            notes.append(f"{runtime} {entry['release']}: environment {how} "
                         f"({entry.get('env_seconds', 0):.0f} s), catalog run "
                         f"{entry.get('seconds', 0) - entry.get('env_seconds', 0):.0f} s")
        for row in entry.get("rows", []):
            lines.append((entry["release"], row["scenario"], row["expected"], row["actual"],
                          row["verdict"]))
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h)
              for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    text = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths))]
    text += [fmt.format(*row).rstrip() for row in lines]
    return "\n".join([*text, "", *notes])
