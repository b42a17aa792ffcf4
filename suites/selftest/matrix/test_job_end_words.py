"""What an ended SLURM job says about itself: the exact words for each end, which attempt and node
its records come from, and the tests its ranks finished when it wrote no result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.executors.job_result import JOB_ID, cause, finished_tests, unit_result
from harness.executors.slurm_client import GONE, JobState
from harness.executors.slurm_job import attempt_dir, write_result
from harness.matrix.config import Cell
from harness.matrix.supervisor import CellResult
from harness.report.records import (
    ERROR,
    KIND_EXIT,
    KIND_MEMORY,
    KIND_TIMEOUT,
    PASSED,
    Attempt,
    TestRecord,
)

# an ended job's files: the same outcome on every JAX
pytestmark = pytest.mark.jax_independent

GONE_WORDS = (
    "the controller forgot the job before its end was seen (MinJobAge), and no result was written"
)


@pytest.mark.parametrize(
    ("state", "output", "deadline", "said"),
    [
        (
            JobState("5", "PENDING"),
            "",
            600.0,
            (
                "still waiting to start when the run's deadline (600 s) passed: cancelled",
                KIND_TIMEOUT,
            ),
        ),
        (
            JobState("5", "OUT_OF_MEMORY"),
            "",
            None,
            ("out of memory: killed over its memory limit", KIND_MEMORY),
        ),
        (
            JobState("5", "NODE_FAIL"),
            "",
            None,
            ("node failure: its node stopped answering the controller", KIND_EXIT),
        ),
        (JobState("5", GONE), "", None, (GONE_WORDS, KIND_EXIT)),
        (
            JobState("5", "COMPLETED", "xh-node1"),
            "",
            None,
            ("the job ended on xh-node1 without writing its result", KIND_EXIT),
        ),
        (
            JobState("5", "FAILED", "xh-node1", "NonZeroExitCode", exit_code="1:0"),
            "",
            None,
            ("the job ended FAILED on xh-node1 (exit 1:0), NonZeroExitCode", KIND_EXIT),
        ),
        (JobState("5", "FAILED"), "", None, ("the job ended FAILED", KIND_EXIT)),
    ],
)
def test_each_end_in_exact_words(
    state: JobState, output: str, deadline: float | None, said: tuple[str, str]
) -> None:
    assert cause(state, output, deadline) == said


def _passed(name: str, cell: Cell) -> TestRecord:
    return TestRecord(f"tests/test_a.py::{name}", cell.name, attempts=[Attempt(PASSED, 0.1)])


def _write(unit: Path, attempt: int, cell: Cell, *, interrupted: bool) -> None:
    write_result(
        attempt_dir(unit, attempt),
        CellResult(cell, [_passed("test_one", cell)], 1.0, 1, interrupted=interrupted),
        False,
    )


def test_a_requeued_attempt_that_wrote_nothing_does_not_report_the_previous_one(
    tmp_path: Path,
) -> None:
    cell = Cell("c")
    _write(tmp_path, 0, cell, interrupted=True)
    result, _ = unit_result(
        cell, JobState("41", "NODE_FAIL", "n2", restarts=1), tmp_path, tmp_path / "job.sh", 4.0
    )
    (job,) = result.records
    assert job.nodeid == JOB_ID
    assert (job.properties["executor-attempt"], job.properties["executor-state"]) == (
        "1",
        "NODE_FAIL",
    )
    assert result.cell is cell and result.wall == 4.0 and result.interrupted is False


def test_a_forgotten_job_that_never_started_says_so(tmp_path: Path) -> None:
    cell = Cell("c")
    result, _ = unit_result(cell, JobState("41", GONE), tmp_path, tmp_path / "job.sh", 4.0)
    (job,) = result.records
    assert job.final == Attempt(ERROR, message=f"cell c: job 41 {GONE_WORDS}", kind=KIND_EXIT)


def test_records_name_the_node_that_ran_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = Cell("c")
    monkeypatch.setenv("SLURMD_NODENAME", "xh-node3")
    _write(tmp_path, 0, cell, interrupted=False)
    result, _ = unit_result(
        cell, JobState("41", "COMPLETED", "xh-node[3-4]"), tmp_path, tmp_path / "job.sh", 4.0
    )
    assert result.cell is cell
    assert [r.properties["executor-nodes"] for r in result.records] == ["xh-node3"]
    monkeypatch.setenv("SLURMD_NODENAME", "")
    _write(tmp_path, 0, cell, interrupted=False)
    result, _ = unit_result(
        cell, JobState("41", "COMPLETED", "xh-node[3-4]"), tmp_path, tmp_path / "job.sh", 4.0
    )
    assert [r.properties["executor-nodes"] for r in result.records] == ["xh-node[3-4]"]


def test_a_job_that_wrote_its_result_then_ran_out_of_time_is_still_blamed(tmp_path: Path) -> None:
    cell = Cell("c")
    _write(tmp_path, 0, cell, interrupted=False)
    result, _ = unit_result(
        cell, JobState("9", "TIMEOUT", "n1"), tmp_path, tmp_path / "job.sh", 61.0
    )
    assert [r.nodeid for r in result.records] == ["tests/test_a.py::test_one", JOB_ID]
    assert result.records[-1].final == Attempt(
        ERROR, message="cell c: job 9 the job's time limit passed on n1", kind=KIND_TIMEOUT
    )


def test_a_job_cancelled_at_the_deadline_says_what_it_waited_for(tmp_path: Path) -> None:
    cell = Cell("c")
    result, _ = unit_result(
        cell,
        JobState("5", "CANCELLED", reason="Priority"),
        tmp_path,
        tmp_path / "job.sh",
        0.0,
        deadline=600.0,
    )
    (job,) = result.records
    assert job.final.message == (
        "cell c: job 5 still waiting to start when the run's deadline (600 s) passed "
        "(waiting for: Priority): cancelled"
    )
    assert (job.final.kind, job.properties["executor-state"]) == (KIND_TIMEOUT, "CANCELLED")


def test_job_output_cut_inside_a_character_is_kept_readable(tmp_path: Path) -> None:
    cell = Cell("c")
    # the last 4000 bytes of the output start inside an é
    (tmp_path / "job-7.out").write_bytes("é".encode() * 2500 + b"x")
    (tmp_path / "job-8.out").write_bytes(b"srun: error: \xff\xfe bad bytes\n")
    seven, _ = unit_result(cell, JobState("7", "FAILED"), tmp_path, tmp_path / "job.sh", 1.0)
    eight, _ = unit_result(cell, JobState("8", "FAILED"), tmp_path, tmp_path / "job.sh", 1.0)
    assert seven.records[-1].final.stderr == "\ufffd" + "é" * 1999 + "x"
    assert eight.records[-1].final.stderr == "srun: error: \ufffd\ufffd bad bytes\n"
    none, _ = unit_result(cell, JobState("6", "FAILED"), tmp_path, tmp_path / "job.sh", 1.0)
    assert none.records[-1].final.stderr == ""


def _events(logs: Path, rank: int, events: list[dict[str, object]]) -> None:
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"launch1.rank{rank}.events.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in events)
    )


def _ran(nodeid: str) -> list[dict[str, object]]:
    return [
        {"event": "start", "nodeid": nodeid},
        *(
            {"event": "report", "nodeid": nodeid, "when": w, "outcome": "passed", "duration": 0.25}
            for w in ("setup", "call", "teardown")
        ),
        {"event": "finish", "nodeid": nodeid},
    ]


def _unreported(nodeid: str) -> list[dict[str, object]]:
    return [{"event": "start", "nodeid": nodeid}, {"event": "finish", "nodeid": nodeid}]


def test_a_rank_that_reported_no_phase_of_a_finished_test_errors_it(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _events(logs, 0, _ran("t.py::TestK::test_a") + _ran("t.py::test_b"))
    _events(logs, 1, _unreported("t.py::TestK::test_a") + _ran("t.py::test_b"))
    records = finished_tests(logs, Cell("c", processes=2), JobState("7", "NODE_FAIL", "n1,n2"))
    assert [(r.nodeid, r.file, r.final.outcome) for r in records] == [
        ("t.py::TestK::test_a", "t.py", ERROR),
        ("t.py::test_b", "t.py", PASSED),
    ]
    assert records[0].final.message == "rank 1: pytest reported no phase of this test"
    silent = tmp_path / "silent"
    _events(silent, 0, _ran("t.py::test_b"))
    _events(silent, 1, _unreported("t.py::test_b"))
    (only,) = finished_tests(silent, Cell("c", processes=2), JobState("7", "NODE_FAIL", "n1,n2"))
    assert only.final.message == "rank 1: pytest reported no phase of this test"
