"""Property-based invariants of distributed XLA runtimes, for the harness' suites and users' own.

Strategies (``meshes``, ``partition_specs``, ``sharded_shapes``, ``dtypes``, ``host_arrays``,
``mesh_spec_shape``, ``programs``) are composable hypothesis building blocks. Each invariant is a
plain ``check_*`` function usable without hypothesis, plus an ``Invariant`` record (``INVARIANTS``)
that offers a ready hypothesis test and a ``search`` for shrunk counterexamples, and names the
fault switches it must catch. ``SyncAliasMachine`` is the sync and aliasing state machine.

Importing this package does not start JAX; building a strategy over meshes does.
"""

from __future__ import annotations

from typing import Any

from harness.properties.base import Falsified, Invariant
from harness.properties.compiles import COMPILE_STABILITY, check_compile_stability
from harness.properties.differential import (
    STEP_BOUNDARY,
    TRAINING_DIFFERENTIAL,
    check_step_boundaries,
    check_training,
)
from harness.properties.discovery import DISCOVERY_IDEMPOTENCE, check_discovery
from harness.properties.donation import (
    DONATION,
    SHARED_BUFFER,
    SHARED_SHARDS,
    check_donation,
    check_shared_buffer,
    check_shared_shards,
)
from harness.properties.failures import FAILURE_SAFETY, check_failure_safety
from harness.properties.layout import (
    COVERAGE,
    HOST_COPY,
    ROUND_TRIP,
    UNEVEN_SPLIT,
    VIEW_SHARDING,
    check_coverage,
    check_host_copy,
    check_round_trip,
    check_uneven_split,
    check_view_sharding,
)
from harness.properties.machine import (
    BUFFER_SHARING,
    PARTIAL_SYNC,
    SAVE_ALIASING,
    SYNC_ALIASING,
    SYNC_WAITS,
    VIEW_WRITES,
    WAITING_SYNC,
    SyncAliasMachine,
    check_waiting_sync,
    programs,
    run_program,
)
from harness.properties.oracle import (
    SEMANTICS_ORACLE,
    TRAINING_ORACLE,
    check_semantics,
    check_training_eager,
)
from harness.properties.preservation import SHARDING_PRESERVATION, check_preservation
from harness.properties.registry import UnknownInvariant, declared_pairs, get, invariants
from harness.properties.specs import (
    OP_SHARDING_CACHE,
    SPEC_NORMALIZATION,
    check_op_sharding,
    check_spec_normalization,
)
from harness.properties.strategies import (
    dtypes,
    host_arrays,
    mesh_spec_shape,
    meshes,
    partition_specs,
    sharded_shapes,
)
from harness.properties.timeouts import TIMED_OUT_READS, check_timed_out_read

__all__ = [
    "SEMANTICS_ORACLE",
    "TRAINING_ORACLE",
    "check_semantics",
    "check_training_eager",
    "STEP_BOUNDARY",
    "TRAINING_DIFFERENTIAL",
    "check_step_boundaries",
    "check_training",
    "BUFFER_SHARING",
    "COMPILE_STABILITY",
    "FAILURE_SAFETY",
    "TIMED_OUT_READS",
    "PARTIAL_SYNC",
    "SHARED_BUFFER",
    "SHARED_SHARDS",
    "WAITING_SYNC",
    "check_shared_buffer",
    "check_shared_shards",
    "check_waiting_sync",
    "VIEW_WRITES",
    "SAVE_ALIASING",
    "SYNC_WAITS",
    "COVERAGE",
    "DISCOVERY_IDEMPOTENCE",
    "DONATION",
    "HOST_COPY",
    "INVARIANTS",
    "OP_SHARDING_CACHE",
    "ROUND_TRIP",
    "SHARDING_PRESERVATION",
    "SPEC_NORMALIZATION",
    "SYNC_ALIASING",
    "UNEVEN_SPLIT",
    "VIEW_SHARDING",
    "Falsified",
    "Invariant",
    "SyncAliasMachine",
    "UnknownInvariant",
    "check_compile_stability",
    "check_coverage",
    "check_discovery",
    "check_donation",
    "check_failure_safety",
    "check_timed_out_read",
    "check_host_copy",
    "check_op_sharding",
    "check_preservation",
    "check_round_trip",
    "check_spec_normalization",
    "check_uneven_split",
    "check_view_sharding",
    "declared_pairs",
    "dtypes",
    "get",
    "invariants",
    "host_arrays",
    "mesh_spec_shape",
    "meshes",
    "partition_specs",
    "programs",
    "run_program",
    "sharded_shapes",
]


def __getattr__(name: str) -> Any:
    # ``INVARIANTS`` is every registered invariant, loaded when first asked for (``registry``)
    if name == "INVARIANTS":
        return invariants()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
