"""JUnit XML for one matrix cell: records in, records out.

The supervisor writes ``reports/junit/<cell>.xml`` here rather than letting pytest do it, because
pytest's writer loses reruns and a crashed process loses the whole file. The layout follows what
the common readers understand without help (Jenkins' junit-10.xsd, Maven Surefire's rerun
semantics, EnricoMi/publish-unit-test-result-action, mikepenz/action-junit-report):

* one ``<testsuite>`` per cell, one ``<testcase>`` per logical test, so a test that was rerun is
  counted once;
* the final result element (``<failure>``, ``<error>``, ``<skipped>`` or none) describes the *last*
  attempt, so the suite counts agree with :attr:`TestRecord.classification`;
* earlier failed attempts become ``<flakyFailure>``/``<flakyError>`` when the test finally passed,
  ``<rerunFailure>``/``<rerunError>`` when it did not, oldest first, each with its stack trace
  and output (earlier *passing* attempts leave no element, only the ``attempts`` count);
* crashes, exits, timeouts and killed ranks are ``<error type="KIND">`` whose message names the
  signal or exit code, with the native stack in ``<system-err>``;
* test-case properties carry everything needed to reproduce the run, plus ``attempts`` and the
  per-attempt ``durations``.

Everything written here reads back into equal records through :func:`read_records` (which also
accepts other tools' JUnit files, e.g. pytest's), so merge and the dashboard work from files only.
"""

from __future__ import annotations

import io
import re
import signal
import socket
from datetime import UTC, datetime
from pathlib import Path
from xml.etree.ElementTree import ParseError

from junitparser import Attr, Error, Failure, JUnitXmlError, Skipped, xunit2

from harness.report.files import write_atomic
from harness.report.properties import PROP_ATTEMPTS, PROP_DURATIONS, PROP_NODEID
from harness.report.records import (
    ERROR,
    FAILED,
    KIND_EXCEPTION,
    KIND_EXIT,
    KIND_MEMORY,
    KIND_RANK,
    KIND_SIGNAL,
    KIND_TIMEOUT,
    PASSED,
    SKIPPED,
    XFAIL_TYPE,
    XFAILED,
    Attempt,
    TestRecord,
)

#: error kinds produced by the supervisor rather than by pytest: their stack goes to system-err
CRASH_KINDS = frozenset({KIND_SIGNAL, KIND_EXIT, KIND_TIMEOUT, KIND_MEMORY, KIND_RANK})
_KINDS = CRASH_KINDS | {KIND_EXCEPTION}


#: caps that keep one runaway test from producing a report no reader can open
MAX_MESSAGE_CHARS = 8 * 1024
MAX_TEXT_CHARS = 512 * 1024

# Characters XML 1.0 cannot carry at all (NUL, most C0 controls, lone surrogates, U+FFFE/F).
_XML_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SIGNAL_RE = re.compile(r"\bsignal (\d+)\b")
_EXIT_RE = re.compile(r"\bexit code (-?\d+)\b")
_EXC_NAME_RE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt)):")


class ReportInputError(Exception):
    """A file that is not readable JUnit XML; the message names the file and the problem."""


class Case(xunit2.TestCase):
    """``<testcase>`` with the ``file``/``line`` attributes annotators use to place a failure."""

    file = Attr()
    line = Attr()


class Suite(xunit2.TestSuite):
    testcase = Case


class Report(xunit2.JUnitXml):
    testsuite = Suite


# --------------------------------------------------------------------------------------- writing


def xml_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """Make test output storable: escape characters XML forbids, keep the tail of huge output.

    Forbidden characters (ANSI escapes, NUL) become visible ``\\xNN`` so nothing is silently lost;
    the tail is kept because the end of a log is where a crash shows.
    """
    clean = _XML_INVALID.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(clean) > limit:
        dropped = len(clean) - limit
        clean = f"[... {dropped} characters dropped ...]\n" + clean[-limit:]
    return clean


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def attempt_message(attempt: Attempt) -> str:
    """The message attribute: for crashes it always names the signal or the exit code.

    Idempotent (a message that already starts with the crash prefix is kept), so reading a file
    back and writing it again does not stack prefixes.
    """
    message = attempt.message.strip()
    prefix = ""
    if attempt.kind == KIND_SIGNAL and attempt.signal is not None:
        prefix = f"killed by signal {attempt.signal} ({signal_name(attempt.signal)})"
    elif attempt.kind == KIND_EXIT and attempt.exit_code is not None:
        prefix = f"exited with exit code {attempt.exit_code}"
    elif attempt.kind == KIND_TIMEOUT and not message:
        prefix = "timed out"
    elif attempt.kind == KIND_MEMORY and not message:
        prefix = "out of memory"
    elif attempt.kind == KIND_RANK:
        numbers = []
        if attempt.signal is not None:
            numbers.append(f"signal {attempt.signal} ({signal_name(attempt.signal)})")
        if attempt.exit_code is not None:
            numbers.append(f"exit code {attempt.exit_code}")
        if numbers:  # kept in the message so that reading the file back recovers them
            prefix = f"a rank of the multi-process cell failed ({', '.join(numbers)})"
        elif not message:
            prefix = "a rank of the multi-process cell failed"
    if prefix and not message.startswith(prefix):
        message = f"{prefix}: {message}" if message else prefix
    return xml_text(message, MAX_MESSAGE_CHARS)


def _result_type(attempt: Attempt) -> str:
    """``type`` attribute: the error kind, else the exception class named by the message."""
    if attempt.kind:
        return attempt.kind
    match = _EXC_NAME_RE.match(attempt.message.strip())
    if match:
        return match.group(1)
    return "failure" if attempt.outcome == FAILED else "error"


def _nodeid_path(record: TestRecord) -> str:
    return record.nodeid.partition("::")[0]


def _system_err(attempt: Attempt) -> str:
    """stderr, and for a crash the native stack too (the first thing a reader of a crash needs)."""
    if attempt.kind in CRASH_KINDS and attempt.details and attempt.details not in attempt.stderr:
        return f"{attempt.details}\n{attempt.stderr}" if attempt.stderr else attempt.details
    return attempt.stderr


def _interim(attempt: Attempt, passed_finally: bool) -> xunit2.InterimResult:
    if attempt.outcome == ERROR:
        cls = xunit2.FlakyError if passed_finally else xunit2.RerunError
    else:
        cls = xunit2.FlakyFailure if passed_finally else xunit2.RerunFailure
    result = cls(attempt_message(attempt), _result_type(attempt))
    if not result.message:  # Result() drops empty messages; keep the attribute for readers
        result.message = ""
    if attempt.details:
        result.stack_trace = xml_text(attempt.details)
    if attempt.stdout:
        result.system_out = xml_text(attempt.stdout)
    err = _system_err(attempt)
    if err:
        result.system_err = xml_text(err)
    return result


def cell_title(record: TestRecord) -> str:
    """The name a merged report gives a test: its cell, then its node id (``cpu-8:
    suites/x.py::test_y``), which is what JUnit readers print as the test's title (GitHub
    annotations, EnricoMi's and mikepenz's actions), so a failure says where it failed, and a test
    that fails in several cells is one row per cell."""
    return f"{record.cell}: {record.nodeid}"


def record_to_case(record: TestRecord, title: str | None = None) -> Case:
    """One ``<testcase>`` for all attempts at one test (see the module docstring for the layout);
    ``title`` replaces its name (the node id then travels as a property)."""
    case = Case(title or record.name, record.classname, round(record.duration, 3))
    case.file = record.file or _nodeid_path(record)
    if record.line is not None:
        case.line = str(record.line)
    for key, value in record.properties.items():
        if key not in (PROP_ATTEMPTS, PROP_DURATIONS, PROP_NODEID):
            case.add_property(xml_text(str(key), 256), xml_text(str(value), MAX_MESSAGE_CHARS))
    case.add_property(PROP_ATTEMPTS, str(len(record.attempts)))
    if _nodeid(record.classname, case.name, case.file) != record.nodeid:
        case.add_property(PROP_NODEID, xml_text(record.nodeid, MAX_MESSAGE_CHARS))
    if len(record.attempts) > 1:
        case.add_property(PROP_DURATIONS, ",".join(f"{a.duration:.3f}" for a in record.attempts))

    if not record.attempts:
        case.result = Error("no attempt of this test was recorded", "no-result")
        return case
    final = record.final
    passed_finally = final.outcome == PASSED
    if final.outcome in (FAILED, ERROR):
        cls = Failure if final.outcome == FAILED else Error
        result = cls(attempt_message(final), _result_type(final))
        if final.details:
            result.text = xml_text(final.details)
        case.result = result
    elif final.outcome in (SKIPPED, XFAILED):
        skipped = Skipped()
        skipped.message = xml_text(final.message, MAX_MESSAGE_CHARS)
        if final.outcome == XFAILED:
            skipped.type = XFAIL_TYPE
        if final.details:
            skipped.text = xml_text(final.details)
        case.result = skipped
    for earlier in record.attempts[:-1]:
        if earlier.outcome in (FAILED, ERROR):
            case.add_interim_result(_interim(earlier, passed_finally))
    if final.stdout:
        case.system_out = xml_text(final.stdout)
    err = _system_err(final)
    if err:
        case.system_err = xml_text(err)
    return case


def build_suite(cell: str, records: list[TestRecord], titled: bool = False) -> Suite:
    """The ``<testsuite>`` of one cell, statistics computed; ``titled``: each test named by
    ``cell_title`` (the merged report, read where the cells are side by side)."""
    suite = Suite(cell)
    suite.timestamp = datetime.now(UTC).isoformat(timespec="seconds")
    suite.hostname = socket.gethostname()
    suite.add_testcases([record_to_case(r, cell_title(r) if titled else None) for r in records])
    return suite


def to_bytes(report: Report) -> bytes:
    buffer = io.BytesIO()
    report.write(buffer)
    return buffer.getvalue()


def write_report(report: Report, path: Path) -> None:
    """Write a whole ``<testsuites>`` document atomically, statistics recomputed first."""
    report.update_statistics()
    write_atomic(path, to_bytes(report))


def write_cell_xml(cell: str, records: list[TestRecord], path: Path) -> None:
    """Write ``path`` (``reports/junit/<cell>.xml``): one testsuite, one testcase per record."""
    report = Report()
    report.add_testsuite(build_suite(cell, records))
    write_report(report, path)


# --------------------------------------------------------------------------------------- reading


def load_report(path: Path) -> Report:
    """Parse a JUnit file, refusing anything that is not JUnit with a message naming ``path``."""
    try:
        report = Report.fromfile(str(path))
    except ParseError as exc:
        raise ReportInputError(f"{path}: not well-formed XML ({exc})") from exc
    except JUnitXmlError as exc:
        raise ReportInputError(
            f"{path}: not a JUnit report (root element must be <testsuites> or <testsuite>)"
        ) from exc
    except OSError as exc:
        raise ReportInputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return report


def _nodeid(classname: str, name: str, file: str) -> str:
    """Rebuild a pytest node id; exact for our own files (``file`` is the node id's path)."""
    if file:
        module = file.removesuffix(".py").replace("/", ".")
        if classname == module:
            return f"{file}::{name}"
        if classname.startswith(module + "."):
            classes = classname[len(module) + 1 :].replace(".", "::")
            return f"{file}::{classes}::{name}"
    return f"{classname.replace('.', '/')}.py::{name}"


def _kind(result_type: str | None) -> str:
    return result_type if result_type in _KINDS else ""


def _crash_numbers(attempt: Attempt) -> None:
    """Recover the signal number or exit code from a crash message written by this module."""
    if attempt.kind in (KIND_SIGNAL, KIND_RANK) and (m := _SIGNAL_RE.search(attempt.message)):
        attempt.signal = int(m.group(1))
    if attempt.kind in (KIND_EXIT, KIND_RANK) and (m := _EXIT_RE.search(attempt.message)):
        attempt.exit_code = int(m.group(1))


def _stderr_back(attempt: Attempt, system_err: str | None) -> str:
    """stderr as it was before :func:`_system_err` put a crash's native stack in front of it."""
    err = system_err or ""
    if attempt.kind in CRASH_KINDS and attempt.details:
        if err == attempt.details:
            return ""
        head = f"{attempt.details}\n"
        if err.startswith(head) and attempt.details not in err[len(head) :]:
            return err[len(head) :]
    return err


def _attempt_from_interim(result: xunit2.InterimResult) -> Attempt:
    outcome = ERROR if isinstance(result, xunit2.FlakyError | xunit2.RerunError) else FAILED
    attempt = Attempt(
        outcome=outcome,
        message=result.message or "",
        details=result.stack_trace or (result.text or "").strip(),
        stdout=result.system_out or "",
        kind=_kind(result.type),
    )
    attempt.stderr = _stderr_back(attempt, result.system_err)
    _crash_numbers(attempt)
    return attempt


def case_to_record(case: Case, cell: str, source: Path) -> TestRecord:
    """Turn one ``<testcase>`` back into a record; ``source`` names the file in errors."""
    if not case.name:
        raise ReportInputError(f"{source}: a <testcase> in suite {cell!r} has no name attribute")
    classname = case.classname or cell
    try:
        time = case.time or 0.0
    except ValueError as exc:
        raise ReportInputError(f"{source}: testcase {case.name!r} has a bad time ({exc})") from exc
    properties = {p.name: p.value or "" for p in case.properties() if p.name}
    properties.pop(PROP_ATTEMPTS, None)
    durations_text = properties.pop(PROP_DURATIONS, "")

    attempts = [
        _attempt_from_interim(r)
        for r in case.interim_result
        if r._elem in list(case._elem)  # direct children only, in document order
    ]
    final = Attempt(outcome=PASSED, stdout=case.system_out or "")
    results = case.result
    if results:
        result = results[0]
        final.outcome = {Failure: FAILED, Error: ERROR, Skipped: SKIPPED}[type(result)]
        if final.outcome == SKIPPED and result.type == XFAIL_TYPE:
            final.outcome = XFAILED
        final.message = result.message or ""
        final.details = result.text or ""
        final.kind = _kind(result.type) if final.outcome == ERROR else ""
    final.stderr = _stderr_back(final, case.system_err)
    _crash_numbers(final)
    attempts.append(final)

    durations = _parse_durations(durations_text, len(attempts))
    if durations is None:
        final.duration = time
    else:
        for attempt, seconds in zip(attempts, durations, strict=True):
            attempt.duration = seconds

    file = case.file or ""
    line = case.line
    return TestRecord(
        nodeid=properties.pop(PROP_NODEID, None) or _nodeid(classname, case.name, file),
        cell=cell,
        file=file,
        line=int(line) if line and line.isdigit() else None,
        attempts=attempts,
        properties=properties,
    )


def _parse_durations(text: str, count: int) -> list[float] | None:
    if not text:
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        return None
    return values if len(values) == count else None


def records_from_report(report: Report, source: Path) -> list[TestRecord]:
    """Every test case of every top-level suite; the suite name is the cell."""
    records = []
    for suite in report:
        cell = suite.name or source.stem
        records.extend(case_to_record(case, cell, source) for case in suite)
    return records


def read_records(path: Path) -> list[TestRecord]:
    """Read a JUnit file (ours or another tool's) back into records.

    Raises :class:`ReportInputError`, naming the file, for malformed XML, a root that is not
    ``<testsuites>``/``<testsuite>``, or a test case without a name.
    """
    return records_from_report(load_report(path), path)
