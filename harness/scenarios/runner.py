"""Running one scenario in one mode, in this process, and judging the outcome.

fixed mode (switch off): every variant must return -> ``passed``, else ``failed``. When
``HARNESS_FAULTS`` forces the scenario's own switch on, a fixed run still runs with the bug
present (the process-wide switch cannot be turned off for one scenario); its result and every
failed variant's error say so, so the failure is not mistaken for a regression.
injected mode (switch on): every variant must raise one of the scenario's signatures ->
``reproduced``; a variant that returns is ``not-reproduced`` (the scenario has no teeth), and an
error matching no signature is ``failed`` (it caught something, but not its bug).

A variant whose needs (``Scenario.variant_needs``, or the scenario's own ``needs.backends``) this
process does not meet, say a CPU-only mechanism on a GPU, is not run: it is ``skipped``, its
``error`` says why, and the scenario's outcome is its other variants' (``skipped`` when none ran).
The backend is JAX's default backend unless the caller names one.

A scenario that names a strategy (``Scenario.explore``), or a run given ``explore=`` or
``schedule=``, runs each variant under ``harness.sched``: a fixed run must survive every explored
schedule, an injected run must fail in one with the signature. A deadlock, livelock or stall of
the exploration is ``failed`` whatever the mode. The variant's result names the strategy, seed
and failing schedule, and the one line that replays exactly that schedule.
"""

from __future__ import annotations

import contextlib
import shlex
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness import sched, settings
from harness.lazy import lazy
from harness.scenarios import explore
from harness.scenarios.base import Context, Scenario, Variant, current_backend

# the runtime (and JAX) is imported when a scenario runs: ``xharness repro`` only builds the
# command line and judges the child's result here
xr = lazy("harness.runtime")
topology = lazy("harness.runtime.topology")
testing = lazy("harness.runtime.testing")

PASSED, REPRODUCED, NOT_REPRODUCED, FAILED = "passed", "reproduced", "not-reproduced", "failed"
#: a variant this process cannot host (its ``error`` says why); never a verdict on the runtime
SKIPPED = "skipped"


@dataclass
class VariantResult:
    variant: str
    outcome: str
    signature: str = ""  # the signature seen ("" when the variant returned)
    error: str = ""  # the exception line, when there was one; the reason, when skipped
    traceback: str = ""
    #: under schedule control: strategy, seed, schedules explored, the failing schedule and the
    #: command replaying it (``explore.Explored.to_json`` plus ``replay``); None for a plain run
    exploration: dict[str, Any] | None = None


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
    explore: str = ""  # the strategy the variants ran under ("replay" for a schedule), or ""
    backend: str = ""  # the backend the variants ran on (what a variant's needs are held to)
    runtime: str = "reference"  # the runtime the variants drove (``Scenario.runtime``)
    version: str = ""  # its version (``Adapter.version``): what an expected row is matched on

    @property
    def skipped(self) -> list[VariantResult]:
        """The variants this process could not host, each with its reason."""
        return [v for v in self.variants if v.outcome == SKIPPED]

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
    "HARNESS_MATMUL_PRECISION",
)


def repro_command(
    scenario_id: str,
    inject: bool,
    seed: int,
    cell: str | None = None,
    explore: str | None = None,
    schedule: str | None = None,
) -> str:
    """The one line that replays a run exactly, environment switches included. An explored run
    names its strategy (the seed then fixes every schedule), a replayed one its schedule."""
    names = REPLAY_ENV if cell else REPLAY_ENV + RUNTIME_ENV
    # the checked value of each, as the harness read it (``harness.settings``)
    parts = [f"{k}={shlex.quote(settings.text(k))}" for k in names if settings.raw(k).strip()]
    parts += ["xharness", "repro", scenario_id]
    if inject:
        parts.append("--inject")
    if schedule is not None:
        parts += ["--schedule", schedule]
    elif explore is not None:
        parts += ["--explore", explore]
    parts += ["--seed", str(seed)]
    if cell:
        parts += ["--cell", cell]
    return " ".join(parts)


def forced_on_note(scenario: Scenario, inject: bool, harness_faults: str | None = None) -> str:
    """The note a fixed run gets when ``HARNESS_FAULTS`` turns the scenario's own switch on."""
    raw = settings.raw("HARNESS_FAULTS") if harness_faults is None else harness_faults
    names = {n.strip() for n in raw.split(",")}
    if inject or scenario.fault not in names:
        return ""
    return (
        f"fault switch {scenario.fault!r} was forced on by HARNESS_FAULTS={raw}: "
        "this fixed-mode run had the bug switched on"
    )


def _run_variant(
    scenario: Scenario,
    name: str,
    ctx: Context,
    note: str = "",
    how: explore.Exploration | None = None,
    cell: str | None = None,
) -> VariantResult:
    explored: list[explore.Explored] = []
    result = _judge_variant(scenario, name, ctx, how, explored)
    if explored:
        found = explored[0]
        result.exploration = found.to_json()
        # a schedule the body departed from replays nothing; any other failing one replays it
        departed = isinstance(found.error, sched.NondeterminismError)
        if found.schedule is not None and not departed:
            result.exploration["replay"] = repro_command(
                scenario.id, ctx.inject, ctx.seed, cell, schedule=found.schedule
            )
    if note and result.outcome == FAILED:
        result.error = f"{note}; {result.error}"
    return result


def controlled(variant: Variant, ctx: Context) -> Callable[[], None]:
    """The body of one controlled run: a fresh context and a fresh runtime state every time, so
    that every run depends on its schedule alone (DFS runs the body again for each schedule)."""

    def body() -> None:
        with testing.isolated(reset_topology=True):
            topology.reset()
            variant(Context(seed=ctx.seed, inject=ctx.inject, devices=ctx.devices))

    return body


def _judge_variant(
    scenario: Scenario,
    name: str,
    ctx: Context,
    how: explore.Exploration | None = None,
    explored: list[explore.Explored] | None = None,
) -> VariantResult:
    injected = switch(scenario) if ctx.inject else contextlib.nullcontext()
    try:
        # each variant starts as in a fresh process: discovery counts from zero
        with testing.isolated(reset_topology=True), injected:
            topology.reset()
            if how is None:
                scenario.variants[name](ctx)
            else:
                found = explore.run(controlled(scenario.variants[name], ctx), how, ctx.seed)
                if explored is not None:
                    explored.append(found)
                if found.harness_error:  # not the variant's failure: the exploration's own
                    assert found.error is not None
                    line = f"{type(found.error).__name__}: {found.error}"
                    return VariantResult(name, FAILED, "", line, line)
                if found.failure is not None:
                    raise found.failure  # judged like a plain run's error, traceback included
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


def switch(scenario: Scenario, fault: str | None = None) -> contextlib.AbstractContextManager[None]:
    """The scenario's own fault switch (or ``fault``, another switch of its runtime) on for a
    block, through the adapter of the runtime the scenario drives."""
    from harness import adapters

    return adapters.get(scenario.runtime).inject(fault or scenario.fault)


def _overall(results: list[VariantResult], inject: bool) -> str:
    ran = [r for r in results if r.outcome != SKIPPED]
    if results and not ran:
        return SKIPPED
    outcomes = {r.outcome for r in ran}
    if FAILED in outcomes:
        return FAILED
    if inject:
        return NOT_REPRODUCED if NOT_REPRODUCED in outcomes else REPRODUCED
    return PASSED


def run(
    scenario: Scenario,
    inject: bool,
    seed: int,
    devices: int,
    cell: str | None = None,
    strategy: str | None = None,
    schedule: str | None = None,
    backend: str | None = None,
) -> Result:
    """Run every variant of ``scenario`` in this process: plainly, or under the schedule control
    ``strategy``/``schedule`` ask for, or else the scenario's own (``Scenario.explore``). A
    variant whose needs ``backend`` (default: JAX's default backend) or this process does not
    meet is skipped with the reason."""
    start = time.perf_counter()
    backend = backend or current_backend()
    processes = _process_count()
    note = forced_on_note(scenario, inject)
    how = explore.resolve(
        explore.default(scenario.explore) if scenario.explore else None, strategy, schedule
    )
    # a fresh context per variant: its data depends on the seed only, not on earlier variants
    results = []
    for name in scenario.variants:
        unmet = scenario.unmet(name, devices, processes, backend)
        if unmet:
            results.append(VariantResult(name, SKIPPED, error=unmet))
            continue
        ctx = Context(seed=seed, inject=inject, devices=devices, backend=backend)
        results.append(_run_variant(scenario, name, ctx, note, how, cell))
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
        repro=repro_command(
            scenario.id,
            inject,
            seed,
            cell,
            explore=how.strategy if how is not None else None,
            schedule=how.schedule if how is not None else None,
        ),
        note=note,
        explore=how.name if how is not None else "",
        backend=backend,
        runtime=scenario.runtime,
        version=_version(scenario.runtime),
    )


def _version(runtime: str) -> str:
    from harness import adapters

    try:
        return adapters.get(runtime).version()
    except Exception:  # noqa: BLE001 - a version nobody can read only leaves the row unmatched
        return ""


def _process_count() -> int:
    import jax

    return int(jax.process_count())
