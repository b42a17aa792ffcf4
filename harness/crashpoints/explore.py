"""Every kill point of one save, judged: what the files hold after a kill at each.

For a case (:class:`Case`: a writer, and how the project loads what it wrote) and a variant (a
save over a previous version, or a first save into nothing), :func:`explore` prepares the
starting directory with the real writer, runs the new save killed at kill point 1, 2, ... (each
time from a fresh copy of the starting directory) until one run completes, and loads what each
kill left with the project's own loaders. Each file must then hold its previous version or its new
one (a first save: nothing or the new one); a file the loader refuses (``refused``) or that loads
as neither version (``damaged``) is a lost save.

A temporary sibling left by a kill (``.<name>.<random>.tmp``) is allowed where no reader picks it
up: the case names the globs its readers use, and a leftover they match is ``stray``.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.crashpoints.engine import Run, Server

#: outcomes after which every file holds a version that was saved whole
GOOD = ("previous", "new", "mixed", "absent")
#: outcomes that lose a save
BAD = ("refused", "damaged", "stray")
_MISSING = object()


class Refused(Exception):
    """The project's loader refused a file; the message is the loader's."""


class Case(Protocol):
    """A writer of the project, and how the project reads back what it writes."""

    name: str
    #: ``module:attribute`` of this case, for the server to import
    spec: str
    #: globs (relative to the directory) of the files the project's readers pick up
    readers: tuple[str, ...]
    #: whether the writer or its loader runs on JAX (a JAX release's suites check it again)
    on_jax: bool

    def warm(self) -> None: ...

    def inputs(self, directory: Path, version: str) -> None: ...

    def write(self, directory: Path, version: str) -> None: ...

    def state(self, directory: Path) -> dict[str, Any]:
        """Each file, loaded by the project's loader into a comparable value (keys are names,
        a missing file has no key); raises :class:`Refused` where a loader refuses."""
        ...

    def may_vanish(self, key: str) -> bool:
        """Whether the save deletes ``key`` before writing it again, by design."""
        ...

    def loaded(self, directory: Path) -> list[Path]:
        """The files of ``directory`` that a loader of the project reads (not a browser)."""
        ...


@dataclass(frozen=True)
class Point:
    """One kill point: what the files held after the kill."""

    kill: int
    outcome: str
    detail: str = ""
    leftovers: tuple[str, ...] = ()


@dataclass
class Result:
    """Every kill point of one case and variant, and the run that completed."""

    case: str
    first_save: bool
    points: list[Point] = field(default_factory=list)
    final: Run | None = None
    seconds: float = 0.0

    @property
    def variant(self) -> str:
        return "first save" if self.first_save else "over previous"

    def counts(self) -> Counter[str]:
        return Counter(p.outcome for p in self.points)

    def failures(self) -> list[Point]:
        return [p for p in self.points if p.outcome in BAD]


def judge(got: dict[str, Any], previous: dict[str, Any], new: dict[str, Any], case: Case) -> tuple[str, str]:
    """The outcome of one kill: each file must hold its previous or its new version."""
    for key in sorted(set(got) | set(previous) | set(new)):
        value = got.get(key, _MISSING)
        if value in (previous.get(key, _MISSING), new.get(key, _MISSING)):
            continue
        if value is _MISSING and case.may_vanish(key):
            continue
        held = "is missing" if value is _MISSING else "holds neither version"
        return "damaged", f"{key} {held}"
    if got == previous:
        return ("absent" if not previous else "previous"), ""
    return ("new" if got == new else "mixed"), ""


def _leftovers(directory: Path, case: Case) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Temporary siblings left behind, and those of them a reader would pick up."""
    temporary = sorted(
        str(p.relative_to(directory)) for p in directory.rglob(".*.tmp") if p.is_file()
    )
    read = {str(p.relative_to(directory)) for g in case.readers for p in directory.glob(g)}
    return tuple(temporary), tuple(t for t in temporary if t in read)


def _state(case: Case, directory: Path) -> dict[str, Any]:
    try:
        return case.state(directory)
    except Refused:
        raise
    except Exception as exc:  # a loader that crashes instead of refusing is a finding too
        raise Refused(f"the loader crashed: {type(exc).__name__}: {exc}") from exc


def _completed(run: Run, what: str) -> Run:
    if run.ending != "completed":
        raise RuntimeError(f"{what} did not complete ({run.ending}): {run.detail}")
    return run


def explore(case: Case, server: Server, workdir: Path, first_save: bool, limit: int = 2000) -> Result:
    """Kill the new save of ``case`` at every kill point in turn (see the module docstring)."""
    started = time.monotonic()
    result = Result(case.name, first_save)
    start = workdir / "start"
    start.mkdir(parents=True)
    if not first_save:
        _completed(server.run(start, "previous"), f"{case.name}: the previous save")
    previous = case.state(start)
    reference = workdir / "reference"
    shutil.copytree(start, reference)
    full = _completed(server.run(reference, "new"), f"{case.name}: the new save")
    new = case.state(reference)
    if new == previous:
        raise RuntimeError(f"{case.name}: the new save reads back as the previous one")
    for kill in range(1, limit + 1):
        trial = workdir / f"kill-{kill}"
        shutil.copytree(start, trial)
        run = server.run(trial, "new", kill)
        if run.ending == "error":
            raise RuntimeError(f"{case.name}: the save failed at kill point {kill}: {run.detail}")
        if run.ending == "completed":
            result.final = run
            if run.events != kill - 1 or run.events != full.events:
                raise RuntimeError(
                    f"{case.name}: the save is not deterministic: {full.events} kill points in "
                    f"one run, {run.events} in another, completed at {kill}"
                )
            shutil.rmtree(trial)
            break
        temporary, read = _leftovers(trial, case)
        try:
            outcome, detail = judge(_state(case, trial), previous, new, case)
        except Refused as exc:
            outcome, detail = "refused", str(exc)
        if read and outcome not in BAD:
            outcome, detail = "stray", f"a reader picks up {', '.join(read)}"
        result.points.append(Point(kill, outcome, detail, temporary))
        shutil.rmtree(trial)
    result.seconds = time.monotonic() - started
    return result


def tear(case: Case, directory: Path, cuts: int = 48) -> list[Point]:
    """Each loaded file of a complete save cut short (at ``cuts`` lengths spread over it, and at
    every length of its last 16 bytes): the loader must refuse it, never load it as something
    else. Cutting a trailing newline may leave the same data, which is fine (``new``). This is
    what a writer that writes in place leaves; a loader that accepts it would turn a lost save
    into wrong data. ``kill`` of each point is the cut length."""
    new = case.state(directory)
    points = []
    for path in case.loaded(directory):
        whole = path.read_bytes()
        lengths = {len(whole) * i // cuts for i in range(cuts)} | set(range(max(0, len(whole) - 16), len(whole)))
        for length in sorted(lengths):
            path.write_bytes(whole[:length])
            try:
                got = _state(case, directory)
                outcome = "new" if got == new else "damaged"
                detail = f"{path.name} cut to {length} of {len(whole)} bytes loads as other data"
            except Refused as exc:
                outcome, detail = "refused", str(exc)
            points.append(Point(length, outcome, detail if outcome == "damaged" else ""))
        path.write_bytes(whole)
    return points


def explore_case(case: Case, workdir: Path) -> list[Result]:
    """Both variants of ``case`` (a save over a previous version, then a first save), one server."""
    workdir.mkdir(parents=True, exist_ok=True)
    with Server(case.spec, workdir / "child.log") as server:
        return [explore(case, server, workdir / variant, first)
                for variant, first in (("over-previous", False), ("first-save", True))]
