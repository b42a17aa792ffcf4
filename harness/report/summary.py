"""The Markdown summary for ``$GITHUB_STEP_SUMMARY``.

GitHub rejects a step summary over 1 MiB, and a summary that fails to upload hides every result,
so this renderer works to a byte budget: totals first, the heat map within its share, then the
failures with their repro commands, each section cut at a whole row or block with a note saying
what was left out. Test output goes into code fences (longer than any backtick run inside) or is
HTML-escaped, so nothing from a test can turn into markup.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from html import escape

from harness.report import properties as prop
from harness.report.findings import NOT_REPORTED, FindingRow
from harness.report.heatmap import (
    EMPTY,
    NAMES,
    SEVERITY,
    WORDS,
    Grid,
    build_grid,
    excerpt,
    failing_attempt,
    message_of,
    natural_key,
    outcomes_shown,
    problems,
    repro_of,
    stack_of,
)
from harness.report.records import ERROR, FAILED, FLAKY, PASSED, SKIPPED, XFAILED, TestRecord

#: GitHub's limit for one step's summary
SUMMARY_LIMIT = 1024 * 1024
#: room kept for the truncation notes, which must always fit
_NOTE_RESERVE = 2048
#: share of the budget the heat map may use, so failures are never crowded out by a huge grid
_HEATMAP_SHARE = 0.45
MESSAGE_CHARS = 2000
STACK_LINES = 15
LINE_CHARS = 300

SQUARES = {ERROR: "🟪", FAILED: "🟥", FLAKY: "🟨", XFAILED: "🟧", PASSED: "🟩", SKIPPED: "⬜", EMPTY: "·"}


class _Budget:
    """Collects whole chunks while they fit in ``limit`` bytes (UTF-8)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.parts: list[str] = []

    def add(self, text: str) -> bool:
        size = len(text.encode("utf-8"))
        if self.size + size > self.limit:
            return False
        self.parts.append(text)
        self.size += size
        return True


def inline(text: str) -> str:
    """Text safe inside a Markdown table cell: no markup, no cell breaks, one line."""
    flat = " ".join(text.split())
    return escape(flat).replace("|", "&#124;")


def code(text: str) -> str:
    return f"<code>{inline(text)}</code>"


def fenced(text: str, lang: str = "") -> str:
    """A code block whose fence cannot be closed by the content."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}\n"


def _clip_lines(text: str) -> str:
    lines = excerpt(text, STACK_LINES).splitlines()
    return "\n".join(
        line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ..." for line in lines
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more chars]"


def _problem_block(record: TestRecord) -> str:
    classification = record.classification
    attempt = failing_attempt(record)
    head = (
        f"#### {SQUARES[classification]} {WORDS[classification]} {code(record.nodeid)} "
        f"on {code(record.cell)}\n\n"
    )
    meta = [f"{len(record.attempts)} attempt(s)", f"{record.duration:.2f} s"]
    if attempt is not None and attempt.kind:
        meta.append(f"kind {code(attempt.kind)}")
    if seed := record.properties.get(prop.SEED):
        meta.append(f"seed {code(seed)}")
    body = [head, " · ".join(meta) + "\n\n"]
    if attempt is not None:
        body.append(fenced(_clip(message_of(attempt), MESSAGE_CHARS)))
        stack = stack_of(attempt)
        if stack:
            body.append(
                "<details><summary>stack (last lines)</summary>\n\n"
                + fenced(_clip_lines(stack))
                + "\n</details>\n\n"
            )
    if classification == FLAKY:
        failed_before = sum(a.outcome in (FAILED, ERROR) for a in record.attempts[:-1])
        body.append(f"Passed after {failed_before} failed attempt(s).\n\n")
    body.append("Reproduce:\n\n" + fenced(_clip(repro_of(record), MESSAGE_CHARS), "sh") + "\n")
    return "".join(body)


def _releases_section(records: Sequence[TestRecord]) -> str:
    """One row per runtime release (``xharness releases``): the catalog's verdicts and each
    other check's counts (the harness's suites, the invariants). The failing tests themselves
    are in the failures below, like every other cell's."""
    from harness.report.dashboard import release_check_of, release_of
    from harness.report.properties import CHECK_CATALOG
    from harness.scenarios.expected import GREEN, KNOWN_BUG, shown_verdict

    table: dict[str, dict[str, Counter[str]]] = {}
    for record in records:
        check = release_check_of(record)
        if not check:
            continue
        key = record.classification
        if check == CHECK_CATALOG and record.properties.get(prop.VERDICT):
            key = shown_verdict(record.properties[prop.VERDICT], record.properties.get(prop.ACTUAL))
        table.setdefault(release_of(record), {}).setdefault(check, Counter())[key] += 1
    if not table:
        return ""
    checks = sorted({c for row in table.values() for c in row}, key=lambda c: (c != CHECK_CATALOG, c))
    lines = [
        "### Runtime releases\n\n| release | " + " | ".join(inline(c) for c in checks) + " |\n|"
        + "---|" * (len(checks) + 1) + "\n"
    ]
    for release in sorted(table, key=natural_key):
        cells = []
        for check in checks:
            counts = table[release].get(check, Counter())
            if not counts:
                cells.append("-")
                continue
            bad = (any(k not in (*GREEN, KNOWN_BUG) for k in counts) if check == CHECK_CATALOG
                   else bool(counts[FAILED] or counts[ERROR]))
            known = counts[KNOWN_BUG] or counts[XFAILED]
            order = {k: i for i, k in enumerate(SEVERITY)}  # most severe first, verdicts by count
            ranked = sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)), -kv[1], kv[0]))
            text = ", ".join(f"{n} {k}" for k, n in ranked)
            square = SQUARES[FAILED] if bad else SQUARES[XFAILED] if known else SQUARES[PASSED]
            cells.append(f"{square} {inline(text)}")
        lines.append(f"| {code(release)} | " + " | ".join(cells) + " |\n")
    return "".join(lines) + "\n"


def render_summary(
    records: Sequence[TestRecord],
    *,
    title: str = "xharness results",
    notes: Sequence[str] = (),
    limit: int = SUMMARY_LIMIT,
    findings: Sequence[FindingRow] = (),
) -> str:
    """The summary, guaranteed to encode to at most ``limit`` bytes; the known findings
    (``report.findings``) close it, where the budget leaves room."""
    grid = build_grid(records)
    total = grid.total
    square = {"failing": SQUARES[FAILED], "passing": SQUARES[PASSED]}.get(total.verdict, SQUARES[SKIPPED])
    verdict = f"{square} {total.verdict}"
    budget = _Budget(limit - _NOTE_RESERVE)
    counts = " · ".join(f"{NAMES.get(o, o)} **{total.counts[o]}**" for o in outcomes_shown(SEVERITY, total.counts))
    budget.add(
        f"## {inline(title)}: {verdict}\n\n**{total.total}** tests over {len(grid.cols)} "
        f"cell(s): {counts} · time {total.duration:.1f} s\n\n"
    )
    for note in notes:
        budget.add(f"> {inline(_clip(note, MESSAGE_CHARS))}\n\n")

    cut_notes: list[str] = []
    if grid.cols:
        cut_notes += _heat_map(budget, grid, budget.size + int(limit * _HEATMAP_SHARE))

    releases = _releases_section(records)
    if releases and not budget.add(releases):
        cut_notes.append("runtime releases table left out")
    cut_notes += _failures(budget, problems(records))
    if findings and not budget.add(findings_section(findings)):
        cut_notes.append("known findings table left out")
    return _finish(budget, cut_notes, limit)


def findings_section(findings: Sequence[FindingRow]) -> str:
    """Every known finding: runtime, releases, what found it, upstream, report."""
    lines = [
        f"### Known findings ({len(findings)})\n\n",
        "| finding | runtime | releases | found by | upstream | report |\n",
        "|---|---|---|---|---|---|\n",
    ]
    for f in findings:
        found = ", ".join(code(i) for i in f.found_by) + (f"; scenario {code(f.scenario)}" if f.scenario else "")
        upstream = inline(f.upstream) if f.upstream else f"{SQUARES[XFAILED]} {NOT_REPORTED}"
        lines.append(
            f"| {code(f.name)} | {inline(f.runtime)} ({inline(f.backend)}) | {inline(f.releases)} | "
            f"{found} | {upstream} | {code(f.report) if f.report else 'none'} |\n"
        )
    return "".join(lines) + "\n"


def _heat_map(budget: _Budget, grid: Grid, heat_limit: int) -> list[str]:
    """The group x cell table, as many groups as its share of the summary holds; what was cut."""
    header = (
        "### Heat map (group x cell)\n\n| group \\ cell | "
        + " | ".join(code(c) for c in grid.cols)
        + " |\n|"
        + "---|" * (len(grid.cols) + 1)
        + "\n"
    )
    totals_row = (
        "| **cell totals** | "
        + " | ".join(inline(grid.col_totals[c].breakdown()) for c in grid.cols)
        + " |\n"
    )
    shown = 0
    room = heat_limit - len(totals_row.encode())
    if budget.size + len(header.encode()) <= room:
        budget.add(header)
        for row in grid.rows:
            line = (
                f"| {inline(row)} | "
                + " | ".join(
                    f"{SQUARES[grid.at(row, c).status]} {inline(grid.at(row, c).label)}"
                    for c in grid.cols
                )
                + " |\n"
            )
            if budget.size + len(line.encode()) > room or not budget.add(line):
                break
            shown += 1
        budget.add(totals_row)
    budget.add("\n")
    return [f"heat map: {shown} of {len(grid.rows)} groups shown"] if shown < len(grid.rows) else []


def _failures(budget: _Budget, listed: Sequence[TestRecord]) -> list[str]:
    """Every failing and flaky test, as many as the summary holds; what was cut."""
    if not listed:
        return []
    budget.add(f"### Failures and flaky tests ({len(listed)})\n\n")
    shown = 0
    for record in listed:
        if not budget.add(_problem_block(record)):
            break
        shown += 1
    return [f"failures: {shown} of {len(listed)} shown"] if shown < len(listed) else []


def _finish(budget: _Budget, cut_notes: list[str], limit: int) -> str:
    """The summary's text with a note of what was cut, never over ``limit`` bytes."""
    text = "".join(budget.parts)
    if cut_notes:
        text += (
            "\n> **Truncated** to stay under GitHub's 1 MiB step-summary limit ("
            + "; ".join(cut_notes)
            + "). The dashboard artifact and the merged JUnit file have every result.\n"
        )
    data = text.encode("utf-8")
    if len(data) > limit:  # cannot happen with the reserve above; kept as a hard guarantee
        text = data[: limit - 64].decode("utf-8", "ignore") + "\n\n> **Truncated.**\n"
    return text
