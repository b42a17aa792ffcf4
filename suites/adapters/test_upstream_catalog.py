"""The catalog against the PyTorch/XLA release this interpreter has: one test per scenario.

A release cell (``xharness releases torch_xla V``, or ``xharness run`` on a cell whose runtime is
``torch_xla``) runs this module inside that release's environment. Each scenario's variants run
in fresh processes, their outcome is judged against ``harness/scenarios/expected.toml``, and the
verdict decides the test: as expected passes, a skip skips with its reason, anything else
(regressed, unexpectedly fixed, unexpected) fails with what each variant saw. The record carries
runtime, release, scenario, expected, actual and verdict as JUnit properties.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from harness.adapters import releases
from harness.adapters.expected import AS_EXPECTED, SKIPPED, VERDICT_SKIPPED
from harness.scenarios import registry

RUNTIME = "torch_xla"


@pytest.mark.parametrize("scenario", [s.id for s in registry.all_scenarios()])
def test_scenario_against_release(scenario: str, record_property) -> None:
    if os.environ.get("HARNESS_RUNTIME") != RUNTIME:
        pytest.skip(
            "runs in a torch_xla cell: xharness releases torch_xla VERSION, or xharness run "
            "--runtime torch_xla"
        )
    if importlib.util.find_spec("torch_xla") is None:
        pytest.skip(f"torch_xla is not installed in {sys.executable}")
    run = releases.run_scenario(scenario, sys.executable)
    for key, value in run.properties().items():
        if value or key != "release":  # a scenario without a reproducer imported no release
            record_property(key, value)
    verdict = run.verdict.verdict
    if verdict == VERDICT_SKIPPED or (verdict == AS_EXPECTED and run.outcome == SKIPPED):
        pytest.skip(run.message())
    if not run.verdict.green:
        pytest.fail(f"{run.message()}\n\n{run.details()}", pytrace=False)
