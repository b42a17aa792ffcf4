"""The result records every part of the harness exchanges.

The supervisor (``harness.matrix``) builds them from the plugin's event stream, the JUnit writer
(``harness.report.junit``) turns them into XML, and the merge reads them back. Keeping one small
value type here means a crash, a timeout and a normal failure all travel the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: outcomes of one attempt at one test
PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
#: a known bug: the test failed as its expectation says it must (pytest's xfail; a release whose
#: expected row says the bug reproduces, and it did). Never a pass, never a failure: JUnit carries
#: it as ``<skipped type="pytest.xfail">``, as pytest's own writer does, so every reader shows it
#: apart from both
XFAILED = "xfailed"
#: the ``type`` of the ``<skipped>`` element that stands for :data:`XFAILED` (pytest's)
XFAIL_TYPE = "pytest.xfail"
#: classification of a (test, cell) over all its attempts
FLAKY = "flaky"

#: error kinds for records that pytest itself could not write
KIND_EXCEPTION = "exception"  # an ordinary test error (fixture/setup) reported by pytest
KIND_SIGNAL = "signal"  # the process died on a signal (SIGSEGV, SIGABRT, ...)
KIND_EXIT = "exit"  # the process left with os._exit(n) / sys.exit mid-test
KIND_TIMEOUT = "timeout"  # the test ran past its time limit
KIND_MEMORY = "memory"  # MemoryError or the out-of-memory killer
KIND_RANK = "rank"  # one rank of a multi-process cell failed or hung


@dataclass
class Attempt:
    """One run of one test: what pytest (or the supervisor, after a crash) saw."""

    outcome: str
    duration: float = 0.0
    message: str = ""
    details: str = ""  # traceback or native stack
    stdout: str = ""
    stderr: str = ""
    kind: str = ""  # one of KIND_* for errors, "" otherwise
    signal: int | None = None
    exit_code: int | None = None


@dataclass
class TestRecord:
    """All attempts at one logical test in one matrix cell."""

    __test__ = False  # not a pytest test class

    nodeid: str
    cell: str
    file: str = ""
    line: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def classname(self) -> str:
        """Dotted module path plus class, the way pytest's own JUnit writer names it."""
        path, _, rest = self.nodeid.partition("::")
        module = path.removesuffix(".py").replace("/", ".")
        parts = rest.split("::")[:-1]
        return ".".join([module, *parts]) if parts else module

    @property
    def name(self) -> str:
        return self.nodeid.split("::")[-1]

    @property
    def final(self) -> Attempt:
        return self.attempts[-1]

    @property
    def classification(self) -> str:
        """passed, failed, flaky, error or skipped, over every attempt (Surefire semantics)."""
        if not self.attempts:
            return ERROR
        last = self.final.outcome
        if last == PASSED:
            return FLAKY if any(a.outcome in (FAILED, ERROR) for a in self.attempts) else PASSED
        return last

    @property
    def duration(self) -> float:
        return sum(a.duration for a in self.attempts)
