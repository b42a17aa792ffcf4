"""``xharness nemesis``: the network-fault cases against a runtime, judged and tabled.

Each case (``harness.network.cases``) runs as a job of two ranks, each a host of its own in a
fabric of network namespaces, with its faults; the history is judged by the network checks and
compared with the case's measured row for this runtime and release. Prints one line per case
(or ``--markdown``: the table docs/reference/network-faults.md holds, ``--json``: every verdict
and timeline). Exit 0: every case as expected (or measured for the first time), 1: a verdict
differs from its row, 2: an unknown case, 7: no network namespaces here (not root, tools missing).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from harness.errors import UsageError
from harness.exits import EXIT_FAILED, EXIT_NO_NETWORK, EXIT_OK
from harness.network import Outcome, fabric, run_faulted
from harness.network.cases import BY_NAME, CASES, Case, agrees, expected
from harness.network.checks import CHECKS


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "nemesis",
        help="run the network-fault cases (partition, pause, kill, flap, throttle, late start)",
        description="Run each network-fault case as a job of hosts of their own (network "
        "namespaces, as root), judge it (bounded, blamed, survived, silent, torn) and compare the "
        "verdicts with the case's measured row. Exit 1: a verdict differs; 7: no namespaces here.",
    )
    p.add_argument("cases", nargs="*", metavar="CASE", help=f"cases to run (default all: {', '.join(BY_NAME)})")
    p.add_argument("--runtime", choices=("jax", "reference"), default="jax",
                   help="what the ranks run: plain JAX collectives, or the reference runtime's")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="the interpreter the ranks run (with JAX and this harness installed), e.g. a "
                   "release environment of `xharness releases`; default this one")
    p.add_argument("-j", "--jobs", type=int, default=2, help="cases run at once (default 2)")
    p.add_argument("--json", action="store_true", help="every verdict and timeline as JSON")
    p.add_argument("--markdown", action="store_true", help="the findings table as Markdown")
    p.add_argument("--history", type=Path, metavar="DIR", help="write each case's history here as JSON")
    p.add_argument("--sweep", action="store_true",
                   help="only remove what an interrupted run left (namespaces, /etc/netns entries)")
    p.set_defaults(handler=nemesis_command)


def release(runtime: str, python: str) -> str:
    """The runtime under test and its release as the ranks' interpreter has it, as the cases'
    rows name it ("jax 0.10.2"), read from its metadata without importing JAX."""
    done = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('jax'))"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(f"{python} has no JAX the ranks could run: {done.stderr.strip()[-300:]}")
    version = done.stdout.strip()
    return f"jax {version}" if runtime == "jax" else f"reference (jax {version})"


def detection(outcome: Outcome) -> float | None:
    """Seconds from the first fault's start to the first rank's failure (an error report or a
    non-zero end); None when none failed."""
    starts = [e.t for e in outcome.history.events if e.kind == "fault-start"]
    if not starts:
        return None
    ends = [e.t for e in outcome.history.events if e.t >= starts[0] and (
        (e.kind == "rank-exit" and e.detail.get("code") != 0)
        or (e.kind == "rank-event" and e.detail.get("event") == "error"))]
    return round(min(ends) - starts[0], 1) if ends else None


def _run(case: Case, runtime: str, python: str) -> Outcome:
    return run_faulted(case.faults, replace(case.spec, runtime=runtime, python=python), bound=case.bound)


def nemesis_command(args: argparse.Namespace) -> int:
    why = fabric.unavailable()
    if args.sweep:
        if why:
            print(f"xharness nemesis: {why}", file=sys.stderr)
            return EXIT_NO_NETWORK
        removed = fabric.sweep()
        print("removed: " + (", ".join(removed) if removed else "nothing"))
        return EXIT_OK
    unknown = [c for c in args.cases if c not in BY_NAME]
    if unknown:
        raise UsageError(f"unknown case(s) {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    if why:
        print(f"xharness nemesis: no network of hosts here: {why}", file=sys.stderr)
        return EXIT_NO_NETWORK
    cases = [BY_NAME[c] for c in args.cases] if args.cases else list(CASES)
    rel = release(args.runtime, args.python)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(lambda c: _run(c, args.runtime, args.python), cases))
    differs = 0
    rows = []
    for case, outcome in zip(cases, outcomes, strict=True):
        want = expected(case.name, rel)
        got = outcome.summary()
        status = "measured" if want is None else ("as expected" if agrees(want, got) else "DIFFERS")
        differs += status == "DIFFERS"
        rows.append((case, outcome, status, want))
        if args.history is not None:
            args.history.mkdir(parents=True, exist_ok=True)
            (args.history / f"{case.name}.json").write_text(outcome.history.to_json())
    if args.json:
        print(json.dumps([{"case": c.name, "release": rel, "status": s, "expected": w,
                           "verdicts": {k: {"holds": v.holds, "why": v.why} for k, v in o.verdicts.items()},
                           "detection_s": detection(o), "timeline": o.history.timeline()}
                          for c, o, s, w in rows], indent=1))
    elif args.markdown:
        print(markdown(rows, rel))
    else:
        for case, outcome, status, want in rows:
            marks = " ".join(f"{k}={_mark(v.holds)}" for k, v in outcome.verdicts.items())
            when = detection(outcome)
            print(f"{case.name:18} {status:12} {marks}  " + ("no rank failed" if when is None else f"failed after {when:g} s"))
            if status == "DIFFERS":
                print(f"  expected {want}\n  " + outcome.report().replace("\n", "\n  "))
    return EXIT_FAILED if differs else EXIT_OK


def _mark(holds: bool | None) -> str:
    return {True: "yes", False: "NO", None: "-"}[holds]


def markdown(rows: list[tuple[Case, Outcome, str, object]], rel: str) -> str:
    head = ["| case | fault | " + " | ".join(CHECKS) + " | detected after | what the ranks said |",
            "|---|---|" + "---|" * len(CHECKS) + "---|---|"]
    lines = [f"Measured with `xharness nemesis --markdown` on {rel}:", "", *head]
    for case, outcome, _, _ in rows:
        marks = " | ".join(_mark(outcome.verdicts[c].holds) for c in CHECKS)
        said = outcome.verdicts["blamed"].why if outcome.verdicts["blamed"].holds is False else (
            outcome.verdicts["bounded"].why if outcome.verdicts["bounded"].holds is False else "")
        when = detection(outcome)
        lines.append(f"| `{case.name}` | {case.meaning} | {marks} | "
                     f"{'-' if when is None else f'{when:g} s'} | {said.replace('|', '/')[:300]} |")
    return "\n".join(lines)
