"""``xharness eager``: build (or reuse) the eager-PyTorch environment the semantics oracle asks.

The oracle (``harness.properties.oracle``) runs every program in the runtime under test and in
eager PyTorch on the CPU; torch lives in an environment of its own, built the way release
environments are (``harness.releases.envs``: ``torch-VERSION-pyXY`` under ``$XHARNESS_ENV_DIR``),
so that the harness' own environment never needs torch. Prints the interpreter's path; exit 3
when pip cannot install that torch.
"""

from __future__ import annotations

import argparse

from harness.exits import EXIT_INSTALL, EXIT_OK
from harness.releases import envs, interpreters
from harness.releases.catalog import say

#: the torch ``xharness eager`` builds unless told otherwise (``harness.properties.eager``)
DEFAULT_TORCH = "2.13.0"


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "eager",
        help="build or reuse the eager PyTorch environment the semantics oracle asks",
        description="Build (or reuse) a virtual environment with torch and numpy "
        "(pip install torch==VERSION numpy) under $XHARNESS_ENV_DIR, which the semantics-oracle "
        "and training-oracle invariants find by themselves; print its interpreter. "
        "$XHARNESS_EAGER_PYTHON names another interpreter instead. Exit 3: pip could not install it.",
    )
    p.add_argument("--torch", default=DEFAULT_TORCH, metavar="VERSION",
                   help=f"the torch release (default {DEFAULT_TORCH})")
    interpreters.add_argument(p)
    p.set_defaults(handler=eager_command)


def eager_command(args: argparse.Namespace) -> int:
    interpreters.apply_argument(args.python)
    try:
        env = envs.ensure_env("torch", args.torch, requirements=[f"torch=={args.torch}", "numpy"], progress=say)
    except envs.ReleaseInstallError as exc:
        say(f"error: {exc}")
        return EXIT_INSTALL
    print(env.python)
    return EXIT_OK
