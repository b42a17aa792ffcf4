"""The documentation's map of the rooms (docs/explanation/architecture.md) is the layers contract,
and the exit codes ``harness.exits`` declares are one meaning per number, each under its name: a
room added to the package or a layer moved in the contract without the map following fails here.
(The documentation's table of exit codes is generated from the declaration when the site is built;
``suites/selftest/test_docs.py`` checks that the page asks for it.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from harness import exits

ROOT = Path(__file__).resolve().parents[2]
MAP_PAGE = (ROOT / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")


def contract_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    assert "ignore_imports" not in contract, "the layers are kept, never exempted"
    return [{name.strip() for name in layer.split("|")} for layer in contract["layers"]]


def map_layers(text: str) -> list[set[str]]:
    """The rooms of the documentation's map, a layer per unindented line (an indented line goes on
    the layer above): the module names in its left column (the code block under "## The map")."""
    block = text.split("\n## The map\n", 1)[1].split("```", 1)[1].split("\n", 1)[1].split("```", 1)[0]
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


def test_the_documented_map_is_the_contract() -> None:
    assert map_layers(MAP_PAGE) == contract_layers()


def test_every_module_has_a_room() -> None:
    placed = set().union(*contract_layers())
    assert top_level_modules() - placed == set(), "a module outside the contract is checked by nothing"


def test_the_map_reader_sees_a_change() -> None:
    moved = MAP_PAGE.replace("harness.commands                        every", "harness.cmds  every")
    assert map_layers(moved) != contract_layers()


def test_the_exit_codes_are_one_meaning_per_number() -> None:
    codes = [e.code for e in exits.TABLE]
    assert len(set(codes)) == len(codes), "one meaning per number"
    for entry in exits.TABLE:
        assert getattr(exits, entry.name) == entry.code
