"""A sharded tensor's per-device pieces, and a tensor assembled from such pieces.

PyTorch/XLA hands out a sharded tensor's local shards (``_get_local_shards``) and builds sharded
tensors from per-device shards when it loads a distributed checkpoint; JAX does both with
``Array.addressable_shards`` and ``jax.make_array_from_single_device_arrays``. None of them copies:
the pieces and the whole share per-device buffers. A buffer donated or deleted through one of them
is then gone for the others too, while their own ``is_deleted()`` still says False, so the
executor looks at the per-device buffers of every input marked as sharing them before it hands
the input to XLA (``liveness.check_inputs_live``). The ``deleted-shard`` switch removes that look.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import SingleDeviceSharding

from harness.runtime import device_data, ir, step
from harness.runtime.mesh import Mesh
from harness.runtime.storage import Storage
from harness.runtime.tensor import Tensor


def _data(t: Tensor) -> device_data.DeviceData:
    """``t``'s device data, executed first if it is pending."""
    if t.rt_views:
        raise ValueError("local shards of a view: take them of the tensor it views")
    storage = t.rt_storage
    if storage.pending:
        step.sync([t], wait=True)
    data = storage.node.data
    assert data is not None
    return data


def _wrap(data: device_data.DeviceData, sharding: Any = None) -> Tensor:
    storage = Storage(ir.data_node(data))
    storage.sharding = sharding
    return Tensor(storage)


def local_shards(t: Tensor) -> list[Tensor]:
    """One single-device tensor per device of this process holding a piece of ``t``, in the
    order of ``t``'s devices. The pieces share ``t``'s buffers (no copy)."""
    data = _data(t)
    data.shares = True
    pieces = []
    for shard in data.array().addressable_shards:
        array = shard.data
        piece = device_data.DeviceData(ir.Aval(array.shape, array.dtype), SingleDeviceSharding(shard.device), array)
        piece.shares = True
        pieces.append(_wrap(piece))
    return pieces


def from_local_shards(pieces: Sequence[Tensor], mesh: Mesh, partition_spec: Any) -> Tensor:
    """The sharded tensor over ``mesh`` by ``partition_spec`` whose per-device pieces are
    ``pieces`` (one per device of the mesh, each on its own device). It shares their buffers."""
    sharding = mesh.get_op_sharding(tuple(partition_spec))
    arrays = [_data(p).array() for p in pieces]
    if not arrays:
        raise ValueError("from_local_shards needs one piece per device, got none")
    piece_shape = arrays[0].shape
    if len(partition_spec) != len(piece_shape):
        raise ValueError(f"partition spec {tuple(partition_spec)} has {len(partition_spec)} entries for {len(piece_shape)}-d pieces")
    sizes = mesh.shape()
    shape = []
    for dim, entry in zip(piece_shape, partition_spec, strict=True):
        axes = () if entry is None else entry if isinstance(entry, tuple) else (entry,)
        shape.append(dim * int(np.prod([sizes[a] for a in axes], dtype=np.int64)))
    array = jax.make_array_from_single_device_arrays(tuple(shape), sharding, arrays)
    data = device_data.DeviceData(ir.Aval(array.shape, array.dtype), sharding, array)
    data.shares = True
    for p in pieces:
        _data(p).shares = True
    return _wrap(data, sharding)
