"""Every invariant the harness ships, in the order the README numbers them."""

from __future__ import annotations

from harness.properties.base import Invariant
from harness.properties.compiles import COMPILE_STABILITY
from harness.properties.differential import STEP_BOUNDARY, TRAINING_DIFFERENTIAL
from harness.properties.discovery import DISCOVERY_IDEMPOTENCE
from harness.properties.donation import DONATION, SHARED_BUFFER, SHARED_SHARDS
from harness.properties.failures import FAILURE_SAFETY
from harness.properties.layout import COVERAGE, HOST_COPY, ROUND_TRIP, UNEVEN_SPLIT, VIEW_SHARDING
from harness.properties.machine import (
    BUFFER_SHARING,
    PARTIAL_SYNC,
    SAVE_ALIASING,
    SYNC_ALIASING,
    SYNC_WAITS,
    VIEW_WRITES,
    WAITING_SYNC,
)
from harness.properties.preservation import SHARDING_PRESERVATION
from harness.properties.specs import OP_SHARDING_CACHE, SPEC_NORMALIZATION

INVARIANTS: tuple[Invariant, ...] = (
    SPEC_NORMALIZATION,
    OP_SHARDING_CACHE,
    COVERAGE,
    UNEVEN_SPLIT,
    VIEW_SHARDING,
    ROUND_TRIP,
    HOST_COPY,
    SHARDING_PRESERVATION,
    SYNC_ALIASING,
    SAVE_ALIASING,
    VIEW_WRITES,
    BUFFER_SHARING,
    PARTIAL_SYNC,
    SYNC_WAITS,
    WAITING_SYNC,
    DISCOVERY_IDEMPOTENCE,
    DONATION,
    SHARED_BUFFER,
    SHARED_SHARDS,
    COMPILE_STABILITY,
    FAILURE_SAFETY,
    TRAINING_DIFFERENTIAL,
    STEP_BOUNDARY,
)


class UnknownInvariant(KeyError):
    """An invariant id that is not in the registry."""


def get(invariant_id: str) -> Invariant:
    for invariant in INVARIANTS:
        if invariant.id == invariant_id:
            return invariant
    raise UnknownInvariant(f"unknown invariant {invariant_id!r}; known: {', '.join(i.id for i in INVARIANTS)}")


def declared_pairs() -> list[tuple[Invariant, str]]:
    """Every (invariant, fault switch) pair an invariant promises to catch."""
    return [(invariant, fault) for invariant in INVARIANTS for fault in invariant.catches]
