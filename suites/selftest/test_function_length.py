"""Functions a reader can hold: no function of the harness is over 80 lines, except a template of
data (a workflow, a page), whose docstring says so by starting with "A template of data". The
check is run on a planted module too, so that a check that cannot fail is caught."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

# the harness's source text: the same outcome on every JAX
pytestmark = pytest.mark.jax_independent

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80
TEMPLATE = "A template of data"


def long_functions(package_dir: Path, limit: int = LIMIT) -> list[str]:
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit and not (ast.get_docstring(node) or "").startswith(TEMPLATE):
                found.append(f"{path.relative_to(package_dir.parent)}:{node.lineno}: {node.name} ({length} lines)")
    return found


def test_no_function_is_over_the_limit() -> None:
    found = long_functions(ROOT / "harness")
    assert not found, f"functions over {LIMIT} lines (split them by what they do):\n" + "\n".join(found)


def test_the_check_finds_a_planted_long_function(tmp_path: Path) -> None:
    package = tmp_path / "planted"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (package / "long.py").write_text(
        f"def too_long():\n{body}\n\n\ndef page():\n    '''{TEMPLATE}: a page.'''\n{body}\n")
    assert long_functions(package) == [f"planted/long.py:1: too_long ({LIMIT + 1} lines)"]
