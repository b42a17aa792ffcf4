"""Lazy tensors: mutable handles over a functional IR.

A ``Tensor`` is a view chain over a ``Storage``; arithmetic records IR nodes and returns new
tensors at once, in-place ops rewrite the storage (see ``functional``), and nothing runs until a
step boundary (``mark_step``) or a read (``numpy()``). Every storage is tracked weakly so
``mark_step`` can find all pending values, as PyTorch/XLA's device context does.

The handle's own behaviour lives here; making tensors from host data and the free functions
over them (``tensor``, ``zeros``, ``where``, ``cat``) are ``harness.runtime.tensor``'s, where
users import them from, and a Python scalar's typing rules are ``harness.runtime.scalars``'.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.runtime import autograd, config, faults, functional, ir, step, transfers
from harness.runtime.host_data import from_host
from harness.runtime.scalars import FLOAT32, is_floating, scalar, scalar_dtype
from harness.runtime.storage import Storage


class Tensor:
    """A lazy tensor (see module docstring). Create with ``harness.runtime.tensor(data)``."""

    __slots__ = ("_storage", "_views", "_node", "_version", "requires_grad", "grad", "_detached", "__weakref__")

    def __init__(
        self,
        storage: Storage,
        views: tuple = (),
        requires_grad: bool = False,
        detached: bool = False,
        node: ir.Node | None = None,
    ) -> None:
        self._storage = storage
        self._views = views
        if node is None:  # else the caller derived this alias' current value itself (``_alias``)
            node = storage.node if not views else functional.read(storage.node, views)
        self._node = node
        self._version = storage.version
        self.requires_grad = requires_grad
        self.grad: Tensor | None = None
        self._detached = detached

    # ------------------------------------------------------------------ construction helpers

    @staticmethod
    def from_node(node: ir.Node, requires_grad: bool = False) -> Tensor:
        """A new tensor over a new storage holding ``node``: what every recorded op returns, so
        it sets the fields directly rather than going through ``__init__``."""
        storage = Storage(node)
        storage.grad_dep = requires_grad
        t = _new_tensor(Tensor)
        t._storage = storage
        t._views = ()
        t._node = node
        t._version = 0
        t.requires_grad = requires_grad
        t.grad = None
        t._detached = False
        return t

    def _alias(self, step: functional.ViewStep, detached: bool | None = None) -> Tensor:
        """A view of this tensor. Its value is this tensor's current value with the one new view
        step applied (the same as reading the whole chain from the storage again, without
        recording the chain's earlier steps once more)."""
        return Tensor(
            self._storage,
            self._views + (step,),
            requires_grad=self.requires_grad and not detached,
            detached=self._detached if detached is None else detached,
            node=functional.apply_view(self.node, step),  # ``node``: regenerated if it changed
        )

    # ------------------------------------------------------------------ the runtime's own interface
    # What the reference runtime's other modules (sharding, autograd, checkpoint, step, optim, nn,
    # kernels, testing) and the reference adapter need of a tensor, named ``rt_*``: not part of
    # the PyTorch/XLA-like surface users call, and the slots behind them stay this class's.

    @property
    def rt_storage(self) -> Storage:
        """Runtime-internal: the storage this tensor names, shared with its aliases and views."""
        return self._storage

    @property
    def rt_views(self) -> tuple:
        """Runtime-internal: the view steps from the storage to this tensor (empty: the storage
        itself)."""
        return self._views

    @property
    def rt_version(self) -> int:
        """Runtime-internal: the storage version this tensor's value last reflected (-1: to be
        regenerated)."""
        return self._version

    @property
    def rt_node(self) -> ir.Node:
        """Runtime-internal: this tensor's value as last derived, without regenerating it from the
        storage."""
        return self._node

    def rt_forget_version(self) -> None:
        """Runtime-internal: regenerate this alias from the storage at its next read (a view update
        rewrote it)."""
        self._version = -1

    def rt_operand(self) -> ir.Node:
        """Runtime-internal: this tensor as an operand of a new IR node (a detached one stops
        gradients)."""
        return self._operand()

    def rt_lift(self, other: Any) -> ir.Node:
        """Runtime-internal: ``other`` (a tensor, a Python scalar or host data) as an operand
        next to this tensor, taking this tensor's dtype where a scalar's kind allows."""
        return self._lift(other)

    def rt_write(self, node: ir.Node, source: Any = None) -> Tensor:
        """Runtime-internal: write ``node`` into this tensor in place, through its storage and
        views."""
        return self._write(node, source)

    # ------------------------------------------------------------------ values

    @property
    def node(self) -> ir.Node:
        """This alias' current value, regenerated from the storage when it changed."""
        st = self._storage
        if self._version != st.version:
            self._node = functional.read(st.node, self._views)
            self._version = st.version
        return self._node

    def _operand(self) -> ir.Node:
        st = self._storage
        if self._version != st.version:
            self._node = functional.read(st.node, self._views)
            self._version = st.version
        node = self._node
        return ir.Node("stop_gradient", (node,)) if self._detached else node

    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    @property
    def ndim(self) -> int:
        return len(self.node.shape)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def is_leaf(self) -> bool:
        return not self.requires_grad or self._storage.requires_grad and not self._views

    def numpy(self) -> np.ndarray:
        """The value on the host: syncs this tensor's storage if it is pending."""
        st = self._storage
        if st.pending:
            step.sync([self], wait=True, donate=False)
        host = transfers.to_host(st.node.data)
        return np.array(functional.host_view(host, self._views))

    def item(self) -> Any:
        return self.numpy().item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __bool__(self) -> bool:
        return bool(self.item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self.numpy()
        return value.astype(dtype) if dtype is not None else value

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self.dtype.name})"

    # ------------------------------------------------------------------ op recording

    def _lift(self, other: Any) -> ir.Node:
        if isinstance(other, Tensor):
            return other._operand()
        if type(other) is float:  # the common scalar, without the general dtype rules below
            dtype = self.node.aval[1]
            return ir.Scalar(other, dtype if is_floating(dtype) else FLOAT32)
        if isinstance(other, bool | numbers.Number | np.generic):
            return scalar(other, scalar_dtype(self.dtype, other))
        return ir.data_node(from_host(other))

    def _unary(self, op: str, attrs: tuple = ()) -> Tensor:
        out = Tensor.from_node(ir.Node(op, (self._operand(),), attrs), self.requires_grad)
        if self.requires_grad and op in autograd.SAVES:
            autograd.save(out._node, (out._storage if autograd.SAVES[op] == "result" else self._storage,))
        return out

    def _binary(self, op: str, other: Any, reverse: bool = False) -> Tensor:
        a = self._operand()
        if isinstance(other, Tensor):
            b = other._operand()
            grad = self.requires_grad or other.requires_grad
        else:
            b = self._lift(other)
            grad = self.requires_grad
        if reverse:
            a, b = b, a
        out = Tensor.from_node(ir.Node(op, (a, b)), grad)
        if grad and op in autograd.SAVES:
            autograd.save(out._node, autograd.saved_operands(op, self, other))
        return out

    def __add__(self, o: Any) -> Tensor: return self._binary("add", o)
    def __radd__(self, o: Any) -> Tensor: return self._binary("add", o, True)
    def __sub__(self, o: Any) -> Tensor: return self._binary("sub", o)
    def __rsub__(self, o: Any) -> Tensor: return self._binary("sub", o, True)
    def __mul__(self, o: Any) -> Tensor: return self._binary("mul", o)
    def __rmul__(self, o: Any) -> Tensor: return self._binary("mul", o, True)
    def __truediv__(self, o: Any) -> Tensor: return self._binary("div", o)
    def __rtruediv__(self, o: Any) -> Tensor: return self._binary("div", o, True)
    def __pow__(self, o: Any) -> Tensor: return self._binary("pow", o)
    def __rpow__(self, o: Any) -> Tensor: return self._binary("pow", o, True)
    def __matmul__(self, o: Any) -> Tensor: return self._binary("matmul", o)
    def __rmatmul__(self, o: Any) -> Tensor: return self._binary("matmul", o, True)
    def __eq__(self, o: Any) -> Tensor: return self._binary("eq", o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tensor: return self._binary("ne", o)  # type: ignore[override]
    def __lt__(self, o: Any) -> Tensor: return self._binary("lt", o)
    def __le__(self, o: Any) -> Tensor: return self._binary("le", o)
    def __gt__(self, o: Any) -> Tensor: return self._binary("gt", o)
    def __ge__(self, o: Any) -> Tensor: return self._binary("ge", o)
    def __neg__(self) -> Tensor: return self._unary("neg")

    __hash__ = object.__hash__
    # numpy defers to the reflected ops above (``ndarray @ tensor`` stays a lazy tensor) instead of
    # pulling the tensor to the host through ``__array__`` and computing on the host
    __array_ufunc__ = None

    def maximum(self, o: Any) -> Tensor: return self._binary("maximum", o)
    def minimum(self, o: Any) -> Tensor: return self._binary("minimum", o)
    def exp(self) -> Tensor: return self._unary("exp")
    def log(self) -> Tensor: return self._unary("log")
    def sqrt(self) -> Tensor: return self._unary("sqrt")
    def rsqrt(self) -> Tensor: return self._unary("rsqrt")
    def tanh(self) -> Tensor: return self._unary("tanh")
    def abs(self) -> Tensor: return self._unary("abs")
    def sigmoid(self) -> Tensor: return self._unary("sigmoid")
    def relu(self) -> Tensor: return self._unary("relu")
    def gelu(self) -> Tensor: return self._unary("gelu")

    def softmax(self, dim: int = -1) -> Tensor:
        return self._unary("softmax", (dim,))

    def log_softmax(self, dim: int = -1) -> Tensor:
        return self._unary("log_softmax", (dim,))

    def _reduce(self, op: str, dim: int | Sequence[int] | None, keepdim: bool) -> Tensor:
        axes = None if dim is None else (tuple(dim) if isinstance(dim, Sequence) else (dim,))
        return self._unary(op, (axes, keepdim))

    def sum(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce("sum", dim, keepdim)

    def mean(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce("mean", dim, keepdim)

    def max(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce("max", dim, keepdim)

    def min(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce("min", dim, keepdim)

    def argmax(self, dim: int = -1) -> Tensor:
        return Tensor.from_node(ir.Node("argmax", (self._operand(),), (dim,)))

    def float(self) -> Tensor:
        return self.to(dtype=np.float32)

    def astype(self, dtype: Any) -> Tensor:
        return self._unary("astype", (np.dtype(dtype),))

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        return self._unary("broadcast_to", (tuple(shape),))

    def expand(self, *shape: int) -> Tensor:
        return self.broadcast_to(shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape)

    # ------------------------------------------------------------------ views (aliases)

    def detach(self) -> Tensor:
        """An alias sharing storage, cut from autograd."""
        return self._alias(("alias", ()), detached=True)

    def view(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        return self._alias(("reshape", (_resolve_shape(self.shape, shape),)))

    reshape = view

    def flatten(self, start_dim: int = 0) -> Tensor:
        s = self.shape
        return self.view(*s[:start_dim], math.prod(s[start_dim:]))

    def unsqueeze(self, dim: int) -> Tensor:
        s = list(self.shape)
        s.insert(dim if dim >= 0 else len(s) + dim + 1, 1)
        return self.view(*s)

    def permute(self, *dims: int) -> Tensor:
        if len(dims) == 1 and isinstance(dims[0], tuple | list):
            dims = tuple(dims[0])
        return self._alias(("transpose", (tuple(d % self.ndim for d in dims),)))

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        perm = list(range(self.ndim))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(*perm)

    @property
    def T(self) -> Tensor:  # noqa: N802 - the conventional name
        return self._alias(("transpose", (tuple(range(len(self.shape) - 1, -1, -1)),)))

    def t(self) -> Tensor:
        return self.T

    def __getitem__(self, index: Any) -> Tensor:
        return self._alias(("getitem", ir.encode_index(index)))

    def __setitem__(self, index: Any, value: Any) -> None:
        self[index].copy_(value)

    # ------------------------------------------------------------------ in-place ops

    def _write(self, node: ir.Node, source: Any = None) -> Tensor:
        """Replace this alias' value with ``node`` (same shape), through the view chain.

        When ``source`` requires grad, so does this tensor from now on (``acc.add_(w * 2)``)."""
        if isinstance(source, Tensor) and source.requires_grad and not self.requires_grad and not self._storage.requires_grad:
            # as in torch, the alias now has a history of its own: a detached one is detached no
            # more (its old value still is, ``add_`` reads it through ``_operand``). Through an
            # alias of a parameter this is not modelled (``properties.semantics.NOT_MODELLED``)
            self.requires_grad, self._detached = True, False
            self._storage.grad_dep = True
        aval = self.node.aval
        if node.aval != aval:  # one comparison in the common case, where nothing changes
            if node.aval[0] != aval[0]:
                node = ir.Node("broadcast_to", (node,), (aval[0],))
            if node.aval[1] != aval[1]:
                node = ir.Node("astype", (node,), (aval[1],))
        st = self._storage
        st.assign(functional.update(st.node, self._views, node))
        if not self._views:
            self._node = st.node
        elif functional.write_reads_back(self._views):
            self._node = node
        else:  # an expand view reads back what its base became, not what was written
            self._node = functional.read(st.node, self._views)
        self._version = st.version
        return self

    def _check_inplace(self) -> None:
        """Before an in-place update: refused on a parameter (or a view of one) outside
        ``no_grad``; counted, so that a value saved for ``backward`` knows it was overwritten."""
        st = self._storage
        if self.requires_grad and st.requires_grad:
            autograd.check_inplace(True, bool(self._views))
        st.writes += 1

    def add_(self, o: Any, alpha: float = 1.0) -> Tensor:
        self._check_inplace()
        other = self._lift(o) if alpha == 1.0 else ir.Node("mul", (self._lift(o), self._lift(alpha)))
        return self._write(ir.Node("add", (self._operand(), other)), o)

    def sub_(self, o: Any, alpha: float = 1.0) -> Tensor:
        self._check_inplace()
        other = self._lift(o) if alpha == 1.0 else ir.Node("mul", (self._lift(o), self._lift(alpha)))
        return self._write(ir.Node("sub", (self._operand(), other)), o)

    def mul_(self, o: Any) -> Tensor:
        self._check_inplace()
        return self._write(ir.Node("mul", (self._operand(), self._lift(o))), o)

    def div_(self, o: Any) -> Tensor:
        self._check_inplace()
        return self._write(ir.Node("div", (self._operand(), self._lift(o))), o)

    def copy_(self, src: Any) -> Tensor:
        self._check_inplace()
        return self._write(self._lift(src), src)

    def zero_(self) -> Tensor:
        self._check_inplace()
        return self._write(ir.const(0, self.dtype))

    def fill_(self, value: Any) -> Tensor:
        self._check_inplace()
        return self._write(scalar(value, self.dtype))

    # ------------------------------------------------------------------ device placement

    def to(self, device: Any = None, dtype: Any = None) -> Tensor:
        """Placement is a no-op on the one SPMD device (see ``nn.Module.to`` for parameters)."""
        return self.astype(dtype) if dtype is not None and np.dtype(dtype) != self.dtype else self

    # ------------------------------------------------------------------ autograd

    def backward(self, retain_graph: bool = False) -> None:
        """Each parameter reachable from this scalar loss gets its gradient in ``.grad`` (set, or
        added to the one already there). As in torch, the values the graph saved for it are
        released (``retain_graph`` keeps them): a second ``backward`` through them is refused."""
        if self.shape != ():
            raise ValueError(f"backward() needs a scalar loss, got shape {self.shape}")
        if not self.requires_grad:
            raise RuntimeError("backward(): the loss does not depend on any tensor with requires_grad=True")
        # functionalization's write-back is where the increments meet: without it upstream is right
        kept_expanded = faults.active(faults.EXPANDED_GRAD_ACCUMULATION) and config.options.functionalization
        expanded = autograd.expanded_seed_leaves(self.node) if kept_expanded else []
        for storage, grad in autograd.gradients(self.node, retain_graph):
            owner = storage.owner() if storage.owner is not None else None
            if owner is None:
                continue
            if any(storage is e for e in expanded):
                # upstream's AccumulateGrad steals the gradient it gets: on an XLA tensor the
                # expanded one reports contiguous strides, so it is not cloned as eager torch
                # clones a stride-0 view; it stays ``ones(()).expand(shape)``
                g = Tensor(Storage(ir.const(1, grad.dtype)), (("expand", (grad.shape,)),))
            else:
                g = Tensor.from_node(grad)
            if owner.grad is None:
                owner.grad = g
            elif kept_expanded and owner.grad.rt_views:
                # torch accumulates in place (``variable_grad += new_grad``): through the view,
                # functionalization adds every element's increment into the one shared element
                with autograd.no_grad():
                    owner.grad.add_(g)
            else:
                owner.grad = owner.grad + g


_new_tensor = object.__new__


def _resolve_shape(old: tuple[int, ...], new: Sequence[int]) -> tuple[int, ...]:
    """``new`` with its -1 filled in, checked against ``old``'s size (sizes are Python ints:
    ``math.prod`` is a tenth of ``np.prod``'s cost, and every ``view`` in a model asks)."""
    new = [int(d) for d in new]
    if new.count(-1) > 1:
        raise ValueError("only one dimension can be -1")
    size = math.prod(old)
    if -1 in new:
        known = math.prod(d for d in new if d != -1)
        new[new.index(-1)] = size // max(known, 1)
    if math.prod(new) != size:
        raise ValueError(f"cannot view shape {old} as {tuple(new)}")
    return tuple(new)
