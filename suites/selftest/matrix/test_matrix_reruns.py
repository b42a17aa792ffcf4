"""``--reruns``: a test that fails then passes is flaky (exit 0, flagged); one that always fails
keeps every attempt. A crash on the first attempt counts as a failed attempt like any other."""

from __future__ import annotations

from pathlib import Path

import pytest
from matrix_helpers import run_matrix, write_matrix, write_suite

from harness.report.records import ERROR, FAILED, FLAKY, KIND_SIGNAL, PASSED

# a suite of plain Python tests, the compile cache off: the same on every JAX
pytestmark = pytest.mark.jax_independent

SUITE = {
    "tests/test_flaky.py": '''
        import ctypes, os
        from pathlib import Path

        STATE = Path(os.environ["STATE_DIR"])

        def first_time(name):
            mark = STATE / name
            if mark.exists():
                return False
            mark.write_text("")
            return True

        def test_flaky_failure():
            assert not first_time("failure"), "fails on the first attempt only"

        def test_flaky_crash():
            if first_time("crash"):
                ctypes.string_at(0)

        def test_steady():
            pass

        def test_always_fails():
            assert False, "broken for good"
    ''',
}

MATRIX = """
    [cells.one]
    devices = 1
    paths = ["tests"]
    timeout = 30
    env = {{ STATE_DIR = "{state}" }}
"""


def _setup(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, MATRIX.format(state=state))


def test_reruns_classify_flaky_and_failed(tmp_path: Path) -> None:
    _setup(tmp_path)
    result = run_matrix(tmp_path, "--reruns", "2", "--compile-cache", "off")
    assert result.returncode == 1, result.stdout + result.stderr
    records = {n.rsplit("::", 1)[1]: r for n, r in result.records("one").items()}
    assert records["test_steady"].classification == PASSED and len(records["test_steady"].attempts) == 1

    flaky = records["test_flaky_failure"]
    assert flaky.classification == FLAKY
    assert [a.outcome for a in flaky.attempts] == [FAILED, PASSED]

    crash = records["test_flaky_crash"]
    assert crash.classification == FLAKY
    assert [(a.outcome, a.kind) for a in crash.attempts] == [(ERROR, KIND_SIGNAL), (PASSED, "")]

    broken = records["test_always_fails"]
    assert broken.classification == FAILED
    assert [a.outcome for a in broken.attempts] == [FAILED, FAILED, FAILED]
    assert "broken for good" in broken.final.message
    assert "FLAKY (passed on rerun): one: tests/test_flaky.py::test_flaky_failure" in result.stdout


def test_only_flaky_failures_exit_0_and_pytest_args_pass_through(tmp_path: Path) -> None:
    _setup(tmp_path)
    result = run_matrix(tmp_path, "--reruns", "1", "--compile-cache", "off", "--", "-k", "not always")
    assert result.returncode == 0, result.stdout + result.stderr
    records = result.records("one")
    assert len(records) == 3
    assert sorted(r.classification for r in records.values()) == [FLAKY, FLAKY, PASSED]
