"""The release bisect behind ``xharness bisect`` (``harness.commands.bisect``, its shell): which
release changed a scenario's outcome.

The releases come from the package index (``index_releases`` below), oldest first, or
from ``--releases``; either end may be a maintainer's own build (a wheel, a directory of wheels,
``installed``: ``harness.releases.release_spec``). The search (``harness.releases.bisect``) visits
releases one at a time; each visited release gets its cached environment (built, or reused as
``releases`` reuses it) and the scenario's upstream trigger runs there, judged as ``repro
--release`` judges it. Only the visited releases are built, and ``--keep N`` caps how many of the
environments this command built stay on disk (least recently used dropped first; environments it
found already built are never touched).

Output: every release tried with its outcome and time, the answer, and the command that replays
the decisive run; ``--json`` prints one object instead. The tried releases and the answer are
JUnit records in ``OUT/junit/bisect-RUNTIME-SCENARIO.xml`` (replacing that file only, so that a
``releases`` run in the same directory stays next to it), and the dashboard shows them in its
release x scenario table.

The index lists releases with ``pip index versions --json`` under the configuration every
install uses (pip's own and ``$XHARNESS_PIP_ARGS``), so the list is of releases the environments
can be built from. Pre-releases (``rc``, ``dev``) are left out of it: the question is which
*release* changed an outcome (an end named explicitly may still be one). A runtime's **supported
floor** is where the project's claims begin: for JAX its declared range (the ``jax`` requirement
of pyproject.toml; an environment outside it cannot install the harness), for PyTorch/XLA the
oldest release line the expected-outcomes table was measured on (2.5). The floor decides the
default good end; an end named below it is kept as asked (with a note), and a release there that
cannot be installed is skipped like any other.

The exit status each result gives is ``EXIT_CODES`` (the command, ``harness.commands.bisect``,
says what each means).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.adapters.runtimes import RUNTIMES
from harness.errors import UsageError
from harness.exits import EXIT_FAILED, EXIT_INSTALL, EXIT_OK
from harness.releases import bisect as search
from harness.releases import envs, release_spec
from harness.releases.bisect import NOT_INSTALLED, BisectResult, EnvKeeper, Outcome, Trial
from harness.releases.catalog import repro_line, say
from harness.releases.release_spec import ReleaseSpec, distribution
from harness.report import properties as prop
from harness.report.properties import (
    BISECT,
    BISECT_ORDER,
    BISECT_RELEASE,
    BISECT_ROLE,
    CHECK_BISECT,
    RELEASE_CHECK,
    RELEASE_RUNTIME,
    REPRO,
)
from harness.scenarios.expected import ExpectedTable

EXIT_CODES = {
    search.CHANGED: EXIT_OK,
    search.AGREE: EXIT_FAILED,
    search.SINGLE: EXIT_FAILED,
    search.NEITHER: EXIT_FAILED,
    search.NOTHING_INSTALLED: EXIT_INSTALL,
}
RECORD_FILE = "harness/releases/bisect.py"


# ------------------------------------------------------------------------------ the index


class ReleaseListError(Exception):
    """pip could not list the releases; the message has pip's own words."""


def supported(runtime: str, root: Path | None = None) -> SpecifierSet:
    """The releases of ``runtime`` the project supports (see the module doc)."""
    facts = RUNTIMES.get(runtime)
    if facts is not None and facts.floor:
        return SpecifierSet(facts.floor)
    try:
        meta = tomllib.loads(((root or envs.project_root()) / "pyproject.toml").read_text())
        dependencies = meta["project"]["dependencies"]
    except (OSError, KeyError, tomllib.TOMLDecodeError, envs.ReleaseInstallError):
        return SpecifierSet()
    for text in dependencies:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name == distribution(runtime):
            return requirement.specifier
    return SpecifierSet()


def parse_versions(texts: Sequence[str]) -> list[Version]:
    """Final releases, oldest first (pre-releases and names that are no version left out)."""
    found = set()
    for text in texts:
        try:
            version = Version(str(text))
        except InvalidVersion:
            continue
        if not version.is_prerelease:
            found.add(version)
    return sorted(found)


def index_releases(runtime: str, pip_args: Sequence[str] | None = None,
                   python: str | None = None) -> list[Version]:
    """Every final release of ``runtime`` on the index, oldest first, as listed by the pip of
    ``python`` (default: this interpreter's). ``pip index versions --json`` exists from pip 23.3;
    an older pip (the 23.2.1 a fresh Python 3.11.7 venv brings) prints the same list as text,
    which is read instead. Releases whose ``Requires-Python`` excludes the listing interpreter
    are listed too (``--ignore-requires-python``): each release is built with an interpreter it
    fits (``harness.releases.interpreters``), so JAX 0.12 is a candidate from Python 3.11.
    Raises :class:`ReleaseListError` with pip's output when pip cannot list them."""
    dist = distribution(runtime)
    extra = list(pip_args) if pip_args is not None else envs.extra_pip_args()
    base = [python or sys.executable, "-m", "pip", "index", "versions", "--ignore-requires-python"]
    proc = _pip_listing([*base, "--json", *extra, dist], extra)
    if proc.returncode != 0 and "no such option: --json" in proc.stdout + proc.stderr:
        proc = _pip_listing([*base, *extra, dist], extra)
        return parse_versions(_listed_as_text(proc.stdout, " ".join(proc.args)))
    try:
        listed = json.loads(proc.stdout)["versions"]
    except (ValueError, KeyError, TypeError):
        raise ReleaseListError(f"{' '.join(proc.args)} printed no version list:\n{proc.stdout[-500:]}") from None
    return parse_versions(listed)


def _pip_listing(cmd: list[str], extra: list[str]) -> subprocess.CompletedProcess[str]:
    """Run one ``pip index versions``; a failure other than an unknown ``--json`` raises."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env=envs.pip_environment())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReleaseListError(f"{' '.join(cmd)}: {exc}") from None
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 and "no such option: --json" not in output:
        tail = "\n".join(output.strip().splitlines()[-10:])
        raise ReleaseListError(f"{' '.join(cmd)} exited with {proc.returncode} (with "
                               f"${envs.PIP_ARGS_VARIABLE} = {' '.join(extra)!r}):\n{tail}")
    return proc


def _listed_as_text(stdout: str, command: str) -> list[str]:
    """The versions of pip's text listing: the line ``Available versions: 0.10.2, 0.10.1``."""
    for line in stdout.splitlines():
        label, sep, rest = line.partition(":")
        if sep and label.strip() == "Available versions":
            return [v.strip() for v in rest.split(",") if v.strip()]
    raise ReleaseListError(f"{command} printed no 'Available versions:' line:\n{stdout[-500:]}")


# ------------------------------------------------------------------------------ the range
def check_ends(good: ReleaseSpec, bad: ReleaseSpec) -> None:
    """The good end is the older one, and they are two releases."""
    if good.key == bad.key:
        raise UsageError(f"--good and --bad name the same release ({good.label}): nothing to search")
    if good.version > bad.version:
        raise UsageError(f"--good {good.label} is newer than --bad {bad.label}: the good end is the "
                         "older release (swap them; which outcome is good is the older end's)")


def plan(runtime: str, good_text: str | None, bad_text: str | None, releases_text: str | None,
         listed: list[ReleaseSpec] | None = None) -> list[ReleaseSpec]:
    """The releases to search, oldest first: the good end, the candidates between the two ends'
    versions, the bad end. ``listed`` replaces the index (tests); ``--releases`` does too.
    Raises :class:`ReleaseListError` when the index cannot be listed."""
    good = release_spec.parse_argument(runtime, good_text, "--good") if good_text else None
    bad = release_spec.parse_argument(runtime, bad_text, "--bad") if bad_text else None
    if good is not None and bad is not None:
        check_ends(good, bad)
    floor = None
    if releases_text is not None:
        texts = [t.strip() for t in releases_text.split(",") if t.strip()]
        if not texts:
            raise UsageError("--releases: no release named")
        candidates = [release_spec.parse_argument(runtime, t, "--releases") for t in texts]
    elif listed is not None:
        candidates = listed
    else:
        candidates = [release_spec.parse(runtime, str(v)) for v in index_releases(runtime)]
        floor = supported(runtime)
    candidates = sorted({c.key: c for c in candidates}.values(), key=lambda c: c.version)
    if good is None:
        pool = [c for c in candidates if floor is None or floor.contains(c.version)] or candidates
        if not pool:
            raise UsageError(f"no release of {runtime} to start from: name --good")
        good = pool[0]
    if bad is None:
        pool = [c for c in candidates if floor is None or floor.contains(c.version)] or candidates
        newest = [c for c in pool if c.version >= good.version and c.key != good.key]
        if not newest:
            raise UsageError(f"no release of {runtime} newer than {good.label}: name --bad")
        bad = newest[-1]
    check_ends(good, bad)
    between = [c for c in candidates if good.version < c.version < bad.version
               and c.key not in (good.key, bad.key)]
    return [good, *between, bad]


# ------------------------------------------------------------------------------ the runs
@dataclass
class Visit:
    """What the command knows of one visited release beyond its outcome."""

    spec: ReleaseSpec
    outcome: Outcome
    run: Any = None  # releases.ScenarioRun, when the scenario ran
    env: envs.ReleaseEnv | None = None
    dropped: bool = False


@dataclass
class Runner:
    """The ``outcome`` callable of the search: builds (or reuses) the release's environment,
    runs the scenario there, and applies ``--keep``."""

    runtime: str
    scenario: str
    table: ExpectedTable
    timeout: float
    keeper: EnvKeeper
    visits: dict[str, Visit] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def __call__(self, spec: ReleaseSpec) -> Outcome:
        from harness.releases.catalog import run_scenario

        started = time.monotonic()
        try:
            env = release_spec.ensure(spec, progress=say)
        except envs.ReleaseInstallError as exc:
            say(f"{self.runtime} {spec.label}: skipped, {str(exc).splitlines()[0]}")
            outcome = Outcome(NOT_INSTALLED, round(time.monotonic() - started, 1),
                              str(exc).splitlines()[0])
            self._note(Visit(spec, outcome))
            return outcome
        run = run_scenario(self.scenario, str(env.python), self.table, timeout=self.timeout,
                           runtime=self.runtime)
        outcome = Outcome(run.outcome, round(time.monotonic() - started, 1), run.verdict.reason)
        visit = Visit(spec, outcome, run, env)
        self._note(visit)
        say(f"{self.runtime} {spec.label}: {run.outcome} ({outcome.seconds:.0f} s)")
        if spec.env_name is not None:
            for key in self.keeper.used(spec.key, env.built):
                built = self.visits[key].env if key in self.visits else None
                tag = built.tag if built is not None else None
                if envs.remove_env(self.runtime, key, root=env.path.parent, tag=tag):
                    say(f"--keep {self.keeper.keep}: dropped the environment {envs.env_name(self.runtime, key, tag)}")
                for other in self.visits.values():
                    if other.spec.key == key:
                        other.dropped = True
        return outcome

    def _note(self, visit: Visit) -> None:
        self.visits[visit.spec.key] = visit
        self.order.append(visit.spec.key)


# ------------------------------------------------------------------------------ the answer
def replay(scenario: str, runtime: str, spec: ReleaseSpec) -> str:
    return repro_line(scenario, runtime, spec.text)


def decisive(result: BisectResult[ReleaseSpec]) -> Trial[ReleaseSpec] | None:
    """The run the answer rests on: the first changed release, the one that gave neither, the
    bad end when the ends agree, the only one run, or the last one tried."""
    if result.first is not None:
        return result.first
    if result.last_good is not None:
        return result.last_good
    return result.trials[-1] if result.trials else None


def answer(runtime: str, result: BisectResult[ReleaseSpec]) -> str:
    """One sentence: what the search found."""
    good, first = result.last_good, result.first
    if result.kind == search.CHANGED and good is not None and first is not None:
        was, now = good.outcome.value, first.outcome.value
        if result.exact:
            return (f"{result.direction} in {runtime} {first.release.label} ({good.release.label} "
                    f"{was}, {first.release.label} {now})")
        suspects = ", ".join(s.label for s in result.suspects)
        untested = ", ".join(s.label for s in result.untested)
        return (f"{result.direction} between {runtime} {good.release.label} ({was}) and "
                f"{first.release.label} ({now}): in one of {suspects} ({untested} could not be "
                "installed)")
    if result.kind == search.AGREE and good is not None and first is not None:
        return (f"no change: both ends {good.outcome.value} ({runtime} {good.release.label} and "
                f"{first.release.label})")
    if result.kind == search.SINGLE and good is not None:
        return (f"only {runtime} {good.release.label} of the range could be installed "
                f"({good.outcome.value}): nothing to compare it with")
    if result.kind == search.NEITHER and first is not None:
        return (f"{runtime} {first.release.label} gave {first.outcome.value}, neither reproduced "
                f"nor passed: the search stops there ({first.outcome.note})")
    return (f"no release of the range could be installed "
            f"({', '.join(r.label for r in result.releases)})")


def _role(result: BisectResult[ReleaseSpec], spec: ReleaseSpec) -> str:
    if result.first is not None and result.first.release.key == spec.key:
        return {search.CHANGED: "first changed", search.NEITHER: "neither",
                search.AGREE: "bad end"}.get(result.kind, "")
    if result.last_good is not None and result.last_good.release.key == spec.key:
        return "last good"
    if spec.key in {s.key for s in result.untested}:
        return "untested"
    if result.releases and spec.key == result.releases[0].key:
        return "good end"
    if result.releases and spec.key == result.releases[-1].key:
        return "bad end"
    return ""


@dataclass(frozen=True)
class TriedRelease:
    """One release the search visited, as the report shows it."""

    order: int  # its turn in the search, from 1
    release: str  # its label
    spec: str  # what names it again on a command line
    kind: str
    version: str
    imported: str  # the release its variants actually imported ("" when none ran)
    outcome: str
    seconds: float
    verdict: str
    note: str
    role: str  # its part in the answer: last good, first changed, good end...
    env: str | None
    env_built: bool
    env_dropped: bool
    replay: str


@dataclass(frozen=True)
class BisectReport:
    """What a bisect found, a value: the terminal's text, the JUnit records and ``--json`` are
    each made from it, and it becomes JSON only at that edge (``to_json``)."""

    runtime: str
    scenario: str
    range: tuple[str, ...]
    result: str
    direction: str
    exact: bool
    answer: str
    last_good: str | None
    first: str | None
    suspects: tuple[str, ...]
    untested: tuple[str, ...]
    trials: tuple[TriedRelease, ...]
    replay: str
    wall: float
    out: str
    exit_code: int

    @property
    def envs_built(self) -> tuple[str, ...]:
        return tuple(t.release for t in self.trials if t.env_built)

    @property
    def envs_dropped(self) -> tuple[str, ...]:
        return tuple(t.release for t in self.trials if t.env_dropped)

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "envs_built": list(self.envs_built),
                "envs_dropped": list(self.envs_dropped)}


def build_report(runtime: str, scenario: str, result: BisectResult[ReleaseSpec], runner: Runner,
                 wall: float, out: Path, code: int) -> BisectReport:
    trials = []
    for index, trial in enumerate(result.trials, 1):
        visit = runner.visits[trial.release.key]
        run = visit.run
        trials.append(TriedRelease(
            order=index, release=trial.release.label, spec=trial.release.text,
            kind=trial.release.kind, version=str(trial.release.version),
            imported=run.release if run is not None else "",
            outcome=trial.outcome.value, seconds=trial.outcome.seconds,
            verdict=run.verdict.verdict if run is not None else NOT_INSTALLED,
            note=trial.outcome.note, role=_role(result, trial.release),
            env=str(visit.env.path) if visit.env is not None and trial.release.env_name else None,
            env_built=bool(visit.env and visit.env.built), env_dropped=visit.dropped,
            replay=replay(scenario, runtime, trial.release),
        ))
    shown = decisive(result)
    return BisectReport(
        runtime=runtime, scenario=scenario, range=tuple(r.label for r in result.releases),
        result=result.kind, direction=result.direction, exact=result.exact,
        answer=answer(runtime, result),
        last_good=result.last_good.release.label if result.last_good else None,
        first=result.first.release.label if result.first else None,
        suspects=tuple(s.label for s in result.suspects),
        untested=tuple(s.label for s in result.untested),
        trials=tuple(trials),
        replay=replay(scenario, runtime, shown.release) if shown else "",
        wall=wall, out=str(out), exit_code=code,
    )


def render(report: BisectReport) -> str:
    """The terminal's text: the releases tried, in the order tried, then the answer."""
    rows = [(str(t.order), t.release, t.outcome, f"{t.seconds:.0f} s",
             "built" if t.env_built else ("-" if t.outcome == NOT_INSTALLED else "reused"),
             t.role) for t in report.trials]
    header = ("#", "release", "outcome", "time", "env", "role")
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [f"bisect {report.scenario} on {report.runtime}: "
             f"{report.range[0]} .. {report.range[-1]} ({len(report.range)} releases)",
             fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()]
    lines += [fmt.format(*r).rstrip() for r in rows]
    for t in report.trials:
        if t.outcome == NOT_INSTALLED:
            lines.append(f"  {t.release}: {t.note}")
    lines.append(f"{report.answer}")
    built = ", ".join(report.envs_built) or "none"
    lines.append(f"tried {len(report.trials)} release(s); environments built: {built}; "
                 f"total {report.wall:.0f} s")
    if report.envs_dropped:
        lines.append(f"dropped (--keep): {', '.join(report.envs_dropped)}")
    if report.replay:
        lines.append(f"replay: {report.replay}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ JUnit
def cell_name(runtime: str, scenario: str) -> str:
    return f"bisect-{runtime}-{scenario}"


def records(report: BisectReport, runs: dict[str, Any]) -> list[Any]:
    """One record per release tried (in version order), then the answer's record. A tried
    release carries what a catalog record carries (so the release table shows it) plus the
    bisect's properties; the answer carries the bisect's result."""
    from harness.report.records import ERROR, FAILED, PASSED, SKIPPED, Attempt, TestRecord

    runtime, scenario = report.runtime, report.scenario
    cell = cell_name(runtime, scenario)
    tried = ";".join(f"{t.release}={t.outcome}" for t in report.trials)
    out = []
    order = {label: i for i, label in enumerate(report.range)}
    for trial in sorted(report.trials, key=lambda t: order.get(t.release, 0)):
        run = runs.get(trial.spec)
        record = TestRecord(nodeid=f"xharness::bisect::{scenario}[{trial.release}]", cell=cell,
                            file=RECORD_FILE)
        if run is not None:
            props = run.properties()
            props[prop.RELEASE] = props[prop.RELEASE] or trial.release
        else:
            props = {prop.RUNTIME: runtime, prop.RELEASE: trial.release, prop.SCENARIO: scenario,
                     prop.EXPECTED: "-", prop.ACTUAL: trial.outcome, prop.VERDICT: NOT_INSTALLED,
                     prop.REASON: trial.note}
        props.update({RELEASE_RUNTIME: runtime, RELEASE_CHECK: CHECK_BISECT, BISECT: cell,
                      BISECT_ORDER: str(trial.order), BISECT_RELEASE: trial.release,
                      BISECT_ROLE: trial.role, REPRO: trial.replay})
        if trial.outcome == NOT_INSTALLED:
            attempt = Attempt(SKIPPED, trial.seconds, f"skipped by the bisect: {trial.note}")
        elif trial.outcome in search.DECISIVE:
            attempt = Attempt(PASSED, trial.seconds)
        else:
            attempt = Attempt(FAILED, trial.seconds, run.message() if run else trial.note,
                              details=run.details() if run else "")
        record.attempts.append(attempt)
        record.properties = {k: str(v) for k, v in props.items()}
        out.append(record)
    summary = TestRecord(nodeid=f"xharness::bisect::{scenario}", cell=cell, file=RECORD_FILE)
    outcome = {search.CHANGED: PASSED, search.NOTHING_INSTALLED: ERROR}.get(report.result, FAILED)
    summary.attempts.append(Attempt(outcome, report.wall,
                                    "" if outcome == PASSED else report.answer))
    summary.properties = {
        prop.RUNTIME: runtime, prop.SCENARIO: scenario, prop.BISECT: cell, prop.BISECT_RESULT: report.result,
        prop.BISECT_DIRECTION: report.direction, prop.BISECT_ANSWER: report.answer,
        prop.BISECT_FIRST: report.first or "", prop.BISECT_LAST_GOOD: report.last_good or "",
        prop.BISECT_SUSPECTS: ";".join(report.suspects), prop.BISECT_TRIED: tried,
        prop.BISECT_RANGE: ";".join(report.range), prop.REPRO: report.replay,
    }
    out.append(summary)
    return out


def write_junit(out: Path, report: BisectReport, runs: dict[str, Any]) -> None:
    """The bisect's JUnit file (replacing an earlier bisect's of the same scenario only), then
    the merged report and dashboard of the directory."""
    from harness.report.api import finish_run
    from harness.report.junit import write_cell_xml

    junit_dir = out / "junit"
    junit_dir.mkdir(parents=True, exist_ok=True)
    cell = cell_name(report.runtime, report.scenario)
    write_cell_xml(cell, records(report, runs), junit_dir / f"{cell}.xml")
    finish_run(out)
