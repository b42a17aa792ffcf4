"""``xharness bench race``: how fast schedule control finds, replays and rules out the catalog's
two concurrency bugs, ``race-on-handles`` and ``wait-gap``, against the free-running stress
baseline, measured in one run.

Why it exists: a strategy is only worth its complexity if it finds the race in far fewer runs than
running the threads freely with random naps (what a loaded CI runner does by accident), and if a
fixed runtime survives a large explored space. Everything here runs each scenario's own variant
(``race_on_handles.accumulate``: three gradient-accumulation steps on a sharded linear model;
``wait_gap.step_then_wait``: one step, then ``wait_device_ops``), each run from fresh state, exactly
as ``xharness repro ID --explore ...`` does.

The stress baseline is run at several nap lengths, because its strength is a choice: no naps is
what a CI runner does by accident, longer naps shake the threads harder. The two bugs sit at
opposite ends. Free-running threads lose the handle race on the first run here (the caller always
outruns the executor), so no strategy can need ten times fewer runs than that: one run is the floor.
The wait gap is a window of microseconds that free threads almost never hit without naps. Both show
on the scheduler's first, preemption-free schedule, which is why DFS finds them at once.

Fault on (each scenario's switch injected), for each seed ``0..seeds-1`` (the seed is the scenario's
and the strategy's, as on the command line): PCT (depth 3), random, DFS (at most 2 preemptions;
deterministic, so one figure) and hypothesis (which then shrinks) until the first failure; every
failing schedule is replayed and must fail the same way at the same schedule. The stress baseline
counts runs to failure. Fault off: DFS covers its bounded space, PCT, random and hypothesis
explore their budgets, stress runs its own; none may fail.

Also measured: what a schedule point costs with no scheduler active, and how many a training
step reaches, so that the cost the points add to ``xharness bench``'s step ratios is explicit.

Runs in a fresh child process (``python -m harness.bench_race``) with 8 CPU devices,
the device count ``xharness repro`` uses by default; the child prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

DEVICES = 8
DFS_BOUND = 2
PCT_DEPTH = 3
BUDGET = 200  # runs per seed before a strategy counts as having missed the race
STRESS_BUDGET = 300
#: the stress baseline's nap lengths (seconds, the upper end of a uniform draw at every point):
#: none at all is what a CI runner does by accident; longer naps shake the threads harder
STRESS_NAPS = (0.0, 0.0001, 0.001)
FIXED = {"pct": 200, "random": 200, "hypothesis": 100, "stress": 100}


#: scenario id -> (module, variant) of the catalog's concurrency scenarios
SCENARIOS = {
    "race-on-handles": ("harness.scenarios.race_on_handles", "accumulate"),
    "wait-gap": ("harness.scenarios.wait_gap", "step_then_wait"),
}


def _body(scenario: str, seed: int, inject: bool) -> Callable[[], None]:
    import importlib

    from harness.scenarios import runner
    from harness.scenarios.base import Context

    module, variant = SCENARIOS[scenario]
    fn = getattr(importlib.import_module(module), variant)
    return runner.controlled(fn, Context(seed, inject, DEVICES))


def _summary(counts: list[int | None]) -> dict[str, Any]:
    found = [c for c in counts if c is not None]
    # a seed that never failed took more than the budget: it counts as infinitely many runs, so
    # a median over every seed is a lower bound (None when most seeds never failed)
    every = (
        statistics.median([float("inf") if c is None else c for c in counts]) if counts else None
    )
    return {
        "seeds": len(counts),
        "found": len(found),
        "median": statistics.median(found) if found else None,
        "median_all": None if every is None or every == float("inf") else every,
        "max": max(found) if found else None,
        "counts": counts,
    }


def _replays(body: Callable[[], None], failure: Any) -> bool:
    """The reported schedule, replayed alone, fails the same way at the same schedule."""
    from harness import sched

    again = sched.replay(body, failure.schedule, raise_on_failure=False).failure
    return again is not None and (again.kind, again.message, again.schedule, again.preemptions) == (
        failure.kind,
        failure.message,
        failure.schedule,
        failure.preemptions,
    )


def _until_failure(strategy: str, body: Callable[[], None], seed: int) -> Any:
    """One check of ``strategy`` with the per-seed budget, stopping at the first failure."""
    from harness import sched

    if strategy == "pct":
        return sched.check_pct(body, BUDGET, PCT_DEPTH, seed, raise_on_failure=False)
    if strategy == "random":
        return sched.check_random(body, BUDGET, seed, raise_on_failure=False)
    if strategy == "dfs":
        return sched.check_dfs(body, DFS_BOUND, BUDGET, raise_on_failure=False)
    return sched.check_hypothesis(body, BUDGET, seed, raise_on_failure=False)


def _injected(scenario: str, seeds: int) -> dict[str, Any]:
    from harness import sched

    out: dict[str, Any] = {}
    runs: dict[str, list[int | None]] = {"pct": [], "random": [], "dfs": [], "hypothesis": []}
    preemptions: dict[str, list[int]] = {k: [] for k in runs}
    replayed = {k: 0 for k in runs}
    kinds: set[str] = set()
    for seed in range(seeds):
        body = _body(scenario, seed, True)
        for name in runs:
            result = _until_failure(name, body, seed)
            failure = result.failure
            if failure is None:
                runs[name].append(None)
                continue
            kinds.add(failure.kind)
            runs[name].append(result.schedules)
            preemptions[name].append(failure.preemptions or 0)
            replayed[name] += _replays(body, failure)
    for name in runs:
        out[name] = {
            **_summary(runs[name]),
            "replayed": replayed[name],
            "max_preemptions": max(preemptions[name], default=None),
        }
    ladder = {}
    for nap in STRESS_NAPS:
        stress = []
        for seed in range(seeds):
            result = sched.stress(
                _body(scenario, seed, True),
                STRESS_BUDGET,
                seed,
                max_sleep=nap,
                raise_on_failure=False,
            )
            stress.append(result.runs_to_failure)
            if result.failure is not None:
                kinds.add(result.failure.kind)
        ladder[_nap_key(nap)] = {**_summary(stress), "budget": STRESS_BUDGET}
    out["stress"] = ladder[_nap_key(DEFAULT_NAP)]
    out["stress_by_nap"] = ladder
    out["failure_kinds"] = sorted(kinds)
    return out


DEFAULT_NAP = 0.001  # ``sched.stress``'s own default


def _nap_key(nap: float) -> str:
    return f"{nap * 1e3:g} ms"


def _ratios(pct: float | None, ladder: dict[str, Any]) -> dict[str, Any]:
    """Stress runs over PCT schedules (medians) per nap length. Where most seeds of the stress
    baseline never failed, the ratio is a lower bound (``>=``: budget over PCT median)."""
    out: dict[str, Any] = {}
    for key, s in ladder.items():
        if pct is None:
            out[key] = {"ratio": None, "lower_bound": False}
        elif s["median_all"] is None:
            out[key] = {"ratio": round(s["budget"] / pct, 2), "lower_bound": True}
        else:
            out[key] = {"ratio": round(s["median_all"] / pct, 2), "lower_bound": False}
    return out


def _fixed(scenario: str) -> dict[str, Any]:
    from harness import sched

    body = _body(scenario, 0, False)
    out: dict[str, Any] = {}
    started = time.perf_counter()
    dfs = sched.check_dfs(body, DFS_BOUND, raise_on_failure=False)
    out["dfs"] = {
        "schedules": dfs.schedules,
        "exhausted": dfs.exhausted,
        "failures": dfs.failures,
        "seconds": round(time.perf_counter() - started, 2),
    }
    for name, check in (
        ("pct", lambda: sched.check_pct(body, FIXED["pct"], PCT_DEPTH, 0, raise_on_failure=False)),
        ("random", lambda: sched.check_random(body, FIXED["random"], 0, raise_on_failure=False)),
        (
            "hypothesis",
            lambda: sched.check_hypothesis(body, FIXED["hypothesis"], 0, raise_on_failure=False),
        ),
        ("stress", lambda: sched.stress(body, FIXED["stress"], 0, raise_on_failure=False)),
    ):
        started = time.perf_counter()
        result = check()
        out[name] = {
            "schedules": result.schedules,
            "failures": result.failures,
            "seconds": round(time.perf_counter() - started, 2),
        }
        if result.failure is not None:
            out[name]["failure"] = result.failure.to_dict()
    controlled = ("dfs", "pct", "random", "hypothesis")
    out["explored"] = sum(out[k]["schedules"] for k in controlled)
    out["failures"] = sum(out[k]["failures"] for k in (*controlled, "stress"))
    return out


class _Counter:
    """A controller that only counts the points reached (every operation runs as ``threading``'s)."""

    def __init__(self) -> None:
        self.points = 0

    def point(self, name: str, context: dict[str, Any]) -> None:
        self.points += 1

    def sync(self, name: str, obj: object) -> None:
        self.points += 1

    def block(self, name: str, obj: object, ready: Any, timeout: float | None) -> int:
        from harness.sched.points import FREE

        self.points += 1
        return FREE

    def adopt(self, thread: threading.Thread) -> None:
        return None


def _point_cost() -> dict[str, Any]:
    """Nanoseconds per inactive ``point()``, and points per training step of the step bench's
    tiny case shape (linear, SGD, ``mark_step`` + ``wait_device_ops``)."""
    import numpy as np

    import harness.runtime as xr
    from harness.sched import point, points

    n = 1_000_000
    loop = range(n)
    started = time.perf_counter()
    for _ in loop:
        point("x")
    with_point = time.perf_counter() - started
    started = time.perf_counter()
    for _ in loop:
        pass
    empty = time.perf_counter() - started
    ns = max(with_point - empty, 0.0) / n * 1e9

    model = xr.models.LinearModel(64, 16)
    opt = xr.optim.SGD(model.parameters(), lr=0.01)
    x = xr.tensor(np.ones((64, 64), np.float32))
    y = xr.tensor(np.zeros((64, 16), np.float32))

    def step() -> None:
        loss = xr.nn.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        xr.mark_step()
        xr.wait_device_ops()

    for _ in range(3):
        step()
    counter = _Counter()
    points.activate(counter)
    try:
        step()
    finally:
        points.deactivate(counter)
    return {
        "ns_per_point": round(ns, 1),
        "points_per_step": counter.points,
        "us_per_step": round(ns * counter.points / 1e3, 2),
    }


def _scenario(scenario: str, seeds: int) -> dict[str, Any]:
    from harness.runtime import faults
    from harness.scenarios.registry import get

    fault = get(scenario).fault
    _body(scenario, 0, False)()  # compile once, outside every count
    started = time.perf_counter()
    with faults.inject(fault):
        injected = _injected(scenario, seeds)
    injected["seconds"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    fixed = _fixed(scenario)
    fixed["seconds"] = round(time.perf_counter() - started, 2)
    pct = injected["pct"]["median"]
    ratios = _ratios(pct, injected["stress_by_nap"])
    return {
        "fault": fault,
        "injected": injected,
        "fixed": fixed,
        "goals": {
            "pct_every_seed": injected["pct"]["found"] == seeds,
            "pct_median_at_most_10": pct is not None and pct <= 10,
            # per nap length: the baseline's strength is a choice, so every one is shown
            "stress_over_pct_at_least_10": {
                key: r["ratio"] is not None and r["ratio"] >= 10 for key, r in ratios.items()
            },
            "stress_over_pct": ratios,
            "hypothesis_at_most_2_preemptions": (
                injected["hypothesis"]["max_preemptions"] is not None
                and injected["hypothesis"]["max_preemptions"] <= 2
            ),
            "every_schedule_replays": all(
                injected[k]["replayed"] == injected[k]["found"]
                for k in ("pct", "random", "dfs", "hypothesis")
            ),
            "fixed_500_schedules_no_failure": fixed["explored"] >= 500 and fixed["failures"] == 0,
            "dfs_exhausted": bool(fixed["dfs"]["exhausted"]),
        },
    }


def measure(seeds: int, scenarios: tuple[str, ...] = tuple(SCENARIOS)) -> dict[str, Any]:
    import jax

    if jax.device_count() != DEVICES:
        raise RuntimeError(f"expected {DEVICES} CPU devices, JAX has {jax.device_count()}")
    return {
        "name": "race",
        "devices": DEVICES,
        "seeds": seeds,
        "budget": BUDGET,
        "pct_depth": PCT_DEPTH,
        "dfs_bound": DFS_BOUND,
        "scenarios": {scenario: _scenario(scenario, seeds) for scenario in scenarios},
        "points": _point_cost(),
    }


def exit_code(report: dict[str, Any]) -> int:
    """1 when a fixed runtime failed under some schedule or some seed never found a race: both
    are findings. Ratio goals are figures, not verdicts."""
    for result in report["scenarios"].values():
        if result["fixed"]["failures"] or not result["goals"]["pct_every_seed"]:
            return 1
    return 0


def print_report(report: dict[str, Any]) -> None:
    print(
        f"xharness bench race: {', '.join(report['scenarios'])} on {report['devices']} CPU devices, "
        f"{report['seeds']} seeds, budget {report['budget']} runs per seed "
        f"(PCT depth {report['pct_depth']}, DFS <= {report['dfs_bound']} preemptions)"
    )
    for scenario, result in report["scenarios"].items():
        _print_scenario(scenario, result)
    p = report["points"]
    print(
        f"points: {p['ns_per_point']:.0f} ns each with no scheduler active, {p['points_per_step']} "
        f"per training step ({p['us_per_step']:.2f} us a step)"
    )


def _print_scenario(scenario: str, result: dict[str, Any]) -> None:
    inj, fixed, goals = result["injected"], result["fixed"], result["goals"]
    print(f"\n{scenario}")
    print("fault on: runs to the first failure (schedules for controlled strategies)")
    header = f"  {'strategy':<14} {'found':>7} {'median':>7} {'max':>5} {'replayed':>9} {'preemptions':>12}"
    print(header)
    rows = [(n, inj[n]) for n in ("pct", "dfs", "random", "hypothesis")]
    rows += [(f"stress {k}", v) for k, v in inj["stress_by_nap"].items()]
    for name, s in rows:
        replayed = f"{s['replayed']}/{s['found']}" if "replayed" in s else "-"
        pre = s.get("max_preemptions")
        print(
            f"  {name:<14} {s['found']:>3}/{s['seeds']:<3} {_fmt(s['median']):>7} {_fmt(s['max']):>5} "
            f"{replayed:>9} {('<= ' + str(pre)) if pre is not None else '-':>12}"
        )
    print(f"  failures seen: {', '.join(inj['failure_kinds'])}")
    print("fault off: schedules explored without a failure")
    for name in ("dfs", "pct", "random", "hypothesis", "stress"):
        s = fixed[name]
        extra = ", bounded space exhausted" if s.get("exhausted") else ""
        unit = "runs (free-running)" if name == "stress" else "schedules"
        print(
            f"  {name:<11} {s['schedules']:>5} {unit}, {s['failures']} failed, {s['seconds']:.1f} s{extra}"
        )
    print(f"  controlled schedules in all: {fixed['explored']}, failures: {fixed['failures']}")
    print("goals:")
    for key, value in goals.items():
        if not key.startswith("stress_over_pct"):
            print(f"  {key:<34} {'ok' if value else 'MISSED'}")
    for nap, r in goals["stress_over_pct"].items():
        ok = goals["stress_over_pct_at_least_10"][nap]
        shown = ("≥ " if r["lower_bound"] else "") + _fmt(r["ratio"])
        print(
            f"  {'stress (' + nap + ' naps) / PCT >= 10':<34} {'ok' if ok else 'MISSED':<7}"
            f"median runs over median schedules: {shown}"
        )
    print(f"seconds: fault on {inj['seconds']:.1f}, fault off {fixed['seconds']:.1f}")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.1f}"
    return str(int(value))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.bench_race")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args(argv)
    with contextlib.redirect_stdout(sys.stderr):  # only the report goes to stdout
        report = measure(args.seeds)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
