"""Making tensors: from host data, filled, and the free functions over several (``where``,
``cat``), where users import them from (``harness.runtime.tensor``).

The tensor handle itself is ``harness.runtime.lazy_tensor.Tensor``, re-exported here with the
scalar typing rules (``harness.runtime.scalars``) that were always importable from this module.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np

from harness.runtime import autograd, ir
from harness.runtime.host_data import from_host
from harness.runtime.lazy_tensor import Tensor
from harness.runtime.scalars import scalar, scalar_dtype
from harness.runtime.storage import Storage

__all__ = ["Tensor", "cat", "ones", "scalar", "scalar_dtype", "tensor", "where", "zeros"]


def tensor(data: Any, requires_grad: bool = False, dtype: Any = None) -> Tensor:
    """A new tensor on the device from host data (float64 becomes float32, as in torch)."""
    if isinstance(data, Tensor):
        data = data.numpy()
    storage = Storage(ir.data_node(from_host(data, dtype)))
    t = Tensor(storage, requires_grad=requires_grad)
    if requires_grad:
        storage.requires_grad = True
        storage.owner = weakref.ref(t)
        storage.node.leaf = weakref.ref(storage)
    return t


def zeros(*shape: int, requires_grad: bool = False, dtype: Any = np.float32) -> Tensor:
    return tensor(np.zeros(_shape_arg(shape), dtype=dtype), requires_grad=requires_grad)


def ones(*shape: int, requires_grad: bool = False, dtype: Any = np.float32) -> Tensor:
    return tensor(np.ones(_shape_arg(shape), dtype=dtype), requires_grad=requires_grad)


def _shape_arg(shape: tuple) -> tuple[int, ...]:
    return tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple | list) else tuple(shape)


def where(cond: Tensor, x: Any, y: Any) -> Tensor:
    like = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else None
    if like is None:  # two scalars: their own common kind, never the condition's bool
        dtype = scalar_dtype(scalar_dtype(np.dtype(np.bool_), x), y)
        nodes = (cond.rt_operand(), scalar(x, dtype), scalar(y, dtype))
    else:
        nodes = (cond.rt_operand(), like.rt_lift(x), like.rt_lift(y))
    grad = any(isinstance(v, Tensor) and v.requires_grad for v in (x, y))
    out = Tensor.from_node(ir.Node("where", nodes), grad)
    if grad:  # torch's WhereBackward keeps the condition
        autograd.save(out.rt_node, (cond.rt_storage,))
    return out


def cat(tensors: Iterable[Tensor], dim: int = 0) -> Tensor:
    ts = list(tensors)
    return Tensor.from_node(ir.Node("concat", tuple(t.rt_operand() for t in ts), (dim,)), any(t.requires_grad for t in ts))
