"""The rooms stay one-way: what the layers contract (``lint-imports``, pyproject.toml) does not
check. No import cycle among the harness's modules, function-level imports included (the type
checker's own imports are not executed and do not count), no private name of one module read
by another, and no private attribute of one module's objects read by another: a room that must be observed registers what it exposes (``harness.runtime.seams``,
``harness.hooks``). Each check is also run on a small package with the fault planted, so that a
check that cannot fail is caught too."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import grimp
import pytest

# the import graph of the harness's modules: the same outcome on every JAX
pytestmark = pytest.mark.jax_independent

ROOT = Path(__file__).resolve().parents[2]


def import_cycles(package: str) -> list[list[str]]:
    """The groups of modules of ``package`` that import each other, round and round (Tarjan's
    strongly connected components of the import graph)."""
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=True)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in edges:
        if module not in index:
            visit(module)
    return cycles


def _module_of(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_reads(package_dir: Path) -> list[str]:
    """Every place a module of the package reads another module's private name: ``from m import
    _x``, ``m._x`` on a module it imported, or a module fetched from ``sys.modules`` by name."""
    base = package_dir.parent
    package = package_dir.name
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        me = _module_of(path, base)
        where = f"{path.relative_to(base)}"
        modules: dict[str, str] = {}  # a local name bound to one of the package's modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and node.module.split(".")[0] == package:
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{where}:{node.lineno}: from {node.module} import {alias.name}")
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package:
                        modules[alias.asname or alias.name.split(".")[0]] = (
                            alias.name if alias.asname else package)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                    and modules.get(node.value.id, me) != me):
                found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
            if isinstance(node, ast.Call | ast.Subscript):
                text = ast.unparse(node)
                if "sys.modules" in text and f"'{package}." in text:
                    found.append(f"{where}:{node.lineno}: {text}")
    return sorted(set(found))


def _defined_private_attributes(tree: ast.AST) -> set[str]:
    """The private attribute names a module defines: ``self._x = ...`` (or through
    ``object.__setattr__(self, "_x", ...)`` and ``self.__dict__["_x"]``), ``__slots__`` entries,
    and private methods and class attributes of its classes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "object.__setattr__" \
                and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
            names.add(str(node.args[1].value))
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("__dict__") \
                and isinstance(node.slice, ast.Constant):
            names.add(str(node.slice.value))
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                targets = item.targets if isinstance(item, ast.Assign) else \
                    [item.target] if isinstance(item, ast.AnnAssign) else []
                for target in targets:
                    if isinstance(target, ast.Name) and target.id == "__slots__" and isinstance(item.value, ast.Tuple | ast.List):
                        names |= {str(e.value) for e in item.value.elts if isinstance(e, ast.Constant)}
                    elif isinstance(target, ast.Name):
                        names.add(target.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _private_name(node: ast.AST) -> str | None:
    """The private attribute ``node`` reads or writes on an object other than ``self``/``cls``:
    ``x._name``, or ``getattr``/``setattr``/``hasattr`` with a literal ``"_name"``."""
    if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("getattr", "setattr", "hasattr") and len(node.args) > 1 \
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
            and node.args[1].value.startswith("_") and not node.args[1].value.startswith("__"):
        return node.args[1].value
    return None


def _is_super(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call) \
        and isinstance(node.value.func, ast.Name) and node.value.func.id == "super"


def _foreign_super_reads(tree: ast.AST) -> set[int]:
    """The ids of the ``super()._x`` nodes in classes with a base defined outside the module: the
    base's private hook is then another module's, whatever the override is called."""
    local = {c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
    out: set[int] = set()
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and any(
                not (isinstance(b, ast.Name) and b.id in local) for b in cls.bases):
            out |= {id(n) for n in ast.walk(cls) if _is_super(n)}
    return out


def private_attribute_reads(package_dir: Path) -> list[str]:
    """Every place a module reads or writes another module's private attribute.

    The rule: ``x._name`` with ``x`` not ``self`` or ``cls``, or ``getattr``/``setattr``/
    ``hasattr`` with a literal ``"_name"``, is reported in module M when ``_name`` is a private
    attribute some other module of the package defines (``self._name = ...``, a ``__slots__``
    entry, a method, class attribute or dataclass field) and M defines no such attribute. A module
    that defines the name may use it on other objects (another instance of its own class). A
    private name defined nowhere in the package is a third-party library's (``os._exit``,
    ``torch_xla._XLAC``, a jitted function's ``_cache_size``): not this rule's business.
    ``super()._name`` in a class whose base comes from another module is that module's private
    hook even when M overrides it, so it is reported whenever another module defines ``_name``."""
    base = package_dir.parent
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(package_dir.rglob("*.py"))}
    defined = {path: _defined_private_attributes(tree) for path, tree in trees.items()}
    found = []
    for path, tree in trees.items():
        elsewhere = set().union(*(names for other, names in defined.items() if other != path))
        foreign_super = _foreign_super_reads(tree)
        for node in ast.walk(tree):
            name = _private_name(node)
            if name is None or name not in elsewhere:
                continue
            if name not in defined[path] or id(node) in foreign_super:
                found.append(f"{path.relative_to(base)}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def test_the_harness_has_no_import_cycle() -> None:
    cycles = import_cycles("harness")
    assert not cycles, (
        "modules that import each other (a lower one must register what it exposes instead, "
        "see harness/hooks.py):\n" + "\n".join(" <-> ".join(c) for c in cycles)
    )


def test_no_module_reads_another_ones_private_names() -> None:
    found = private_reads(ROOT / "harness")
    assert not found, (
        "private names read across modules (make the name public in its module, or register "
        "it there):\n" + "\n".join(found)
    )


def test_no_module_reads_another_ones_private_attributes() -> None:
    found = private_attribute_reads(ROOT / "harness")
    assert not found, (
        "private attributes read across modules (give the class a documented interface for "
        "them, as Tensor's rt_* names, or move the code next to the class):\n" + "\n".join(found)
    )


def test_the_layers_contract_holds() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed here (the test extra installs it)")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "plantedpkg"
    package.mkdir()
    files = {
        "__init__.py": "",
        "low.py": "_hidden = 1\n\ndef helper():\n    from plantedpkg import high\n    return high.VALUE\n",
        "high.py": "from plantedpkg import low\n\nVALUE = low._hidden\n",
        "other.py": "import sys\nfrom plantedpkg.low import _hidden\n"
                    "seen = sys.modules.get('plantedpkg.high')\n",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from plantedpkg import other\n",
        "box.py": "class Box:\n    __slots__ = ('_inside',)\n\n    def same(self, other):\n"
                  "        return other._inside == self._inside\n",
        "peek.py": "import os\n\ndef peek(box):\n    os._exit  # a library's private name: not ours\n"
                   "    return box._inside, getattr(box, '_inside')\n",
        "hooks.py": "class Base:\n    def _hook(self):\n        return 1\n\n\n"
                    "class Near(Base):\n    def _hook(self):\n        return super()._hook() + 1\n",
        "sub.py": "from plantedpkg.hooks import Base\n\n\nclass Far(Base):\n    def _hook(self):\n"
                  "        return super()._hook() + 2\n",
    }
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def test_the_checks_find_what_is_planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _planted(tmp_path, monkeypatch)
    # a function-level import closes the circle; a TYPE_CHECKING import opens none
    assert import_cycles("plantedpkg") == [["plantedpkg.high", "plantedpkg.low"]]
    found = private_reads(package)
    assert "plantedpkg/high.py:3: low._hidden" in found
    assert "plantedpkg/other.py:2: from plantedpkg.low import _hidden" in found
    assert "plantedpkg/other.py:3: sys.modules.get('plantedpkg.high')" in found
    assert not [f for f in found if "low.py" in f]  # a module's own private names are its own
    attributes = private_attribute_reads(package)
    # a slot read by another module, a base's hook reached through super() from another module;
    # not the same-module reads (box.py, hooks.py) nor a library's private name (os._exit)
    assert attributes == ["plantedpkg/peek.py:5: box._inside", "plantedpkg/peek.py:5: getattr(box, '_inside')",
                          "plantedpkg/sub.py:6: super()._hook"]
