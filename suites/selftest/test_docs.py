"""The documentation holds to the code: the examples its pages show run as written, the commands it
names exist, the tables it generates are the code's own declarations, every name of the plugin API
is documented (each adapter operation with its meaning, arguments and errors, each field of the
records a plugin builds), and the site builds strictly, so that a broken link or a reference to a
name that does not exist fails it.

The site is docs/ (mkdocs.yml); its reference tables are filled at build time by the hook
docs/_hooks/reference.py, which these tests import to check the same tables the site shows.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import file_module
import pytest

from harness import exits, settings

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


_load = file_module.load


HOOK = _load("_docs_reference_hook", DOCS / "_hooks" / "reference.py")


def page(path: str) -> str:
    return (DOCS / path).read_text(encoding="utf-8")


def _python_block(text: str, containing: str) -> str:
    return next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if containing in b)


# ------------------------------------------------------------------------------ examples and commands
def test_runtime_example_runs_and_compiles_once(tmp_path: Path) -> None:
    """The reference runtime's training loop (docs/reference/runtime.md) runs as written."""
    script = tmp_path / "example.py"
    script.write_text(_python_block(page("reference/runtime.md"), "mark_step"))
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss, compiles = proc.stdout.split()
    assert float(loss) < 0.1  # twenty SGD steps towards zero targets
    assert int(compiles) == 1  # the steady loop compiled once


def test_properties_example_is_a_suite_that_passes(tmp_path: Path) -> None:
    """The user's own suite of docs/how-to/property-tests.md is a pytest file whose tests pass."""
    (tmp_path / "test_users_suite.py").write_text(
        _python_block(page("how-to/property-tests.md"), "harness.properties"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JAX_NUM_CPU", "XLA_FLAGS"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 passed" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.jax_independent
def test_setup_commands_are_the_ci_scripts() -> None:
    """The two commands the README and the site give are the CI scripts, and CI runs the test one."""
    for text in (README.read_text(), page("index.md"), page("how-to/install.md")):
        assert "bash ci/main.sh" in text and "bash ci/test.sh" in text
    assert "exec bash ci/test.sh" in (ROOT / ".ci/run").read_text()
    assert "mkdocs serve" in README.read_text()  # and how to read the site


@pytest.mark.jax_independent
def test_the_readme_links_into_the_site() -> None:
    """Every docs/ page the README links to exists, and the README sends readers to each part."""
    links = re.findall(r"\]\((docs/[^)#]+)", README.read_text())
    assert links, "the README links into docs/"
    for link in links:
        assert (ROOT / link).is_file(), link
    for part in ("tutorials", "how-to", "reference", "explanation"):
        assert any(link.startswith(f"docs/{part}/") for link in links), part


@pytest.mark.jax_independent
def test_every_name_in_api_is_documented_in_the_plugin_guide() -> None:
    """The plugin guide's section on harness.api names every (non-constant) name of the surface."""
    api = importlib.import_module("harness.api")
    section = page("how-to/write-a-plugin.md").split("## The public surface", 1)[1].split("\n## ", 1)[0]
    missing = [n for n in api.__all__ if f"`{n}`" not in section and not n.isupper()]
    assert not missing, f"docs/how-to/write-a-plugin.md's section on harness.api does not name {missing}"


# ------------------------------------------------------------------------------ generated reference
@pytest.mark.jax_independent
def test_the_settings_table_is_the_declaration() -> None:
    """The settings page asks for the generated table, and gets the declaration's
    (``xharness config --markdown`` prints the same)."""
    text = page("reference/settings.md")
    assert text.count("<!-- xharness:settings -->") == 1
    assert settings.markdown_table().rstrip("\n") in HOOK.fill(text)


@pytest.mark.jax_independent
def test_the_exit_codes_table_is_the_declaration() -> None:
    text = page("reference/exit-codes.md")
    assert text.count("<!-- xharness:exit-codes -->") == 1
    assert exits.markdown_table() in HOOK.fill(text)


def _commands(parser: argparse.ArgumentParser, path: list[str]) -> list[tuple[list[str], argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its subparsers here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                found += _commands(sub, [*path, name])
    return found


@pytest.mark.jax_independent
def test_the_cli_reference_has_every_command_and_option() -> None:
    """Every subcommand and sub-subcommand of ``harness.cli.build_parser()`` has its section, with
    its usage and every option it takes, on the command-line page."""
    from harness import cli

    text = page("reference/cli.md")
    assert text.count("<!-- xharness:cli -->") == 1
    filled = HOOK.fill(text)
    commands = _commands(cli.build_parser(), ["xharness"])
    assert len(commands) > 10
    for path, parser in commands[1:]:
        anchor = "-".join(path)
        assert f"{' '.join(path)} {{#{anchor}}}" in filled, path
        section = filled.split(f"{{#{anchor}}}", 1)[1]
        assert f"usage: {' '.join(path)}" in section.replace("\n", " ")
        for action in parser._actions:  # noqa: SLF001
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"<code>{option}" in section or f", {option}" in section, (path, option)


@pytest.mark.jax_independent
def test_an_unknown_placeholder_fails_the_build() -> None:
    with pytest.raises(HOOK.UnknownPlaceholder, match="no such generated table"):
        HOOK.fill("<!-- xharness:commands -->\n")


# ------------------------------------------------------------------------------ the API reference
@pytest.mark.jax_independent
def test_the_api_page_renders_harness_api() -> None:
    assert re.search(r"^::: harness\.api$", page("reference/api.md"), re.MULTILINE)


def _documented(doc: str | None) -> str:
    assert doc and doc.strip(), "no docstring"
    return doc


@pytest.mark.jax_independent
def test_every_adapter_operation_says_its_meaning_arguments_and_errors() -> None:
    """Each operation of the protocol (``Adapter``) and each operation ``BaseAdapter`` adds says
    what it means (a summary line), names every argument under ``Args:``, says what it returns or
    raises, and, where ``BaseAdapter``'s default raises ``Unsupported``, names that error and the
    capability it lacks."""
    from harness.adapters import PROTOCOL_METHODS
    from harness.api import Adapter, BaseAdapter

    extra = [name for name, value in vars(BaseAdapter).items()
             if inspect.isfunction(value) and not name.startswith("_") and name not in PROTOCOL_METHODS]
    assert len(PROTOCOL_METHODS) >= 15 and len(extra) >= 15
    for cls, names in ((Adapter, PROTOCOL_METHODS), (BaseAdapter, extra)):
        for name in names:
            where = f"{cls.__name__}.{name}"
            doc = _documented(inspect.getdoc(getattr(cls, name)))
            params = [p for p in inspect.signature(getattr(cls, name)).parameters if p != "self"]
            if params:
                args = doc.split("Args:", 1)[1] if "Args:" in doc else ""
                missing = [p for p in params if not re.search(rf"^\s+\*{{0,2}}{p}:", args, re.MULTILINE)]
                assert not missing, f"{where}: Args: does not name {missing}"
            assert "Returns:" in doc or "Raises:" in doc, f"{where}: says neither what it returns nor raises"
            default = inspect.getsource(getattr(BaseAdapter, name)) if hasattr(BaseAdapter, name) else ""
            lacks = re.search(r"raise self\._lacks\((\w+)\)", default)
            if lacks:
                # the protocol's own docstring, or BaseAdapter's, names the error and the capability
                docs = doc + (inspect.getdoc(getattr(BaseAdapter, name)) or "")
                raises = docs.split("Raises:", 1)[1] if "Raises:" in docs else ""
                assert "Unsupported" in raises and lacks.group(1) in raises, \
                    f"{where}: Raises: must name Unsupported and {lacks.group(1)}"


@pytest.mark.jax_independent
def test_every_field_of_the_plugin_records_is_described() -> None:
    """Every field of ``Context``, ``Needs``, ``Scenario``, ``Signature``, ``Invariant`` and
    ``CellShape`` has a description the API reference renders: a ``#:`` comment above it, or a
    comment on its line, which the site's griffe extension (docs/_hooks/attribute_comments.py) turns
    into the field's docstring, read here as mkdocstrings reads it."""
    griffe = pytest.importorskip("griffe")
    extension = _load("_docs_attribute_comments", DOCS / "_hooks" / "attribute_comments.py")
    extensions = griffe.load_extensions(extension.AttributeComments())
    from harness import api

    for name in ("Context", "Needs", "Scenario", "Signature", "Invariant", "CellShape"):
        cls = getattr(api, name)
        source = Path(inspect.getfile(cls))  # the defining file alone, read as griffe reads it
        module = griffe.visit(cls.__module__.rsplit(".", 1)[-1], filepath=source,
                              code=source.read_text(encoding="utf-8"), extensions=extensions)
        record = module[cls.__qualname__]
        assert (record.docstring and record.docstring.value.strip()), f"{name} has no docstring"
        fields = [f.name for f in dataclasses.fields(cls)]
        undescribed = [f for f in fields if not (f in record.members and record.members[f].docstring
                                                 and record.members[f].docstring.value.strip())]
        assert not undescribed, f"{name}: fields without a description: {undescribed}"


@pytest.mark.jax_independent
def test_the_comment_reader_finds_a_field_without_one(tmp_path: Path) -> None:
    """The extension reads ``#:`` above and a trailing comment, skips pragmas, and leaves a field
    without either undocumented (so the test above can fail)."""
    extension = _load("_docs_attribute_comments", DOCS / "_hooks" / "attribute_comments.py")
    lines = ["#: the first", "#: and more", "a: int = 1", "b: int = 2  # trailing words",
             "c: int = 3  # noqa: E501", "d: int = 4", "e: str = '# not a comment'"]
    assert extension.comment_doc(lines, 3) == "the first and more"
    assert extension.comment_doc(lines, 4) == "trailing words"
    assert extension.comment_doc(lines, 5) == ""
    assert extension.comment_doc(lines, 6) == ""
    assert extension.comment_doc(lines, 7) == ""


# ------------------------------------------------------------------------------ the site, built
def _build(config_dir: Path, site: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=config_dir, capture_output=True, text=True, env=env, timeout=600,
    )


@pytest.mark.jax_independent
def test_the_site_builds_strictly_with_every_api_name(tmp_path: Path) -> None:
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    from harness import api

    html = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    missing = [n for n in api.__all__ if f'id="harness.api.{n}"' not in html]
    assert not missing, f"the API reference does not render {missing}"


@pytest.mark.jax_independent
def test_a_broken_link_or_an_unknown_name_fails_the_strict_build(tmp_path: Path) -> None:
    """The proof that the strict build can fail: a copy of the site with a link to a page that does
    not exist and a reference to an API name that does not exist."""
    copy = tmp_path / "copy"
    shutil.copytree(DOCS, copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    api_page = copy / "docs" / "reference" / "api.md"
    api_page.write_text(api_page.read_text() + "\n[gone](no-such-page.md) and [Nope][harness.api.Nope]\n")
    done = _build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr, done.stderr[-3000:]
    assert "harness.api.Nope" in done.stderr, done.stderr[-3000:]
