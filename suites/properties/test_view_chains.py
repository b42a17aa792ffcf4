"""The view-chain-specs invariant (``harness.properties.view_specs``): the spec read two or more
views away from the marked tensor.

A detach-only chain marked again, or a chain ending in a detach after a real view, is where it
fails; neither depends on the cell's device count or options, so one cell (cpu-8) runs it."""

from __future__ import annotations

import pytest

import harness.runtime as xr
from harness.properties.view_specs import VIEW_CHAIN_SPECS, check_chain_spec

pytestmark = pytest.mark.cell_independent

test_view_chain_specs = VIEW_CHAIN_SPECS.hypothesis_test()


def test_a_detached_alias_marked_again_lays_its_storage_out() -> None:
    """Found by the invariant: marking ``t.detach().detach()`` of a sharded ``t`` left the
    storage's requested layout in place, and the step laid the base out by the old spec."""
    mesh = xr.Mesh(list(range(len(xr.discover().devices))), (len(xr.discover().devices),), ("x",))
    n = mesh.size()
    for state in ("data", "pending", "stepped", "written"):
        check_chain_spec(mesh, ("x", None), (n, n), state, ("detach", "detach"), respec=(None, "x"))


def test_a_view_then_a_detach_reports_nothing() -> None:
    n = len(xr.discover().devices)
    mesh = xr.Mesh(list(range(n)), (n,), ("x",))
    t = xr.mark_sharding(xr.tensor([[1.0, 2.0]] * n), mesh, ("x", None))
    assert xr.sharding_spec(t.view(2 * n).detach()) is None
    assert xr.sharding_spec(t.T.detach()) is None
    assert xr.sharding_spec(t.detach().detach()) == ("x", None)
