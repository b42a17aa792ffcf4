"""The catalog against real runtime releases: one scenario (``xharness repro --runtime
torch_xla|jax``), or every scenario against each of several releases (``xharness releases``).

A scenario's outcome is its variants' (``harness.scenarios.upstream_torch_xla``): ``failed`` if
any broke in a way that is not the bug, else ``reproduced`` if any showed the bug's signature,
else ``passed`` if any ran, else ``skipped``. The outcome is then judged against the expected
table (``harness.adapters.expected``) for the release the variants actually imported, which is
not always the one asked for.

``releases`` gives each release its own cached environment (``harness.adapters.envs``) and runs
the catalog there as a supervised matrix cell named ``<runtime>-<release>``, so an abort in the
release is a record, and each release gets its own JUnit file. A JAX release is more than its
catalog: the reference runtime rides on JAX, so its environment also runs the harness's own suites
(``<runtime>-<release>-suites``, the reference runtime on that JAX) and the invariants with JAX as
the runtime under test (``<runtime>-<release>-invariants``), each a supervised cell of its own. A
release that cannot be installed is reported (an error record in its JUnit file and a row in the
table) and the others still run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.adapters import envs, interpreters, release_spec
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
from harness.adapters.release_spec import ReleaseSpec, ReleaseSpecError
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
#: the invariants, with the released runtime as the runtime under test
INVARIANT_TESTS = "suites/properties/test_invariants.py"
#: the harness's own suites in a JAX release's environment: the reference runtime rides on that
#: JAX, so these are the compatibility check. The report selftests are left out: JUnit, merging
#: and the dashboard never touch JAX, and they run once in the test job.
SUITE_PATHS = ("suites/selftest", "suites/regression", "suites/properties", "suites/models")
SUITE_ARGS = ("--ignore=suites/selftest/report",)
#: the suites and invariants run as the matrix's cpu-8 cell does: 8 CPU devices, the runtime
#: options at their defaults, its per-test limit
SUITE_DEVICES = 8
SUITE_TIMEOUT = 300.0
CATALOG, SUITES, INVARIANTS = "catalog", "suites", "invariants"
#: what each release of a runtime is checked with, one supervised cell each, in this order (the
#: quick ones first). PyTorch/XLA's suites and invariants run from ci/releases.sh.
RELEASE_CHECKS: dict[str, tuple[str, ...]] = {
    "torch_xla": (CATALOG,),
    "jax": (CATALOG, INVARIANTS, SUITES),
}
#: a release of each runtime, for messages
EXAMPLE_RELEASE = {"torch_xla": "2.9.0", "jax": "0.10.2"}
#: runtimes ``xharness repro --runtime`` runs upstream triggers for; without ``--release`` each
#: runs on the one this interpreter imports
UPSTREAM_RUNTIMES = tuple(dict.fromkeys((*RELEASED_RUNTIMES, "jax")))
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
    backend = next((v.backend for v in variants if v.backend), "") or "cpu"
    if release:
        verdict = table.judge(runtime, release, scenario, outcome, machine_skip, backend=backend)
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


def python_for(runtime: str, release: ReleaseSpec | None, progress: Any = None) -> str:
    """The interpreter that runs ``runtime``: ``release``'s environment (built or reused; this
    one for ``installed``), or this one when no release is named (then the runtime must be
    importable here)."""
    if release is not None:
        return str(release_spec.ensure(release, progress=progress).python)
    if not importable_here(runtime):
        raise RuntimeUnavailable(
            f"{runtime} is not importable by {sys.executable}; name a release (--release "
            f"{EXAMPLE_RELEASE.get(runtime, '1.0')}) to run it in that release's own cached "
            "environment, or install it here"
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
    spec = parse_release(args.runtime, args.release) if args.release else None
    if spec is not None:
        interpreters.apply_argument(getattr(args, "python", None))
    if not upstream.reproducers(args.scenario, args.runtime):
        raise UsageError(f"scenario {args.scenario!r} has no {args.runtime} reproducer")
    try:
        table = load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    try:
        python = python_for(args.runtime, spec, progress=_say)
    except envs.ReleaseInstallError as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_INSTALL
    except RuntimeUnavailable as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    run = run_scenario(args.scenario, python, table, timeout=args.timeout, runtime=args.runtime)
    replay = f"xharness repro {args.scenario} --runtime {args.runtime}"
    if spec is not None:
        replay += f" --release {shlex.quote(spec.text)}"
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
    """A supervised cell whose pytest runs in another interpreter (a release's environment).

    Its records say which release they belong to (``release``) and, in a ``releases`` run, which
    runtime was released and which of its checks the cell is (``release-runtime``,
    ``release-check``), so that the report can group them without knowing the cells' names."""

    def __init__(self, cell: Cell, settings: Any, progress: Any, python: str,
                 released: str | None = None, check: str | None = None) -> None:
        super().__init__(cell, settings, progress)
        self.python = python
        self.released = released or (cell.runtime_name if cell.runtime_name in RELEASED_RUNTIMES else None)
        self.check = check

    def _argv(self, events: Path, stack: Path, select_file: Path | None) -> list[str]:
        rest = super()._argv(events, stack, select_file)[3:]  # after "python -m pytest"
        if rest[:2] == ["-p", "harness.plugin"]:  # decided for this interpreter, not that one
            rest = rest[2:]
        plugin = [] if _autoloads_plugin(self.python) else ["-p", "harness.plugin"]
        return [self.python, "-m", "pytest", *plugin, *rest]

    def _finalize(self, record: Any) -> Any:
        if self.check is not None and "repro" not in record.properties:
            record.properties["repro"] = self._repro(record)
        record = super()._finalize(record)
        extra = {"release": self.cell.release, "release-runtime": self.released,
                 "release-check": self.check}
        for key, value in extra.items():
            if value:
                record.properties.setdefault(key, value)
        return record

    def _repro(self, record: Any) -> str:
        """The command that reruns one test of a ``releases`` cell as the cell ran it: that
        environment's pytest with the cell's device count and runtime (``xharness run`` has no
        cell of that name to rerun)."""
        env = self.cell.environment(self.settings.runtime)
        keep = ("HARNESS_RUNTIME", "JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES", "PJRT_DEVICE",
                "CPU_NUM_DEVICES")
        prefix = " ".join(f"{k}={env[k]}" for k in keep if k in env)
        if record.nodeid in self.items:
            target = shlex.quote(record.nodeid)
        else:  # a record of the cell as a whole: the whole cell again
            target = shlex.join([*self.cell.paths, *self.cell.pytest_args])
        return f"{prefix} {self.python} -m pytest {target}"


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
    """The catalog cell of a release: every scenario's upstream trigger, judged."""
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


@dataclass(frozen=True)
class ReleaseCheck:
    """One supervised cell of a release: which check it is, and the cell that runs it (its
    ``runtime_name`` is the runtime under test inside: the reference runtime for the suites)."""

    kind: str
    cell: Cell

    @property
    def under_test(self) -> str:
        return self.cell.runtime_name or "reference"


def release_checks(runtime: str, release: str, timeout: float) -> list[ReleaseCheck]:
    """The cells ``xharness releases`` runs for one release (``RELEASE_CHECKS``)."""
    checks: list[ReleaseCheck] = []
    for kind in RELEASE_CHECKS.get(runtime, (CATALOG,)):
        if kind == CATALOG:
            checks.append(ReleaseCheck(CATALOG, release_cell(runtime, release, timeout)))
        elif kind == SUITES:
            checks.append(ReleaseCheck(SUITES, _suites_cell(runtime, release)))
        else:
            checks += [ReleaseCheck(INVARIANTS, c) for c in _invariant_cells(runtime, release)]
    return checks


def _suites_cell(runtime: str, release: str) -> Cell:
    return Cell(
        name=f"{runtime}-{release}-suites",
        devices=SUITE_DEVICES,
        paths=SUITE_PATHS,
        pytest_args=SUITE_ARGS,
        timeout=SUITE_TIMEOUT,
        description=f"the harness's suites, the reference runtime on {runtime} {release}",
        runtime_name="reference",
        release=release,
    )


def _invariant_cells(runtime: str, release: str) -> list[Cell]:
    """The invariants against the release in one cell, except those whose known failure on it
    breaks the process for the tests after them (``isolated_invariants``): a cell each."""
    from harness.properties.base import isolated_invariants

    alone = isolated_invariants(runtime, release)
    tests = {invariant: f"{INVARIANT_TESTS}::test_{invariant.replace('-', '_')}" for invariant in alone}
    base = Cell(
        name=f"{runtime}-{release}-invariants",
        devices=SUITE_DEVICES,
        paths=(INVARIANT_TESTS,),
        pytest_args=tuple(f"--deselect={test}" for test in tests.values()),
        timeout=SUITE_TIMEOUT,
        description=f"the invariants against {runtime} {release}",
        runtime_name=runtime,
        release=release,
    )
    return [base] + [
        dataclasses.replace(base, name=f"{base.name}-{invariant}", paths=(test,), pytest_args=(),
                            description=f"the invariant {invariant} against {runtime} {release}, alone")
        for invariant, test in tests.items()
    ]


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
    interpreters.add_argument(p)
    p.set_defaults(handler=releases_command)


def releases_command(args: argparse.Namespace) -> int:
    from harness.matrix.interrupt import sigterm_interrupts
    from harness.report.api import finish_run

    specs = list({s.key: s for s in (parse_release(args.runtime, v) for v in args.versions)}.values())
    interpreters.apply_argument(args.python)
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    try:
        load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    out: Path = args.out
    junit_dir = out / "junit"
    junit_dir.mkdir(parents=True, exist_ok=True)
    for stale in junit_dir.glob("*.xml"):  # this run's directory describes this run only
        stale.unlink()
    started = time.monotonic()
    releases: list[dict[str, Any]] = []
    interrupted = False
    with sigterm_interrupts():
        for spec in specs:
            entry, interrupted = _run_release(args.runtime, spec, args.timeout, out)
            releases.append(entry)
            if interrupted:
                break
    finish_run(out)
    wall = round(time.monotonic() - started, 1)
    code = 130 if interrupted else _exit_code(releases)
    if args.json:
        print(json.dumps({"runtime": args.runtime, "releases": releases, "wall": wall,
                          "out": str(out), "exit_code": code}, indent=2))
    else:
        print(render_table(args.runtime, releases))
        print(f"total {wall:.1f} s; JUnit per cell in {junit_dir}/, dashboard {out / 'index.html'}")
    return code


def _run_release(runtime: str, spec: ReleaseSpec, timeout: float, out: Path) -> tuple[dict[str, Any], bool]:
    """One release: its environment, then each of its checks as a supervised cell. Returns its
    entry of the report and whether the run was interrupted (Ctrl-C or SIGTERM). A release that
    is a wheel is the cell ``<runtime>-wheel-<digest>``; one on the index keeps its version."""
    from harness.report.junit import write_cell_xml

    junit_dir = out / "junit"
    checks = release_checks(runtime, spec.key, timeout)
    catalog = checks[0].cell
    entry: dict[str, Any] = {"release": spec.label, "cell": catalog.name,
                             "junit": str(junit_dir / f"{catalog.name}.xml")}
    if spec.kind != release_spec.INDEX:
        entry["spec"] = spec.text
    t0 = time.monotonic()
    try:
        env = release_spec.ensure(spec, progress=_say)
    except envs.ReleaseInstallError as exc:
        _say(f"error: {exc}")
        records = [install_error_record(catalog, exc)]
        write_cell_xml(catalog.name, records, junit_dir / f"{catalog.name}.xml")
        entry.update(error=str(exc).splitlines()[0], installed=False, rows=_rows(records),
                     checks=[], seconds=round(time.monotonic() - t0, 1))
        return entry, False
    entry.update(installed=True, env=str(env.path), env_built=env.built,
                 env_seconds=round(env.seconds, 1), rows=[], checks=[])
    interrupted = False
    for check in checks:
        result = _run_check(runtime, shlex.quote(spec.text), check, env, out)
        write_cell_xml(check.cell.name, result.records, junit_dir / f"{check.cell.name}.xml")
        if check.kind == CATALOG:
            entry.update(rows=_rows(result.records), catalog_seconds=round(result.wall, 1))
        else:
            entry["checks"].append(check_summary(check, result.records, result.wall,
                                                 junit_dir / f"{check.cell.name}.xml"))
        if result.interrupted:
            interrupted = True
            break
    entry["seconds"] = round(time.monotonic() - t0, 1)
    return entry, interrupted


def _run_check(runtime: str, version: str, check: ReleaseCheck, env: envs.ReleaseEnv, out: Path) -> Any:
    """One check of a release as a supervised cell in the release's environment."""
    from harness.matrix.progress import Progress
    from harness.matrix.supervisor import RunSettings

    cell = check.cell
    matrix = Matrix(path=envs.project_root() / "harness/scenarios/expected.toml",
                    root=envs.project_root(), cells={})
    settings = RunSettings(matrix=matrix, out_dir=out, runtime=check.under_test,
                           repro_prefix=f"xharness releases {runtime} {version}")
    progress = Progress(1)
    progress.cell_started(cell.name, f"{check.kind}: {cell.description} in {env.path}")
    result = ReleaseCellRun(cell, settings, progress, str(env.python), released=runtime,
                            check=check.kind).run()
    progress.cell_finished(cell.name, f"{len(result.records)} record(s) in {result.wall:.1f}s")
    return result


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
                            "repro": record.properties.get("repro", "")})
    return {"check": check.kind, "cell": check.cell.name, "runtime": check.under_test,
            "junit": str(junit), "counts": {k: counts.get(k, 0) for k in CHECK_COUNTS},
            "failing": failing, "seconds": round(wall, 1)}


#: the classifications a check's counts always name (a flaky test passed on a rerun)
CHECK_COUNTS = ("passed", "failed", "error", "skipped", "flaky")


def parse_release(runtime: str, text: str) -> ReleaseSpec:
    """A release as a command names it (``harness.adapters.release_spec``); a usage error
    when it names nothing usable."""
    try:
        return release_spec.parse(runtime, text)
    except ReleaseSpecError as exc:
        raise UsageError(str(exc)) from None


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
    red = any(c["failing"] for r in releases for c in r.get("checks", []))
    return 1 if bad or red else 0


def render_table(runtime: str, releases: list[dict[str, Any]]) -> str:
    """The release x scenario table (expected and actual outcome, and the verdict), then per
    release its environment, its suites' and invariants' counts and every failing test."""
    header = ("release", "scenario", "expected", "actual", "verdict")
    lines: list[tuple[str, ...]] = []
    notes = []
    for entry in releases:
        notes += _release_notes(runtime, entry)
        for row in entry.get("rows", []):
            lines.append((entry["release"], row["scenario"], row["expected"], row["actual"],
                          row["verdict"]))
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
