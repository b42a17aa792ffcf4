"""The HTML dashboard: one self-contained static page per run.

It has to open from a CI artifact or a laptop's disk with no network, so everything is inline
(CSS and SVG, no scripts at all) and a Content-Security-Policy forbids any fetch or script even if
escaping were ever missed. Every string that came from a test (names, messages, stacks,
properties) goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape

from harness.report import properties as prop
from harness.report.findings import NOT_REPORTED, FindingRow
from harness.report.heatmap import (
    EMPTY,
    NAMES,
    SEVERITY,
    WORDS,
    Grid,
    Tally,
    build_grid,
    excerpt,
    failing_attempt,
    group_of,
    message_of,
    natural_key,
    outcomes_shown,
    problems,
    repro_of,
    stack_of,
)
from harness.report.history import RunPoint
from harness.report.kills import render_kill_table
from harness.report.properties import (
    BISECT_ORDER,
    BISECT_ROLE,
    CHECK_BISECT,
    CHECK_CATALOG,
    RELEASE_CHECK,
    RELEASE_RUNTIME,
    SCENARIO_CHECKS,
)
from harness.report.records import ERROR, FAILED, FLAKY, PASSED, SKIPPED, XFAILED, TestRecord
from harness.scenarios.expected import KNOWN_BUG, shown_verdict

#: a run this large still renders; the rest is in the JUnit file
MAX_PROBLEMS_SHOWN = 300
SLOWEST_SHOWN = 15

COLORS = {
    PASSED: "#2e7d32",
    FLAKY: "#f9a825",
    FAILED: "#c62828",
    ERROR: "#6a1b9a",
    SKIPPED: "#757575",
    XFAILED: "#e65100",  # a known bug: neither the pass green nor the failure red
    EMPTY: "#eeeeee",
}
_TEXT_ON = {FLAKY: "#000", EMPTY: "#555"}
#: what the trend stacks, bottom up, each in its own colour (a known bug is neither a pass nor a skip)
TREND_OUTCOMES = (PASSED, XFAILED, FLAKY, FAILED, ERROR, SKIPPED)

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse} th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}
th{background:#f5f5f5} td.num{text-align:right;font-variant-numeric:tabular-nums}
table.heatmap td.hm{text-align:center;font-weight:600;min-width:84px}
table.heatmap td.hm a{color:inherit}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;font-size:12px}
pre{background:#f7f7f7;border:1px solid #e0e0e0;padding:8px;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;max-height:480px}
pre.repro{background:#eef5ff;border-color:#bcd}
pre.example{background:#fff8e6;border-color:#e0c98a}
article.problem{border-left:4px solid #ccc;padding:4px 12px;margin:12px 0}
.meta{color:#555} .note{background:#fff8e1;border:1px solid #f9a825;padding:8px}
.totals span{margin-right:14px}
"""


def _style(outcome: str) -> str:
    return f"background:{COLORS[outcome]};color:{_TEXT_ON.get(outcome, '#fff')}"


def _badge(outcome: str) -> str:
    word = WORDS.get(outcome, outcome)
    return f'<span class="badge {outcome}" style="{_style(outcome)}">{escape(word)}</span>'


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 120 else f"{value / 60:.1f} min"


def _totals(total: Tally) -> str:
    spans = [f"<span><b>{total.total}</b> tests</span>"]
    spans += [f"<span>{_badge(o)} {total.counts[o]}</span>" for o in outcomes_shown(SEVERITY, total.counts)]
    spans.append(f"<span>time {_seconds(total.duration)}</span>")
    return f'<p class="totals" id="totals">{"".join(spans)}</p>'


def _tally_cell(tally: Tally, where: str, body: str) -> str:
    """One heatmap cell: coloured by the tally's status, its breakdown on hover."""
    title = escape(f"{where}: {tally.breakdown()}", quote=True)
    return f'<td class="hm {tally.status}" style="{_style(tally.status)}" title="{title}">{body}</td>'


def _heatmap(grid: Grid, anchors: dict[tuple[str, str], str]) -> str:
    if not grid.cols:
        return "<p>No test results.</p>"
    head = "".join(f"<th>{escape(c)}</th>" for c in grid.cols)
    rows = []
    for row in grid.rows:
        cells = []
        for col in grid.cols:
            tally = grid.at(row, col)
            label = escape(tally.label)
            anchor = anchors.get((row, col))
            if anchor:
                label = f'<a href="#{anchor}">{label}</a>'
            cells.append(_tally_cell(tally, f"{row} on {col}", label))
        rows.append(f"<tr><th>{escape(row)}</th>{''.join(cells)}</tr>")
    totals = []
    for col in grid.cols:
        tally = grid.col_totals[col]
        counts = "<br>".join(f"{tally.counts[o]} {o}" for o in SEVERITY if tally.counts[o])
        totals.append(f'<td class="num">{counts}<br><i>{_seconds(tally.duration)}</i></td>')
    return (
        '<table class="heatmap" id="heatmap"><thead><tr><th>group \\ cell</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
        f"<tfoot><tr><th>cell totals</th>{''.join(totals)}</tr></tfoot></table>"
    )


def bar_left(index: int, count: int, left: float, right: float) -> float:
    """Where the bar of run ``index`` (of ``count``, oldest first) starts: spread by index from
    ``left`` to ``right``, the latest run at ``right`` however few runs there are, as the legend
    promises (this run on the right)."""
    if count <= 1:
        return right
    return left + index * (right - left) / (count - 1)


def _trend(history: Sequence[RunPoint]) -> str:
    """Stacked bars of the classification counts per run, oldest left, as inline SVG."""
    if not history:
        return "<p>No earlier runs recorded yet.</p>"
    width, height, pad = 820, 220, 30
    peak = max(max(sum(p.counts.values()) for p in history), 1)
    bar = min(max((width - 2 * pad) / len(history) * 0.8, 1.0), 40.0)
    shapes = []
    for i, point in enumerate(history):
        x = bar_left(i, len(history), pad, width - pad - bar)
        y = height - pad
        for outcome in TREND_OUTCOMES:
            count = point.counts.get(outcome, 0)
            if not count:
                continue
            h = (height - 2 * pad) * count / peak
            y -= h
            tip = escape(f"{point.timestamp}: {count} {outcome}", quote=True)
            shapes.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{COLORS[outcome]}"><title>{tip}</title></rect>'
            )
    axis = (
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#999"/>'
        f'<text x="{pad}" y="{pad - 8}" font-size="12">{peak} tests</text>'
        f'<text x="{pad}" y="{height - 8}" font-size="12">{escape(history[0].timestamp)}</text>'
        f'<text x="{width - pad}" y="{height - 8}" font-size="12" text-anchor="end">'
        f"{escape(history[-1].timestamp)}</text>"
    )
    legend = " ".join(f"{_badge(o)}" for o in TREND_OUTCOMES)
    rows = "".join(
        f"<tr><td>{escape(p.timestamp)}</td>"
        + "".join(f'<td class="num">{p.counts.get(o, 0)}</td>' for o in TREND_OUTCOMES)
        + f'<td class="num">{_seconds(p.duration)}</td></tr>'
        for p in reversed(history)
    )
    heads = "".join(f"<th>{escape(NAMES.get(o, o))}</th>" for o in TREND_OUTCOMES)
    return (
        f'<svg id="trend" role="img" aria-label="pass, known bug, fail and flaky counts over the '
        f'last {len(history)} runs" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg">{axis}{"".join(shapes)}</svg>'
        f'<p id="trend-legend">{legend} (oldest run on the left, this run on the right)</p>'
        "<details><summary>runs as a table</summary><table><tr><th>run</th>"
        f"{heads}<th>time</th></tr>{rows}</table></details>"
    )


def _findings(findings: Sequence[FindingRow]) -> str:
    """The findings page: every bug the harness knows a real runtime carries, where upstream
    tracks it, and the report ready to file where nobody has."""
    if not findings:
        return ""
    rows = []
    for f in findings:
        upstream = (f'<a href="{escape(f.upstream, quote=True)}">{escape(f.upstream)}</a>' if f.upstream
                    else f'<span class="badge xfailed" style="{_style(XFAILED)}">{escape(NOT_REPORTED)}</span>')
        found = ", ".join(f"<code>{escape(i)}</code>" for i in f.found_by)
        if f.scenario:
            found += f"; scenario <code>{escape(f.scenario)}</code>"
        report = f"<code>{escape(f.report)}</code>" if f.report else "none"
        rows.append(
            f'<tr><td><b>{escape(f.name)}</b><br><span class="meta">{escape(f.summary)}</span></td>'
            f"<td>{escape(f.runtime)} ({escape(f.backend)})</td><td>{escape(f.releases)}</td>"
            f"<td>{found}</td><td>{upstream}</td><td>{report}</td></tr>"
        )
    return (
        f'<h2 id="findings">Known findings ({len(findings)})</h2>'
        "<p>Bugs found in real runtimes. A test that meets one reads as a known bug, and a "
        "release that stops showing it fails as unexpectedly fixed.</p>"
        '<table id="findings-table"><tr><th>finding</th><th>runtime</th><th>releases</th>'
        f"<th>found by</th><th>upstream</th><th>report</th></tr>{''.join(rows)}</table>"
    )


def _properties_table(record: TestRecord) -> str:
    rows = "".join(
        f"<tr><th>{escape(k)}</th><td><code>{escape(v)}</code></td></tr>"
        for k, v in sorted(record.properties.items())
    )
    return f"<details><summary>properties</summary><table>{rows}</table></details>" if rows else ""


def _problem(record: TestRecord, anchor: str) -> str:
    attempt = failing_attempt(record)
    kind = attempt.kind if attempt else ""
    classification = record.classification
    meta = [
        f"group <b>{escape(group_of(record))}</b>",
        f"{len(record.attempts)} attempt(s)",
        _seconds(record.duration),
    ]
    if kind:
        meta.append(f"kind <b>{escape(kind)}</b>")
    if seed := record.properties.get(prop.SEED):
        meta.append(f"seed <code>{escape(seed)}</code>")
    location = record.file + (f":{record.line}" if record.line is not None else "")
    parts = [
        f'<article class="problem {classification}" id="{anchor}" '
        f'style="border-left-color:{COLORS[classification]}">',
        f"<h3>{_badge(classification)} <code>{escape(record.nodeid)}</code> on "
        f"<b>{escape(record.cell)}</b></h3>",
        f'<p class="meta">{" · ".join(meta)}'
        + (f" · <code>{escape(location)}</code>" if location else "")
        + "</p>",
    ]
    if attempt is not None:
        parts.append(f'<pre class="message">{escape(message_of(attempt))}</pre>')
        stack = stack_of(attempt)
        if stack:
            parts.append(
                "<details open><summary>stack (last lines)</summary>"
                f'<pre class="stack">{escape(excerpt(stack))}</pre></details>'
            )
    if classification == FLAKY:
        earlier = [a for a in record.attempts[:-1] if a.outcome in (FAILED, ERROR)]
        items = "".join(f"<li>{escape(message_of(a))}</li>" for a in earlier)
        parts.append(f"<p>Failed {len(earlier)} time(s) before passing:</p><ul>{items}</ul>")
    if example := record.properties.get(prop.HYPOTHESIS_EXAMPLE):
        blob = record.properties.get(prop.HYPOTHESIS_BLOB, "")
        parts.append(
            '<p>Shrunk counterexample (hypothesis):</p><pre class="example">'
            f"{escape(excerpt(example))}</pre>"
            + (f"<p>Blob: <code>@reproduce_failure({escape(blob)})</code></p>" if blob else "")
        )
    parts.append(f'<p>Reproduce:</p><pre class="repro">{escape(repro_of(record))}</pre>')
    parts.append(_properties_table(record))
    parts.append("</article>")
    return "".join(parts)


#: colours of the verdicts on real runtimes (``harness.scenarios.expected``)
VERDICT_COLORS = {
    "as-expected": COLORS[PASSED],
    KNOWN_BUG: COLORS[XFAILED],  # as expected, and the expectation is the bug: never a pass's green
    "skipped": COLORS[SKIPPED],
    "regressed": COLORS[FAILED],
    "unexpectedly-fixed": COLORS[FLAKY],
    "flaky": COLORS[FLAKY],  # the runs of a trigger disagreed beyond the row's rate
    "unexpected": COLORS[ERROR],
    "not-installed": COLORS[ERROR],
}




def release_of(record: TestRecord) -> str:
    """``jax 0.10.2``: the runtime released and its release, as a column of the release tables.
    The ``runtime`` property names the runtime under test, which for a release's suites is the
    reference runtime riding on it, so ``release-runtime`` comes first."""
    props = record.properties
    runtime = props.get(RELEASE_RUNTIME) or props.get(prop.RUNTIME, "").split(" ")[0]
    return f"{runtime} {props.get(prop.RELEASE, '')}".strip()


def release_check_of(record: TestRecord) -> str:
    """Which check of a release the record belongs to: ``catalog``, ``suites``, ``invariants``;
    a judged record of a run that did not say is the catalog's, anything else none's ("")."""
    props = record.properties
    if not props.get(prop.RELEASE):
        return ""
    check = props.get(RELEASE_CHECK, "")
    if not check and props.get(prop.VERDICT):
        return CHECK_CATALOG
    return check


@dataclass
class ReleaseChecks:
    """The suites' and invariants' results per release: check x release counts, and the
    records that failed or errored per release (flaky ones passed, and are in the problems)."""

    checks: list[str] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    failing: dict[str, list[TestRecord]] = field(default_factory=dict)


def release_checks(records: Sequence[TestRecord]) -> ReleaseChecks:
    """Group the records of releases' test-suite cells (every check but the catalog)."""
    found = ReleaseChecks()
    for record in records:
        check = release_check_of(record)
        if not check or check in SCENARIO_CHECKS:
            continue
        release = release_of(record)
        found.tallies.setdefault((check, release), Tally()).add(record)
        if record.classification in (FAILED, ERROR):
            found.failing.setdefault(release, []).append(record)
    found.checks = sorted({c for c, _ in found.tallies}, key=natural_key)
    found.releases = sorted({r for _, r in found.tallies}, key=natural_key)
    return found


def _release_checks(records: Sequence[TestRecord], anchors: dict[tuple[str, str], str]) -> str:
    """Check x release counts for the harness's suites and the invariants run in each release's
    environment, then every failing test per release, linked to its problem below."""
    found = release_checks(records)
    if not found.tallies:
        return ""
    head = "".join(f"<th>{escape(r)}</th>" for r in found.releases)
    body = []
    for check in found.checks:
        tds = []
        for release in found.releases:
            tally = found.tallies.get((check, release)) or Tally()
            text = f"{escape(tally.label)}<br>{escape(tally.breakdown())}"
            tds.append(_tally_cell(tally, f"{check} on {release}", text))
        body.append(f"<tr><th>{escape(check)}</th>{''.join(tds)}</tr>")
    lists = []
    for release in found.releases:
        failing = found.failing.get(release, [])
        if not failing:
            continue
        items = []
        for record in failing:
            name = escape(record.nodeid)
            anchor = anchors.get((record.cell, record.nodeid))
            link = f'<a href="#{anchor}">{name}</a>' if anchor else name
            first = next(iter(message_of(record.final).splitlines()), "") if record.attempts else ""
            items.append(f"<li>{_badge(record.classification)} <code>{link}</code> "
                         f"({escape(release_check_of(record))}): {escape(first)}</li>")
        lists.append(f"<h3>{escape(release)}: {len(failing)} failing</h3><ul>{''.join(items)}</ul>")
    return (
        "<h2>Runtime releases: the harness's suites and invariants</h2>"
        "<p>Each cell: the results of that check in the release's own environment (the suites "
        "run the reference runtime on the release; the invariants run against the release).</p>"
        f'<table class="heatmap" id="release-checks"><thead><tr><th>check \\ release</th>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
        + ("".join(lists) or "<p>No failing tests.</p>")
    )


def _releases(records: Sequence[TestRecord]) -> str:
    """Release x scenario, expected and actual outcome and the verdict, for the records of runs
    against real runtime releases (they carry ``release`` and ``verdict`` properties)."""
    judged = [r for r in records if r.properties.get(prop.VERDICT) and release_check_of(r) in SCENARIO_CHECKS]
    if not judged:
        return ""
    columns: dict[str, None] = {}
    rows: dict[str, None] = {}
    cells: dict[tuple[str, str], TestRecord] = {}
    for record in judged:
        column = release_of(record)
        row = record.properties.get(prop.SCENARIO) or record.name
        columns.setdefault(column)
        rows.setdefault(row)
        held = cells.get((row, column))
        if held is None or release_check_of(held) != CHECK_CATALOG:  # the catalog's run first
            cells[(row, column)] = record
    answers = bisect_answers(records)
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = []
    for row in rows:
        tds = []
        for column in columns:
            record = cells.get((row, column))
            if record is None:
                tds.append(f'<td class="hm" style="{_style(EMPTY)}">-</td>')
                continue
            props = record.properties
            verdict = shown_verdict(props[prop.VERDICT], props.get(prop.ACTUAL))
            color = VERDICT_COLORS.get(verdict, COLORS[ERROR])
            text = "#000" if verdict == "unexpectedly-fixed" else "#fff"
            reason = props.get(prop.REASON) or (message_of(record.final) if record.attempts else verdict)
            title = escape(f"{row} on {column}: {reason}", quote=True)
            tds.append(
                f'<td class="hm release" style="background:{color};color:{text}" title="{title}">'
                f"{escape(props.get(prop.EXPECTED, '-'))} &rarr; {escape(props.get(prop.ACTUAL, '-'))}"
                f"<br><b>{escape(verdict.replace('-', ' ') if verdict == KNOWN_BUG else verdict)}</b>"
                f"{_bisect_mark(record)}</td>"
            )
        if answers:
            tds.append(_bisect_cell(answers.get(row, [])))
        body.append(f"<tr><th>{escape(row)}</th>{''.join(tds)}</tr>")
    if answers:
        head += "<th>bisect</th>"
    return (
        "<h2>Runtimes under test: release x scenario</h2>"
        "<p>Each cell: the outcome the expected-outcomes table names &rarr; the outcome of the "
        "upstream trigger on that release, and the verdict."
        + (" A release an <code>xharness bisect</code> tried is marked with its turn in the "
           "search; the bisect column has each search's answer." if answers else "")
        + "</p>"
        f'<table class="heatmap" id="releases"><thead><tr><th>scenario \\ release</th>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def bisect_answers(records: Sequence[TestRecord]) -> dict[str, list[TestRecord]]:
    """The answer records of ``xharness bisect`` runs (they carry ``bisect-result``), by scenario."""
    found: dict[str, list[TestRecord]] = {}
    for record in records:
        if record.properties.get(prop.BISECT_RESULT):
            found.setdefault(record.properties.get(prop.SCENARIO) or record.name, []).append(record)
    return found


def _bisect_mark(record: TestRecord) -> str:
    """Under a release cell a bisect tried: its turn in the search, and its role in the answer."""
    props = record.properties
    if release_check_of(record) != CHECK_BISECT:
        return ""
    role = props.get(BISECT_ROLE, "")
    text = f"bisect #{props.get(BISECT_ORDER, '?')}" + (f": {role}" if role else "")
    return f'<br><small class="bisect">{escape(text)}</small>'


def _bisect_cell(answers: Sequence[TestRecord]) -> str:
    """The bisect column of one scenario: each search's answer, then the releases it tried in
    the order tried with their outcomes, and the command that replays the decisive run."""
    if not answers:
        return f'<td class="hm" style="{_style(EMPTY)}">-</td>'
    parts = []
    for record in answers:
        props = record.properties
        tried = [item.partition("=") for item in props.get(prop.BISECT_TRIED, "").split(";") if item]
        steps = "".join(f"<li>{escape(release)}: {escape(outcome)}</li>" for release, _, outcome in tried)
        parts.append(
            f"<b>{escape(props.get(prop.BISECT_ANSWER, ''))}</b>"
            f"<ol>{steps}</ol><code>{escape(props.get(prop.REPRO, ''))}</code>"
        )
    status = PASSED if all(r.properties.get(prop.BISECT_RESULT) == "changed" for r in answers) else FAILED
    return f'<td class="bisect" style="border-left:4px solid {COLORS[status]}">{"<hr>".join(parts)}</td>'



def _slowest(records: Sequence[TestRecord]) -> str:
    slow = sorted(records, key=lambda r: r.duration, reverse=True)[:SLOWEST_SHOWN]
    if not slow:
        return ""
    rows = "".join(
        f'<tr><td class="num">{_seconds(r.duration)}</td><td>{escape(r.cell)}</td>'
        f"<td><code>{escape(r.nodeid)}</code></td><td>{_badge(r.classification)}</td></tr>"
        for r in slow
    )
    return (
        '<table id="durations"><tr><th>time</th><th>cell</th><th>test</th><th>result</th></tr>'
        f"{rows}</table>"
    )


def render_dashboard(
    records: Sequence[TestRecord],
    history: Sequence[RunPoint] = (),
    *,
    title: str = "xharness results",
    notes: Sequence[str] = (),
    generated: datetime | None = None,
    findings: Sequence[FindingRow] = (),
) -> str:
    """The whole page as a string (the caller writes it atomically); ``findings`` are the known
    findings (``report.findings.finding_rows``), listed on their own section."""
    grid = build_grid(records)
    shown = problems(records)
    anchors: dict[tuple[str, str], str] = {}
    by_test: dict[tuple[str, str], str] = {}  # (cell, node id) -> its problem's anchor
    articles = []
    for index, record in enumerate(shown[:MAX_PROBLEMS_SHOWN]):
        anchor = f"problem-{index}"
        anchors.setdefault((group_of(record), record.cell), anchor)
        by_test.setdefault((record.cell, record.nodeid), anchor)
        articles.append(_problem(record, anchor))
    if len(shown) > MAX_PROBLEMS_SHOWN:
        articles.append(
            f'<p class="note">{len(shown) - MAX_PROBLEMS_SHOWN} more failed or flaky tests are '
            "not shown here; the merged JUnit file has them all.</p>"
        )
    when = (generated or datetime.now(UTC)).isoformat(timespec="seconds")
    note_html = "".join(f'<p class="note">{escape(n)}</p>' for n in notes)
    heading = f"{title}: {grid.total.verdict}"  # the tab's title and the page's heading
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(heading)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{escape(heading)}</h1><p class="meta">generated {escape(when)} · '
        f"{len(grid.cols)} cell(s) · {len(grid.rows)} group(s)"
        + (f' · <a href="#findings">{len(findings)} known findings</a>' if findings else "")
        + f"</p>{note_html}"
        f"{_totals(grid.total)}"
        "<h2>Heat map: group x cell</h2>"
        f"{_heatmap(grid, anchors)}"
        f"{_releases(records)}"
        f"{_release_checks(records, by_test)}"
        f"{render_kill_table(records, COLORS)}"
        "<h2>Trend</h2>"
        f"{_trend(history)}"
        f"{_findings(findings)}"
        f'<h2 id="problems">Failures and flaky tests ({len(shown)})</h2>'
        f"{''.join(articles) or '<p>None.</p>'}"
        "<h2>Slowest tests</h2>"
        f"{_slowest(records)}"
        "</body></html>\n"
    )
