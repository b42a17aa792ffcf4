"""How fast the invariants search: examples per second per invariant under the CI profile.

Why it matters: a property earns its keep by the number of inputs it tries in the time CI gives
it. Each invariant is run twice in one process with the CI profile's settings (derandomized, its
own example count, generation only): *cold* is the first run (compiles, JAX meshes and strategy
objects built on the way), *warm* the same examples again (everything cached), which is what a
cell pays after its first property test. The state machine is measured in operations (rules) per
second, the unit its target is stated in. Figures are reported, never asserted: timing on a
shared machine is not a test.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from hypothesis import Phase, given, settings

from harness.properties.base import SEARCH_SETTINGS, Invariant
from harness.properties.differential import STEP_BOUNDARY, TRAINING_DIFFERENTIAL
from harness.properties.oracle import SEMANTICS_ORACLE, TRAINING_ORACLE
from harness.properties.registry import INVARIANTS

#: invariants whose every example is a whole program: measured in programs per second (the
#: oracles' cold run includes starting the eager PyTorch worker, which imports torch)
PROGRAM_FUZZERS: tuple[Invariant, ...] = (TRAINING_DIFFERENTIAL, STEP_BOUNDARY, SEMANTICS_ORACLE, TRAINING_ORACLE)

#: targets from the issue that set them: examples/s (rules/s for the state machine)
TARGETS: dict[str, float] = {
    "spec-normalization": 1000.0,
    "op-sharding-cache": 1000.0,
    "coverage": 50.0,
    "round-trip": 50.0,
    "sync-aliasing": 20.0,
}


@dataclass
class Speed:
    invariant: str
    unit: str  # "examples/s" or "rules/s"
    examples: int
    rules: int
    cold: float  # units per second, first run
    warm: float  # units per second, the same examples again
    compiles: int  # XLA compiles during the cold run
    target: float | None

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.warm >= self.target

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "met": self.met}


def _timed(invariant: Invariant, max_examples: int) -> tuple[float, int, int]:
    count = [0, 0]

    def run(example: dict[str, Any]) -> None:
        count[0] += 1
        program = example.get("program", ())
        count[1] += len(program) if isinstance(program, list | tuple) else 0  # a machine's rules
        invariant.run_example(example)

    options = {**SEARCH_SETTINGS, "max_examples": max_examples, "phases": [Phase.generate]}
    test = settings(**options)(given(invariant.examples())(run))
    start = time.perf_counter()
    test()
    return time.perf_counter() - start, count[0], count[1]


def measure(invariant: Invariant, max_examples: int | None = None) -> Speed:
    from harness.runtime import transfers

    n = max_examples or invariant.max_examples
    compiles = transfers.metrics.compiles
    cold, examples, rules = _timed(invariant, n)
    compiles = transfers.metrics.compiles - compiles
    warm, _, _ = _timed(invariant, n)
    per_rule = rules > 0  # program invariants: the state machine's unit is the rule
    units = rules if per_rule else examples
    unit = "rules/s" if per_rule else "programs/s" if invariant in PROGRAM_FUZZERS else "examples/s"
    return Speed(
        invariant=invariant.id,
        unit=unit,
        examples=examples,
        rules=rules,
        cold=units / cold,
        warm=units / warm,
        compiles=compiles,
        target=TARGETS.get(invariant.id),
    )


def measure_all(ids: list[str] | None = None, max_examples: int | None = None) -> list[Speed]:
    every = [*INVARIANTS, *(i for i in PROGRAM_FUZZERS if i not in INVARIANTS)]
    chosen = [i for i in every if (ids is None or i.id in ids) and not i.unmet()]  # unmet: cannot run here
    return [measure(i, max_examples) for i in chosen]


def table(speeds: list[Speed]) -> str:
    lines = [f"{'invariant':24} {'unit':11} {'examples':>8} {'rules':>6} {'cold':>9} {'warm':>9} {'target':>12} {'compiles':>8}"]
    for s in speeds:
        target = "-" if s.target is None else f"{s.target:g}{'' if s.met else ' MISSED'}"
        lines.append(
            f"{s.invariant:24} {s.unit:11} {s.examples:>8} {s.rules or '-':>6} {s.cold:>9.1f} {s.warm:>9.1f} {target:>12} {s.compiles:>8}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.properties.speed [--json]``: the child ``xharness bench properties``
    runs (the device count must be fixed before JAX starts)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m harness.properties.speed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    speeds = measure_all()
    if args.json:
        print(json.dumps({"invariants": [s.to_dict() for s in speeds]}))
    else:
        print(table(speeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
