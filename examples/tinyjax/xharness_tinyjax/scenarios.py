"""The catalog entry for the dropped-axis bug: the trigger, and how the bug shows itself; and the
trigger as tinyjax's maintainers would run it, without the harness (``UPSTREAM``)."""

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


def columns_over_every_device() -> None:
    """The scenario's trigger in tinyjax's own API, for the report to file: a 4 x 2n matrix's
    columns split over every device, its layout read back."""
    import numpy as np

    from xharness_tinyjax.adapter import TinyJaxAdapter

    runtime = TinyJaxAdapter()
    n = runtime.device_count()
    mesh = runtime.mesh(range(n), (n,), ("x",))
    host = np.arange(8 * n, dtype=np.float32).reshape(4, 2 * n)
    t = runtime.mark_sharding(runtime.tensor(host), mesh, (None, "x"))
    got = runtime.sharding_spec(t)
    if got != (None, "x"):
        raise LayoutLost(f"the layout lost its spec: marked (None, 'x'), laid out by {got}")
    np.testing.assert_array_equal(runtime.to_host(t), host)


#: tinyjax's upstream triggers (``xharness.upstream``): ``xharness report upstream
#: tinyjax-dropped-axis --runtime tinyjax`` writes the report to file against tinyjax
UPSTREAM = (
    api.Reproducer(
        "tinyjax-dropped-axis", "columns-over-four-devices", columns_over_every_device,
        "the tinyjax-dropped-axis scenario's trigger",
        env={"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "4"},
        signatures=(api.Signature("layout-lost", LayoutLost, "lost its spec"),),
        runtime="tinyjax",
    ),
)
