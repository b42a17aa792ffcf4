"""double-discovery: slice discovery runs twice when a kernel is lowered on multi-slice.

PyTorch/XLA traces Pallas kernels (flash attention) through JAX, which starts JAX's own backend;
on a multi-slice (DCN) topology that backend would run MegaScale discovery a second time, so the
lowering sets ``SKIP_MEGASCALE_PJRT_CLIENT=true`` around it. PR #8654 moved that into a
``requires_jax`` decorator whose context manager popped the variable on exit; the decorated
helpers nest, so the inner exit removed the flag before the outer lowering started the backend
(regression #8812 on two v6e slices, fixed by #8819 with save-and-restore; cousin #8954).

Here: a 2-slice topology (real slices where the platform has them, simulated otherwise), a
``HybridMesh``, and a tiny-ViT forward whose attention goes through the kernel-lowering path;
``discovery_count()`` must stay 1 and the kernel must agree with the plain attention.
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")
testing = lazy("harness.runtime.testing")
topology = lazy("harness.runtime.topology")

SLICES = 2


def vit_forward(ctx: Context) -> None:
    topology.reset()
    xr.configure(num_slices=SLICES)
    topo = xr.discover()
    if topo.num_slices != SLICES:
        raise InvariantViolation(
            f"expected a {SLICES}-slice topology, discovery found {topo.num_slices}"
        )
    per_slice = topo.device_count // SLICES
    mesh = xr.HybridMesh(
        ici_mesh_shape=(per_slice,), dcn_mesh_shape=(SLICES,), axis_names=("data",)
    )
    xr.manual_seed(ctx.seed)
    vit = xr.models.TinyViT(use_kernel=True)
    images = xr.tensor(ctx.normal(topo.device_count, 3, 8, 8))
    xr.mark_sharding(images, mesh, ("data", None, None, None))
    with_kernel = vit(images).numpy()
    count = xr.discovery_count()
    if count != 1:
        raise xr.DuplicateDiscoveryError(
            f"slice topology discovery ran {count} times in one process"
        )
    for block in vit.blocks.children():
        block.attn.use_kernel = False
    plain = vit(images).numpy()
    if not np.allclose(with_kernel, plain, **testing.tolerance(np.float32, minimum={"rtol": 1e-4, "atol": 1e-5})):
        raise InvariantViolation(
            f"attention kernel and plain attention differ by {np.abs(with_kernel - plain).max():.3g}"
        )


SCENARIO = Scenario(
    id="double-discovery",
    title="Nested skip-discovery guards re-run slice discovery during kernel lowering",
    upstream=("pytorch/xla#8609", "pytorch/xla#8812", "pytorch/xla#8819", "pytorch/xla#8954"),
    component="topology discovery and the kernel-lowering guard",
    trigger="tiny-ViT forward on a 2-slice HybridMesh; attention lowered through nested guarded helpers",
    fault="double-discovery",  # faults.DOUBLE_DISCOVERY
    signatures=(
        Signature("duplicate-discovery", "harness.runtime.errors:DuplicateDiscoveryError", r"discovery ran \d+ times"),
    ),
    variants={"vit-forward": vit_forward},
    needs=Needs(devices=SLICES, device_multiple=SLICES),
    story=__doc__ or "",
)
