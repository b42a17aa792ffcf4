"""The catalog against the real runtime release this interpreter has: one test per scenario,
and one per known finding that has reproducers of its own (``FINDING_REPRODUCERS``).

A release cell (``xharness releases torch_xla|jax V``, or ``xharness run`` on a cell whose runtime
is ``torch_xla`` or ``jax``) runs this module inside that release's environment, with the runtime
under test in ``HARNESS_RUNTIME``. Each scenario's variants for that runtime run in fresh
processes, their outcome is judged against ``harness/scenarios/expected.toml``, and the verdict
decides the test: as expected passes, a skip skips with its reason (a scenario with no trigger
written for the runtime is one), anything else (regressed, unexpectedly fixed, unexpected) fails
with what each variant saw. The record carries runtime, release, scenario, expected, actual and
verdict as JUnit properties. A known finding is judged the same way by its rows, so one that
stops reproducing on a release its row says carries it fails as ``unexpectedly-fixed``: findings
stay found, or say that they are fixed.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from harness.releases import catalog
from harness.scenarios import registry
from harness.scenarios import upstream_torch_xla as upstream
from harness.scenarios.expected import AS_EXPECTED, REPRODUCED, SKIPPED, VERDICT_SKIPPED


@pytest.mark.parametrize("scenario", [*(s.id for s in registry.all_scenarios()), *upstream.finding_names()])
def test_scenario_against_release(scenario: str, record_property) -> None:
    runtime = os.environ.get("HARNESS_RUNTIME", "")
    if runtime not in catalog.UPSTREAM_RUNTIMES:
        pytest.skip(
            f"runs in a release cell of {' or '.join(catalog.UPSTREAM_RUNTIMES)}: xharness releases "
            "RUNTIME VERSION, or xharness run --runtime RUNTIME"
        )
    if importlib.util.find_spec(runtime) is None:
        pytest.skip(f"{runtime} is not installed in {sys.executable}")
    run = catalog.run_scenario(scenario, sys.executable, runtime=runtime)
    for key, value in run.properties().items():
        if value or key != "release":  # a scenario without a reproducer imported no release
            record_property(key, value)
    verdict = run.verdict.verdict
    if verdict == VERDICT_SKIPPED or (verdict == AS_EXPECTED and run.outcome == SKIPPED):
        pytest.skip(run.message())
    if not run.verdict.green:
        pytest.fail(f"{run.message()}\n\n{run.details()}", pytrace=False)
    if verdict == AS_EXPECTED and run.outcome == REPRODUCED:
        # the release carries this bug, as its expected row says: a known bug, never a pass
        pytest.xfail(f"known bug: {run.message()}")
