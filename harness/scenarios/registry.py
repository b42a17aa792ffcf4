"""The catalog: every scenario registered in the ``xharness.scenarios`` entry-point group.

The harness' own scenarios and a plugin's are found the same way (``harness.entrypoints``): an
entry point ``id = "pkg.module:SCENARIO"`` names a :class:`~harness.scenarios.base.Scenario` whose
``id`` is the entry point's name and whose ``runtime`` is a registered runtime. One that fails to
load or check is left out with a warning naming its distribution; a command that asks for it by
id gets that message instead of "unknown scenario".
"""

from __future__ import annotations

import functools
from typing import Any

from harness import adapters, entrypoints
from harness.scenarios.base import Scenario


class UnknownScenario(KeyError):
    def __init__(self, name: str, known: list[str], message: str = "") -> None:
        super().__init__(name)
        self.message = message or f"unknown scenario {name!r}; known scenarios: {', '.join(known)}"

    def __str__(self) -> str:
        return self.message


def check_scenario(entry: entrypoints.EntryPoint, obj: Any) -> str | None:
    """Why ``obj`` is not a catalog scenario for ``entry``, or None."""
    wrong = entrypoints.id_item(entry, obj, Scenario, "scenario")
    if wrong is not None:
        return wrong
    if obj.runtime not in adapters.names():
        return (f"the scenario's runtime {obj.runtime!r} is not registered (known: "
                f"{', '.join(adapters.names())}); register its adapter under xharness.runtimes")
    return next((why for sig in obj.signatures if (why := sig.unresolved()) is not None), None)


@functools.cache
def loaded() -> entrypoints.Loaded:
    """Every registered scenario, loaded and checked once per process."""
    return entrypoints.load_group(entrypoints.SCENARIOS, check_scenario)


def all_scenarios() -> list[Scenario]:
    """The catalog, the harness' own scenarios first; a broken plugin is warned about once."""
    found = loaded()
    return [obj for _, obj in found.items.values()]


def origin(scenario_id: str) -> entrypoints.EntryPoint | None:
    """The entry point that registered ``scenario_id`` (its distribution and version)."""
    return loaded().origin(scenario_id)


def get(scenario_id: str) -> Scenario:
    found = loaded()
    if scenario_id in found.items:
        scenario: Scenario = found.items[scenario_id][1]
        return scenario
    broken = entrypoints.find(found, scenario_id)
    raise UnknownScenario(scenario_id, list(found.items), str(broken) if broken else "")
