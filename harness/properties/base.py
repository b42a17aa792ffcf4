"""What an invariant is: a plain check, the inputs that exercise it, and the bugs it must catch.

An ``Invariant`` pairs a plain function (``check(**example)`` raises ``AssertionError`` or the
runtime's own error when the runtime breaks the rule; usable without hypothesis) with a strategy
of examples, and declares the fault switches it must catch. From those it offers a ready
hypothesis test (for a user's suite: ``test_x = invariant.hypothesis_test()``) and ``search``,
which runs hypothesis and returns the shrunk counterexample instead of raising: the tool the
teeth meta-tests and ``xharness teeth`` are built on.

Every example runs inside ``harness.runtime.testing.isolated()``, so one example's pending graph,
options or simulated topology never leak into the next, and a falsifying example replays alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from harness.properties import budgets
from harness.scenarios.known_findings import KnownFinding, known_findings

#: settings of a search: deterministic (the same counterexample on every machine), no deadline
#: (XLA compile times vary), no example database (a search must not depend on earlier runs), and
#: no explain phase: after shrinking it re-runs the counterexample hundreds of times to mark which
#: parts could vary, which took 4 to 8 s of the 0.5 to 9 s a schedule search needs, for notes the
#: shrunk schedule already makes plain (its draws are its preemptions)
SEARCH_SETTINGS = dict(
    deadline=None,
    phases=[phase for phase in Phase if phase is not Phase.explain],
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

_BLOB = re.compile(r"@reproduce_failure\((.*?)\)")


@dataclass(frozen=True)
class Falsified:
    """A shrunk counterexample: what hypothesis reported, and how big it is."""

    invariant: str
    example: str  # the shrunk example, as hypothesis printed it (or the rule steps of a machine)
    size: int  # the invariant's own measure: dimensions, mesh axes, rule steps...
    error: str  # ``Type: message`` of the failure the example raised
    blob: str  # hypothesis' ``@reproduce_failure`` arguments, when it printed them
    faults: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "example": self.example,
            "size": self.size,
            "error": self.error,
            "blob": self.blob,
            "faults": list(self.faults),
        }


def explained(findings: list[KnownFinding], exc: BaseException) -> list[KnownFinding] | None:
    """The findings that account for every failure in ``exc`` (hypothesis reports each distinct
    one), or None when some failure is none of them: that one is news, never excused."""
    used: list[KnownFinding] = []
    for leaf in _leaves(exc):
        finding = next((f for f in findings if f.explains(leaf)), None)
        if finding is None:
            return None
        if finding not in used:
            used.append(finding)
    return used


@dataclass(frozen=True)
class Invariant:
    """One rule every runtime must keep: a plain check, the examples that exercise it, and the
    fault switches it must catch.

    ``check(**example)`` raises ``AssertionError`` (or the runtime's own error) when the runtime
    breaks the rule, and works without hypothesis; ``hypothesis_test()`` is a ready test for a
    suite, and ``search()`` the shrunk counterexample ``xharness teeth`` reports. A plugin registers
    one under the ``xharness.invariants`` entry-point group, named by its ``id``; it is checked when
    loaded (its ``id`` is the entry point's, it ``needs`` only capabilities the harness knows).
    """

    #: the invariant's id, as commands name it (``xharness teeth --checks ID``); the entry point's name
    id: str
    #: one line stating the rule
    title: str
    #: the plain check: called with one example's values as keyword arguments, it returns when the
    #: rule holds and raises when it is broken
    check: Callable[..., None]
    #: a function returning the hypothesis strategy of examples (dicts of ``check``'s keyword
    #: arguments), built lazily: it may need the devices
    examples: Callable[[], st.SearchStrategy[dict[str, Any]]]
    #: the fault switches it must catch (of the runtime under test): ``xharness teeth`` turns each
    #: on and fails when the search finds no counterexample
    catches: tuple[str, ...] = ()
    #: an example's size (dimensions, axes, operations...), the measure a shrunk counterexample is
    #: reported and bounded by
    size: Callable[[dict[str, Any]], int] = lambda example: 0
    #: the largest shrunk counterexample the teeth tests accept (0: no bound)
    max_size: int = 0
    #: examples per run under the CI profile (scaled with a wider profile: ``scaled_examples``): the
    #: full budget, which a matrix cell shares out by its kind (``harness.properties.budgets``)
    max_examples: int = 100
    #: examples a search for a counterexample may try (teeth); a focused program search needs more
    #: than a CI run, since a bug's sequence is a small corner of the programs it can draw
    search_examples: int = 0
    #: the fewest devices the process must address; with fewer the invariant is skipped
    min_devices: int = 1
    #: capabilities of the runtime under test the invariant needs (``harness.adapters.base``)
    needs: tuple[str, ...] = ()
    #: run each example inside ``isolated()``; an invariant that only reads cached objects and
    #: records nothing (the spec checks) skips it, which is a third of its time per example
    isolate: bool = True
    #: the runtime mutants it must kill (stems of ``suites/properties/mutants/*.patch``): bugs
    #: nobody planted behind a switch, run by ``ci/mutants.py``, never by ``search``
    mutants: tuple[str, ...] = ()
    #: what it needs beyond the runtime under test (the semantics oracle: an eager torch to ask):
    #: why that is missing, or None; the ready test skips with the reason, a search refuses
    resources: Callable[[], str | None] | None = None

    def run_example(self, example: dict[str, Any]) -> None:
        """Check one example in isolation, remembering it if it fails."""
        from harness.runtime.testing import isolated

        try:
            if self.isolate:
                with isolated():
                    self.check(**example)
            else:
                self.check(**example)
        except BaseException as exc:
            try:  # each distinct failure hypothesis reports keeps its own example
                exc.__dict__.setdefault("xharness_example", example)
            except AttributeError:
                pass
            raise

    def unmet(self) -> str | None:
        """Why the runtime under test cannot host this invariant, or None."""
        from harness.adapters import Unsupported, current, require

        try:
            require(current(), *self.needs)
        except Unsupported as exc:
            return f"{self.id}: {exc}"
        missing = self.resources() if self.resources is not None else None
        return f"{self.id}: {missing}" if missing else None

    def scaled_examples(self) -> int:
        """``max_examples`` under the loaded profile: the invariant's own count is for the CI
        profile (hypothesis' default of 100 examples), a wider profile scales it up alike, and a
        matrix cell runs its kind's share of it (``budgets.SHARES``)."""
        return budgets.examples(max(1, math.ceil(self.max_examples * settings.default.max_examples / 100)))

    def hypothesis_test(self, **overrides: Any) -> Callable[[], None]:
        """A ready test function for pytest (or to call directly), under the loaded hypothesis
        profile with the invariant's example count scaled to it; ``overrides`` win."""
        invariant = self

        def test() -> None:
            import pytest

            from harness.adapters import current

            if reason := invariant.unmet():
                pytest.skip(reason)
            options: dict[str, Any] = {"max_examples": invariant.scaled_examples()}
            rt = current()
            findings = known_findings(invariant.id, rt.name, rt.version())
            if findings:
                # a failure here is judged, not debugged: whether a known finding explains it does
                # not depend on its size, and shrinking a whole training program on a real release
                # cost minutes (step-boundary on torch_xla 2.9.0: 146 s against 14 s); an
                # unexplained one is re-raised as drawn, and ``search()`` shrinks it
                options["phases"] = tuple(p for p in Phase if p is not Phase.shrink)
            chosen = settings(**{**options, **overrides})
            run = chosen(given(invariant.examples())(invariant.run_example))
            cell_seed = budgets.seed(invariant.id)
            if chosen.derandomize and cell_seed is not None:  # each cell draws examples of its own
                run = seed(cell_seed)(run)
            if not findings:
                run()
                return
            try:
                run()
            except BaseException as exc:  # noqa: BLE001 - the known failure, reported as such
                used = None if isinstance(exc, KeyboardInterrupt | SystemExit) else explained(findings, exc)
                if used is None:
                    raise
                pytest.xfail(
                    "known upstream bug "
                    + "; ".join(f"{f.upstream}: {f.summary}" for f in used)
                    + f" ({type(exc).__name__})"
                )
            required = [f for f in findings if f.must_fail]
            if required:
                pytest.fail(
                    f"unexpectedly fixed: {rt.name} {rt.version()} keeps {invariant.id}, but "
                    + "; ".join(f"{f.upstream} ({f.summary})" for f in required)
                    + " was expected to break it; update KNOWN_FINDINGS"
                )

        test.__name__ = f"test_{self.id.replace('-', '_')}"
        test.__qualname__ = test.__name__
        test.__doc__ = self.title
        return test

    def search(self, max_examples: int | None = None, **overrides: Any) -> Falsified | None:
        """Run hypothesis; the shrunk counterexample, or None when none was found. Raises
        ``harness.adapters.Unsupported`` when the runtime under test cannot host the invariant."""
        if reason := self.unmet():
            from harness.adapters import Unsupported

            raise Unsupported(reason)
        budget = max_examples or self.search_examples or self.max_examples
        options = {**SEARCH_SETTINGS, "max_examples": budget, **overrides}
        test = settings(**options)(given(self.examples())(self.run_example))
        try:
            test()
        except BaseException as exc:  # noqa: BLE001 - any failure of the runtime is a finding
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return self._falsified(exc)
        return None

    def _falsified(self, exc: BaseException) -> Falsified:
        """The smallest of the failures hypothesis reported (it reports each distinct one)."""
        from harness.adapters import current

        found = [
            (
                self.size(e.__dict__["xharness_example"])
                if "xharness_example" in e.__dict__
                else -1,
                i,
                e,
            )
            for i, e in enumerate(_leaves(exc))
        ]
        size, _, leaf = min(found, key=lambda f: (f[0] < 0, f[0], f[1]))
        notes = "\n".join(getattr(leaf, "__notes__", ()))
        blob = _BLOB.search(notes) or _BLOB.search("\n".join(getattr(exc, "__notes__", ())))
        shown = "\n".join(
            line
            for line in notes.splitlines()
            if not line.startswith(("You can reproduce", "@reproduce"))
        ).strip()
        return Falsified(
            invariant=self.id,
            example=shown or repr(leaf.__dict__.get("xharness_example", {})),
            size=size,
            error=f"{type(leaf).__name__}: {leaf}".strip(),
            blob=blob.group(1) if blob else "",
            faults=tuple(sorted(current().faults_on())),
        )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


@contextmanager
def switched_on(names: tuple[str, ...]) -> Iterator[None]:
    """Every named fault switch of the runtime under test on for the block."""
    from contextlib import ExitStack

    from harness.adapters import current

    with ExitStack() as stack:
        for name in names:
            stack.enter_context(current().inject(name))
        yield
