"""The one line a failure is known by: the JUnit ``message``, the terminal's line, the dashboard's
and the step summary's.

Every reader shows the message's first line only, so that line must say what went wrong. pytest's
crash message does for an ordinary exception, but not always: an exception raised with its text
on the next lines (numpy's ``AssertionError: \\nArrays are not equal``) has a first line with
nothing after the name, and an item whose failure is a report of its own (a project scenario's
verdict: ``regressed: expected passed ..., got reproduced``) has no crash message at all, so its
words were only in the stack text.
"""

from __future__ import annotations

import re

#: a first line that names an exception and says nothing else (``AssertionError:``)
_BARE = re.compile(r"^[A-Za-z_][\w.]*:?\s*$")
#: the lines of pytest's report that carry the exception (``E   AssertionError: ...``)
_E_LINE = re.compile(r"^E\s+(?P<text>\S.*)$")


def headline(message: str, report: str) -> str:
    """``message`` (pytest's crash message; "" when it has none) with a first line that says
    something, taken from its own later lines, else from ``report`` (the failure's text as
    pytest shows it); "" when neither says anything."""
    lines = message.strip("\n").splitlines()
    if lines and not _BARE.match(lines[0]):
        return message.strip()
    name = lines[0].strip().rstrip(":") if lines else ""
    said = next((line.strip() for line in lines[1:] if line.strip()), "")
    if not said:
        said = _said_in(report, name)
    if not said:
        return message.strip()
    rest = lines[1:]
    while rest and not rest[0].strip():
        rest.pop(0)
    if rest and rest[0].strip() == said:
        rest.pop(0)
    first = f"{name}: {said}" if name and not said.startswith(name) else said
    return "\n".join([first, *rest]).strip()


def _said_in(report: str, name: str) -> str:
    """The first meaningful line of a failure's report: after its ``E`` line naming the
    exception, the next ``E`` line; with no ``E`` lines (a report an item wrote itself), its
    first non-blank line."""
    lines = report.splitlines()
    e_lines = [m.group("text").strip() for line in lines if (m := _E_LINE.match(line))]
    if e_lines:
        meaningful = [t for t in e_lines if not _BARE.match(t) and t.rstrip(":") != name]
        return meaningful[0] if meaningful else ""
    return next((line.strip() for line in lines if line.strip()), "")
