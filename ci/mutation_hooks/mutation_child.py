"""The half of ``mutation_hits`` that runs in every process a test starts (``sitecustomize``
imports it there): kept apart from the pytest plugin so that those processes, down to the ranks,
import neither pytest nor anything else they would not have imported anyway."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HITS = "XHARNESS_MUTATION_HITS"
STATS = "stats"  # mutmut's MUTANT_UNDER_TEST while it maps tests to functions


def hits_dir() -> Path | None:
    value = os.environ.get(HITS)
    return Path(value) if value else None


def main_module(argv: list[str]) -> str | None:
    """The module this process runs as ``__main__`` (``python -m NAME``), or None."""
    for index, arg in enumerate(argv[1:-1], 1):
        if arg == "-m":
            return argv[index + 1]
        if not arg.startswith("-"):
            return None  # a script: its functions are no room's
    return None


def record_in_child() -> None:
    """In a (child) process: write each call of a mutated function where the test reads it
    (stats run), and let a mutant of the module run as ``__main__`` switch on there."""
    directory = hits_dir()
    if directory is None or not os.environ.get("MUTANT_UNDER_TEST"):
        return
    import mutmut.mutation.trampoline as trampoline

    main = main_module(list(sys.orig_argv))
    if os.environ["MUTANT_UNDER_TEST"] != STATS:
        if main is not None and os.environ["MUTANT_UNDER_TEST"].startswith(main + "."):
            as_main = "__main__." + os.environ["MUTANT_UNDER_TEST"][len(main) + 1:]
            trampoline.get_mutant_under_test = lambda: as_main  # this process only, not its children
        return
    seen: set[str] = set()
    path = directory / f"{os.getpid()}.hits"

    def record(name: str, caller: str | None = None) -> None:
        if main is not None and name.startswith("__main__."):
            name = main + name[len("__main__"):]
        if name in seen:
            return
        seen.add(name)
        with path.open("a", encoding="utf-8") as out:  # one short line: appended whole
            out.write(name + "\n")

    trampoline.record_trampoline_hit = record  # type: ignore[assignment]
