"""The ``xharness`` command.

Every subcommand lives in the command layer, ``harness.commands`` (one module per command family,
each with ``add_parsers``), the top room of the package: it imports the rooms it commands and
none of them imports it. This file only wires those modules together, from a static table the
import contracts can see, and maps failures to the exit codes of ``harness.exits``.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType

from harness import settings
from harness.commands import (
    bench,
    bisect,
    catalog,
    config,
    durations,
    eager,
    init,
    matrix,
    nemesis,
    releases,
    report,
    teeth,
)
from harness.errors import UsageError
from harness.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "UsageError", "build_parser", "main"]

#: the modules that contribute subcommands, in the order ``xharness --help`` lists them
COMMANDS: tuple[ModuleType, ...] = (
    catalog,  # list, repro
    matrix,  # run, cells
    durations,  # durations
    report,  # report merge, report html, report summary, report upstream
    bench,  # bench
    releases,  # releases
    bisect,  # bisect
    eager,  # eager
    teeth,  # teeth
    nemesis,  # nemesis
    init,  # init
    config,  # config
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xharness", description="Regression-test and CI harness for distributed XLA runtimes"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        # every declared environment variable is checked before a command starts anything
        for warning in settings.check_environment():
            print(f"xharness: warning: {warning}", file=sys.stderr)
        return int(args.handler(args))
    except UsageError as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader went away (``xharness list | head``): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    # run as a script this module is ``__main__``; the subcommands raise ``harness.cli.UsageError``,
    # so dispatch through the imported module for the exit code 2 to be kept
    from harness.cli import main as _main

    sys.exit(_main())
