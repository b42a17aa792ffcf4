"""Running one scenario in one mode, in this process, and judging the outcome.

fixed mode (switch off): every variant must return -> ``passed``, else ``failed``. When
``HARNESS_FAULTS`` forces the scenario's own switch on, a fixed run still runs with the bug
present (the process-wide switch cannot be turned off for one scenario); its result and every
failed variant's error say so, so the failure is not mistaken for a regression.
injected mode (switch on): every variant must raise one of the scenario's signatures ->
``reproduced``; a variant that returns is ``not-reproduced`` (the scenario has no teeth), and an
error matching no signature is ``failed`` (it caught something, but not its bug).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

import harness.runtime as xr
from harness.runtime import topology
from harness.runtime.testing import isolated
from harness.scenarios.base import Context, Scenario

PASSED, REPRODUCED, NOT_REPRODUCED, FAILED = "passed", "reproduced", "not-reproduced", "failed"


@dataclass
class VariantResult:
    variant: str
    outcome: str
    signature: str = ""  # the signature seen ("" when the variant returned)
    error: str = ""  # the exception line, when there was one
    traceback: str = ""


@dataclass
class Result:
    scenario: str
    mode: str
    outcome: str
    seed: int
    seconds: float
    signature: str = ""
    variants: list[VariantResult] = field(default_factory=list)
    repro: str = ""
    note: str = ""  # e.g. the scenario's switch was forced on by HARNESS_FAULTS in fixed mode

    @property
    def ok(self) -> bool:
        return self.outcome in (PASSED, REPRODUCED)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: environment switches that change what a run does, carried into its replay line
REPLAY_ENV = ("HARNESS_FAULTS", "HARNESS_CRASH_MODE")
#: runtime options from the environment; a ``--cell`` replay sets these itself, from the cell
RUNTIME_ENV = (
    "HARNESS_DISABLE_FUNCTIONALIZATION",
    "HARNESS_PARAM_ALIASING",
    "HARNESS_NUM_SLICES",
    "HARNESS_EXECUTION_DELAY",
)


def repro_command(scenario_id: str, inject: bool, seed: int, cell: str | None = None) -> str:
    """The one line that replays a run exactly, environment switches included."""
    names = REPLAY_ENV if cell else REPLAY_ENV + RUNTIME_ENV
    parts = [f"{k}={shlex.quote(os.environ[k])}" for k in names if os.environ.get(k)]
    parts += ["xharness", "repro", scenario_id]
    if inject:
        parts.append("--inject")
    parts += ["--seed", str(seed)]
    if cell:
        parts += ["--cell", cell]
    return " ".join(parts)


def forced_on_note(scenario: Scenario, inject: bool, harness_faults: str | None = None) -> str:
    """The note a fixed run gets when ``HARNESS_FAULTS`` turns the scenario's own switch on."""
    raw = os.environ.get("HARNESS_FAULTS", "") if harness_faults is None else harness_faults
    names = {n.strip() for n in raw.split(",")}
    if inject or scenario.fault not in names:
        return ""
    return (
        f"fault switch {scenario.fault!r} was forced on by HARNESS_FAULTS={raw}: "
        "this fixed-mode run had the bug switched on"
    )


def _run_variant(scenario: Scenario, name: str, ctx: Context, note: str = "") -> VariantResult:
    result = _judge_variant(scenario, name, ctx)
    if note and result.outcome == FAILED:
        result.error = f"{note}; {result.error}"
    return result


def _judge_variant(scenario: Scenario, name: str, ctx: Context) -> VariantResult:
    injected = xr.faults.inject(scenario.fault) if ctx.inject else contextlib.nullcontext()
    try:
        # each variant starts as in a fresh process: discovery counts from zero
        with isolated(reset_topology=True), injected:
            topology.reset()
            scenario.variants[name](ctx)
    except Exception as exc:  # judged against the signatures below
        sig = scenario.signature_for(exc)
        line = f"{type(exc).__name__}: {exc}"
        tb = traceback.format_exc()
        if sig is None:
            return VariantResult(name, FAILED, "", line, tb)
        if ctx.inject and not scenario.expects(name, sig.name):
            wanted = " or ".join(scenario.expected[name])
            return VariantResult(
                name, FAILED, sig.name, f"expected signature {wanted}, saw {sig.name}: {line}", tb
            )
        return VariantResult(name, REPRODUCED if ctx.inject else FAILED, sig.name, line, tb)
    return VariantResult(name, NOT_REPRODUCED if ctx.inject else PASSED)


def _overall(results: list[VariantResult], inject: bool) -> str:
    outcomes = {r.outcome for r in results}
    if FAILED in outcomes:
        return FAILED
    if inject:
        return NOT_REPRODUCED if NOT_REPRODUCED in outcomes else REPRODUCED
    return PASSED


def run(
    scenario: Scenario, inject: bool, seed: int, devices: int, cell: str | None = None
) -> Result:
    """Run every variant of ``scenario`` in this process."""
    start = time.perf_counter()
    note = forced_on_note(scenario, inject)
    # a fresh context per variant: its data depends on the seed only, not on earlier variants
    results = [
        _run_variant(scenario, name, Context(seed=seed, inject=inject, devices=devices), note)
        for name in scenario.variants
    ]
    seen = "; ".join(
        f"{r.variant}: {r.signature}" if len(results) > 1 else r.signature
        for r in results
        if r.signature
    )
    return Result(
        scenario=scenario.id,
        mode="injected" if inject else "fixed",
        outcome=_overall(results, inject),
        seed=seed,
        seconds=round(time.perf_counter() - start, 3),
        signature=seen,
        variants=results,
        repro=repro_command(scenario.id, inject, seed, cell),
        note=note,
    )
