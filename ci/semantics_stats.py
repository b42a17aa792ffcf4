"""What the semantics oracle's generator draws: statement kinds, operand positions, view kinds,
boundary placements, their consecutive pairs and triples, and the compositions the classes of
bugs it hunts are made of.

The oracle (``harness.properties.oracle``) only finds the bugs whose statements its generator
lines up: a parameter the optimizer updated, used again before the boundary; a view of a detached
alias written through; an executed value as the first or second operand of a subtraction. This
script draws ``--programs`` programs from ``semantics.programs()`` the way the oracle's searches
do (hypothesis, derandomized, generation only), turns each into its features
(``semantics.features``: one per statement) and counts, with the motifs and without them
(``programs(motifs=False)``: statement by statement only):

- each feature (the kind and the facts that make it another case: ``binary:sub:executed-pending``
  is an executed value as the first operand, a pending one as the second);
- consecutive pairs and triples of coarse kinds (the feature's kind, plus ``executed``/``pending``
  per operand for binary operations, ``differentiable``/``through-view`` for in-place updates):
  how many of the possible ones are never drawn;
- the programs that hold each of ``semantics.COMPOSITIONS``.

    .venv/bin/python ci/semantics_stats.py [--programs 1000]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def coarse(feature: str) -> str:
    """The feature a pair or triple is counted by."""
    parts = feature.split(":")
    if parts[0] == "binary":
        return ":".join(parts[:3]).replace("/param", "")
    if parts[0] == "inplace":
        flags = [p for p in parts[2:] if p in ("differentiable", "through-view")]
        return ":".join(["inplace", *flags])
    if parts[0] == "view":
        return "view:of-detached" if "of-detached" in parts else "view"
    return parts[0]


def collect(programs: int, motifs: bool) -> dict[str, Any]:
    from hypothesis import Phase, given, settings

    from harness.properties import semantics

    features: Counter[str] = Counter()
    pairs: Counter[tuple[str, ...]] = Counter()
    triples: Counter[tuple[str, ...]] = Counter()
    compositions: Counter[str] = Counter()
    kinds: set[str] = set()

    @settings(max_examples=programs, derandomize=True, database=None, deadline=None, phases=[Phase.generate])
    @given(semantics.programs(motifs=motifs))
    def draw(program: semantics.Program) -> None:
        seen = semantics.features(program)
        features.update(set(seen))
        c = [coarse(f) for f in seen]
        kinds.update(c)
        pairs.update(set(zip(c, c[1:], strict=False)))
        triples.update(set(zip(c, c[1:], c[2:], strict=False)))
        for name, pattern in semantics.COMPOSITIONS.items():
            if semantics.holds(seen, pattern):
                compositions[name] += 1

    draw()
    return {"features": dict(features), "pairs": {"|".join(k): v for k, v in pairs.items()},
            "triples": {"|".join(k): v for k, v in triples.items()}, "compositions": dict(compositions),
            "kinds": sorted(kinds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=1000)
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
    sys.path.insert(0, str(ROOT))
    from harness.properties import semantics

    runs = {"motifs": collect(args.programs, True), "statement by statement": collect(args.programs, False)}
    kinds = sorted(set(runs["motifs"]["kinds"]) | set(runs["statement by statement"]["kinds"]))
    possible_pairs = len(kinds) ** 2
    possible_triples = len(kinds) ** 3
    print(f"{args.programs} programs per generator; {len(kinds)} coarse kinds: {', '.join(kinds)}\n")
    print(f"| composition | {' | '.join(runs)} |")
    print(f"|---|{'---:|' * len(runs)}")
    for name in semantics.COMPOSITIONS:
        print(f"| {name} | " + " | ".join(str(r["compositions"].get(name, 0)) for r in runs.values()) + " |")
    print()
    for label, r in runs.items():
        print(f"{label}: {len(r['features'])} features, {len(r['pairs'])} of {possible_pairs} pairs, "
              f"{len(r['triples'])} of {possible_triples} triples drawn")
    never = [f for f in sorted(set(runs["statement by statement"]["features"]) | set(runs["motifs"]["features"]))
             if f not in runs["motifs"]["features"]]
    print(f"features only the statement-by-statement generator drew: {never or 'none'}")
    binary = sorted(f for f in runs["motifs"]["features"] if f.startswith("binary:sub:"))
    print("operand positions of subtraction (with motifs):",
          ", ".join(f"{f.split(':', 2)[2]} {runs['motifs']['features'][f]}" for f in binary))
    rare = sorted(itertools.islice(sorted(runs["motifs"]["triples"].items(), key=lambda kv: kv[1]), 0, 8))
    print("rarest drawn triples (with motifs):", "; ".join(f"{k} {v}" for k, v in rare))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
