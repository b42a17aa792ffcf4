"""One scenario run in a fresh process: ``python -m harness.scenarios.child ID [--inject] --seed N``.

``xharness repro`` runs every scenario here so that the device count of the cell is set before JAX
starts, discovery counts start from zero, and a scenario that kills its process (the SIGSEGV of
``race-on-handles`` in crash mode) is observed from outside instead of taking the CLI down.
Prints one line ``RESULT_MARKER <json>``; exits 0 when the run is ok, 1 when not, 3 when this
process cannot host the scenario.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys

RESULT_MARKER = "XHARNESS-SCENARIO-RESULT"
EXIT_CANNOT_HOST = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness.scenarios.child")
    parser.add_argument("scenario")
    parser.add_argument("--inject", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cell", default=None)
    args = parser.parse_args(argv)
    faulthandler.enable(all_threads=True)

    import jax

    from harness.scenarios import registry, runner

    scenario = registry.get(args.scenario)
    devices = len(jax.devices())
    unmet = scenario.needs.unmet(devices, jax.process_count())
    if unmet:
        print(f"{scenario.id}: {unmet}", file=sys.stderr)
        return EXIT_CANNOT_HOST
    result = runner.run(scenario, args.inject, args.seed, devices, args.cell)
    for v in result.variants:
        if v.traceback and not result.ok:
            print(v.traceback, file=sys.stderr)
    print(RESULT_MARKER, json.dumps(result.to_json()), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
