"""``xharness bench [step|race|properties|...]``: measurements against a peer, in one run.

The command's shell: flags and the case to run. The cases, what they measure and their targets
are ``harness.bench`` (and ``harness.bench_race``); a backend that is not on this machine ends the
command with ``EXIT_NO_BACKEND`` and the reason.
"""

from __future__ import annotations

import argparse
from typing import Any

from harness import bench as cases
from harness.backends import Backend
from harness.bench import BENCH_BACKENDS, BENCHES, CASES
from harness.bench_matrix import STATES
from harness.errors import UsageError
from harness.exits import EXIT_NO_BACKEND

__all__ = ["add_parsers", "bench_command"]


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measurements against a peer: step time vs. jax.jit, schedule control vs. stress",
        description=bench_doc(),
    )
    parser.add_argument(
        "case",
        nargs="?",
        default="step",
        choices=list(BENCHES),
        help="; ".join(f"{b.name}: {b.help}" for b in BENCHES.values()) + " (default step)",
    )
    parser.add_argument("--steps", type=int, default=100, help="step: timed steps per side (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="step: untimed steps per side first (default 10)")
    parser.add_argument("--only", choices=sorted(CASES), help="step: run one model")
    parser.add_argument(
        "--backend", choices=BENCH_BACKENDS, default=Backend.CPU,
        help="step: the devices to measure on: 4 CPU devices (default), or every GPU or TPU device "
        f"found (exit {EXIT_NO_BACKEND} when there is none)",
    )
    parser.add_argument("--seeds", type=int, default=20, help="race: seeds per strategy (default 20)")
    parser.add_argument("--against", metavar="REV", default=None,
                        help="matrix: a git revision whose matrix runs too, alternating with the working tree's")
    parser.add_argument("--rounds", type=int, default=1, help="matrix: rounds, each a run per tree and state (default 1)")
    parser.add_argument("--state", choices=sorted(STATES), default="both",
                        help="matrix: cold runs only, or each followed by a warm run (default both)")
    parser.add_argument("--cells", default=None, help="matrix: comma-separated cells (default: every cell)")
    parser.add_argument("--keep", metavar="DIR", default=None,
                        help="matrix: keep each run's reports and caches under DIR (default: a temporary "
                        "directory, removed after)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=bench_command)


def bench_command(args: argparse.Namespace) -> int:
    case = getattr(args, "case", "step")
    backend = getattr(args, "backend", Backend.CPU)
    if case != "step" and backend != Backend.CPU:
        raise UsageError(f"--backend applies to the step case; {case} runs on CPU devices")
    return BENCHES[case].run(args)


def bench_doc() -> str | None:
    """The benchmarks' own summary, as ``xharness bench --help`` shows it."""
    return cases.__doc__.split("\n\n")[0] if cases.__doc__ else None
