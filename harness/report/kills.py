"""The mutation score as report records: one test case per runtime mutant, and its kill table.

``ci/mutants.py --junit FILE`` writes each mutant as a test case of the cell ``mutants``: passed
when the suites killed it, failed when it survived (a hole in the checks), errored when it could
not be judged (stale patch, timeout, a broken run). The case carries the mutant's category, the
upstream bug it is a cousin of and the test that killed it as properties, so the file goes
through ``xharness report html`` like any cell's and the dashboard draws the kill table from it.
Keeping the score in the records the rest of the report already reads means no second file
format, and a surviving mutant is a red test in every JUnit reader a team already has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from harness.report.properties import (
    PROP_CATEGORY,
    PROP_COUSIN,
    PROP_KILLER,
    PROP_MUTANT,
    PROP_RESULT,
)
from harness.report.records import ERROR, FAILED, PASSED, Attempt, TestRecord

MUTANT_CELL = "mutants"
KILLED, SURVIVED = "killed", "survived"
_MUTANTS_FILE = "suites/properties/mutants"


def mutant_record(outcome: Mapping[str, Any]) -> TestRecord:
    """The record of one judged mutant (a ``ci/mutants.py`` outcome: mutant, category, result,
    killer, seconds, detail, title, cousin)."""
    result = str(outcome["result"])
    name = str(outcome["mutant"])
    seconds = float(outcome.get("seconds") or 0.0)
    killer = str(outcome.get("killer") or "")
    if result == KILLED:
        attempt = Attempt(PASSED, seconds)
    elif result == SURVIVED:
        attempt = Attempt(
            FAILED,
            seconds,
            message=f"mutant {name} survived: no test failed on it ({outcome.get('title') or 'see its patch'})",
            details="A surviving mutant is a bug the suites cannot see: add or strengthen a check "
            f"until it fails on {_MUTANTS_FILE}/{name}.patch.",
        )
    else:
        attempt = Attempt(
            ERROR,
            seconds,
            message=f"mutant {name} could not be judged: {result}",
            details=str(outcome.get("detail") or ""),
            kind="exception",
        )
    return TestRecord(
        nodeid=f"{_MUTANTS_FILE}/{name}.patch",
        cell=MUTANT_CELL,
        file=f"{_MUTANTS_FILE}/{name}.patch",
        attempts=[attempt],
        properties={
            PROP_MUTANT: name,
            PROP_CATEGORY: str(outcome.get("category") or ""),
            PROP_COUSIN: str(outcome.get("cousin") or ""),
            PROP_RESULT: result,
            PROP_KILLER: killer,
        },
    )


def render_kill_table(records: Sequence[TestRecord], colors: Mapping[str, str]) -> str:
    """The dashboard's kill table: each mutant, its category, whether it was killed and by which
    test; empty when the report holds no mutant records. ``colors`` maps an outcome (passed,
    failed, error) to the dashboard's color for it, so a survivor is as red as a failed test."""
    mutants = sorted((r for r in records if r.properties.get(PROP_MUTANT)), key=lambda r: r.properties[PROP_MUTANT])
    if not mutants:
        return ""
    killed = sum(r.properties.get(PROP_RESULT) == KILLED for r in mutants)
    rows = []
    for record in mutants:
        props = record.properties
        result = props.get(PROP_RESULT, "?")
        outcome = PASSED if result == KILLED else FAILED if result == SURVIVED else ERROR
        color = colors.get(outcome, "#888")
        killer = escape(props.get(PROP_KILLER, "") or "-")
        rows.append(
            f"<tr><td><code>{escape(props[PROP_MUTANT])}</code></td>"
            f"<td>{escape(props.get(PROP_CATEGORY, ''))}</td><td>{escape(props.get(PROP_COUSIN, ''))}</td>"
            f'<td style="background:{color};color:#fff"><b>{escape(result)}</b></td>'
            f"<td><code>{killer}</code></td></tr>"
        )
    return (
        f"<h2>Mutation score: {killed} of {len(mutants)} runtime mutants killed</h2>"
        "<p>Each mutant is a realistic runtime bug nobody planted as a fault switch "
        f"(<code>{_MUTANTS_FILE}/</code>); a survivor is a bug the suites cannot see.</p>"
        '<table id="mutants"><tr><th>mutant</th><th>category</th><th>cousin of</th><th>result</th>'
        f"<th>killing test</th></tr>{''.join(rows)}</table>"
    )
