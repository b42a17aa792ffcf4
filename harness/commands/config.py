"""``xharness config``: every declared setting, its effective value, and where the value came from.

As ``git config --show-origin`` or ``pip config list`` do: the environment's variables (set, or
their defaults) and the project's ``[tool.xharness]`` keys (the file and line they are set on, or
the default), from the declaration in ``harness.settings``. Both are checked first, as every
command checks them, so a bad value exits 2 here too. ``--markdown`` prints the table of settings,
the one the documentation generates from the declaration (docs/reference/settings.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from harness import project, settings
from harness.commands import plugins
from harness.errors import UsageError
from harness.exits import EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "config",
        help="show every setting, its value and where it came from",
        description="Every setting the harness reads (environment variables and [tool.xharness] "
        "keys) with its effective value and its source: the environment, the project file and "
        "line, or the default. Exit 2 when one has a value it does not accept.",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="one JSON object")
    out.add_argument("--markdown", action="store_true", help="the table of settings (the documentation's settings page)")
    p.set_defaults(handler=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    if args.markdown:
        print(settings.markdown_table(), end="")
        return EXIT_OK
    try:
        own = project.load()
    except project.ProjectError as exc:
        raise UsageError(str(exc)) from None
    try:
        from harness.matrix.config import MatrixError, project_matrix

        matrix = project_matrix(own)
        where = f"{matrix.path} ({len(matrix.cells)} cells: xharness cells --json)"
    except MatrixError as exc:
        raise UsageError(str(exc)) from None
    rows = settings.effective(project=_project_values(own), matrix=where)
    chosen = project.runtime_under_test(own)
    rows = [dataclasses.replace(r, value=chosen.name, source=chosen.source) if r.name == "HARNESS_RUNTIME" else r
            for r in rows]
    loaded = plugins.state()
    if args.json:
        print(json.dumps({"project": str(own.path) if own.path else None, "root": str(own.root),
                          "runtime": {"name": chosen.name, "source": chosen.source},
                          "plugins": {"distributions": list(loaded.distributions),
                                      "broken": [str(e) for e in loaded.broken]},
                          "settings": [r.to_dict() for r in rows]}, indent=2))
        return EXIT_OK
    print(f"project: {own.describe()} (root {own.root})")
    print(f"runtime under test: {chosen.name} (from {chosen.source})")
    print(f"plugins: {', '.join(loaded.distributions)}; "
          + (f"{len(loaded.broken)} broken:" if loaded.broken else "all load"))
    for error in loaded.broken:
        print(f"  {error}")
    width = max(len(f"{r.name}={r.value}") for r in rows)
    for row in rows:
        label = f"{row.where}: {row.name}" if row.where != settings.ENV else row.name
        internal = "  (set by the harness for its own processes)" if row.internal else ""
        print(f"{f'{label}={row.value}':<{width + 20}}  {row.source}{internal}")
    return EXIT_OK


def _project_values(own: project.Project) -> Any:
    """``key -> (value, "file:line")`` for the keys the project file sets."""
    if own.path is None:
        return lambda key: None
    text = own.path.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    table = data if own.path.name == project.OWN_FILE else data.get("tool", {}).get("xharness", {})
    lines = text.splitlines()

    def found(key: str) -> tuple[str, str] | None:
        if key not in table:
            return None
        value = table[key]
        shown = f"{len(value)} cell(s)" if key == "cells" else json.dumps(value)
        line = next((n for n, t in enumerate(lines, 1)
                     if re.match(rf"^\s*(\[\[\s*(tool\.xharness\.)?)?{re.escape(key)}\b", t)), None)
        where = Path(own.path)  # type: ignore[arg-type]
        return shown, f"{where}:{line}" if line else str(where)

    return found
