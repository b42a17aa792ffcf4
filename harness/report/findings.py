"""The known findings as a table: the bugs the harness found in real runtimes, for the dashboard's
findings page and the step summary.

A finding is declared once (``harness.scenarios.known_findings.KNOWN_FINDINGS``, one entry per invariant
that finds it); here the entries of one bug become one row. What each row shows is read where it
lives: the releases from the expected-outcomes table's rows that say it reproduced, the upstream
issue from the finding, and the ready-to-file report from ``reports/upstream/`` of the harness'
own source tree (``xharness report upstream NAME`` writes it there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness.report import properties as prop
from harness.report.records import TestRecord

#: where ``xharness report upstream`` writes, relative to the source tree
UPSTREAM_REPORTS = Path("reports") / "upstream"
NOT_REPORTED = "not reported"


@dataclass(frozen=True)
class FindingRow:
    """One bug a real runtime is known to carry."""

    name: str  # the catalog scenario or the finding's own id
    runtime: str
    backend: str
    releases: str  # the release ranges measured to carry it
    found_by: tuple[str, ...]  # the invariants that find it
    scenario: str  # the catalog scenario that re-creates it, or ""
    summary: str
    upstream: str  # the upstream issue's address, or "" (not reported)
    report: str  # the report file, relative to the source tree, or ""

    @property
    def upstream_text(self) -> str:
        return self.upstream or NOT_REPORTED


def source_root() -> Path:
    """The directory that holds the harness' package (its checkout, where the reports live)."""
    import harness

    return Path(harness.__file__).resolve().parent.parent


def _project_root() -> Path:
    """The project's directory (``[tool.xharness]``'s), else the working directory."""
    from harness import project

    try:
        return project.load().root
    except project.ProjectError:
        return Path.cwd()


def report_files(name: str, runtime: str, root: Path | None = None) -> list[str]:
    """The committed reports of one finding, newest release last."""
    folder = (root or source_root()) / UPSTREAM_REPORTS
    prefix = f"{name}-{runtime}-"
    found = [p for p in folder.glob(f"{prefix}*.md") if p.is_file()] if folder.is_dir() else []
    found.sort(key=lambda p: _version(p.stem[len(prefix):]))
    return [str(UPSTREAM_REPORTS / p.name) for p in found]


def _version(text: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(text))
    except InvalidVersion:  # a report of a wheel or an installed build: before the releases
        return (0, text)


def finding_rows(root: Path | None = None) -> list[FindingRow]:
    """Every known finding, once per bug, in declaration order."""
    from harness.adapters.runtimes import RELEASED
    from harness.scenarios.known_findings import all_findings, table_of

    rows: dict[tuple[str, str, str], FindingRow] = {}  # one per bug: name, runtime, backend
    for finding in all_findings():
        table = table_of(finding.runtime)
        # a plugin's reports are its project's, written where report upstream writes them
        where = root if root is not None or finding.runtime in RELEASED else _project_root()
        key = (finding.name, finding.runtime, finding.backend)
        if key in rows:
            old = rows[key]
            rows[key] = replace(old, found_by=(*old.found_by, finding.invariant))
            continue
        ranges = table.reproduced_ranges(finding.runtime, finding.name, finding.backend) if finding.name else []
        reports = report_files(finding.name, finding.runtime, where) if finding.name else []
        rows[key] = FindingRow(
            name=finding.name,
            runtime=finding.runtime,
            backend=finding.backend,
            releases=" or ".join(ranges) or f"not measured on {finding.backend}",
            found_by=(finding.invariant,),
            scenario=finding.scenario,
            summary=finding.summary,
            upstream=finding.upstream_link,
            report=reports[-1] if reports else "",
        )
    return list(rows.values())


def tested_runtimes(records: Iterable[TestRecord]) -> set[str]:
    """The runtimes a run's records tested: a release's runtime, else the runtime under test
    (the supervisor writes it into every record of a cell). The reference runtime rides on JAX,
    which its runs therefore test too."""
    found = set()
    for record in records:
        props = record.properties
        name = props.get(prop.RELEASE_RUNTIME) or props.get(prop.RUNTIME, "").split(" ")[0]
        if name:
            found.update(("reference", "jax") if name == "reference" else (name,))
    return found


def shown_for(rows: list[FindingRow], records: Iterable[TestRecord]) -> list[FindingRow]:
    """The findings a run's dashboard and step summary list: those of the runtimes it tested. A
    project that tests its own runtime is not shown other runtimes' bugs; records that name no
    runtime (another tool's JUnit file) keep them all, since nothing says what was tested."""
    runtimes = tested_runtimes(records)
    return [r for r in rows if r.runtime in runtimes] if runtimes else rows


def markdown_table(rows: list[FindingRow] | None = None) -> str:
    """The findings as the documentation shows them (``<!-- xharness:findings -->``)."""
    lines = [
        "| finding | runtime | releases | found by | upstream | report |",
        "|---|---|---|---|---|---|",
    ]
    for f in finding_rows() if rows is None else rows:
        found = ", ".join(f"`{i}`" for i in f.found_by) + (f"; scenario `{f.scenario}`" if f.scenario else "")
        upstream = f"<{f.upstream}>" if f.upstream else f"**{NOT_REPORTED}**"
        summary = f.summary.replace("|", "\\|")
        lines.append(
            f"| `{f.name}`: {summary} | {f.runtime} ({f.backend}) | {f.releases.replace('|', '')} | "
            f"{found} | {upstream} | {f'`{f.report}`' if f.report else 'none'} |"
        )
    return "\n".join(lines)
