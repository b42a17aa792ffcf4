"""The search of ``xharness bisect``: the first release whose outcome differs from the good end's.

Pure: releases in, a callable that says a release's outcome, a result value out. No environment,
no process and no printing here (``harness.releases.bisect_run`` does those), so every branch
of the search is tested over fake outcome sequences without installing anything.

The search is ``git bisect``'s. Both ends are checked first; the good end (the older) decides which
outcome is "good" and the bad end must show the other one. Then the releases between are halved:
the candidate tried is the median of those not yet tried, so each real run halves them and a
search over ``n`` releases runs at most ``2 + bit_length(n - 2)`` of them, plus one run per release
that could not be installed. A release that cannot be installed is skipped (``git bisect skip``)
and the search goes on around it; when skipped releases sit between the last good and the first
changed release, the answer is the bracket that contains the change, not one release. An end that
cannot be installed is replaced by its nearest installable neighbour inward.

An outcome that is neither ``reproduced`` nor ``passed`` (the trigger broke some other way, or could
not run on that release) says nothing about the bug, and bisecting on as if it did would name a
wrong release, so the search stops there and names it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from harness.scenarios.expected import PASSED, REPRODUCED

#: the outcome of a release whose environment could not be built
NOT_INSTALLED = "not-installed"
#: the outcomes that say something about the bug: one is the good end's, the other the change
DECISIVE = (REPRODUCED, PASSED)

#: what a search found
CHANGED = "changed"  # the outcome changes between ``last_good`` and ``first``
AGREE = "agree"  # both ends have one outcome: no change in the range
SINGLE = "single"  # only one release of the range could be run: nothing to compare
NEITHER = "neither"  # a release gave an outcome that is neither reproduced nor passed
NOTHING_INSTALLED = "nothing-installed"  # no release of the range could be installed

R = TypeVar("R")


@dataclass(frozen=True)
class Outcome:
    """What one release did: ``reproduced``, ``passed``, ``failed``, ``skipped`` or
    ``not-installed``, the seconds it took and a note (why it did not install, say)."""

    value: str
    seconds: float = 0.0
    note: str = ""

    @property
    def installed(self) -> bool:
        return self.value != NOT_INSTALLED

    @property
    def decisive(self) -> bool:
        return self.value in DECISIVE


@dataclass(frozen=True)
class Trial(Generic[R]):
    release: R
    outcome: Outcome


@dataclass(frozen=True)
class BisectResult(Generic[R]):
    """The answer and how it was reached.

    ``trials``: every release tried, in the order tried. ``last_good``: the newest release run
    with the good end's outcome. ``first``: for ``changed`` the first release with the other
    outcome, for ``neither`` the release that gave neither, for ``agree`` the bad end.
    ``untested``: the releases between the two that could not be installed; when there are some,
    the change is in one of them or in ``first``."""

    kind: str
    releases: tuple[R, ...]
    trials: tuple[Trial[R], ...]
    last_good: Trial[R] | None = None
    first: Trial[R] | None = None
    untested: tuple[R, ...] = ()

    @property
    def exact(self) -> bool:
        """A change pinned to one release (no untested release before it)."""
        return self.kind == CHANGED and not self.untested

    @property
    def direction(self) -> str:
        """``fixed`` (the bug reproduced, then passed) or ``regressed`` (the reverse); ""
        unless a change was found."""
        if self.kind != CHANGED or self.last_good is None or self.first is None:
            return ""
        return "fixed" if self.last_good.outcome.value == REPRODUCED else "regressed"

    @property
    def suspects(self) -> tuple[R, ...]:
        """The releases the change may have come in, oldest first: ``first`` alone when exact."""
        if self.kind != CHANGED or self.first is None:
            return ()
        return (*self.untested, self.first.release)

    @property
    def skipped(self) -> tuple[R, ...]:
        """Every release tried that could not be installed, in the order tried."""
        return tuple(t.release for t in self.trials if not t.outcome.installed)


def bisect(releases: Sequence[R], outcome: Callable[[R], Outcome]) -> BisectResult[R]:
    """Search ``releases`` (oldest first) for the first one whose outcome differs from the good
    end's, calling ``outcome`` once per release it visits (see the module doc)."""
    ordered = tuple(releases)
    trials: list[Trial[R]] = []
    seen: dict[int, Outcome] = {}

    def visit(index: int) -> Outcome:
        result = outcome(ordered[index])
        seen[index] = result
        trials.append(Trial(ordered[index], result))
        return result

    def done(kind: str, good: int | None = None, first: int | None = None) -> BisectResult[R]:
        untested: tuple[R, ...] = ()
        if kind == CHANGED and good is not None and first is not None:
            untested = tuple(ordered[i] for i in range(good + 1, first)
                             if i in seen and not seen[i].installed)
        return BisectResult(
            kind, ordered, tuple(trials),
            Trial(ordered[good], seen[good]) if good is not None else None,
            Trial(ordered[first], seen[first]) if first is not None else None,
            untested,
        )

    lo = 0
    while lo < len(ordered) and not visit(lo).installed:
        lo += 1
    if lo == len(ordered):
        return done(NOTHING_INSTALLED)
    good = seen[lo]
    if not good.decisive:
        return done(NEITHER, first=lo)
    hi = len(ordered) - 1
    while hi > lo and not visit(hi).installed:
        hi -= 1
    if hi == lo:
        return done(SINGLE, good=lo)
    if not seen[hi].decisive:
        return done(NEITHER, good=lo, first=hi)
    if seen[hi].value == good.value:
        return done(AGREE, good=lo, first=hi)
    # invariant: ordered[lo] has the good outcome, ordered[hi] the other one
    while True:
        candidates = [i for i in range(lo + 1, hi) if i not in seen]
        if not candidates:
            return done(CHANGED, good=lo, first=hi)
        mid = candidates[len(candidates) // 2]
        result = visit(mid)
        if not result.installed:
            continue
        if not result.decisive:
            return done(NEITHER, good=lo, first=mid)
        if result.value == good.value:
            lo = mid
        else:
            hi = mid


class EnvKeeper:
    """Which environments to drop so that at most ``keep`` of those this run built are kept
    (``--keep N``): the least recently used go first, and an environment the run did not build
    (it found it complete) is never dropped, whatever the cap. Pure bookkeeping over names."""

    def __init__(self, keep: int | None) -> None:
        if keep is not None and keep < 0:
            raise ValueError("keep must be 0 or more")
        self.keep = keep
        self._built: OrderedDict[str, None] = OrderedDict()  # least recently used first

    def used(self, name: str, built: bool) -> list[str]:
        """Note that ``name`` was just used (and built by this run, if ``built``); returns the
        names to drop now, least recently used first."""
        if built:
            self._built[name] = None
        if name in self._built:
            self._built.move_to_end(name)
        if self.keep is None:
            return []
        dropped = []
        while len(self._built) > self.keep:
            oldest, _ = self._built.popitem(last=False)
            dropped.append(oldest)
        return dropped

    @property
    def kept(self) -> list[str]:
        """The environments this run built and still keeps, least recently used first."""
        return list(self._built)
