"""lost-sharding: FSDPv2 without functionalization loses parameter and output shardings.

Issue #8607: FSDPv2 + SPMD on a ViT with ``XLA_DISABLE_FUNCTIONALIZATION=1`` crashed with "Check
failed: has_sharding()" / "Sharding instruction must have a sharding attribute". The reporter found
that without functionalization ``model.to(device)`` re-materialized every parameter replicated.
PR #8578 made ``custom_sharding_`` always put the sharding on the new custom-sharding node,
because a later view update could rewrite the IR and leave it on the view-update node; timm's
patch embedding returns a view (``flatten(2).transpose(1, 2)``), which is where that bites.

Here: functionalization off, a tiny ViT wrapped by FSDPv2 (the patch embedding wrapped on its
own), moved ``.to(device)`` again as a training script does; every sharded parameter must stay
sharded, and a training step must compile and run.
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")


def _wrapped_vit(ctx: Context) -> tuple[xr.fsdp.FSDPv2, dict[str, tuple | None]]:
    xr.configure(functionalization=False)
    n = ctx.devices
    mesh = xr.Mesh(range(n), (n,), ("fsdp",))
    xr.manual_seed(ctx.seed)
    vit = xr.models.TinyViT(dim=4 * n, depth=1, heads=2, classes=2 * n)
    model = xr.fsdp.FSDPv2(
        vit, mesh, auto_wrap_policy=lambda m: isinstance(m, xr.models.PatchEmbed)
    )
    specs = {name: xr.sharding_spec(p) for name, p in model.named_parameters()}
    if all(spec is None for spec in specs.values()):
        raise InvariantViolation("FSDPv2 sharded no parameter at all")
    return model, specs


def _check_layouts(model: xr.fsdp.FSDPv2, specs: dict[str, tuple | None], when: str) -> None:
    lost = [
        name
        for name, p in model.named_parameters()
        if specs[name] is not None and xr.sharding_spec(p) is None
    ]
    if lost:
        raise xr.ShardingLostError(
            f"parameters replicated instead of sharded {when}: {', '.join(lost)}"
        )


def _train(model: xr.fsdp.FSDPv2, ctx: Context, steps: int = 2) -> None:
    n = ctx.devices
    opt = xr.optim.SGD(model.parameters(), lr=0.05)
    images = xr.tensor(ctx.normal(2 * n, 3, 8, 8))
    labels = xr.tensor(np.eye(2 * n, dtype=np.float32)[ctx.rng.integers(0, 2 * n, 2 * n)])
    losses = []
    for _ in range(steps):
        loss = xr.nn.cross_entropy(model(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        xr.mark_step()
        losses.append(loss.item())
    if not np.all(np.isfinite(losses)):
        raise InvariantViolation(f"training produced non-finite losses {losses}")


def to_device_after_wrap(ctx: Context) -> None:
    """The reporter's finding: ``.to(device)`` after wrapping must keep every layout."""
    model, specs = _wrapped_vit(ctx)
    model.to(xr.device())
    _check_layouts(model, specs, "after .to(device)")


def train_step(ctx: Context) -> None:
    """The crash: the patch embedding's output is a view, sharded by its FSDPv2 wrapper; the
    step must compile and run and keep every layout."""
    model, specs = _wrapped_vit(ctx)
    _train(model, ctx)
    _check_layouts(model, specs, "after training steps")


SCENARIO = Scenario(
    id="lost-sharding",
    title="FSDPv2 without functionalization: .to(device) and view updates drop shardings",
    upstream=("pytorch/xla#8607", "pytorch/xla#8578", "pytorch/xla#8662"),
    component="Module.to, custom sharding over views (functionalization off)",
    trigger="FSDPv2 tiny-ViT with functionalization off, .to(device), one training step",
    fault="lost-sharding",  # faults.LOST_SHARDING
    signatures=(
        Signature("replicated-params", "harness.runtime.errors:ShardingLostError", r"replicated instead of sharded"),
        Signature("missing-sharding", "harness.runtime.errors:ShardingLostError", r"must have a sharding attribute"),
    ),
    variants={"to-device-after-wrap": to_device_after_wrap, "train-step": train_step},
    needs=Needs(devices=1),
    story=__doc__ or "",
    expected={"to-device-after-wrap": ("replicated-params",), "train-step": ("missing-sharding",)},
)
