"""One pair of the kill matrix in a fresh process:
``python -m harness.teeth.child CHECK FAULT --result FILE [--declared] [--extra-checks SPEC]...``.

A fresh process per pair, for the same reasons ``xharness repro`` uses one per scenario: the
device count is fixed before JAX starts, discovery counts start from zero, a switch that poisons
a process-wide cache cannot leak into the next pair, and a check that kills its process (or
hangs) costs that pair only, observed from outside. The result is written atomically to
``--result`` as JSON, so a partial line can never be mistaken for a result; a child that leaves
no file died before it finished, and the parent records that. With ``--timeout S`` (the parent's
limit) every thread's stack is dumped shortly before the parent would kill the child.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness.teeth.child")
    parser.add_argument("check")
    parser.add_argument("fault")
    parser.add_argument("--result", required=True, help="where the JSON result goes")
    parser.add_argument("--declared", action="store_true", help="the check declares the fault")
    parser.add_argument("--extra-checks", action="append", default=[], metavar="SPEC")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=None, help="the parent's limit, in seconds")
    args = parser.parse_args(argv)
    faulthandler.enable(all_threads=True)
    from harness.stack_dumps import stack_dump_delay

    if args.timeout is not None and args.timeout > 0:
        faulthandler.dump_traceback_later(stack_dump_delay(args.timeout), exit=False)

    import jax

    from harness.files import atomic_writer
    from harness.teeth.checks import load_checks, select
    from harness.teeth.matrix import Pair, run_pair

    (check,) = select(load_checks(args.extra_checks), [args.check])
    devices = len(jax.devices())
    print(f"[xharness teeth] {check.id} x {args.fault} on {devices} devices", file=sys.stderr)
    result = run_pair(Pair(check, args.fault, args.declared), devices, args.seed)
    faulthandler.cancel_dump_traceback_later()
    with atomic_writer(Path(args.result)) as handle:
        handle.write(json.dumps(result.to_dict()).encode())
    print(f"[xharness teeth] {result.status} in {result.seconds:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
