"""Invariant 9: a training loop compiles its step once; every later step reuses the program.

A runtime that compiles again on a step that records the same ops is slow in the way users
notice last: every step still gives the right numbers. The known causes are all cousins of each
other: a Python scalar baked into the program (a learning-rate schedule, a loss scale, a step
counter: PyTorch/XLA sends them as device data), an input whose layout after the first step is
spelled differently from before it (optimizer state created replicated on the default layout
next to a parameter replicated on the user's mesh: equal values, another program), a requested
output layout dropped after a step. The check trains a small model under a drawn layout
(none, FSDPv2, specs per parameter, a dimension the mesh does not divide included), optimizer,
scalar and runtime options for three steps and asks the compile counter whether the
second and third compiled anything.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness.adapters import base
from harness.properties import strategies as pst
from harness.properties.base import Invariant
from harness.runtime import config, fsdp, models, nn, optim, plan_cache, recompiles, sharding, step
from harness.runtime.mesh import Mesh
from harness.runtime.tensor import Tensor, tensor

LAYOUTS: tuple[str, ...] = ("none", "fsdp", "specs")
OPTIMIZERS: tuple[str, ...] = ("sgd", "momentum", "adam")
#: the Python scalar that changes every step: none, the optimizer's learning rate, a float loss
#: scale, an int step counter (``schedule`` is the name of a thread schedule in the other checks)
SCALARS: tuple[str, ...] = ("none", "lr", "loss-scale", "step-count")
STEPS = 3


def _divides(mesh: Mesh, spec: tuple[Any, ...], shape: tuple[int, ...]) -> bool:
    return all(dim % parts == 0 for dim, parts in zip(shape, pst.split_counts(mesh, spec), strict=True))


def _optimizer(name: str, params: list[Tensor]) -> optim.Optimizer:
    if name == "adam":
        return optim.Adam(params, lr=0.01)
    return optim.SGD(params, lr=0.1, momentum=0.9 if name == "momentum" else 0.0)


def check_compile_stability(
    mesh: Mesh,
    features: tuple[int, int],
    layout: str,
    specs: tuple[Any, Any],
    optimizer: str,
    scalars: str,
    batch_split: bool,
    functionalization: bool,
    param_aliasing: bool,
) -> None:
    """Three training steps of a linear model: after the first, no step compiles.

    ``specs`` (weight, bias) apply with the ``specs`` layout; one that does not divide its
    parameter is replaced by the replicated spec on the same mesh, the layout FSDPv2 gives such a
    parameter."""
    config.configure(functionalization=functionalization, param_aliasing=param_aliasing)
    # from an empty program cache: a program an earlier example compiled would make a second
    # program of this loop look free, and the same example pass when replayed
    plan_cache.clear_cache()
    fin, fout = features
    model: nn.Module = models.LinearModel(fin, fout)
    linear = model
    if layout == "fsdp":
        model = fsdp.FSDPv2(model, mesh)
    elif layout == "specs":
        for p, spec in ((linear.fc.weight, specs[0]), (linear.fc.bias, specs[1])):
            if not _divides(mesh, tuple(spec), p.shape):
                spec = (None,) * len(p.shape)
            sharding.mark_sharding(p, mesh, spec)
    opt = _optimizer(optimizer, list(model.parameters()))
    axis = mesh.axis_names[0]
    batch = 2 * mesh.shape()[axis]
    rng = np.random.default_rng(0)
    start = plan_cache.compile_count()
    counts: list[int] = []  # compiles since the loop began, after each step
    for k in range(STEPS):
        x = tensor(rng.standard_normal((batch, fin)).astype(np.float32))
        y = tensor(rng.standard_normal((batch, fout)).astype(np.float32))
        if batch_split:
            sharding.mark_sharding(x, mesh, (axis, None))
        loss = nn.mse_loss(model(x), y)
        if scalars == "loss-scale":
            loss = loss * (1.0 + 0.5 * k)
        elif scalars == "step-count":
            loss = loss * (k + 1)
        loss.backward()
        if scalars == "lr":
            opt.lr = 0.1 / (k + 1)
        opt.step()
        opt.zero_grad()
        step.mark_step()
        counts.append(plan_cache.compile_count() - start)
    assert counts[-1] == counts[0], (
        f"the loop compiled again after its first step: compiles so far after each of {STEPS} steps "
        f"{counts} (layout {layout}, optimizer {optimizer}, Python scalar {scalars}); "
        f"the steps recorded the same ops, so a later step needs no new program. The runtime: "
        f"{recompiles.last_compile_reason()}"
    )


@st.composite
def _examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes(max_axes=2, require_axes=(fsdp.FSDP_AXIS,)))
    return {
        "mesh": mesh,
        "features": (draw(pst.ints(1, 12)), draw(pst.ints(1, 12))),
        "layout": draw(pst.choice(LAYOUTS)),
        "specs": (draw(pst.partition_specs(mesh, 2, forms=("tuple",))), draw(pst.partition_specs(mesh, 1, forms=("tuple",)))),
        "optimizer": draw(pst.choice(OPTIMIZERS)),
        "scalars": draw(pst.choice(SCALARS)),
        "batch_split": draw(st.booleans()),
        "functionalization": draw(st.booleans()),
        "param_aliasing": draw(st.booleans()),
    }


def _size(example: dict[str, Any]) -> int:
    """What a counterexample needs beyond the simplest loop: a layout, an optimizer with state,
    a schedule, a split batch."""
    return (
        LAYOUTS.index(example["layout"])
        + OPTIMIZERS.index(example["optimizer"])
        + int(example["scalars"] != "none")
        + int(example["batch_split"])
    )


COMPILE_STABILITY = Invariant(
    id="compile-stability",
    title="a training loop compiles once: no later step with the same ops compiles again, "
    "whatever the layout, optimizer state or Python scalar schedule",
    check=check_compile_stability,
    examples=_examples,
    size=_size,
    max_size=4,
    max_examples=20,
    needs=(base.TRAINING, base.SHARDING),
)
