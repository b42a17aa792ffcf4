"""What a dead job's records say when its ranks die at different points, and what one test's
record says when its ranks disagree: the shapes a real two-node job produces, which one rank, one
phase and one attempt cannot tell apart from a wrong reading.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.executors.job_result import JOB_ID, finished_tests, job_record, unit_result
from harness.executors.slurm_client import JobState
from harness.matrix.config import Cell
from harness.matrix.outcomes import attempt_from_reports, merge_ranks, properties_from_reports
from harness.report.records import (
    ERROR,
    FAILED,
    KIND_EXCEPTION,
    KIND_EXIT,
    KIND_MEMORY,
    PASSED,
    SKIPPED,
    XFAILED,
    Attempt,
)

pytestmark = pytest.mark.cell_independent


def _phases(nodeid: str, outcome: str = "passed", *, failing: str = "call", message: str = "",
            properties: list[list[str]] | None = None) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [{"event": "start", "nodeid": nodeid}]
    for when in ("setup", "call", "teardown"):
        said = outcome if when == failing else "passed"
        event: dict[str, object] = {"event": "report", "nodeid": nodeid, "when": when, "outcome": said,
                                    "duration": 0.25}
        if said == "failed":
            event["message"] = message
        if properties and when == "call":
            event["properties"] = properties
        events.append(event)
    events.append({"event": "finish", "nodeid": nodeid})
    return events


def _write(logs: Path, rank: int, events: list[dict[str, object]], launch: int = 1) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / f"launch{launch}.rank{rank}.events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def test_only_tests_every_rank_finished_are_kept_in_the_order_they_finished(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _write(logs, 0, _phases("t.py::test_a") + _phases("t.py::test_b") + _phases("t.py::test_c"))
    # rank 1's node went away during test_c: it never finished it
    _write(logs, 1, _phases("t.py::test_a") + _phases("t.py::test_b") + [{"event": "start", "nodeid": "t.py::test_c"}])
    records = finished_tests(logs, Cell("c", processes=2), JobState("7", "NODE_FAIL", "n1,n2"))
    assert [r.nodeid for r in records] == ["t.py::test_a", "t.py::test_b"]
    assert all(r.cell == "c" and r.file == "t.py" for r in records)
    assert records[0].properties["executor-job"] == "7"
    assert records[0].properties["executor-nodes"] == "n1,n2"
    assert records[0].properties["executor-state"] == "NODE_FAIL"
    assert records[0].final.duration == pytest.approx(0.75)


def test_a_test_that_failed_on_one_rank_fails_and_names_that_rank(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _write(logs, 0, _phases("t.py::test_a", properties=[["seed", "0"]]))
    _write(logs, 1, _phases("t.py::test_a", "failed", message="rank one's assert", properties=[["seed", "1"]]))
    (record,) = finished_tests(logs, Cell("c", processes=2), JobState("7", "TIMEOUT", "n1"))
    assert record.final.outcome == FAILED
    assert record.final.message == "rank 1: rank one's assert"
    assert record.properties["seed"] == "0"  # rank 0's values win


def test_no_event_stream_means_no_finished_test(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    assert finished_tests(tmp_path / "logs", Cell("c"), JobState("7", "NODE_FAIL")) == []


def test_a_dead_job_without_a_result_keeps_its_finished_tests_before_its_own_record(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _write(logs, 0, _phases("t.py::test_a"))
    _write(logs, 1, _phases("t.py::test_a"))
    unit = tmp_path / "unit"
    unit.mkdir()
    (unit / "job-8.out").write_text("srun: error: n2: task 1: Killed\n")
    result, not_installed = unit_result(Cell("c", processes=2), JobState("8", "FAILED", "n1,n2", exit_code="0:9"),
                                        unit, unit / "job.sh", 4.0, logs=logs)
    assert not not_installed and not result.interrupted
    assert [r.nodeid for r in result.records] == ["t.py::test_a", JOB_ID]
    job = result.records[-1]
    assert job.final.outcome == ERROR and job.final.kind == KIND_EXIT
    assert job.final.message == "cell c: job 8 the job ended FAILED on n1,n2 (exit 0:9)"
    assert "task 1: Killed" in job.final.stderr


def test_a_job_record_says_which_job_where_and_how_to_run_it_again(tmp_path: Path) -> None:
    cell = Cell("c2", devices=4, processes=2, slices=2)
    record = job_record(cell, "12", "text", KIND_EXIT, "out", tmp_path / "job.sh",
                        JobState("12", "PREEMPTED", "n3", restarts=2))
    assert record.nodeid == JOB_ID and record.cell == "c2"
    assert record.final.message == "cell c2: job 12 text" and record.final.stderr == "out"
    assert record.properties["devices"] == str(cell.total_devices)
    assert record.properties["processes"] == "2" and record.properties["slices"] == "2"
    assert record.properties["executor-job"] == "12" and record.properties["executor-nodes"] == "n3"
    assert record.properties["executor-state"] == "PREEMPTED" and record.properties["executor-attempt"] == "2"
    assert record.properties["repro"] == f"sbatch {tmp_path / 'job.sh'}"
    never = job_record(cell, "", "was never submitted", KIND_EXIT, "", tmp_path / "job.sh")
    assert never.final.message == "cell c2: the job was never submitted"
    assert "executor-job" not in never.properties and "executor-state" not in never.properties


def _report(when: str, outcome: str, **extra: object) -> dict[str, object]:
    return {"event": "report", "when": when, "outcome": outcome, "duration": 0.5, **extra}


def test_each_phase_that_fails_gives_its_own_outcome_and_words() -> None:
    setup = attempt_from_reports([_report("setup", "failed", message="no fixture")])
    assert (setup.outcome, setup.kind, setup.message) == (ERROR, KIND_EXCEPTION, "error in setup: no fixture")
    call = attempt_from_reports([_report("setup", "passed"), _report("call", "failed", message="wrong"),
                                 _report("teardown", "failed", message="cleanup")])
    assert (call.outcome, call.kind, call.message) == (FAILED, "", "wrong")
    assert call.duration == pytest.approx(1.5)
    teardown = attempt_from_reports([_report("setup", "passed"), _report("call", "passed"),
                                     _report("teardown", "failed", message="leak")])
    assert (teardown.outcome, teardown.message) == (ERROR, "error in teardown: leak")
    memory = attempt_from_reports([_report("call", "failed", message="", exc_type="MemoryError")])
    assert (memory.outcome, memory.kind) == (ERROR, KIND_MEMORY)
    unsaid = attempt_from_reports([_report("call", "failed")])
    assert unsaid.message == "call failed"
    nothing = attempt_from_reports([])
    assert nothing.outcome == ERROR and "no phase" in nothing.message


def test_a_skip_and_an_expected_failure_keep_their_reasons() -> None:
    skipped = attempt_from_reports([_report("setup", "skipped", message="Skipped: needs 4 devices")])
    assert (skipped.outcome, skipped.message) == (SKIPPED, "needs 4 devices")
    xfailed = attempt_from_reports([_report("setup", "passed"),
                                    _report("call", "skipped", message="", wasxfail="known bug 12")])
    assert (xfailed.outcome, xfailed.message) == (XFAILED, "known bug 12")
    last = attempt_from_reports([_report("call", "passed", stdout="a", stderr="b")])
    assert (last.stdout, last.stderr) == ("a", "b")


def test_the_last_value_of_a_recorded_property_wins() -> None:
    said = properties_from_reports([{"properties": [["k", "1"], ["j", 2]]}, {"properties": [["k", "3"]]}, {}])
    assert said == {"k": "3", "j": "2"}


def test_ranks_are_merged_worst_first_and_failing_alike_are_named_together() -> None:
    merged = merge_ranks({
        0: Attempt(PASSED, duration=1.0, stdout="zero"),
        1: Attempt(FAILED, duration=3.0, message="same", details="d1"),
        2: Attempt(FAILED, duration=2.0, message="same", details="d2"),
        3: Attempt(ERROR, duration=0.5, message="other", kind=KIND_EXCEPTION, details="d3"),
    })
    assert merged.outcome == ERROR and merged.kind == KIND_EXCEPTION
    assert merged.message == "ranks 1, 2: same; rank 3: other"
    assert merged.duration == 3.0
    assert "--- rank 1 ---\nd1" in merged.details and "--- rank 3 ---\nd3" in merged.details
    assert "rank 0" not in merged.details
    # every rank skipped but one passed: the pass speaks; a lone rank is itself
    assert merge_ranks({0: Attempt(SKIPPED), 1: Attempt(PASSED)}).outcome == PASSED
    alone = Attempt(FAILED, message="m")
    assert merge_ranks({5: alone}) is alone
    # of two ranks failing worst alike, the lower rank's attempt speaks
    tie = merge_ranks({0: Attempt(FAILED, message="a", signal=6), 1: Attempt(FAILED, message="b", signal=9)})
    assert tie.signal == 6
