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
import json
import shlex
import time
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.exits import EXIT_FAILED, EXIT_INSTALL, EXIT_INTERRUPTED, EXIT_OK
from harness.matrix.config import RELEASED_RUNTIMES, Matrix
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
from harness.report.properties import CHECK_CATALOG
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
    interpreters.add_argument(p)
    p.set_defaults(handler=releases_command)


def releases_command(args: argparse.Namespace) -> int:
    from harness.matrix.interrupt import sigterm_interrupts
    from harness.report.api import finish_run

    specs = list({s.key: s for s in (release_spec.parse_argument(args.runtime, v) for v in args.versions)}.values())
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
    code = EXIT_INTERRUPTED if interrupted else exit_code(releases)
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
        env = release_spec.ensure(spec, progress=say)
    except envs.ReleaseInstallError as exc:
        say(f"error: {exc}")
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
        if check.kind == CHECK_CATALOG:
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

