"""FSDPv2: every parameter sharded on the mesh's ``fsdp`` axis, as PyTorch/XLA's
``SpmdFullyShardedDataParallel`` does.

The constructor moves the module to the device first (``module.to``, as upstream), then marks each
parameter that is not sharded yet with the spec from ``prepare_partition_spec``; the forward pass
shards the output's batch dimension. ``prepare_partition_spec`` is the function that had the 0-d
bug (issue #8522): it returned the bare list ``[]`` for a scalar parameter, and the list then hit
the ``lru_cache`` of ``Mesh.get_op_sharding``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.runtime import faults, sharding
from harness.runtime.mesh import Mesh
from harness.runtime.nn import Module
from harness.runtime.tensor import Tensor

FSDP_AXIS = "fsdp"


def prepare_partition_spec(param: Tensor, mesh: Mesh, extra_data_axis: str | None = None) -> Any:
    """The spec sharding ``param`` on the ``fsdp`` axis.

    Upstream shards dimension 0 and lets XLA pad uneven shards; JAX rejects uneven shards, so the
    first dimension that divides evenly is chosen, and a parameter with none stays replicated.
    """
    _check_extra_data_axis(mesh, extra_data_axis)
    spec: list[Any] = [None] * param.ndim
    if not spec and faults.active(faults.UNHASHABLE_SPEC):
        return spec  # upstream 2.4/2.5: the bare list, unhashable
    parts = mesh.shape()[FSDP_AXIS] * (mesh.shape()[extra_data_axis] if extra_data_axis else 1)
    for dim, size in enumerate(param.shape):
        if size % parts == 0:
            spec[dim] = (extra_data_axis, FSDP_AXIS) if extra_data_axis else FSDP_AXIS
            break
    return tuple(spec)


def _check_extra_data_axis(mesh: Mesh, extra_data_axis: str | None) -> None:
    if extra_data_axis is not None and extra_data_axis not in mesh.axis_names:
        raise ValueError(f"extra_data_axis {extra_data_axis!r} is not an axis of the mesh; mesh axes: {mesh.axis_names}")


def shard_batch(output: Any, mesh: Mesh) -> None:
    """Default output sharding: the batch dimension on ``fsdp``."""
    if isinstance(output, Tensor) and output.ndim >= 1 and output.shape[0] % mesh.shape()[FSDP_AXIS] == 0:
        sharding.mark_sharding(output, mesh, (FSDP_AXIS,) + (None,) * (output.ndim - 1))


class FSDPv2(Module):
    def __init__(
        self,
        module: Module,
        mesh: Mesh,
        shard_output: Callable[[Any, Mesh], None] | None = None,
        auto_wrap_policy: Callable[[Module], bool] | None = None,
        extra_data_axis: str | None = None,
    ) -> None:
        super().__init__()
        if FSDP_AXIS not in mesh.axis_names:
            raise ValueError(f"FSDPv2 needs a mesh axis named {FSDP_AXIS!r}, got {mesh.axis_names}")
        _check_extra_data_axis(mesh, extra_data_axis)
        if auto_wrap_policy is not None:
            _wrap_children(module, mesh, auto_wrap_policy, shard_output, extra_data_axis)
        module.to("xla")
        for param in module.parameters():
            if sharding.is_sharded(param):
                continue
            sharding.mark_sharding(param, mesh, prepare_partition_spec(param, mesh, extra_data_axis))
        self.module = module
        object.__setattr__(self, "mesh", mesh)
        object.__setattr__(self, "shard_output", shard_output or shard_batch)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        output = self.module(*args, **kwargs)
        self.shard_output(output, self.mesh)
        return output


def _wrap_children(
    module: Module,
    mesh: Mesh,
    policy: Callable[[Module], bool],
    shard_output: Callable[[Any, Mesh], None] | None,
    extra_data_axis: str | None,
) -> None:
    for name, child in list(module.named_children()):
        _wrap_children(child, mesh, policy, shard_output, extra_data_axis)
        if policy(child):
            setattr(module, name, FSDPv2(child, mesh, shard_output=shard_output, extra_data_axis=extra_data_axis))
