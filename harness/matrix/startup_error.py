"""pytest's own words for a cell that stopped before its first test.

When pytest cannot start (a configuration file that does not parse, an unknown option, a
``conftest.py`` that cannot be imported) it says why on its standard error and exits, and the
cell's record would otherwise say only "pytest exited with code 4": the reason would be in a
rank's log, which a reader of the JUnit file, the dashboard or the step summary never opens. This
finds the line that says it, so the record's message carries it.
"""

from __future__ import annotations

import re

#: what pytest writes when it cannot start, most telling first: its ``ERROR:`` lines (a usage
#: error, a configuration file it cannot read), argparse's ``prog: error:``, the ``E   `` lines of
#: an import error's report, then the last line of a traceback
_PATTERNS = (
    re.compile(r"^ERROR: (?!usage:)(?P<said>.+)$"),
    re.compile(r"^[\w.-]+: error: (?P<said>.+)$"),
    re.compile(r"^E\s+(?P<said>\S.*)$"),
    re.compile(r"^(?P<said>[A-Za-z_][\w.]*(?:Error|Exception): .+)$"),
)


def pytest_error_line(log: str) -> str:
    """The line of ``log`` (a rank's raw output) in which pytest says why it did not start, "" when
    it says nothing recognisable. The last line of the most telling kind wins: the first
    ``E`` lines of a report are the traceback's, its last the exception."""
    lines = [line.rstrip() for line in log.splitlines()]
    for pattern in _PATTERNS:
        found = [m.group("said").strip() for line in lines if (m := pattern.match(line))]
        if found:
            return found[-1]
    return ""
