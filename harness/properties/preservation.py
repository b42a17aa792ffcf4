"""Invariant 5: a parameter keeps the sharding it was given through everything training does to it.

Upstream #8607: with functionalization off, ``module.to(device)`` re-materialized every parameter
replicated, and FSDPv2 calls ``.to`` itself, so the model trained replicated (or failed to compile).
A layout can be lost at many more places than that one: an in-place update, an optimizer step, a
wrapper, a step boundary. The check drives a parameter through a random sequence of them, in both
functionalization modes, and after each one compares the layout the runtime reports *and* the one
its device buffer really has with the spec given at the start.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness.adapters import base
from harness.properties import strategies as pst
from harness.properties.base import Invariant
from harness.properties.layout import expected_read_back, spelled
from harness.properties.swarm import enabled_in_order, swarm
from harness.runtime import config, faults, fsdp, nn, optim, sharding, step
from harness.runtime.mesh import Mesh, normalize_spec
from harness.runtime.tensor import tensor

#: what training does to a parameter, each a place where a layout can be dropped
OPS: tuple[str, ...] = ("to", "inplace", "copy", "sgd", "adam", "fsdp", "mark_step")


class _Model(nn.Module):
    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.w = nn.Parameter(np.arange(1, 1 + int(np.prod(shape)), dtype=np.float32).reshape(shape) / 7)


def _layout_of(p: Any) -> Any:
    """The sharding of the parameter's device buffer (after a sync), or None while pending."""
    storage = p.rt_storage
    return None if storage.pending else storage.node.data.array().sharding


def same_layout(a: Any, b: Any, ndim: int) -> bool:
    """Whether two shardings put the same slices on the same devices (a replicated layout is the
    same whatever order its devices are listed in)."""
    if a.is_fully_replicated or b.is_fully_replicated:
        return bool(a.is_fully_replicated and b.is_fully_replicated and a.device_set == b.device_set)
    return bool(a.is_equivalent_to(b, ndim))


def check_preservation(mesh: Mesh, spec: Any, shape: tuple[int, ...], functionalization: bool, ops: list[str]) -> None:
    """After every op the parameter reports the spec it was marked with, and after every step its
    device buffer is laid out that way."""
    config.configure(functionalization=functionalization)
    ndim = len(shape)
    expected = normalize_spec(spec, ndim, mesh)
    model: nn.Module = _Model(shape)
    p = model.w
    sharding.mark_sharding(p, mesh, expected)
    plain = tensor(np.zeros(shape, np.float32))  # not a parameter: copy_ and in-place ops only
    sharding.mark_sharding(plain, mesh, expected)
    plain_spec = expected
    optimizers: dict[str, Any] = {}
    done: list[str] = []
    for op in ops:
        if op == "to":
            model.to("xla")
        elif op == "inplace":
            p.detach().mul_(2.0)
            p.detach().add_(1.0)
            plain.add_(1.0)
        elif op == "copy":  # a restore: copying a replicated value in keeps each tensor's layout
            p.detach().copy_(tensor(np.full(shape, 0.5, np.float32)))
            plain.copy_(tensor(np.full(shape, 0.25, np.float32)))
        elif op in ("sgd", "adam"):
            if op not in optimizers:
                optimizers[op] = optim.SGD([p], lr=0.01) if op == "sgd" else optim.Adam([p], lr=0.01)
            loss = (p * p).sum()
            loss.backward()
            optimizers[op].step()
            optimizers[op].zero_grad()
        elif op == "fsdp":
            if fsdp.FSDP_AXIS not in mesh.axis_names or isinstance(model, fsdp.FSDPv2):
                continue
            if all(e is None for e in expected):  # FSDPv2 shards what is not sharded yet
                expected = fsdp.prepare_partition_spec(p, mesh)
            model = fsdp.FSDPv2(model, mesh)
        elif op == "mark_step":
            step.mark_step(wait=True)
        done.append(op)
        kept = spelled(sharding.sharding_spec(plain))
        assert kept == expected_read_back(plain_spec), (
            f"after {done} a plain tensor sharded {plain_spec!r} reports {kept!r}"
        )
        reported = spelled(sharding.sharding_spec(p))
        assert reported == expected_read_back(expected), (
            f"after {done} (functionalization {'on' if functionalization else 'off'}) the parameter "
            f"reports layout {reported!r}, it was sharded {expected!r}"
        )
        actual = _layout_of(p)
        if actual is not None:
            want = mesh.get_op_sharding(expected)
            assert same_layout(actual, want, ndim), (
                f"after {done} (functionalization {'on' if functionalization else 'off'}) the parameter's "
                f"buffer is laid out {actual}, it was sharded {expected!r}"
            )


_BOOLS = st.booleans()


@lru_cache(maxsize=256)
def _op_lists(enabled: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(enabled), min_size=1, max_size=6)


@st.composite
def _preservation_examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh, spec, shape = draw(pst.mesh_spec_shape(3))
    return {
        "mesh": mesh,
        "spec": spec,
        "shape": shape,
        "functionalization": draw(_BOOLS),
        # swarm: the ops this example may use, drawn first (``harness.properties.swarm``), so
        # that a run of steps and copies without an optimizer in between is not left to chance
        "ops": draw(_op_lists(enabled_in_order(OPS, draw(swarm(OPS))))),
    }


def _ops_and_dims(example: dict[str, Any]) -> int:
    return len(example["ops"]) + len(example["shape"]) + len(example["mesh"].axis_names) - 1


SHARDING_PRESERVATION = Invariant(
    id="sharding-preservation",
    title="a parameter's sharding survives .to(), in-place ops, copy_, SGD/Adam, FSDPv2 and mark_step",
    check=check_preservation,
    examples=_preservation_examples,
    catches=(faults.LOST_SHARDING,),
    size=_ops_and_dims,
    max_size=3,
    max_examples=40,
    min_devices=2,
    needs=(base.TRAINING, base.SHARDING_READBACK),
)
