"""``xharness report``: merge JUnit files, render the dashboard and the step summary.

These run in CI's merge job on the artifacts of every matrix cell, and locally on any JUnit file.
Unreadable input is a user error (exit 2) that names the file, and nothing is written then.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.errors import UsageError
from harness.exits import EXIT_OK
from harness.report.api import publish
from harness.report.junit import ReportInputError, read_records
from harness.report.merge import combine, merge_files
from harness.report.records import TestRecord


def _usage(message: str) -> Exception:
    # Imported late: harness.cli imports this module while building its parser.

    return UsageError(message)


def _merge(args: argparse.Namespace) -> int:
    try:
        report = merge_files(args.inputs, args.out)
    except ReportInputError as exc:
        raise _usage(str(exc)) from exc
    flaky = sum(1 for suite in report for case in suite if case.is_flaky)
    skipped = sum(suite.skipped or 0 for suite in report)
    print(
        f"{args.out}: {len(report)} suite(s), {report.tests} tests, {report.failures} failures, "
        f"{report.errors} errors, {skipped} skipped, {flaky} flaky"
    )
    return EXIT_OK


def _load(junit: Path) -> tuple[list[TestRecord], bytes]:
    try:
        records = combine(read_records(junit))
        return records, junit.read_bytes()
    except ReportInputError as exc:
        raise _usage(str(exc)) from exc


def _history_dir(args: argparse.Namespace) -> Path | None:
    if args.no_history:
        return None
    return args.history if args.history is not None else args.out.parent / "history"


def _not_run(text: str | None) -> list[str]:
    """``--not-run``: the cells no runner ran (``xharness cells --github``'s ``not_run``), as
    the notes at the top of the page."""
    if not text:
        return []
    try:
        cells = json.loads(text)
        if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("why"), str) for c in cells):
            raise ValueError("not a list of objects with a why")
    except ValueError as exc:
        raise _usage(f"--not-run: a JSON list of {{cell, why}} objects, as xharness cells --github "
                     f"writes it ({exc}): {text[:200]!r}") from None
    return [c["why"] for c in cells]


def _html(args: argparse.Namespace) -> int:
    records, data = _load(args.junit)
    publish(records, data, args.out, None, _history_dir(args), notes=_not_run(args.not_run))
    print(f"{args.out}: dashboard of {len(records)} test record(s)")
    return EXIT_OK


def _summary(args: argparse.Namespace) -> int:
    records, data = _load(args.junit)
    publish(records, data, None, args.out, None, notes=_not_run(args.not_run))
    print(f"{args.out}: summary of {len(records)} test record(s)")
    return EXIT_OK


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser(
        "report", help="merge JUnit files, render the dashboard and the step summary"
    )
    sub = report.add_subparsers(dest="report_command", metavar="ACTION", required=True)

    merge = sub.add_parser(
        "merge",
        help="merge JUnit files into one report (one suite per cell, reruns deduplicated)",
        description="Merge JUnit files or directories of them. The same test in several inputs "
        "becomes one test case: the last input decides, earlier failures stay as flaky/rerun "
        "elements. Exit 2, writing nothing, if any input is not readable JUnit XML.",
    )
    merge.add_argument("inputs", nargs="+", type=Path, metavar="IN", help="file or directory")
    merge.add_argument("--out", type=Path, required=True, metavar="FILE")
    merge.set_defaults(handler=_merge)

    html = sub.add_parser(
        "html",
        help="render the self-contained HTML dashboard of a JUnit file",
        description="Render a static page (no network, no scripts) with the heat map, failures, "
        "durations and the trend over past runs; this run is added to the history first "
        "(once per distinct report).",
    )
    html.add_argument("junit", type=Path, metavar="JUNIT")
    html.add_argument("--out", type=Path, required=True, metavar="FILE")
    html.add_argument(
        "--history",
        type=Path,
        default=None,
        metavar="DIR",
        help="run history for the trend (default: history/ next to --out)",
    )
    html.add_argument("--no-history", action="store_true", help="neither record nor show a trend")
    html.add_argument("--not-run", default=None, metavar="JSON", help="the cells no runner ran, as xharness cells --github writes them (not_run): "
                      "each is a note at the top of the page, with its reason")
    html.set_defaults(handler=_html)

    upstream = sub.add_parser(
        "upstream",
        help="write the issue to file upstream for a scenario on a real runtime release",
        description="Run the scenario's trigger on the release (in its own environment, as "
        "repro --runtime does) and write, as Markdown, the issue a maintainer would file: a "
        "standalone reproducer script that imports only the runtime, expected and actual "
        "results, versions, device, the releases measured and the related references.",
    )
    upstream.add_argument("scenario")
    upstream.add_argument("--runtime", required=True,
                          help="torch_xla, jax, or a plugin's runtime that registers upstream triggers")
    upstream.add_argument("--release", default=None, help="a release (its cached environment); "
                          "default: the runtime this interpreter imports")
    upstream.add_argument("--out", default=None, metavar="FILE",
                          help="default: reports/upstream/SCENARIO-RUNTIME-RELEASE.md")
    upstream.add_argument("--python", action="append", default=None, metavar="PATH",
                          help="an interpreter to build the release's environment with")
    upstream.set_defaults(handler=_upstream)

    summary = sub.add_parser(
        "summary",
        help="render the Markdown step summary (under 1 MiB) of a JUnit file",
    )
    summary.add_argument("junit", type=Path, metavar="JUNIT")
    summary.add_argument("--out", type=Path, required=True, metavar="FILE")
    summary.add_argument("--not-run", default=None, metavar="JSON", help="the cells no runner ran, as xharness cells --github writes them (not_run): "
                      "each is a note at the top of the page, with its reason")
    summary.set_defaults(handler=_summary)


def _upstream(args: argparse.Namespace) -> int:
    # the command layer: a report that runs a release's trigger is the releases room's work
    from harness.commands import plugins
    from harness.releases import catalog
    from harness.releases.upstream_report import report_command

    if args.runtime not in catalog.UPSTREAM_RUNTIMES:  # a plugin's runtime: judged like repro's
        plugins.require_loadable("xharness report upstream")
    return report_command(args)
