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
#: where hypothesis' note of the shrunk example starts (its wording changed between releases)
_EXAMPLE = re.compile(r"^(?:E\s+)?(?:Failing test case|Falsifying example): (?P<call>[\w.]+\()", re.MULTILINE)
#: the most of an example's one-line form a headline carries
EXAMPLE_CHARS = 240


def headline(message: str, report: str) -> str:
    """``message`` (pytest's crash message; "" when it has none) with a first line that says
    something, taken from its own later lines, else from ``report`` (the failure's text as
    pytest shows it); "" when neither says anything. A property's failure (hypothesis' note of
    its shrunk example in either) ends its first line with the example's one-line form, since
    the example is what a reader replays."""
    said = _first_line(message, report)
    example = shrunk_example(message) or shrunk_example(report)
    if not example or example in said.split("\n", 1)[0]:
        return said
    first, _, rest = said.partition("\n")
    return f"{first} (shrunk example: {example})" + (f"\n{rest}" if rest else "")


def shrunk_example(text: str) -> str:
    """Hypothesis' note of the shrunk example (``Failing test case: f(\n    x=1,\n)``) on one
    line, its comments left out: ``f(x=1)``; "" where ``text`` has none."""
    found = _EXAMPLE.search(text)
    if not found:
        return ""
    depth, parts = 0, []
    for line in text[found.start("call"):].splitlines()[:200]:
        line = re.sub(r"^E\s+", "", line) if line.startswith("E ") else line
        code = re.sub(r"\s+#.*$", "", line).strip()
        parts.append(code)
        depth += code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")
        if depth <= 0:
            break
    one = re.sub(r",\s+([)\]}])", r"\1", " ".join(parts))  # a trailing comma, not a 1-tuple's
    one = re.sub(r"([(\[{])\s+", r"\1", one)
    return one if len(one) <= EXAMPLE_CHARS else one[: EXAMPLE_CHARS - 1] + "…"


def _first_line(message: str, report: str) -> str:
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
