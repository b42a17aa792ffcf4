"""The catalog: every scenario by id, registered by importing its module."""

from __future__ import annotations

import importlib

from harness.scenarios.base import Scenario

#: catalog modules, in the order they are listed
MODULES = (
    "harness.scenarios.race_on_handles",
    "harness.scenarios.double_discovery",
    "harness.scenarios.unhashable_spec",
    "harness.scenarios.lost_sharding",
    "harness.scenarios.aliased_save",
    "harness.scenarios.wait_gap",
    "harness.scenarios.partial_sync",
    "harness.scenarios.host_aliasing",
    "harness.scenarios.deleted_shard",
)


class UnknownScenario(KeyError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(name)
        self.message = f"unknown scenario {name!r}; known scenarios: {', '.join(known)}"

    def __str__(self) -> str:
        return self.message


def all_scenarios() -> list[Scenario]:
    return [importlib.import_module(m).SCENARIO for m in MODULES]


def get(scenario_id: str) -> Scenario:
    for s in all_scenarios():
        if s.id == scenario_id:
            return s
    raise UnknownScenario(scenario_id, [s.id for s in all_scenarios()])
