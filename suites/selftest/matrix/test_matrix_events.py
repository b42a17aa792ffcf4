"""The event stream and the per-rank merge, without processes."""

from __future__ import annotations

from pathlib import Path

from harness.matrix.events import EventReader, EventWriter
from harness.matrix.outcomes import attempt_from_reports, merge_ranks
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


def test_reader_is_incremental_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    writer = EventWriter(path)
    reader = EventReader(path)
    assert reader.poll() == []
    writer.emit("start", nodeid="t::a")
    assert [e["event"] for e in reader.poll()] == ["start"]
    with open(path, "a") as fh:  # a process that died in the middle of a write
        fh.write('{"event": "fin')
    assert reader.poll() == []
    writer.close()
    assert [e["nodeid"] for e in reader.events] == ["t::a"]


def _report(when: str, outcome: str, **extra: object) -> dict[str, object]:
    return {"event": "report", "when": when, "outcome": outcome, "duration": 0.5, **extra}


def test_phases_become_one_attempt_with_pytest_meaning() -> None:
    ok = attempt_from_reports([_report("setup", "passed"), _report("call", "passed"), _report("teardown", "passed")])
    assert (ok.outcome, ok.duration) == (PASSED, 1.5)
    failed = attempt_from_reports([_report("setup", "passed"), _report("call", "failed", message="assert 0")])
    assert (failed.outcome, failed.kind, failed.message) == (FAILED, "", "assert 0")
    setup = attempt_from_reports([_report("setup", "failed", message="fixture broke")])
    assert (setup.outcome, setup.kind) == (ERROR, KIND_EXCEPTION) and "setup" in setup.message
    memory = attempt_from_reports([_report("call", "failed", exc_type="MemoryError", message="MemoryError")])
    assert (memory.outcome, memory.kind) == (ERROR, KIND_MEMORY)
    skipped = attempt_from_reports([_report("setup", "skipped", message="Skipped: needs 9 devices")])
    assert (skipped.outcome, skipped.message) == (SKIPPED, "needs 9 devices")
    xfail = attempt_from_reports([_report("call", "skipped", wasxfail="known bug")])
    assert (xfail.outcome, xfail.message) == (XFAILED, "known bug")  # apart from pass and skip


def test_a_test_passes_only_if_every_rank_passes() -> None:
    good = Attempt(PASSED, duration=1.0)
    bad = Attempt(FAILED, duration=2.0, message="mismatch", details="trace")
    merged = merge_ranks({0: good, 1: bad})
    assert merged.outcome == FAILED and merged.message == "rank 1: mismatch" and merged.duration == 2.0
    assert "--- rank 1 ---" in merged.details
    assert merge_ranks({0: good, 1: Attempt(PASSED)}).outcome == PASSED
    assert merge_ranks({0: Attempt(SKIPPED), 1: Attempt(SKIPPED)}).outcome == SKIPPED
    both = merge_ranks({0: bad, 1: Attempt(ERROR, message="x")})
    assert both.outcome == ERROR and both.message == "rank 0: mismatch; rank 1: x"
    assert merge_ranks({0: bad, 1: bad}).message == "ranks 0, 1: mismatch"
