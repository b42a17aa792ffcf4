"""One scenario run in a fresh process: ``python -m harness.scenarios.child ID [--inject] --seed N
[--explore STRATEGY | --schedule S]``.

``xharness repro`` runs every scenario here so that the device count of the cell is set before JAX
starts, discovery counts start from zero, and a scenario that kills its process (the SIGSEGV of
``race-on-handles`` in crash mode) is observed from outside instead of taking the CLI down.
Prints one line ``RESULT_MARKER <json>``; exits 0 when the run is ok, 1 when not, 3 when this
process cannot host the scenario. With ``--timeout S`` (the parent's limit) the child dumps every
thread's stack to stderr shortly before the parent would kill it, so a hang shows where it hung.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import sys

from harness.exits import EXIT_USAGE
from harness.stack_dumps import stack_dump_delay

RESULT_MARKER = "XHARNESS-SCENARIO-RESULT"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness.scenarios.child")
    parser.add_argument("scenario")
    parser.add_argument("--inject", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cell", default=None)
    parser.add_argument("--explore", default=None, help="a harness.sched strategy")
    parser.add_argument("--schedule", default=None, help="a schedule string to replay")
    parser.add_argument("--timeout", type=float, default=None, help="the parent's limit, in seconds")
    args = parser.parse_args(argv)
    faulthandler.enable(all_threads=True)
    if args.timeout is not None and args.timeout > 0:
        faulthandler.dump_traceback_later(stack_dump_delay(args.timeout), exit=False)

    import jax

    from harness import compile_cache
    from harness.scenarios import registry, runner

    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        compile_cache.install()

    scenario = registry.get(args.scenario)
    devices = len(jax.devices())
    unmet = scenario.needs.unmet(devices, jax.process_count())
    if unmet:
        print(f"{scenario.id}: {unmet}", file=sys.stderr)
        return EXIT_USAGE  # the parent reports what it printed as a usage error
    result = runner.run(
        scenario, args.inject, args.seed, devices, args.cell, args.explore, args.schedule
    )
    for v in result.variants:
        if v.traceback and not result.ok:
            print(v.traceback, file=sys.stderr)
    faulthandler.cancel_dump_traceback_later()
    print(RESULT_MARKER, json.dumps(result.to_json()), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
