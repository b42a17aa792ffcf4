"""The ``xharness`` command.

Each area of the harness owns its subcommands (``add_parsers`` in its ``commands`` module, or in
``harness.bench`` and ``harness.releases.bisect_command``, which are one command each), so this
file only wires them together and maps failures to the documented exit codes:
0 success, 1 test/scenario failure, 2 usage or configuration error; the commands that run real
runtime releases add 3 (a release could not be installed) and 4 (the runtime is not importable
here and no release was named).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from harness import settings
from harness.errors import UsageError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "UsageError", "build_parser", "main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: modules that contribute subcommands; each has ``add_parsers(subparsers)``
_COMMAND_MODULES = (
    "harness.scenarios.commands",  # list, repro
    "harness.matrix.commands",  # run, cells
    "harness.report.commands",  # report merge, report html
    "harness.bench",  # bench
    "harness.releases.commands",  # releases
    "harness.releases.bisect_command",  # bisect
    "harness.releases.eager_command",  # eager
    "harness.teeth.commands",  # teeth
    "harness.starter",  # init
    "harness.config_command",  # config
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xharness", description="Regression-test and CI harness for distributed XLA runtimes"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that area is not installed in this build
                continue
            raise
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
        return 130
    except BrokenPipeError:  # the reader went away (``xharness list | head``): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    # run as a script this module is ``__main__``; the subcommands raise ``harness.cli.UsageError``,
    # so dispatch through the imported module for the exit code 2 to be kept
    from harness.cli import main as _main

    sys.exit(_main())
