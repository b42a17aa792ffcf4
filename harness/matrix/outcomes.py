"""From plugin events to :class:`Attempt` values: one per test, merged across ranks.

pytest reports a test in up to three phases (setup, call, teardown); the record wants one outcome
with pytest's own meaning (a failing call is a failure, a failing setup or teardown an error) plus
the harness' classification of errors (a ``MemoryError`` is ``memory``, not an ordinary exception).
"""

from __future__ import annotations

from harness.matrix.events import Event
from harness.report.headline import headline
from harness.report.records import (
    ERROR,
    FAILED,
    KIND_EXCEPTION,
    KIND_MEMORY,
    PASSED,
    SKIPPED,
    XFAILED,
    Attempt,
)

_SEVERITY = {SKIPPED: 0, PASSED: 1, XFAILED: 2, FAILED: 3, ERROR: 4}


def attempt_from_reports(reports: list[Event]) -> Attempt:
    """One attempt from the ``report`` events (setup/call/teardown) of one test on one rank."""
    if not reports:
        return Attempt(outcome=ERROR, kind=KIND_EXCEPTION, message="pytest reported no phase of this test")
    duration = sum(float(r.get("duration") or 0.0) for r in reports)
    last = reports[-1]
    attempt = Attempt(
        outcome=PASSED,
        duration=duration,
        stdout=str(last.get("stdout") or ""),
        stderr=str(last.get("stderr") or ""),
    )
    failed = [r for r in reports if r.get("outcome") == "failed"]
    if failed:
        first = failed[0]
        memory = any(r.get("exc_type") == "MemoryError" for r in failed)
        attempt.outcome = FAILED if first.get("when") == "call" and not memory else ERROR
        attempt.kind = KIND_MEMORY if memory else ("" if attempt.outcome == FAILED else KIND_EXCEPTION)
        said = headline(str(first.get("message") or ""), str(first.get("longrepr") or ""))
        attempt.message = said or f"{first.get('when')} failed"
        if first.get("when") != "call":
            attempt.message = f"error in {first.get('when')}: {attempt.message}"
        attempt.details = "\n\n".join(str(r.get("longrepr") or "") for r in failed)
        return attempt
    skipped = [r for r in reports if r.get("outcome") == "skipped"]
    if skipped:
        first = skipped[0]
        attempt.outcome = SKIPPED
        reason = str(first.get("message") or "")
        if first.get("wasxfail") is not None:  # an expected failure: a known bug, kept apart
            attempt.outcome = XFAILED
            reason = first.get("wasxfail") or reason
        attempt.message = reason.removeprefix("Skipped: ")
    return attempt


def properties_from_reports(reports: list[Event]) -> dict[str, str]:
    """What the test recorded with ``record_property`` (last value of a key wins)."""
    props: dict[str, str] = {}
    for report in reports:
        for key, value in report.get("properties") or []:
            props[str(key)] = str(value)
    return props


def merge_ranks(per_rank: dict[int, Attempt]) -> Attempt:
    """A test passes only if it passes on every rank; the worst rank's result speaks for it."""
    if len(per_rank) == 1:
        return next(iter(per_rank.values()))
    ranks = sorted(per_rank)
    worst_rank = max(ranks, key=lambda r: (_SEVERITY.get(per_rank[r].outcome, 4), -r))
    worst = per_rank[worst_rank]
    bad = [r for r in ranks if per_rank[r].outcome in (FAILED, ERROR)]
    message = worst.message
    if bad:  # ranks that failed the same way are named together
        groups: dict[str, list[int]] = {}
        for r in bad:
            groups.setdefault(per_rank[r].message, []).append(r)
        message = "; ".join(
            f"{'rank' if len(rs) == 1 else 'ranks'} {', '.join(map(str, rs))}: {text}" for text, rs in groups.items()
        )
    return Attempt(
        outcome=worst.outcome,
        duration=max(a.duration for a in per_rank.values()),
        message=message,
        details="\n\n".join(f"--- rank {r} ---\n{per_rank[r].details}" for r in bad),
        stdout=_joined(per_rank, "stdout"),
        stderr=_joined(per_rank, "stderr"),
        kind=worst.kind,
        signal=worst.signal,
        exit_code=worst.exit_code,
    )


def _joined(per_rank: dict[int, Attempt], attr: str) -> str:
    parts = [f"--- rank {r} ---\n{getattr(a, attr)}" for r, a in sorted(per_rank.items()) if getattr(a, attr)]
    return "\n".join(parts)
