"""Expected outcomes of the catalog against real runtimes, and the verdict on an actual outcome.

Against a real runtime there is no fault switch: the upstream trigger runs as written upstream and
either shows the bug's signature (``reproduced``), runs clean (``passed``), breaks some other way
(``failed``) or cannot run here (``skipped``). Whether that is good news depends on the release,
so what each release is expected to do is data (``harness/scenarios/expected.toml``), not code:
a row names a runtime, a release range (a PEP 440 specifier set such as ``<2.6``), a scenario, the
backend it was measured on, and the outcome. A result that differs from its row is what fails a
CI run:

``as-expected``         the outcome is the row's;
``regressed``           the row says ``passed`` (the bug was fixed) and the trigger reproduced it
                        or broke: the release went backwards;
``unexpectedly-fixed``  the row says ``reproduced`` and the trigger ran clean: good news that the
                        table must learn, so it is still a failure until the row is updated;
``unexpected``          any other difference, including an outcome for which no row exists (a
                        real runtime's result means nothing until someone says what to expect);
``skipped``             the run could not happen here. A skip because *this machine* lacks
                        something (a multi-slice TPU) is never held against a release. A skip
                        because *the release* lacks something (an API that did not exist yet) is
                        compared with the table like any outcome: ``as-expected`` when the row
                        says ``skipped`` or there is no row, ``unexpected`` when the row expected
                        the trigger to run.

Only ``as-expected`` and ``skipped`` leave CI green.

What a release does can depend on the backend: ``host-aliasing`` is aliasing on the CPU and a race
with the transfer on a GPU, with different triggers and possibly different outcomes. So a row
names its ``backend`` (``cpu``, ``gpu``, ``tpu``, as ``jax.default_backend()`` spells them), and a
row without one means ``cpu``, never "any": rows state what was measured, every row so far was
measured on a CPU, and a GPU result nobody measured must read ``unexpected`` until someone runs it
there and adds its row. Two rows may not cover one release of one scenario on one backend.

A row's ``scenario`` is a catalog id, or the id of a known finding that no catalog scenario
re-creates but that has upstream reproducers of its own (``upstream_findings.FINDING_REPRODUCERS``):
the table is where every measured outcome lives, and a known finding's releases are read from it
(``carries``), so a finding that stops reproducing is ``unexpectedly-fixed`` like any scenario.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.adapters.runtimes import RELEASED
from harness.backends import Backend
from harness.scenarios.base import BACKENDS

REPRODUCED, PASSED, FAILED, SKIPPED = "reproduced", "passed", "failed", "skipped"
OUTCOMES = (REPRODUCED, PASSED, FAILED, SKIPPED)
#: an outcome that differed between the runs of one trigger (a race or a crash run several times,
#: each in a fresh process): never a row's outcome, and never judged as one run's outcome
FLAKY = "flaky"
AS_EXPECTED, REGRESSED, UNEXPECTEDLY_FIXED, UNEXPECTED = (
    "as-expected",
    "regressed",
    "unexpectedly-fixed",
    "unexpected",
)
VERDICT_SKIPPED = "skipped"
#: the runs disagreed, beyond what the row's rate allows: reported with the counts, never as a
#: one-run verdict such as ``unexpectedly-fixed``
VERDICT_FLAKY = "flaky"
VERDICTS = (AS_EXPECTED, REGRESSED, UNEXPECTEDLY_FIXED, UNEXPECTED, VERDICT_SKIPPED, VERDICT_FLAKY)
GREEN = (AS_EXPECTED, VERDICT_SKIPPED)
#: how a report shows an ``as-expected`` verdict whose outcome is the bug itself: the release
#: carries a known bug. Green for CI (the table says so), and never drawn as a pass
KNOWN_BUG = "known-bug"


def shown_verdict(verdict: str, actual: str | None) -> str:
    """The verdict a report shows: :data:`KNOWN_BUG` for a bug that reproduced as expected."""
    return KNOWN_BUG if verdict == AS_EXPECTED and actual == REPRODUCED else verdict
#: the harness' own runtimes a row may name (the reference runtime is judged by its fault switches
#: instead); a project's table may name its plugins' runtimes too (``runtimes()``)
REAL_RUNTIMES = tuple(sorted(RELEASED))


def runtimes() -> tuple[str, ...]:
    """Every runtime a row may name: the harness' real runtimes and every registered plugin's
    (a plugin's runtime is judged by its version, as a release is)."""
    from harness import adapters

    return tuple(dict.fromkeys([*REAL_RUNTIMES, *(n for n in adapters.names() if n != "reference")]))

#: the backend of a row that names none, and of a run whose caller names none
DEFAULT_BACKEND = Backend.CPU

_ROW_KEYS = {"runtime", "releases", "scenario", "outcome", "why", "backend", "at_least"}
_REQUIRED = ("runtime", "releases", "scenario", "outcome")


class ExpectedTableError(Exception):
    """A malformed expected-outcomes file; the message names the file, line and field."""


@dataclass(frozen=True)
class Expectation:
    runtime: str
    releases: SpecifierSet
    scenario: str
    outcome: str
    why: str = ""
    line: int | None = None
    backend: str = DEFAULT_BACKEND
    #: ``(k, n)``: the outcome shows in at least ``k`` of every ``n`` runs (a race measured so);
    #: None: in every run
    at_least: tuple[int, int] | None = None

    def rate(self) -> str:
        return f"{self.at_least[0]} of {self.at_least[1]}" if self.at_least else "every time"

    def covers(
        self, runtime: str, release: str, scenario: str, backend: str = DEFAULT_BACKEND
    ) -> bool:
        if (runtime, scenario, backend) != (self.runtime, self.scenario, self.backend):
            return False
        return self.releases.contains(public_version(release), prereleases=True)

    def describe(self) -> str:
        return f"{self.runtime} {self.releases or '(any release)'} on {self.backend}: {self.outcome}"


@dataclass(frozen=True)
class Verdict:
    verdict: str
    expected: str | None  # the row's outcome, or None without a row
    actual: str
    reason: str  # one sentence for the terminal, the JUnit message and the dashboard

    @property
    def green(self) -> bool:
        return self.verdict in GREEN


def public_version(release: str) -> Version:
    """``2.5.1+cu121`` -> ``2.5.1``: the local label names a build, not a release."""
    try:
        return Version(Version(release).public)
    except InvalidVersion:
        raise ExpectedTableError(f"not a release version: {release!r}") from None


def _range_text(releases: SpecifierSet) -> str:
    """``>=2.1,<2.2`` rather than the set's own sorted ``<2.2,>=2.1``: lower bound first."""
    parts = sorted(releases, key=lambda s: (s.operator not in (">=", ">", "==", "~="), str(s)))
    return ",".join(str(p) for p in parts) or "every release"


def default_path() -> Path:
    return Path(__file__).resolve().parents[1] / "scenarios" / "expected.toml"


@dataclass(frozen=True)
class ExpectedTable:
    path: Path
    rows: tuple[Expectation, ...]

    def lookup(
        self, runtime: str, release: str, scenario: str, backend: str = DEFAULT_BACKEND
    ) -> Expectation | None:
        """The one row for this (runtime, release, scenario, backend); two matching rows are an
        error, since the table would then say two things about one run."""
        found = [r for r in self.rows if r.covers(runtime, release, scenario, backend)]
        if len(found) > 1:
            lines = " and ".join(str(r.line) for r in found)
            raise ExpectedTableError(
                f"{self.path}: rows at lines {lines} both cover {runtime} {release} for "
                f"{scenario!r} on {backend}; narrow their release ranges"
            )
        return found[0] if found else None

    def carries(self, runtime: str, release: str, scenario: str) -> bool | None:
        """Whether ``release`` carries the bug, on any backend measured: True where a row covering
        it says reproduced, False where the rows covering it say otherwise, None where none does
        (nobody measured that release)."""
        version = public_version(release)
        rows = [r for r in self.rows if (r.runtime, r.scenario) == (runtime, scenario)
                and r.releases.contains(version, prereleases=True)]
        return any(r.outcome == REPRODUCED for r in rows) if rows else None

    def reproduced_ranges(self, runtime: str, scenario: str, backend: str = DEFAULT_BACKEND) -> list[str]:
        """The release ranges whose rows on ``backend`` say the bug reproduced (what a findings
        page shows), each as its row writes it."""
        return [_range_text(r.releases) for r in self.rows
                if (r.runtime, r.scenario, r.outcome, r.backend) == (runtime, scenario, REPRODUCED, backend)]

    def judge(
        self,
        runtime: str,
        release: str,
        scenario: str,
        actual: str,
        machine_skip: bool = False,
        backend: str = DEFAULT_BACKEND,
        counts: Mapping[str, int] | None = None,
    ) -> Verdict:
        """The verdict on a run of ``scenario`` on ``backend`` (the backend its variants ran on,
        ``jax.default_backend()`` there): judged by that backend's row only. ``counts``: how
        many runs showed each outcome, where the trigger ran several times."""
        row = self.lookup(runtime, release, scenario, backend)
        return judge(row.outcome if row else None, actual, machine_skip, row, backend, counts)


def judge(
    expected: str | None,
    actual: str,
    machine_skip: bool = False,
    row: Expectation | None = None,
    backend: str = DEFAULT_BACKEND,
    counts: Mapping[str, int] | None = None,
) -> Verdict:
    """The verdict on ``actual`` given the table's ``expected`` outcome (see the module doc);
    ``backend`` only words the reason when there is no row. A :data:`FLAKY` outcome (the runs
    of a trigger disagreed; ``counts`` says how) is as expected only when the row states a rate
    (``at_least``) that the counts meet; otherwise it is :data:`VERDICT_FLAKY` with the counts,
    never a verdict one run could have given."""
    if actual != FLAKY and actual not in OUTCOMES:
        raise ValueError(f"unknown outcome {actual!r}")
    where = f" (expected.toml line {row.line})" if row is not None and row.line else ""
    if actual == FLAKY:
        seen = dict(counts or {})
        total = sum(seen.values())
        text = ", ".join(f"{o} {n} of {total}" for o, n in sorted(seen.items(), key=lambda kv: -kv[1]))
        if row is not None and row.at_least and expected is not None and FAILED not in seen:
            k, n = row.at_least
            hits = seen.get(expected, 0)
            if hits * n >= k * total:
                return Verdict(AS_EXPECTED, expected, expected,
                               f"{expected} in {hits} of {total} runs, as expected: at least {k} of {n}{where}")
        wanted = f"{expected} {row.rate()}{where}" if row is not None and expected else "no rate"
        return Verdict(VERDICT_FLAKY, expected, FLAKY, f"the runs disagreed ({text}); the table expects {wanted}")
    if actual == SKIPPED and (machine_skip or expected is None):
        why = "this machine cannot run it" if machine_skip else "the release cannot run it"
        return Verdict(VERDICT_SKIPPED, expected, actual, why)
    if expected is None:
        if backend != DEFAULT_BACKEND:
            return Verdict(
                UNEXPECTED, None, actual,
                f"{actual}, and the table has no expected outcome for it on {backend}: once "
                f'measured there, add a row with backend = "{backend}" to expected.toml',
            )
        return Verdict(
            UNEXPECTED, None, actual,
            f"{actual}, and the table has no expected outcome for it: add a row to expected.toml",
        )
    if actual == expected:
        return Verdict(AS_EXPECTED, expected, actual, f"{actual}, as expected{where}")
    if expected == PASSED and actual in (REPRODUCED, FAILED):
        return Verdict(REGRESSED, expected, actual, f"expected passed{where}, got {actual}")
    if expected == REPRODUCED and actual == PASSED:
        return Verdict(
            UNEXPECTEDLY_FIXED, expected, actual,
            f"expected the bug to reproduce{where}, but it passed: update the table",
        )
    return Verdict(UNEXPECTED, expected, actual, f"expected {expected}{where}, got {actual}")


def actual_outcome(outcome: str, signatures: set[str], variants: list[Mapping[str, object]]) -> str:
    """What a fixed run of a runtime as installed *did*, in the table's words: it ran clean
    (:data:`PASSED`), every variant that ran failed with one of the scenario's ``signatures``
    (:data:`REPRODUCED`: the bug is in this release), nothing could run (:data:`SKIPPED`), or it
    broke some other way (:data:`FAILED`). ``outcome`` and ``variants`` are a runner result's
    (``harness.scenarios.runner.Result.to_json``), read by ``xharness repro`` from its child and
    by a project's scenario items in process."""
    ran = [v for v in variants if v.get("outcome") != SKIPPED]
    if outcome == PASSED:
        return PASSED
    if outcome == SKIPPED:
        return SKIPPED
    if ran and all(v.get("signature") in signatures for v in ran):
        return REPRODUCED
    return FAILED


def load(path: Path | None = None, scenarios: tuple[str, ...] | None = None) -> ExpectedTable:
    """Read and validate the table; ``scenarios`` (default: the catalog's ids) are the names a
    row may use. Raises :class:`ExpectedTableError` naming the line of the offending row."""
    path = path or default_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExpectedTableError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExpectedTableError(f"{path}: not valid TOML: {exc}") from None
    if scenarios is None:  # the catalog's ids, and the known findings that have reproducers of their own
        from harness.scenarios import registry, upstream_findings

        scenarios = tuple(s.id for s in registry.all_scenarios()) + tuple(upstream_findings.finding_names())
    unknown_top = sorted(set(data) - {"expect"})
    if unknown_top:
        raise ExpectedTableError(f"{path}: unknown top-level key {unknown_top[0]!r} (rows are "
                                 "[[expect]] tables)")
    raw = data.get("expect", [])
    if not isinstance(raw, list):
        raise ExpectedTableError(f"{path}: 'expect' must be an array of tables ([[expect]])")
    headers = [n for n, ln in enumerate(text.splitlines(), 1) if re.match(r"\s*\[\[\s*expect\s*\]\]", ln)]
    rows = []
    for index, body in enumerate(raw):
        line = headers[index] if index < len(headers) else None
        rows.append(_row(path, line, body, scenarios))
    return ExpectedTable(path, tuple(rows))


def _row(path: Path, line: int | None, body: object, scenarios: tuple[str, ...]) -> Expectation:
    def fail(field: str, message: str) -> ExpectedTableError:
        where = f"{path}:{line}" if line else str(path)
        return ExpectedTableError(f"{where}: expect.{field}: {message}")

    if not isinstance(body, dict):
        raise fail("", "each row is a table")
    for key in body:
        if key not in _ROW_KEYS:
            raise fail(key, f"unknown key (expected one of {', '.join(sorted(_ROW_KEYS))})")
    for key in _REQUIRED:
        if key not in body:
            raise fail(key, "missing")
        if not isinstance(body[key], str):
            raise fail(key, f"must be a string, got {body[key]!r}")
    if body["runtime"] not in runtimes():
        raise fail("runtime", f"unknown runtime {body['runtime']!r} (one of {', '.join(runtimes())})")
    if body["scenario"] not in scenarios:
        raise fail("scenario", f"unknown scenario {body['scenario']!r} (one of {', '.join(scenarios)})")
    if body["outcome"] not in OUTCOMES:
        raise fail("outcome", f"unknown outcome {body['outcome']!r} (one of {', '.join(OUTCOMES)})")
    try:
        releases = SpecifierSet(body["releases"])
    except InvalidSpecifier:
        raise fail("releases", f"not a version range like '<2.6' or '>=2.6,<3': {body['releases']!r}") from None
    why = body.get("why", "")
    if not isinstance(why, str):
        raise fail("why", "must be a string")
    backend = body.get("backend", DEFAULT_BACKEND)
    if backend not in BACKENDS:
        raise fail("backend", f"unknown backend {backend!r} (one of {', '.join(BACKENDS)}; "
                              "without the key: cpu)")
    at_least = None
    if "at_least" in body:
        match = re.fullmatch(r"\s*(\d+)\s+of\s+(\d+)\s*", str(body["at_least"]))
        k, n = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        if not isinstance(body["at_least"], str) or not match or not 0 < k <= n:
            raise fail("at_least", f"a rate like \"18 of 20\" (0 < k <= n), got {body['at_least']!r}")
        at_least = (k, n)
    return Expectation(body["runtime"], releases, body["scenario"], body["outcome"], why, line, backend, at_least)
