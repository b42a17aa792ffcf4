"""Every catalog scenario in both modes: fixed must pass, injected must reproduce its signature."""

from __future__ import annotations

import os

import jax
import pytest

from harness.report import properties as prop
from harness.scenarios import registry, runner

# the catalog also runs in the multi-process cells (2 x 4 devices over jax.distributed, and one
# process per slice), where every scenario must hold in every rank
pytestmark = pytest.mark.multiprocess

SCENARIOS = registry.all_scenarios()
SEED = 0


def schedule_properties(result: runner.Result) -> dict[str, str]:
    """What a run under schedule control adds to its JUnit record: the strategy, its seed, how
    many schedules it explored and, when one failed, that schedule and the line replaying it."""
    explored = [v for v in result.variants if v.exploration]
    if not explored:
        return {}
    # the variant that found a schedule speaks for the scenario (race scenarios have one variant)
    v = next((v for v in explored if v.exploration and v.exploration.get("schedule")), explored[0])
    found = v.exploration or {}
    props = {
        "strategy": str(found["strategy"]),
        "strategy-seed": "" if found.get("seed") is None else str(found["seed"]),
        "schedules": str(found["schedules"]),
    }
    if found.get("schedule"):
        props["schedule"] = str(found["schedule"])
        props["preemptions"] = str(found.get("preemptions"))
    if found.get("replay"):
        props["repro-schedule"] = str(found["replay"])
    if found.get("exhausted") is not None:
        props["exhausted"] = str(found["exhausted"]).lower()
    return props


def skipped_variants(result: runner.Result) -> str:
    """What a JUnit record says of the variants this cell could not host (a mechanism that does
    not exist on its backend): each with its reason, so that a green record never hides that a
    variant did not run."""
    return "; ".join(f"{v.variant}: {v.error}" for v in result.skipped)


@pytest.mark.parametrize("mode", ["fixed", "injected"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(scenario, mode: str, record_property) -> None:
    record_property("scenario", scenario.id)
    record_property("mode", mode)
    record_property("seed", str(SEED))
    devices = len(jax.devices())
    unmet = scenario.needs.unmet(devices)
    if unmet:
        pytest.skip(f"{scenario.id}: {unmet}")
    inject = mode == "injected"
    cell = os.environ.get("HARNESS_CELL")  # set when the supervisor runs this process as a cell
    result = runner.run(scenario, inject, SEED, devices, cell)
    if jax.process_count() == 1:  # multi-process cells replay through `xharness run --cells`
        record_property("repro", result.repro)
    for name, value in schedule_properties(result).items():
        record_property(name, value)
    skipped = skipped_variants(result)
    if skipped:
        record_property("skipped-variants", skipped)
    if result.outcome == runner.SKIPPED:
        pytest.skip(f"{scenario.id}: every variant skipped on {result.backend}: {skipped}")
    details = "\n".join(
        f"{v.variant}: {v.outcome} {v.error}\n{v.traceback}" for v in result.variants
    )
    expected = runner.REPRODUCED if inject else runner.PASSED
    assert result.outcome == expected, (
        f"{scenario.id} [{mode}] {result.outcome}; replay: {result.repro}\n{details}"
    )
    if inject:
        names = {sig.name for sig in scenario.signatures}
        ran = [v for v in result.variants if v.outcome != runner.SKIPPED]
        assert ran and all(v.signature in names for v in ran), details
        # the signature it showed, as a plugin's injected scenario item records it
        record_property(prop.SIGNATURE, result.signature)
    if scenario.explore:  # a race: explored, and an injected run names the schedule that failed
        props = schedule_properties(result)
        assert props["strategy"] == scenario.explore and props["strategy-seed"] == str(SEED)
        assert ("schedule" in props) == inject, props
