"""One declared table of settings: every command refuses a bad value before it starts anything,
names what looks like a setting but is none, and ``xharness config`` shows where each value came
from; the documentation's table (docs/reference/settings.md, generated when the site is built) is
the declaration's."""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest

from harness import cli, settings

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No declared variable set: these tests may run inside a cell, which sets several."""
    for name in settings.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that starts a process fails the test: the check must come first."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a process was started: {args[0] if args else kwargs}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)


@pytest.mark.parametrize(("name", "value", "says"), [
    ("HARNESS_MATMUL_PRECISION", "bogus", "not one of the names"),
    ("HARNESS_WAIT_TIMEOUT", "abc", "not a number"),
    ("HARNESS_COMPLETION_DELAY", "x", "not a number"),
    ("JAX_NUM_CPU_DEVICES", "abc", "not a whole number"),
    ("HARNESS_WAIT_TIMEOUT", "-5", "out of range"),
    ("HARNESS_RUNTIME", "nope", "not one of the names"),
    ("HARNESS_CRASH_MODE", "weird", "not one of the names"),
    ("HARNESS_FAULTS", "nonsense", "unknown name(s) 'nonsense'"),
])
def test_each_bad_value_is_a_usage_error_before_anything_starts(
    name: str, value: str, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    no_children: None,
) -> None:
    monkeypatch.setenv(name, value)
    assert cli.main(["repro", "aliased-save"]) == 2
    err = capsys.readouterr().err
    assert f"{name}={value!r} (from the environment): {says}; accepted: " in err, err


def test_a_near_miss_is_a_warning_naming_the_setting(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HARNES_FAULTS", "aliased-save")
    monkeypatch.setenv("XHARNESS_NOTHING", "1")
    assert cli.main(["config", "--markdown"]) == 0
    err = capsys.readouterr().err
    assert "HARNES_FAULTS is set but is no setting of the harness; did you mean HARNESS_FAULTS?" in err
    assert "XHARNESS_NOTHING is set but is no setting of the harness" in err
    assert settings.near_miss("PATH") is None and settings.near_miss("HARNESS_FAULTS") is None


def test_a_replay_line_carries_the_checked_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.scenarios.runner import repro_command

    monkeypatch.setenv("HARNESS_CRASH_MODE", " Signal ")
    monkeypatch.setenv("HARNESS_FAULTS", "aliased-save, aliased-save")
    line = repro_command("aliased-save", True, 0)
    assert line.startswith("HARNESS_FAULTS=aliased-save HARNESS_CRASH_MODE=signal xharness repro")


def test_config_shows_every_setting_and_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n\n[tool.xharness]\nreports = "out"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XHARNESS_PROJECT", raising=False)
    monkeypatch.setenv("HARNESS_WAIT_TIMEOUT", "30")
    assert cli.main(["config", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    rows = {(r["where"], r["name"]): r for r in shown["settings"]}
    assert rows[("environment", "HARNESS_WAIT_TIMEOUT")]["source"] == "environment"
    assert rows[("environment", "HARNESS_CRASH_MODE")]["source"] == "default"
    assert rows[("[tool.xharness]", "reports")]["source"] == f"{tmp_path / 'pyproject.toml'}:5"
    assert rows[("[tool.xharness]", "matrix")]["source"] == "default"
    # every declared setting, each once
    assert {n for w, n in rows if w == "environment"} == set(settings.ENVIRONMENT)
    assert {n for w, n in rows if w == "[tool.xharness]"} == set(settings.keys(settings.PROJECT))
    assert {n for w, n in rows if w == "matrix cell"} == set(settings.keys(settings.CELL))
    assert len(shown["settings"]) == len(settings.SETTINGS) + len(settings.KEYS)
    assert rows[("matrix cell", "timeout")]["source"].endswith("(2 cells: xharness cells --json)")
    assert cli.main(["config"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"^HARNESS_WAIT_TIMEOUT=30\s+environment$", text, re.MULTILINE)
    assert re.search(r"^HARNESS_PROCESS_ID=0\s+default  \(set by the harness for its own processes\)$", text, re.MULTILINE)


def test_config_markdown_prints_the_declared_table(capsys: pytest.CaptureFixture[str]) -> None:
    """``xharness config --markdown`` prints the table the documentation generates from the
    declaration (docs/reference/settings.md; ``suites/selftest/test_docs.py`` checks the page)."""
    assert cli.main(["config", "--markdown"]) == 0
    assert capsys.readouterr().out.strip() == settings.markdown_table().strip()


def test_the_cell_and_project_keys_are_the_declared_ones() -> None:
    from harness import project
    from harness.matrix import config
    from harness.runtime.config import MATMUL_PRECISIONS

    assert config._CELL_KEYS == set(settings.keys(settings.CELL))  # noqa: SLF001 - the parser's own list
    assert set(project.KEYS) == set(settings.keys(settings.PROJECT))
    assert set(settings.CELL_CHOICES["matmul_precision"]) == set(MATMUL_PRECISIONS)


def _environment_reads(tree: ast.AST, constants: dict[str, str]) -> list[tuple[int, str]]:
    """Reads of the environment (``environ.get(K)``, ``environ[K]``, ``getenv(K)``) and their keys."""
    def key(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return constants.get(node.id)
        return None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner = node.func.value
            named = isinstance(owner, ast.Name | ast.Attribute) and "environ" in ast.unparse(owner)
            if (node.func.attr == "get" and named) or node.func.attr == "getenv":
                if (k := key(node.args[0])) is not None:
                    found.append((node.lineno, k))
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and "environ" in ast.unparse(node.value):
            if (k := key(node.slice)) is not None:
                found.append((node.lineno, k))
    return found


def test_no_module_reads_a_setting_but_through_the_declaration() -> None:
    offenders = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        if path.name == "settings.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                     for t in n.targets if isinstance(t, ast.Name)
                     and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
        for line, name in _environment_reads(tree, constants):
            if name in settings.ENVIRONMENT or name.startswith(settings.PREFIXES):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert not offenders, "read these through harness.settings:\n" + "\n".join(offenders)


def test_every_variable_the_project_names_is_declared_and_every_declared_one_is_used() -> None:
    sources = [*(ROOT / "harness").rglob("*.py"), *(ROOT / "ci").glob("*.sh"), *(ROOT / "ci").glob("*.py")]
    text = "\n".join(p.read_text(encoding="utf-8") for p in sources)
    named = set(re.findall(r"\b(X?HARNESS_[A-Z0-9_]*[A-Z0-9])\b", text))
    undeclared = sorted(n for n in named if n not in settings.ENVIRONMENT)
    assert not undeclared, f"declare these in harness/settings.py: {undeclared}"
    used = "\n".join(p.read_text(encoding="utf-8") for p in sources if p.name != "settings.py")
    unused = sorted(n for n in settings.ENVIRONMENT if n not in used)
    assert not unused, f"declared but read nowhere: {unused}"
