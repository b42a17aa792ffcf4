"""Every invariant of ``harness.properties`` against the reference runtime, all switches off.

These are the invariants' own ready hypothesis tests, run under the plugin's profile (the
derandomized ``xharness`` profile in CI; ``--hypothesis-profile xharness-explore`` searches wider).
Each cell runs its kind's share of an invariant's examples from a seed of its own
(``harness.properties.budgets``), so the cells add up instead of repeating. They run in every CPU
cell; the pure ones also per rank in the multi-process cells. Those whose examples set the runtime
options themselves (functionalization and param aliasing are drawn) are marked
``options_independent``: cpu-8-nofunc, which differs from cpu-8 only in an option, would run them
as cpu-8 does, and leaves them to cpu-8.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.properties import (
    BUFFER_SHARING,
    COMPILE_STABILITY,
    COVERAGE,
    DISCOVERY_IDEMPOTENCE,
    DONATION,
    HOST_COPY,
    INVARIANTS,
    OP_SHARDING_CACHE,
    PARTIAL_SYNC,
    ROUND_TRIP,
    SAVE_ALIASING,
    SHARDING_PRESERVATION,
    SHARED_BUFFER,
    SHARED_SHARDS,
    SPEC_NORMALIZATION,
    STEP_BOUNDARY,
    SYNC_ALIASING,
    SYNC_WAITS,
    TRAINING_DIFFERENTIAL,
    UNEVEN_SPLIT,
    VIEW_SHARDING,
    VIEW_WRITES,
    WAITING_SYNC,
)

#: for the invariants whose every example sets both runtime options the matrix's cells differ in
#: (suites/selftest/matrix/test_matrix_config.py checks that each one marked so does)
OPTIONS_INDEPENDENT = pytest.mark.options_independent

test_spec_normalization = pytest.mark.multiprocess(SPEC_NORMALIZATION.hypothesis_test())
test_op_sharding_cache = pytest.mark.multiprocess(OP_SHARDING_CACHE.hypothesis_test())
test_coverage = pytest.mark.multiprocess(COVERAGE.hypothesis_test())
test_round_trip = ROUND_TRIP.hypothesis_test()
test_host_copy = HOST_COPY.hypothesis_test()
test_sharding_preservation = SHARDING_PRESERVATION.hypothesis_test()
test_sync_aliasing = OPTIONS_INDEPENDENT(SYNC_ALIASING.hypothesis_test())
test_discovery_idempotence = pytest.mark.multiprocess(DISCOVERY_IDEMPOTENCE.hypothesis_test())
test_donation = DONATION.hypothesis_test()
test_uneven_split = pytest.mark.multiprocess(UNEVEN_SPLIT.hypothesis_test())
test_view_sharding = VIEW_SHARDING.hypothesis_test()
test_buffer_sharing = OPTIONS_INDEPENDENT(BUFFER_SHARING.hypothesis_test())
test_sync_waits = OPTIONS_INDEPENDENT(SYNC_WAITS.hypothesis_test())
test_save_aliasing = OPTIONS_INDEPENDENT(SAVE_ALIASING.hypothesis_test())
test_view_writes = OPTIONS_INDEPENDENT(VIEW_WRITES.hypothesis_test())
test_shared_buffer = OPTIONS_INDEPENDENT(SHARED_BUFFER.hypothesis_test())
test_shared_shards = SHARED_SHARDS.hypothesis_test()
test_waiting_sync = WAITING_SYNC.hypothesis_test()
test_partial_sync = OPTIONS_INDEPENDENT(PARTIAL_SYNC.hypothesis_test())
test_compile_stability = OPTIONS_INDEPENDENT(COMPILE_STABILITY.hypothesis_test())
test_training_differential = TRAINING_DIFFERENTIAL.hypothesis_test()
test_step_boundary = STEP_BOUNDARY.hypothesis_test()


#: invariants whose ready test lives in a module of its own, beside the direct tests it rests on
ELSEWHERE = {"failure-safety": "test_failures.py", "timed-out-reads": "test_timeouts.py", "semantics-oracle": "test_oracle.py",
             "training-oracle": "test_oracle.py", "spelling-compiles": "test_spellings.py",
             "step-bookkeeping": "test_step_race.py", "view-chain-specs": "test_view_chains.py"}


def test_every_registered_invariant_runs_here() -> None:
    tests = {name for name in globals() if name.startswith("test_")}
    missing = [i.id for i in INVARIANTS if f"test_{i.id.replace('-', '_')}" not in tests and i.id not in ELSEWHERE]
    assert not missing, f"invariants without a test in this module: {missing}"
    here = Path(__file__).parent
    for invariant, module in ELSEWHERE.items():
        name = f"test_{invariant.replace('-', '_')}"
        assert re.search(rf"^{name}\b", (here / module).read_text(), re.M), f"{module} has no {name}"
