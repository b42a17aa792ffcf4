"""An invariant any runtime with layouts must keep: a tensor is laid out by the spec it was marked
with, and its values survive the layout."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness import api


def check_spec_round_trip(rows: int, cols: int, axis: int) -> None:
    runtime = api.current()
    api.require(runtime, api.MESHES, api.SHARDING, api.SHARDING_READBACK)
    n = runtime.device_count()
    mesh = runtime.mesh(range(n), (n,), ("x",))
    host = np.arange(rows * n * cols, dtype=np.float32).reshape(rows * n, cols)
    if axis == 1:
        host = np.ascontiguousarray(host.reshape(cols, rows * n))
    spec = ("x", None) if axis == 0 else (None, "x")
    t = runtime.mark_sharding(runtime.tensor(host), mesh, spec)
    got = runtime.sharding_spec(t)
    assert got == spec, f"marked {spec}, laid out by {got}"
    np.testing.assert_array_equal(runtime.to_host(t), host)


def _examples() -> st.SearchStrategy[dict[str, Any]]:
    # every sharded dimension is a multiple of the device count (``rows * n``), so each layout
    # is an even split on any mesh
    return st.fixed_dictionaries(
        {"rows": st.integers(1, 3), "cols": st.integers(1, 4), "axis": st.sampled_from((0, 1))}
    )


SPEC_ROUND_TRIP = api.Invariant(
    id="tinyjax-spec-round-trip",
    title="a tensor is laid out by the spec it was marked with, values intact",
    check=check_spec_round_trip,
    examples=_examples,
    catches=("dropped-axis",),
    size=lambda example: example["rows"] + example["cols"],
    max_size=4,
    max_examples=20,
    needs=(api.MESHES, api.SHARDING, api.SHARDING_READBACK),
    isolate=False,
)
