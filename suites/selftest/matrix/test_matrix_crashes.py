"""Every way a test process can die still yields that test's record, and the cell goes on.

One supervised run over a throwaway suite in which crash tests sit between passing tests: each
crash must cost exactly the test that caused it (the supervisor restarts pytest for the rest).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from matrix_helpers import run_cell, run_matrix, write_matrix, write_suite

from harness.report.records import (
    ERROR,
    FAILED,
    KIND_EXIT,
    KIND_MEMORY,
    KIND_SIGNAL,
    KIND_TIMEOUT,
    PASSED,
)

SUITE = {
    "tests/test_kinds.py": '''
        import ctypes, os, signal, time

        import jax  # at collection, so no test's time limit pays for JAX's start

        def test_before(record_property):
            record_property("scenario", "demo-scenario")
            print("output of a passing test")

        def test_segv():
            ctypes.string_at(0)  # a real invalid read: SIGSEGV

        def test_between_1():
            pass

        def test_abort():
            os.write(2, b"F0000 client.cc:80] Check failed: buffer is deleted\\n")  # native, not captured
            os.abort()  # what a failed CHECK in native code does

        def test_between_2():
            pass

        def test_hang():
            time.sleep(120)

        def test_exit():
            os._exit(3)

        def test_hang_past_the_timer():
            import faulthandler
            faulthandler.cancel_dump_traceback_later()  # the in-process timer cannot help here
            time.sleep(120)

        def test_dies_inside_its_timed_dump(request):
            # what the per-test timer's dump leaves when it crashes the process (CPython issues
            # 131580, 116008): its header and a first thread, then death by a signal, unreported
            import faulthandler
            faulthandler.cancel_dump_traceback_later()
            with open(request.config.getoption("xharness_stack"), "a") as stack:
                stack.write("Timeout (0:00:03)!\\nThread 0x00007f0000000001 (most recent call first):\\n")
            faulthandler.disable()
            os.kill(os.getpid(), signal.SIGSEGV)

        def test_memory():
            bytearray(1 << 62)

        def test_fails():
            assert 1 + 1 == 3

        def test_after():
            assert jax.device_count() == 2
    ''',
}

MATRIX = """
    [cells.c2]
    backend = "cpu"
    devices = 2
    paths = ["tests"]
    timeout = 3
"""


def test_each_crash_kind_is_recorded_and_the_rest_of_the_cell_runs(tmp_path: Path) -> None:
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, MATRIX)
    result = run_matrix(tmp_path)
    assert result.returncode == 1, result.stderr
    records = result.records("c2")
    ids = {n.rsplit("::", 1)[1]: r for n, r in records.items()}
    assert sorted(ids) == sorted(
        ["test_before", "test_segv", "test_between_1", "test_abort", "test_between_2", "test_hang",
         "test_exit", "test_hang_past_the_timer", "test_dies_inside_its_timed_dump", "test_memory", "test_fails",
         "test_after"]
    )
    for name in ("test_before", "test_between_1", "test_between_2", "test_after"):
        assert ids[name].final.outcome == PASSED, (name, ids[name].final.message)

    expected = {  # name -> (outcome, kind, signal, exit code, text the stack must show)
        "test_segv": (ERROR, KIND_SIGNAL, signal.SIGSEGV, None, "test_segv"),
        "test_abort": (ERROR, KIND_SIGNAL, signal.SIGABRT, None, "test_abort"),
        "test_hang": (ERROR, KIND_TIMEOUT, None, None, "test_hang"),
        "test_exit": (ERROR, KIND_EXIT, None, 3, ""),
        # the supervisor's watchdog: stacks on request (SIGUSR1), then SIGTERM
        "test_hang_past_the_timer": (ERROR, KIND_TIMEOUT, None, None, "test_hang_past_the_timer"),
        # a signal inside the timer's own dump is the hang the dump was for, not a crash
        "test_dies_inside_its_timed_dump": (ERROR, KIND_TIMEOUT, None, None, "Timeout (0:00:03)"),
        "test_memory": (ERROR, KIND_MEMORY, None, None, "MemoryError"),
        "test_fails": (FAILED, "", None, None, "assert"),
    }
    problems = []
    for name, (outcome, kind, sig, code, text) in expected.items():
        attempt = ids[name].final
        seen = (attempt.outcome, attempt.kind, attempt.signal, attempt.exit_code)
        if seen != (outcome, kind, sig, code) or text not in attempt.details:
            problems.append(f"{name}: got {seen}, details {attempt.details[:300]!r}")
    assert not problems, "\n".join(problems)

    # the native output of the dying test is kept with its record
    assert "Check failed: buffer is deleted" in ids["test_abort"].final.stderr
    hang = ids["test_hang"].final
    assert "Timeout (0:00:03)" in hang.details  # faulthandler dumped every thread
    assert 2.5 < hang.duration < 30
    # the record carries the cell, the versions, what the test recorded, and a repro line
    props = ids["test_before"].properties
    assert props["cell"] == "c2" and props["devices"] == "2" and props["backend"] == "cpu"
    assert props["scenario"] == "demo-scenario"
    assert props["jax"] and props["jaxlib"]
    assert props["repro"].endswith("--cells c2 -- tests/test_kinds.py::test_before")
    assert "output of a passing test" in ids["test_before"].final.stdout
    watchdog = ids["test_hang_past_the_timer"].final
    assert 5 < watchdog.duration < 30  # limit 3 s, plus at most as much grace again
    dump = ids["test_dies_inside_its_timed_dump"].final
    assert "inside the dump of its thread stacks" in dump.message and "SIGSEGV" in dump.message
    # one launch for the start, one restart per process death (segv, abort, hang, exit, hang, dump)
    assert "7 launch(es)" in result.stdout
    assert (result.out / "junit.xml").exists() and (result.out / "index.html").exists()


@pytest.mark.jax_independent  # a test of plain Python, the compile cache off
def test_a_cell_that_cannot_start_or_selects_nothing_still_has_a_record(tmp_path: Path) -> None:
    write_suite(tmp_path, {"tests/test_ok.py": "def test_ok():\n    pass\n"})
    write_matrix(tmp_path, MATRIX)
    broken = run_matrix(tmp_path, "--compile-cache", "off", "--", "--no-such-flag")
    assert broken.returncode == 1
    (record,) = broken.records("c2").values()
    assert (record.classname, record.name, record.file) == ("xharness", "startup", "matrix.toml")
    assert (record.final.outcome, record.final.kind, record.final.exit_code) == (ERROR, KIND_EXIT, 4)
    assert "unrecognized arguments: --no-such-flag" in record.final.stderr
    assert record.properties["repro"].endswith("--cells c2 -- tests --no-such-flag")

    empty = run_matrix(tmp_path, "--compile-cache", "off", "--", "-k", "no_such_test")
    assert empty.returncode == 1
    assert [r.name for r in empty.records("c2").values()] == ["no-tests"]


@pytest.mark.jax_independent  # a test of plain Python
def test_a_process_that_makes_no_progress_before_any_test_is_stopped_saying_so(tmp_path: Path) -> None:
    """Stuck in collection, so no test's time limit ran out: the record gives the watchdog's own
    reason (no progress for its idle limit), not a time limit the process never had."""
    write_suite(tmp_path, {"tests/conftest.py": "import time\ntime.sleep(120)\n",
                           "tests/test_ok.py": "def test_ok():\n    pass\n"})
    write_matrix(tmp_path, '[cells.c]\ndevices = 1\npaths = ["tests"]\ntimeout = 30\n')
    (record,) = run_cell(tmp_path, "c", idle_limit=2.0, grace=1.0)
    assert (record.nodeid, record.final.outcome, record.final.kind) == ("xharness::startup", ERROR, KIND_TIMEOUT)
    assert record.final.message.startswith(
        "pytest made no progress for 2s outside any test (start-up, collection or shutdown); stopped by the "
        "supervisor (stacks dumped on request) before any test started"), record.final.message
