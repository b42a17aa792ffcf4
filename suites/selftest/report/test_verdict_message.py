"""A failure's message says what went wrong on its first line, the line every reader shows (the
terminal, JUnit's ``message``, the dashboard, the step summary): a project scenario's verdict,
not "call failed"; a numpy assertion's text, not a bare ``AssertionError:``."""

from __future__ import annotations

from harness.matrix.outcomes import attempt_from_reports
from harness.report.headline import headline
from harness.report.junit import record_to_case
from harness.report.records import FAILED, TestRecord

VERDICT = ("shardjax-split [fixed] on shardjax 0.1.0: regressed: expected passed (expected.toml line 9), "
           "got reproduced (/repo/expected.toml)\nreplay: xharness repro shardjax-split --cell cpu-1\n"
           "  split: reproduced ShapeError\nTraceback ...")
NUMPY = ("AssertionError: \nArrays are not equal\n\nMismatched elements: 1 / 6 (16.7%)\n"
         "Max absolute difference among violations: 1.")
NUMPY_REPORT = ("    def test_values(adapter):\n>       np.testing.assert_array_equal(a, b)\n"
                "E       AssertionError: \nE       Arrays are not equal\nE       \nE       Mismatched elements: 1 / 6")


def _failed(message: str, longrepr: str) -> TestRecord:
    event = {"event": "report", "nodeid": "x.py::t", "when": "call", "outcome": "failed", "duration": 0.1,
             "message": message, "longrepr": longrepr}
    return TestRecord(nodeid="x.py::t", cell="cpu-1", attempts=[attempt_from_reports([event])])


def test_a_verdict_is_the_message_not_call_failed() -> None:
    record = _failed("", VERDICT)  # the item's own report: pytest has no crash message for it
    first = record.final.message.splitlines()[0]
    assert record.final.outcome == FAILED and first == VERDICT.splitlines()[0]
    assert "regressed: expected passed (expected.toml line 9), got reproduced" in first
    case = record_to_case(record)
    assert case.result[0].message.startswith("shardjax-split [fixed] on shardjax 0.1.0: regressed: expected passed")


def test_a_numpy_assertion_says_its_first_meaningful_line() -> None:
    record = _failed(NUMPY, NUMPY_REPORT)
    lines = record.final.message.splitlines()
    assert lines[0] == "AssertionError: Arrays are not equal"
    assert "Mismatched elements: 1 / 6 (16.7%)" in lines  # the rest is kept
    # with no text in the crash message at all, the report's E lines say it
    assert headline("AssertionError", NUMPY_REPORT).splitlines()[0] == "AssertionError: Arrays are not equal"


def test_a_message_that_says_something_is_kept_as_it_is() -> None:
    assert headline("assert 1 == 2", "E   assert 1 == 2") == "assert 1 == 2"
    assert headline("ValueError: bad axis\nmore", "") == "ValueError: bad axis\nmore"
    assert _failed("", "").final.message == "call failed"  # nothing said anywhere: the phase


#: an invariant's failure as pytest reports it: hypothesis' note of the shrunk example after it
INVARIANT_MESSAGE = (
    "AssertionError: a read whose wait timed out returned [3.0, 3.0], not [4.0, 4.0]\n"
    "Failing test case: run_example(\n"
    "    example={\n"
    "        'shape': (2,),\n"
    "        'steps': 3,\n"
    "        'slow': True,  # or any other generated value\n"
    "    },\n"
    ")\n\nYou can reproduce this test case by temporarily adding @reproduce_failure('6.1', b'AAA') ...")


def test_an_invariants_message_ends_with_its_shrunk_example_on_one_line() -> None:
    first = headline(INVARIANT_MESSAGE, "").splitlines()[0]
    assert first == ("AssertionError: a read whose wait timed out returned [3.0, 3.0], not [4.0, 4.0] "
                     "(shrunk example: run_example(example={'shape': (2,), 'steps': 3, 'slow': True}))")
    # older hypothesis says "Falsifying example", and the note may be only in the report's E lines
    report = "\n".join(f"E       {line}" for line in INVARIANT_MESSAGE.replace("Failing test case", "Falsifying example").splitlines())
    first = headline("AssertionError: a read whose wait timed out", report).splitlines()[0]
    assert first.endswith("(shrunk example: run_example(example={'shape': (2,), 'steps': 3, 'slow': True}))")
    assert headline("AssertionError: plain", "E   AssertionError: plain") == "AssertionError: plain"
