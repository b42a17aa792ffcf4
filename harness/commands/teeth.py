"""``xharness teeth``: the check x fault-switch kill matrix.

Exit codes: 0 every declared pair was caught; 1 some declared pair was missed, errored (its process
died or hung) or could not run in this topology (a skip proves nothing); 2 usage error (an unknown
check or switch, a bad ``--devices``, an ``--extra-checks`` spec that does not resolve).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness.commands import plugins
from harness.errors import UsageError

DEFAULT_DEVICES = 8
DEFAULT_TIMEOUT = 300.0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "teeth",
        help="check x fault-switch kill matrix (scenarios and invariants)",
        description="Run every check with each fault switch it declares (one fresh process per "
        "pair) and show which pairs it caught. Exit 0 when every declared pair was caught, 1 "
        "when one was missed, errored or skipped, 2 on a usage error.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--out", default=None,
                   help="writes OUT/junit/teeth.xml and OUT/logs/teeth/ (default: the project's reports "
                   "directory, [tool.xharness] reports, else reports/)")
    p.add_argument("--checks", default=None, metavar="ID,ID", help="only these checks (rows)")
    p.add_argument("--faults", default=None, metavar="NAME,NAME", help="only these switches")
    p.add_argument(
        "--all-pairs",
        action="store_true",
        help="also run the pairs a check does not declare (for information, never a failure)",
    )
    p.add_argument(
        "--devices", type=int, default=DEFAULT_DEVICES, help="CPU devices per child (default 8)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help="seconds one pair may run before it counts as hung (default 300)",
    )
    p.add_argument(
        "--extra-checks",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="your own checks: an Invariant, a Scenario or a list of them, from a dotted module "
        "or a .py file (repeatable, or comma-separated)",
    )
    p.add_argument(
        "--runtime", default="reference",
        help="the registered runtime whose fault switches are the columns (default: reference); "
        "its checks run against it",
    )
    p.add_argument(
        "-j", "--jobs", type=int, default=None, help="pairs run at once (default: CPUs, at most 4)"
    )
    p.set_defaults(handler=cmd_teeth)


def _names(raw: str | None, flag: str) -> list[str] | None:
    if raw is None:
        return None
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names:
        raise UsageError(f"{flag} names nothing (got {raw!r})")
    return list(dict.fromkeys(names))


def switches(runtime: str) -> dict[str, str]:
    """The fault switches of ``runtime`` (its adapter's): the columns of its kill matrix."""
    from harness import adapters

    try:
        return dict(adapters.get(runtime).fault_switches())
    except adapters.UnknownRuntime as exc:
        raise UsageError(f"--runtime: {exc}") from None
    except (adapters.Unsupported, adapters.AdapterUnavailable) as exc:
        raise UsageError(f"--runtime {runtime}: it has no fault switches to measure teeth with ({exc})") from None


def _faults(raw: str | None, runtime: str = "reference") -> list[str]:
    SWITCHES = switches(runtime)
    names = _names(raw, "--faults")
    if names is None:
        return list(SWITCHES)
    unknown = [n for n in names if n not in SWITCHES]
    if unknown:
        raise UsageError(
            f"unknown fault switch(es) {', '.join(map(repr, unknown))}; known: {', '.join(SWITCHES)}"
        )
    return names


def _reports_dir() -> Path:
    from harness import project

    try:
        return project.load().reports_dir()
    except project.ProjectError as exc:
        raise UsageError(str(exc)) from None


def cmd_teeth(args: argparse.Namespace) -> int:
    if args.devices < 1:
        raise UsageError(f"--devices must be at least 1 (CPU devices per child), got {args.devices}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")

    plugins.require_loadable("xharness teeth")
    from harness.teeth import checks as checks_mod
    from harness.teeth import launch, output
    from harness.teeth.matrix import SKIPPED, PairResult, plan

    extra = tuple(
        checks_mod.normalize_spec(s) for raw in args.extra_checks for s in raw.split(",") if s.strip()
    )
    faults = _faults(args.faults, args.runtime)
    own = args.runtime != "reference"
    known = checks_mod.load_checks(extra, switches(args.runtime) if own else None)
    if own and args.checks is None:  # a plugin runtime's matrix: the checks of its switches
        known = [c for c in known if set(c.declares) & set(switches(args.runtime))]
    checks = checks_mod.select(known, _names(args.checks, "--checks"))
    pairs = plan(checks, faults, args.all_pairs)

    out = Path(args.out) if args.out is not None else _reports_dir()
    settings = launch.LaunchSettings(
        devices=args.devices,
        timeout=args.timeout,
        jobs=args.jobs or max(1, min(4, os.cpu_count() or 1)),
        logs=out / "logs" / "teeth",
        runtime=args.runtime,
    )
    start = time.monotonic()
    # a pair this topology cannot host is known without starting a process
    skipped = {
        i: PairResult.of(p, SKIPPED, note=unmet)
        for i, p in enumerate(pairs)
        if (unmet := p.check.unmet(args.devices))
    }
    to_run = [p for i, p in enumerate(pairs) if i not in skipped]
    done = [0]

    def progress(result: PairResult) -> None:
        done[0] += 1
        print(output.progress_line(result, done[0], len(to_run)), file=sys.stderr, flush=True)

    ran, interrupted = launch.run_all(to_run, settings, progress)
    by_pair = {(r.check, r.fault): r for r in [*ran, *skipped.values()]}
    results = [by_pair[(p.check.id, p.fault)] for p in pairs if (p.check.id, p.fault) in by_pair]
    junit = out / "junit" / "teeth.xml"
    run = output.TeethRun(
        checks=checks,
        faults=faults,
        pairs=pairs,
        results=results,
        devices=args.devices,
        seconds=time.monotonic() - start,
        junit=junit,
        interrupted=interrupted,
        runtime=args.runtime,
    )
    output.write_junit(run, junit)
    if args.json:
        print(json.dumps(output.to_json(run), indent=2))
    else:
        print(output.render_table(run))
    return run.exit_code

