"""The spelling-compiles invariant (``harness.properties.spellings``): one program over one layout
compiles once, whichever spelling of the layout its input and requested output use.

The plan cache's key is the runtime's, whatever the device count: one cell (cpu-8) runs it."""

from __future__ import annotations

import numpy as np
import pytest

import harness.runtime as xr
from harness.properties.spellings import SPELLING_COMPILES, spell

pytestmark = pytest.mark.cell_independent

test_spelling_compiles = SPELLING_COMPILES.hypothesis_test()


def test_a_size_one_axis_named_or_not_is_one_program() -> None:
    """Found by the invariant: ``('x', 'y')`` and ``('x', None)`` on an ``('x': n, 'y': 1)`` mesh
    compiled the same program twice (the plan cache keyed on the sharding as written)."""
    n = len(xr.discover().devices)
    mesh = xr.Mesh(list(range(n)), (n, 1), ("x", "y"))
    compiled = []
    for spec in (("x", None), spell(mesh, ("x", None), "unit-axes"), spell(mesh, ("x", None), "groups")):
        before = xr.compile_count()
        t = xr.mark_sharding(xr.tensor(np.ones((n, 2), np.float32)), mesh, spec)
        out = xr.mark_sharding(t * 3.0, mesh, spec)
        xr.mark_step()
        compiled.append(xr.compile_count() - before)
        assert xr.sharding_spec(out) == spec or xr.sharding_spec(out) == ("x", None)
    assert spell(mesh, ("x", None), "unit-axes") == (("x", "y"), None)
    assert compiled[1:] == [0, 0], compiled
