"""The event stream and the per-rank merge, without processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.matrix import events as events_module
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


KILLED_AFTER_WRITING = """
import os, signal, sys
from pathlib import Path
from harness.matrix.events import EventWriter
writer = EventWriter(Path(sys.argv[1]))
assert not writer.durable, "a process on the supervisor's machine does not fsync"
writer.emit("start", nodeid="t::dies")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_event_outlives_the_process_that_wrote_it_without_fsync(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_LAUNCHER"}
    died = subprocess.run([sys.executable, "-c", KILLED_AFTER_WRITING, str(path)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert [(e["event"], e["nodeid"]) for e in EventReader(path).poll()] == [("start", "t::dies")]


@pytest.mark.parametrize(("launcher", "fsyncs"), [("", 0), ("local", 0), ("slurm", 2), ("mpi", 2)])
def test_only_a_rank_read_from_another_host_fsyncs_each_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              launcher: str, fsyncs: int) -> None:
    """A rank a cluster launcher started may lose its host with the events the shared file system
    had not been given; on the supervisor's own machine, the kernel keeps what was written."""
    monkeypatch.setenv("HARNESS_LAUNCHER", launcher)
    synced: list[int] = []
    monkeypatch.setattr(events_module.os, "fsync", synced.append)
    writer = EventWriter(tmp_path / "events.jsonl")
    writer.emit("start", nodeid="t::a")
    writer.emit("finish", nodeid="t::a")
    writer.close()
    assert len(synced) == fsyncs
    assert EventWriter(tmp_path / "other.jsonl", durable=True).durable


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
