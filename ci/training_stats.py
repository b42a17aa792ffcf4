"""How often the training-program generator draws each composition of events around a step boundary.

The training fuzzer (``harness.properties.training``) only finds the bugs whose order of events it
draws: an input updated in place, then the forward product that reads it, then a read of a forward
value, then a step boundary, then ``backward`` needs all five in that order, and a generator can
express each of them and still never line them up. This script draws ``--programs`` programs from
``training.programs()`` the way the invariants' searches do (hypothesis, derandomized, generation
only) and turns each into its sequence of events, read off the code it runs (``training.code`` in
the reference runtime's dialect, line by line, so what is counted is what runs):

- ``inplace``: an input (``x``, ``y``) updated in place from its own value (``x.mul_(0.5)``); a
  ``copy_`` of a fresh batch into a reused buffer replaces the value and reads none of it, and is
  not counted;
- ``product``: a matrix product (a linear layer, ``h @ w0.T``);
- ``read``: a value read back to the host (``.numpy()``);
- ``step``: a step boundary (``xr.mark_step()``); a sync of chosen tensors is neither a step nor a
  read and is not counted;
- ``backward``: ``loss.backward()``.

A program counts once for each ordered triple of distinct events it holds as a subsequence (not
necessarily adjacent), in two ways: *anywhere* in the program, and *within one step* (inside one
optimizer step's code, where a ``backward`` is of the forward pass the events before it belong
to; across steps a subsequence often strings together events that have nothing to do with each
other). The same two counts are printed for the compositions ``COMPOSITIONS`` of five events.

``--tree PATH`` measures the harness of another checkout (imported from there in a child process);
``--baseline PATH`` measures a second tree too and prints both side by side.

    .venv/bin/python ci/training_stats.py [--programs 1000] [--tree PATH] [--baseline PATH]
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tree_measure import measure

ROOT = Path(__file__).resolve().parent.parent
EVENTS: tuple[str, ...] = ("inplace", "product", "read", "step", "backward")
TRIPLES: tuple[tuple[str, str, str], ...] = tuple(itertools.permutations(EVENTS, 3))
#: five-event orders that break the reference runtime when they fall in one optimizer step
COMPOSITIONS: tuple[tuple[str, ...], ...] = (
    ("inplace", "product", "read", "step", "backward"),
    ("product", "inplace", "read", "step", "backward"),
    ("product", "read", "inplace", "step", "backward"),
)
_INPLACE = re.compile(r"^(?:x|y)\.(?!copy_)\w+_\(")
_STEP_HEADER = re.compile(r"^# step \d+$")


def events_of(line: str, mark_step: str) -> list[str]:
    """The events of one line of reference-dialect code, in the order they run."""
    line = line.strip()
    out = []
    if _INPLACE.match(line):
        out.append("inplace")
    if " @ " in line:
        out.append("product")
    if ".numpy()" in line:
        out.append("read")
    if line == mark_step:
        out.append("step")
    if line.endswith(".backward()"):
        out.append("backward")
    return out


def events(text: str, mark_step: str) -> tuple[list[str], list[list[str]]]:
    """The program's events, and the events of each optimizer step's code (``# step k`` up to
    the next step or the final reads)."""
    every: list[str] = []
    steps: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if _STEP_HEADER.match(line.strip()):
            current = []
            steps.append(current)
        found = events_of(line, mark_step)
        every += found
        if current is not None:
            current += found
    return every, steps


def holds(sequence: Sequence[str], wanted: Sequence[str]) -> bool:
    """Whether ``wanted`` is a subsequence of ``sequence``."""
    it = iter(sequence)
    return all(any(e == w for e in it) for w in wanted)


def key(events_: Sequence[str]) -> str:
    return ">".join(events_)


def collect(count: int) -> dict[str, Any]:
    """Draw ``count`` programs in this process (the tree on sys.path) and count their events."""
    from hypothesis import Phase, given, settings

    from harness.adapters.reference import REFERENCE_DIALECT
    from harness.properties import training

    patterns = [*TRIPLES, *COMPOSITIONS]
    anywhere: Counter[str] = Counter()
    in_step: Counter[str] = Counter()
    lengths: list[int] = []

    @settings(max_examples=count, database=None, derandomize=True, phases=[Phase.generate], deadline=None)
    @given(training.programs())
    def draw(program: training.Program) -> None:
        text = training.code(program, REFERENCE_DIALECT).text()
        every, steps = events(text, REFERENCE_DIALECT.mark_step)
        lengths.append(len(every))
        for pattern in patterns:
            if holds(every, pattern):
                anywhere[key(pattern)] += 1
            if any(holds(step, pattern) for step in steps):
                in_step[key(pattern)] += 1

    draw()
    return {
        "programs": len(lengths),
        "mean_events": statistics.fmean(lengths) if lengths else 0.0,
        "anywhere": dict(anywhere),
        "in_step": dict(in_step),
    }


def _share(count: int, total: int) -> str:
    if not count:
        return "0 (never)"
    return f"{count} ({100 * count / total:.1f}%)" if total else str(count)


def table(results: dict[str, dict[str, Any]]) -> str:
    """Markdown: a summary, the five-event compositions, and every triple (in ``TRIPLES`` order)."""
    names = list(results)
    header = "| | " + " | ".join(f"{n}: anywhere | {n}: within one step" for n in names) + " |"
    rule = "|---|" + "---|---|" * len(names)

    def row(label: str, pattern: str) -> str:
        cells = [
            f"{_share(r['anywhere'].get(pattern, 0), r['programs'])} | {_share(r['in_step'].get(pattern, 0), r['programs'])}"
            for r in results.values()
        ]
        return f"| {label} | " + " | ".join(cells) + " |"

    out = [
        "| | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| programs | " + " | ".join(str(r["programs"]) for r in results.values()) + " |",
        "| mean events | " + " | ".join(f"{r['mean_events']:.1f}" for r in results.values()) + " |",
    ]
    for where, what in (("anywhere", "anywhere"), ("in_step", "within one step")):
        cells = [str(sum(1 for t in TRIPLES if not r[where].get(key(t)))) for r in results.values()]
        out.append(f"| triples never drawn {what} (of {len(TRIPLES)}) | " + " | ".join(cells) + " |")
    out += ["", header.replace("| |", "| composition |", 1), rule]
    out += [row(", ".join(c), key(c)) for c in COMPOSITIONS]
    out += ["", header.replace("| |", "| triple |", 1), rule]
    out += [row(", ".join(t), key(t)) for t in TRIPLES]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--baseline", type=Path, help="a second checkout, measured first and shown first")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, Any]] = {}
    if args.baseline is not None:
        results[f"baseline ({args.baseline})"] = measure(args.baseline, "training_stats", args.programs)
    results[f"{args.tree}"] = measure(args.tree, "training_stats", args.programs)
    print(f"training.programs(): {args.programs} programs drawn as the searches draw them, events of the reference code\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
