"""How often the program search draws each pair of operations and each alias-chain length.

A property suite only finds the bugs whose sequence of operations it draws. This script draws
``--programs`` examples of one machine invariant the way its suite does (hypothesis, derandomized,
generation only), *runs* each program on the reference runtime and records what the interpreter
executed, not what the strategy names:

- an operation counts under its kind (``alias``, ``inplace``, ``save``...) when it ran; an alias,
  ``create`` or ``derive`` that made no tensor (the machine was full) counts as ``noop``;
- a pair ``a>b`` is two operations *adjacent* in the program as run (``a`` right before ``b``);
  a program counts once per pair it holds;
- a tensor's alias-chain length is how many views lie between it and its base (a view of a view
  of a base: 2); a program counts under the longest chain it made, and under the longest chain
  it wrote through (an in-place op on that tensor).

``--tree PATH`` measures the harness of another checkout (imported from there in a child
process); ``--baseline PATH`` measures a second tree too and prints both side by side.

    .venv/bin/python ci/swarm_stats.py [--programs 1000] [--invariant sync-aliasing]
                                       [--tree PATH] [--baseline PATH] [--all]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from tree_measure import measure

ROOT = Path(__file__).resolve().parent.parent
KINDS = {
    "Create": "create",
    "Alias": "alias",
    "InPlace": "inplace",
    "InPlaceTensor": "inplace_tensor",
    "Derive": "derive",
    "MarkStep": "mark_step",
    "Sync": "sync",
    "Wait": "wait",
    "Read": "read",
    "SaveLoad": "save",
    "Grab": "grab",
    "CollectHandles": "collect",
    "ReadHandles": "read_handles",
}
MAKES_TENSOR = ("Create", "Alias", "Derive")
WRITES = ("InPlace", "InPlaceTensor")
LONGEST = 4  # chains of this length or longer share a row


def collect(invariant_id: str, count: int) -> dict[str, Any]:
    """Draw and run ``count`` programs of the invariant in this process (the tree on sys.path)."""
    from hypothesis import Phase, given, settings

    from harness.properties import get, machine
    from harness.runtime.testing import isolated

    invariant = get(invariant_id)
    pairs: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    made: Counter[int] = Counter()
    written: Counter[int] = Counter()
    lengths: list[int] = []
    original = machine.Interpreter.apply

    def recording(self: Any, op: Any) -> None:
        depths: list[int] = self.__dict__.setdefault("chain_depths", [0] * len(self.tensors))
        name = type(op).__name__
        before = len(self.tensors)
        source = before - 1 - op.src % before if name == "Alias" else None
        original(self, op)
        grown = len(self.tensors) - before
        depths.extend([0] * grown)
        if name == "Alias" and grown:
            depths[-1] = depths[source] + 1
        kind = "noop" if name in MAKES_TENSOR and not grown else KINDS[name]
        if name in WRITES:
            target = len(self.tensors) - 1 - op.dst % len(self.tensors)
            self.__dict__.setdefault("chain_written", []).append(depths[target])
        self.__dict__.setdefault("ran", []).append(kind)
        recorded.append(self)

    recorded: list[Any] = []
    machine.Interpreter.apply = recording  # type: ignore[method-assign]

    @settings(max_examples=count, database=None, derandomize=True, phases=[Phase.generate], deadline=None)
    @given(invariant.examples())
    def run(example: dict[str, Any]) -> None:
        recorded.clear()
        with isolated():
            machine.run_program(example["functionalization"], example["param_aliasing"], example["program"])
        interp = recorded[-1] if recorded else None
        ran = interp.__dict__.get("ran", []) if interp is not None else []
        depths = interp.__dict__.get("chain_depths", [0]) if interp is not None else [0]
        lengths.append(len(ran))
        kinds.update(set(ran))
        pairs.update({f"{a}>{b}" for a, b in zip(ran, ran[1:], strict=False)})
        made[min(max(depths), LONGEST)] += 1
        written[min(max(interp.__dict__.get("chain_written", [0]) if interp is not None else [0]), LONGEST)] += 1

    try:
        run()
    finally:
        machine.Interpreter.apply = original  # type: ignore[method-assign]
    return {
        "programs": len(lengths),
        "mean_length": statistics.fmean(lengths) if lengths else 0.0,
        "kinds": dict(kinds),
        "pairs": dict(pairs),
        "chain_made": {str(k): v for k, v in made.items()},
        "chain_written": {str(k): v for k, v in written.items()},
    }


def _share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.1f}%)" if total else str(count)


def table(results: dict[str, dict[str, Any]], show_all: bool) -> str:
    """Markdown: a summary, the chain lengths, and the pairs (the rarest first, by the first tree)."""
    names = list(results)
    first = results[names[0]]
    out = [
        "| | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
        "| programs | " + " | ".join(str(r["programs"]) for r in results.values()) + " |",
        "| mean operations run | " + " | ".join(f"{r['mean_length']:.1f}" for r in results.values()) + " |",
    ]
    for key, what in (("chain_made", "made"), ("chain_written", "written through")):
        for length in range(1, LONGEST + 1):
            label = f"alias chain >= {length} {what}"
            cells = []
            for r in results.values():
                at_least = sum(v for k, v in r[key].items() if int(k) >= length)
                cells.append(_share(at_least, r["programs"]))
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    kinds = sorted({k for r in results.values() for k in r["kinds"]} - {"noop"})
    every = [f"{a}>{b}" for a in kinds for b in kinds]
    for r in results.values():
        seen = [r["pairs"].get(p, 0) for p in every]
        r["_summary"] = (sum(1 for s in seen if s == 0), sum(1 for s in seen if s < r["programs"] / 100), statistics.median(seen))
    out.append(f"| adjacent pairs of {len(kinds)} kinds never drawn (of {len(every)}) | " + " | ".join(str(r["_summary"][0]) for r in results.values()) + " |")
    out.append("| adjacent pairs in < 1% of programs | " + " | ".join(str(r["_summary"][1]) for r in results.values()) + " |")
    out.append("| programs per adjacent pair, median | " + " | ".join(str(r["_summary"][2]) for r in results.values()) + " |")
    rows = sorted(every, key=lambda p: (first["pairs"].get(p, 0), p))
    if not show_all:
        rows = rows[:15]
    out += ["", "| adjacent pair | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    out += [f"| {p} | " + " | ".join(str(r["pairs"].get(p, 0)) for r in results.values()) + " |" for p in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--invariant", default="sync-aliasing", help="a machine invariant's id")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--baseline", type=Path, help="a second checkout, measured first and shown first")
    parser.add_argument("--all", action="store_true", help="every pair, not the 15 rarest")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, Any]] = {}
    if args.baseline is not None:
        results[f"baseline ({args.baseline})"] = measure(args.baseline, "swarm_stats", args.invariant, args.programs)
    results[f"{args.tree}"] = measure(args.tree, "swarm_stats", args.invariant, args.programs)
    print(f"{args.invariant}: {args.programs} programs drawn as its suite draws them, counted as run\n")
    print(table(results, args.all))
    return 0


if __name__ == "__main__":
    sys.exit(main())
