"""The catalog entry for the dropped-axis bug: the trigger, and how the bug shows itself."""

from __future__ import annotations

import numpy as np

from harness import api


class LayoutLost(AssertionError):
    """A tensor's layout is not the one it was marked with."""


def _sharded_columns(ctx: api.Context) -> None:
    """Split a matrix's columns over every device, then read the layout and the values back."""
    runtime = api.get("tinyjax")
    mesh = runtime.mesh(range(ctx.devices), (ctx.devices,), ("x",))
    host = ctx.normal(4, 2 * ctx.devices)
    t = runtime.mark_sharding(runtime.tensor(host), mesh, (None, "x"))
    got = runtime.sharding_spec(t)
    if got != (None, "x"):
        raise LayoutLost(f"the layout lost its spec: marked (None, 'x'), laid out by {got}")
    np.testing.assert_array_equal(runtime.to_host(t), host)


DROPPED_AXIS = api.Scenario(
    id="tinyjax-dropped-axis",
    title="mark_sharding drops the last sharded dimension: the tensor is replicated along it",
    upstream=(),
    component="tinyjax mark_sharding",
    trigger="mark a 2-D tensor (None, 'x') over a 1-D mesh and read its layout back",
    fault="dropped-axis",
    signatures=(api.Signature("layout-lost", "xharness_tinyjax.scenarios:LayoutLost", "lost its spec"),),
    variants={"sharded-columns": _sharded_columns},
    runtime="tinyjax",
)
