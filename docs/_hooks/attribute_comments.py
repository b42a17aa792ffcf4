"""A griffe extension: an attribute documented by a comment is documented in the API reference.

The harness documents a field where it is declared, the way Sphinx reads it: a ``#:`` comment on
the lines above the field, or a comment at the end of the field's own line. Griffe reads only
string docstrings, so this extension turns those comments into the attribute's docstring when it
has none (``mkdocs.yml``: ``extensions`` of the python handler). A trailing comment that is a
tool's pragma (``noqa``, ``type:``, ``pragma``) is not documentation and is left out.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path
from typing import Any

import griffe

_PRAGMAS = ("noqa", "type:", "pragma", "fmt:", "pylint:")


def _lines(attr: griffe.Attribute, agent: Any) -> list[str]:
    code = getattr(agent, "code", None)
    if isinstance(code, str):
        return code.splitlines()
    path = attr.filepath
    return Path(path).read_text(encoding="utf-8").splitlines() if isinstance(path, Path) else []


def _trailing_comment(line: str) -> str:
    """The comment that ends ``line`` (tokenized, so a ``#`` inside a string is not one)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return ""
    found = [t.string for t in tokens if t.type == tokenize.COMMENT]
    if not found or found[-1].startswith("#:"):
        return ""
    text = found[-1].lstrip("#").strip()
    return "" if text.lower().startswith(_PRAGMAS) else text


def comment_doc(lines: list[str], lineno: int) -> str:
    """The documentation comments of the statement on line ``lineno`` (1-based): the ``#:`` block
    right above it, else its trailing comment."""
    above: list[str] = []
    i = lineno - 2
    while i >= 0 and lines[i].strip().startswith("#:"):
        above.insert(0, lines[i].strip()[2:].strip())
        i -= 1
    if above:
        return " ".join(above).strip()
    return _trailing_comment(lines[lineno - 1]) if 0 < lineno <= len(lines) else ""


class AttributeComments(griffe.Extension):
    """Comments (``#:`` above, or trailing) become the docstrings of the attributes they document."""

    def on_attribute_instance(self, *, node: ast.AST | griffe.ObjectNode, attr: griffe.Attribute,
                              agent: griffe.Visitor | griffe.Inspector, **kwargs: Any) -> None:
        if attr.docstring is not None or attr.lineno is None:
            return
        text = comment_doc(_lines(attr, agent), attr.lineno)
        if text:
            attr.docstring = griffe.Docstring(text, lineno=attr.lineno, endlineno=attr.lineno, parent=attr)
