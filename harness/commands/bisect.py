"""``xharness bisect SCENARIO --runtime torch_xla|jax``: which release changed a scenario's outcome.

The command's shell: flags, checks of what the user gave, progress and the exit status. The search
and what it records are ``harness.releases.bisect_run`` (the releases to visit, one run per
release, the report and its JUnit file) over the pure ``harness.releases.bisect``.

Exit: 0 a change was found; 1 the two ends agree, only one release could be run, or a release
gave an outcome that is neither reproduced nor passed (named); 2 usage; 3 no release of the range
could be installed (or the index could not be listed); 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from harness.errors import UsageError
from harness.exits import EXIT_INSTALL, EXIT_INTERRUPTED
from harness.matrix.config import RELEASED_RUNTIMES
from harness.releases import bisect as search
from harness.releases import interpreters
from harness.releases.bisect import BisectResult, EnvKeeper, Trial
from harness.releases.bisect_run import (
    EXIT_CODES,
    ReleaseListError,
    Runner,
    build_report,
    cell_name,
    plan,
    render,
    supported,
    write_junit,
)
from harness.releases.catalog import say
from harness.scenarios.expected import ExpectedTableError
from harness.scenarios.expected import load as load_table


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bisect",
        help="find the first release where a scenario's outcome changes",
        description="Check both ends, then binary-search the releases between them (from the "
        "package index, oldest first, or --releases) for the first whose outcome differs from "
        "the good end's: 'fixed in X' or 'regressed in X'. Each visited release runs in its own "
        "cached environment; one that cannot be installed is skipped. A release may be a "
        "version, a wheel file, a directory of wheels or 'installed'. Exit 0: a change was "
        "found; 1: the ends agree, or a release gave an outcome that is neither reproduced nor "
        "passed; 2: usage error; 3: no release in the range could be installed.",
    )
    p.add_argument("scenario", help="a catalog scenario (xharness list)")
    p.add_argument("--runtime", required=True, help=f"runtime under test ({', '.join(RELEASED_RUNTIMES)})")
    p.add_argument("--good", metavar="RELEASE",
                   help="the older end (default: the oldest supported release on the index)")
    p.add_argument("--bad", metavar="RELEASE", help="the newer end (default: the newest release)")
    p.add_argument("--releases", metavar="V,...",
                   help="the releases to search, comma-separated, instead of the index's")
    p.add_argument("--keep", type=int, default=None, metavar="N",
                   help="keep at most N of the environments this command builds (least recently "
                   "used dropped first; environments it did not build are never dropped)")
    p.add_argument("--out", type=Path, default=Path("reports"), help="output directory (default: reports)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="per-release time limit of the scenario in seconds (default 900)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    interpreters.add_argument(p)
    p.set_defaults(handler=bisect_command)



def bisect_command(args: argparse.Namespace) -> int:
    from harness.matrix.interrupt import sigterm_interrupts
    from harness.releases.catalog import UPSTREAM_RUNTIMES
    from harness.scenarios import registry
    from harness.scenarios import upstream_torch_xla as upstream

    try:
        upstream.check_name(args.scenario)
    except registry.UnknownScenario as exc:
        raise UsageError(str(exc)) from None
    if args.runtime not in RELEASED_RUNTIMES or args.runtime not in UPSTREAM_RUNTIMES:
        raise UsageError(f"--runtime: unknown runtime {args.runtime!r} (one of {', '.join(RELEASED_RUNTIMES)})")
    if not upstream.reproducers(args.scenario, args.runtime):
        raise UsageError(f"scenario {args.scenario!r} has no {args.runtime} reproducer to bisect with")
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.keep is not None and args.keep < 0:
        raise UsageError("--keep must be 0 or more")
    interpreters.apply_argument(args.python)
    try:
        table = load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    try:
        specs = plan(args.runtime, args.good, args.bad, args.releases)
    except ReleaseListError as exc:
        print(f"xharness: error: cannot list the releases of {args.runtime}: {exc}", file=sys.stderr)
        return EXIT_INSTALL
    floor = supported(args.runtime)
    if not floor.contains(specs[0].version, prereleases=True):
        say(f"note: {specs[0].label} is outside the supported releases of {args.runtime} "
             f"({floor}); a release that cannot be installed is skipped")
    say(f"bisect {args.scenario} on {args.runtime}: {len(specs)} releases, "
         f"{' '.join(s.label for s in specs)}")
    runner = Runner(args.runtime, args.scenario, table, args.timeout, EnvKeeper(args.keep))
    started = time.monotonic()
    interrupted = False
    with sigterm_interrupts():
        try:
            result = search.bisect(specs, runner)
        except KeyboardInterrupt:
            interrupted = True
            tried = tuple(Trial(runner.visits[k].spec, runner.visits[k].outcome) for k in runner.order)
            result = BisectResult(search.NOTHING_INSTALLED, tuple(specs), tried)
    wall = round(time.monotonic() - started, 1)
    code = EXIT_INTERRUPTED if interrupted else EXIT_CODES[result.kind]
    report = build_report(args.runtime, args.scenario, result, runner, wall, args.out, code)
    if interrupted:
        report = dataclasses.replace(report, result="interrupted", answer="interrupted before an answer")
    write_junit(args.out, report, {v.spec.text: v.run for v in runner.visits.values()})
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render(report))
        print(f"JUnit {args.out / 'junit' / (cell_name(args.runtime, args.scenario) + '.xml')}, "
              f"dashboard {args.out / 'index.html'}")
    return code
