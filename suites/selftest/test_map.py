"""The README's map of the rooms is the layers contract, and its table of exit codes is the one
``harness.exits`` declares: a room added to the package, a layer moved in the contract or an exit
code added in code without the README following fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from harness import exits

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def contract_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    assert "ignore_imports" not in contract, "the layers are kept, never exempted"
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def readme_layers(text: str) -> list[set[str]]:
    """The rooms of the README's map, a layer per unindented line (an indented line goes on the
    layer above): the module names in its left column."""
    block = text.split("\n## The rooms\n", 1)[1].split("```\n", 2)[1]
    layers: list[set[str]] = []
    for line in block.splitlines():
        names = set(re.findall(r"\bharness(?:\.\w+)?\b", line.split("  ", 1)[0] if not line.startswith(" ")
                               else line.strip().split("  ", 1)[0]))
        if line.startswith(" "):
            layers[-1] |= names
        else:
            layers.append(names)
    return layers


def top_level_modules() -> set[str]:
    package = ROOT / "harness"
    return {f"harness.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"} | {
        f"harness.{p.name}" for p in package.iterdir() if (p / "__init__.py").exists()}


def test_the_readme_map_is_the_contract() -> None:
    assert readme_layers(README) == contract_layers()


def test_every_module_has_a_room() -> None:
    placed = set().union(*contract_layers())
    assert top_level_modules() - placed == set(), "a module outside the contract is checked by nothing"


def test_the_map_reader_sees_a_change() -> None:
    moved = README.replace("harness.commands                        every", "harness.cmds  every")
    assert readme_layers(moved) != contract_layers()


def test_the_readme_exit_codes_are_the_declared_ones() -> None:
    assert exits.markdown_table() in README
    codes = [e.code for e in exits.TABLE]
    assert len(set(codes)) == len(codes), "one meaning per number"
    for entry in exits.TABLE:
        assert getattr(exits, entry.name) == entry.code
