"""The kill matrix: which (check, fault switch) pairs run, and how one pair is judged.

A pair is *declared* when the check names the switch among the bugs it must catch. Declared pairs
decide the verdict: each must be ``caught``; ``missed`` means the check has no teeth for that bug,
``skipped`` (the topology cannot host the check) and ``error`` (the check broke some other way,
or its process died or hung) are not passes either. With ``--all-pairs`` the undeclared pairs run
too, for information only: a check that happens to catch another bug is worth knowing about, but
it never promised to.

Judging reuses what each kind of check already has: a scenario goes through the catalog's runner
(injected mode for its own switch, where the runner matches the error against the scenario's
signatures; fixed mode under the other switch for an undeclared pair), an invariant through
``Invariant.search`` with the switch on, which returns its shrunk counterexample.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from harness.exits import EXIT_FAILED, EXIT_OK
from harness.report.records import KIND_EXCEPTION
from harness.scenarios.base import Scenario
from harness.teeth.checks import SCENARIO, Check

CAUGHT, MISSED, SKIPPED, ERROR = "caught", "missed", "skipped", "error"

#: hypothesis' note on a line of an example, e.g. ``# or any other generated value``
_TRAILING_COMMENT = re.compile(r"\s+#[^'\"]*$")
#: the spacing of a multi-line repr, undone once its lines are joined
_TIDY = (
    (re.compile(r"([(\[{])\s+"), r"\1"),
    (re.compile(r"\(([^(),\[\]{}]+),\s+\)"), r"(\1,)"),  # a 1-tuple keeps its comma
    (re.compile(r",?\s+([)\]}])"), r"\1"),
    (re.compile(r"\s{2,}"), " "),
)


@dataclass(frozen=True)
class Pair:
    check: Check
    fault: str
    declared: bool


@dataclass
class PairResult:
    """What happened to one pair; travels from the child as JSON."""

    check: str
    kind: str
    fault: str
    declared: bool
    status: str
    seconds: float = 0.0
    example: str = ""  # the shrunk counterexample, or the signature a scenario reproduced
    size: int | None = None  # the counterexample's size by the invariant's own measure
    max_size: int | None = None  # the invariant's bound on that size
    error: str = ""  # ``Type: message`` the check raised (caught), or what went wrong (error)
    blob: str = ""  # hypothesis' @reproduce_failure arguments
    note: str = ""  # why skipped or missed, in words
    details: str = ""  # traceback, per-variant outcomes, or the output of a process that died
    error_kind: str = ""  # for errors: exception, signal, exit or timeout
    signal: int | None = None
    exit_code: int | None = None
    log: str = ""  # the child's output file

    @property
    def passed(self) -> bool:
        """Whether this pair keeps the exit code at 0 (undeclared pairs always do)."""
        return not self.declared or self.status == CAUGHT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairResult:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def of(cls, pair: Pair, status: str, **values: Any) -> PairResult:
        return cls(
            check=pair.check.id,
            kind=pair.check.kind,
            fault=pair.fault,
            declared=pair.declared,
            status=status,
            max_size=pair.check.max_size,
            **values,
        )


def plan(checks: Sequence[Check], faults: Sequence[str], all_pairs: bool) -> list[Pair]:
    """The pairs to run, row by row: the declared ones, and the rest with ``all_pairs``."""
    return [
        Pair(check, fault, fault in check.declares)
        for check in checks
        for fault in faults
        if all_pairs or fault in check.declares
    ]


def exit_code(results: Sequence[PairResult]) -> int:
    """0 when every declared pair was caught, else 1."""
    return EXIT_OK if all(r.passed for r in results) else EXIT_FAILED


def headline(example: str, width: int = 120) -> str:
    """A counterexample on one line: hypothesis' report without its header, its comments about
    which parts may vary, and its line breaks (a state machine's program included)."""
    lines = [ln.strip() for ln in example.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    if lines and lines[0].startswith(("Failing test case", "Falsifying example")):
        opened = lines.pop(0).endswith("(")
        if opened and lines and lines[-1] == ")":
            lines.pop()
    text = " ".join(_TRAILING_COMMENT.sub("", ln) for ln in lines)
    for pattern, replacement in _TIDY:
        text = pattern.sub(replacement, text)
    text = text.strip().rstrip(",")
    return text if len(text) <= width else text[: width - 3] + "..."


def clean_example(text: str) -> str:
    """Hypothesis' report of an example without its replay hints and coverage explanation,
    which belong to the blob and to a reader's own run."""
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("Explanation:"):
            skipping = True
            continue
        if skipping and (line.startswith("    ") or not line.strip()):
            continue
        skipping = False
        if line.startswith(("You can reproduce", "@reproduce")):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


# ------------------------------------------------------------------------------ one pair, here


def run_pair(pair: Pair, devices: int, seed: int = 0) -> PairResult:
    """Judge one pair in this process (which must have been started with the device count)."""
    unmet = pair.check.unmet(devices)
    if unmet:
        return PairResult.of(pair, SKIPPED, note=unmet)
    start = time.perf_counter()
    try:
        if pair.check.kind == SCENARIO:
            result = _scenario(pair, devices, seed)
        else:
            result = _invariant(pair)
    except Exception as exc:  # the check broke outside what it judges: an error, not a verdict
        result = PairResult.of(
            pair,
            ERROR,
            error=f"{type(exc).__name__}: {exc}",
            error_kind=KIND_EXCEPTION,
            details=traceback.format_exc(),
        )
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def _scenario(pair: Pair, devices: int, seed: int) -> PairResult:
    from harness.scenarios import runner

    scenario = pair.check.target
    assert isinstance(scenario, Scenario)
    if pair.declared:
        outcome = runner.run(scenario, inject=True, seed=seed, devices=devices)
    else:  # the check's own bug stays off; only the other switch is on
        with runner.switch(scenario, pair.fault):
            outcome = runner.run(scenario, inject=False, seed=seed, devices=devices)
    variants = "\n".join(
        f"{v.variant}: {v.outcome}" + (f" - {v.error}" if v.error else "") for v in outcome.variants
    )
    tracebacks = "\n".join(v.traceback for v in outcome.variants if v.traceback)
    first_error = next((v.error for v in outcome.variants if v.error), "")
    quiet = [v.variant for v in outcome.variants if not v.error]
    if outcome.outcome == runner.REPRODUCED or (not pair.declared and outcome.outcome == runner.FAILED):
        return PairResult.of(
            pair, CAUGHT, example=outcome.signature, error=first_error, details=variants
        )
    if outcome.outcome in (runner.NOT_REPRODUCED, runner.PASSED):
        return PairResult.of(
            pair,
            MISSED,
            note=f"every variant ran to the end with the switch on: {', '.join(quiet)}"
            if len(quiet) == len(outcome.variants)
            else f"variant(s) that ran to the end with the switch on: {', '.join(quiet)}",
            details=variants,
        )
    return PairResult.of(
        pair,
        ERROR,
        error=first_error,
        error_kind=KIND_EXCEPTION,
        note="the scenario failed, but not with one of its signatures",
        details=f"{variants}\n\n{tracebacks}".strip(),
    )


def _hypothesis_errors() -> frozenset[str]:
    """Names of hypothesis' own errors: a search that ends in one found nothing about the
    runtime (an unsatisfiable strategy, a health check), so it must not count as a catch."""
    from hypothesis import errors

    return frozenset(
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.HypothesisException)
    )


def _invariant(pair: Pair) -> PairResult:
    from harness.properties.base import Invariant, switched_on

    invariant = pair.check.target
    assert isinstance(invariant, Invariant)
    with switched_on((pair.fault,)):
        found = invariant.search()
    if found is None:
        return PairResult.of(
            pair, MISSED, note=f"no counterexample in {invariant.max_examples} examples"
        )
    size = found.size if found.size >= 0 else None
    values: dict[str, Any] = dict(
        example=clean_example(found.example), size=size, error=found.error, blob=found.blob
    )
    if found.error.partition(":")[0] in _hypothesis_errors():
        return PairResult.of(
            pair,
            ERROR,
            error_kind=KIND_EXCEPTION,
            note="hypothesis could not search the invariant's examples",
            **values,
        )
    if pair.fault not in found.faults:
        return PairResult.of(
            pair,
            ERROR,
            error_kind=KIND_EXCEPTION,
            note=f"the counterexample was found with {list(found.faults)} on, not {pair.fault!r}",
            **values,
        )
    if size is not None and invariant.max_size and size > invariant.max_size:
        values["note"] = f"shrunk to size {size}, above the invariant's bound {invariant.max_size}"
    return PairResult.of(pair, CAUGHT, **values)
