"""Proof of teeth: each invariant, with each fault switch it declares, finds a small counterexample.

A check that cannot fail is no check. For every (invariant, switch) pair an invariant declares,
hypothesis must falsify the invariant with the switch on, and the counterexample it shrinks to must
be no bigger than the invariant's bound (a small counterexample is one a maintainer can read). With
every switch off the same invariants pass (``test_invariants.py``).
"""

from __future__ import annotations

import jax
import pytest

from harness.properties import declared_pairs
from harness.properties.base import switched_on

PAIRS = declared_pairs()


@pytest.mark.parametrize(("invariant", "fault"), PAIRS, ids=[f"{i.id}-{f}" for i, f in PAIRS])
def test_invariant_catches_its_fault(invariant, fault) -> None:
    if len(jax.devices()) < invariant.min_devices:
        pytest.skip(f"{fault} is observable by {invariant.id} only with {invariant.min_devices}+ devices")
    with switched_on((fault,)):
        found = invariant.search()
    assert found is not None, f"{invariant.id} found no counterexample with {fault} on: it has no teeth"
    assert fault in found.faults
    assert 0 <= found.size <= invariant.max_size, (
        f"{invariant.id} shrank {fault} to size {found.size} (bound {invariant.max_size}):\n{found.example}"
    )


def test_every_switch_is_declared_by_some_invariant() -> None:
    from harness.runtime import faults

    assert {fault for _, fault in PAIRS} == set(faults.SWITCHES)
