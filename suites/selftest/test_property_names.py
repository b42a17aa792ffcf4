"""A record property's name is spelled in one module, ``harness/report/properties.py``: every
writer and reader of a property uses its constant, so a renamed property breaks at import, not
silently in a report.

The scan looks at every other module of the harness for a string that names a declared property
where it is used as one: a key read from or written into something called ``properties`` or
``props`` (subscript, ``get``/``pop``/``setdefault``, ``update``, a dict literal assigned to it),
a JUnit ``add_property`` call, or a dict literal a function named after properties returns. Short
words such as ``"cell"`` or ``"seed"`` are ordinary elsewhere (TOML keys, JSON fields, flags), so
that context is what makes them property names. A name with a hyphen or an underscore in it
(``"turn-seed"``, ``"bisect-tried"``) is one anywhere. The check is also run on a planted module,
so that a check that cannot fail is caught."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.report import properties

# the harness's source text: the same outcome on every JAX
pytestmark = pytest.mark.jax_independent

ROOT = Path(__file__).resolve().parents[2]
DECLARED = {v for k, v in vars(properties).items() if k.isupper() and isinstance(v, str)}
DISTINCT = {n for n in DECLARED if "-" in n or "_" in n}
CHECK_NAMES = {properties.CHECK_CATALOG, properties.CHECK_INVARIANTS, properties.CHECK_SUITES}


def _receiver(node: ast.AST) -> bool:
    tail = ast.unparse(node).rsplit(".", 1)[-1]
    return tail.endswith("properties") or tail == "props"


def _keys(node: ast.AST | None) -> list[ast.Constant]:
    if isinstance(node, ast.Dict):
        return [k for k in node.keys if isinstance(k, ast.Constant)]
    return []


def _as_property(tree: ast.AST) -> list[ast.Constant]:
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _receiver(node.value) and isinstance(node.slice, ast.Constant):
            found.append(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            first = node.args[0] if node.args and isinstance(node.args[0], ast.Constant) else None
            if node.func.attr in ("get", "pop", "setdefault") and _receiver(node.func.value) and first:
                found.append(first)
            elif node.func.attr == "add_property" and first:
                found.append(first)
            elif node.func.attr == "update" and _receiver(node.func.value):
                found += [k for a in node.args for k in _keys(a)]
        elif isinstance(node, ast.Assign) and any(_receiver(t) for t in node.targets):
            found += _keys(node.value)
        elif isinstance(node, ast.FunctionDef) and "propert" in node.name:
            found += [k for r in ast.walk(node) if isinstance(r, ast.Return) for k in _keys(r.value)]
    return found


def property_literals(package_dir: Path, skip: Path | None = None) -> list[str]:
    hits = []
    for path in sorted(package_dir.rglob("*.py")):
        if skip is not None and path.resolve() == skip.resolve():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        used = {id(c) for c in _as_property(tree) if c.value in DECLARED - CHECK_NAMES}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    id(node) in used or node.value in DISTINCT):
                hits.append(f"{path.relative_to(package_dir.parent)}:{node.lineno}: {node.value!r}")
    return sorted(set(hits))


def test_property_names_are_spelled_once() -> None:
    found = property_literals(ROOT / "harness", skip=ROOT / "harness" / "report" / "properties.py")
    assert not found, "use harness.report.properties' constants:\n" + "\n".join(found)


def test_the_scan_finds_planted_literals(tmp_path: Path) -> None:
    package = tmp_path / "planted"
    package.mkdir()
    (package / "writer.py").write_text(
        "def finalize(record):\n"
        "    record.properties['verdict'] = 'x'\n"
        "    seed = {'seed': 1}\n"  # an ordinary dict key: not a property
        "    return record.properties.get('cell'), 'turn-seed'\n"
    )
    found = property_literals(package)
    assert found == ["planted/writer.py:2: 'verdict'", "planted/writer.py:4: 'cell'",
                     "planted/writer.py:4: 'turn-seed'"]
