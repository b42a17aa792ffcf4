"""unhashable-spec: FSDPv2 over a model with a 0-d parameter fails in the sharding cache.

In PyTorch/XLA 2.4 and 2.5, ``_prepare_spmd_partition_spec`` built ``[None] * ndim`` and returned
that list early for a 0-d parameter; FSDPv2's constructor passed it to ``mark_sharding``, whose
``Mesh.get_op_sharding`` is ``functools.lru_cache``-d, so the list key raised
``TypeError: unhashable type: 'list'`` (issue #8522, fixed by PR #8613: return a tuple).

Here: FSDPv2 wraps an MLP with a learnable scalar output scale; every parameter must be sharded
on ``fsdp`` (the scalar replicated), and a training step must update the scalar.
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")


def fsdp_scalar_param(ctx: Context) -> None:
    n = ctx.devices
    mesh = xr.Mesh(range(n), (n,), ("fsdp",))
    xr.manual_seed(ctx.seed)
    model = xr.fsdp.FSDPv2(xr.models.ScaledMLP(4 * n, 2 * n, n), mesh)
    for name, p in model.named_parameters():
        spec = xr.sharding_spec(p)
        if p.ndim == 0 and spec is not None:
            raise InvariantViolation(f"0-d parameter {name} should be replicated, has spec {spec}")
        if p.ndim > 0 and spec is None:
            raise InvariantViolation(f"parameter {name} {p.shape} is not sharded on fsdp")
    scale = model.module.scale
    before = scale.numpy()
    opt = xr.optim.SGD(model.parameters(), lr=0.1)
    x, y = xr.tensor(ctx.normal(2 * n, 4 * n)), xr.tensor(ctx.normal(2 * n, n))
    loss = xr.nn.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    xr.mark_step()
    if not np.isfinite(loss.item()) or np.array_equal(scale.numpy(), before):
        raise InvariantViolation("the 0-d scale parameter was not updated by the training step")


SCENARIO = Scenario(
    id="unhashable-spec",
    title="FSDPv2 partition spec of a 0-d parameter is an unhashable list",
    upstream=("pytorch/xla#8522", "pytorch/xla#8613", "pytorch/xla#5593"),
    component="FSDPv2 partition-spec preparation and the cached Mesh.get_op_sharding",
    trigger="FSDPv2 over a model with a learnable 0-d scale",
    fault="unhashable-spec",  # faults.UNHASHABLE_SPEC
    signatures=(Signature("unhashable-list", TypeError, r"unhashable type: 'list'"),),
    variants={"fsdp-scalar-param": fsdp_scalar_param},
    needs=Needs(devices=1),
    story=__doc__ or "",
)
