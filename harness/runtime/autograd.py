"""``loss.backward()``: one ``vjp`` node over the recorded graph.

There is no tape. At ``backward`` the loss' IR is walked for the nodes that are values of
requires-grad leaves (parameters); a ``vjp`` node takes the loss and those leaves as operands, and
each leaf's ``.grad`` becomes (or is accumulated with) one element of it. The derivative itself is
``jax.vjp`` at lowering time (see ``ir``), so it is JAX's, and it compiles together with the
forward pass and the optimizer update in the step's single executable. For the same reason the
gradient's products ask XLA for the runtime's ``matmul_precision`` as the forward's do: ``jax.vjp``
runs inside the lowering's trace (``ir.lower``), and the products it derives carry the forward's
precision, so a backward pass on a GPU is not TF32 while its forward is exact float32.

A value that was already executed (read with ``.item()``, or synced by a ``mark_step`` before
``backward``) is device data, but it keeps the IR that computed it (``Node.origin``); the walk
unfolds such values back into that IR, so logging the loss first does not cut the gradient.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from harness.runtime import ir

#: whether in-place updates are recorded for autograd (``no_grad`` turns it off, as torch's does)
_ENABLED = [True]


@contextmanager
def no_grad() -> Iterator[None]:
    """Updates inside are not autograd's concern: an optimizer's in-place step on its parameters,
    an initialization. Outside, an in-place update of a parameter (a leaf that requires grad) or
    of a view of one is refused, as torch refuses it: PyTorch/XLA's autograd is torch's."""
    _ENABLED.append(False)
    try:
        yield
    finally:
        _ENABLED.pop()


def check_inplace(leaf: bool, view: bool) -> None:
    """Refuse an in-place update of a requires-grad leaf (``leaf``) outside ``no_grad``."""
    if leaf and _ENABLED[-1]:
        what = "a view of a leaf Variable" if view else "a leaf Variable"
        raise RuntimeError(f"{what} that requires grad is being used in an in-place operation.")

# This module sees nodes and the storages their ``leaf`` references point to, never tensors:
# ``tensor`` builds on it (``Tensor.backward``), not the other way round.


# ------------------------------------------------------------------ saved values
# torch's autograd keeps, per operation, the values its derivative needs (``derivatives.yaml``):
# a product keeps each operand the other's gradient needs, ``exp`` and ``tanh`` keep their result.
# Two rules follow, and PyTorch/XLA's autograd is torch's: an in-place update of a saved value
# before ``backward`` is refused (its version counter moved), and a second ``backward`` through
# an operation whose saved values the first released is refused. This runtime differentiates
# the recorded graph whole, so it keeps only what those rules need: which storages each
# operation saved, at which count of in-place updates (``Storage.writes``), and whether a
# ``backward`` released them.

#: operation -> what it saves: "operands" (each operand the other operand's gradient needs),
#: "quotient" (the divisor, and the dividend too where the divisor needs grad), "self" (its
#: input), "result" (its output); a Python-scalar operand is saved too (the second
#: ``backward`` rule) but is never overwritten
SAVES: dict[str, str] = {
    "mul": "operands", "div": "quotient", "matmul": "operands", "maximum": "operands", "pow": "self", "log": "self",
    "abs": "self", "gelu": "self", "exp": "result", "tanh": "result", "sigmoid": "result",
    "relu": "result", "sqrt": "result", "rsqrt": "result", "softmax": "result", "log_softmax": "result",
    "where": "condition",  # recorded by ``tensor.where`` itself: the condition is its first operand
}


class Saved:
    """What one recorded operation saved: (storage, its in-place count then), and whether a
    ``backward`` released it."""

    __slots__ = ("versions", "released")

    def __init__(self, versions: tuple[tuple[Any, int], ...]) -> None:
        self.versions = versions
        self.released = False


#: id(node) -> (a weak reference to the node, its record). Keyed by id, not a WeakKeyDictionary:
#: the step's donation walk and every backward ask about each node they pass, and a weak key
#: costs a new weak reference per question; the entry goes when its node does
_SAVED: dict[int, tuple[weakref.ReferenceType[ir.Node], Saved]] = {}


def _record(node: ir.Node) -> Saved | None:
    entry = _SAVED.get(id(node))
    return entry[1] if entry is not None and entry[0]() is node else None


def _keep(node: ir.Node, record: Saved) -> None:
    key = id(node)
    _SAVED[key] = (weakref.ref(node, lambda _ref, key=key: _SAVED.pop(key, None)), record)


def save(node: ir.Node, storages: Iterable[Any]) -> None:
    """``node`` (an operation that needs grad) saved these storages' current values."""
    _keep(node, Saved(tuple((weakref.ref(s), s.writes) for s in storages)))


def saved_operands(op: str, a: Any, b: Any) -> tuple[Any, ...]:
    """The storages a binary ``op`` of tensor ``a`` and ``b`` (a tensor or a scalar) saves."""
    rule = SAVES[op]
    if rule == "self":
        return (a.rt_storage,) if a.requires_grad else ()
    b_grad = bool(getattr(b, "requires_grad", False))
    if rule == "quotient":
        return ((b.rt_storage,) if hasattr(b, "rt_storage") else ()) + ((a.rt_storage,) if b_grad else ())
    out = []
    if a.requires_grad and hasattr(b, "rt_storage"):
        out.append(b.rt_storage)
    if hasattr(b, "requires_grad") and b.requires_grad:
        out.append(a.rt_storage)
    return tuple(out)


def released(node: ir.Node) -> bool:
    """Whether ``node`` saved values a ``backward`` has released: its graph is done with."""
    if not _SAVED:
        return False
    record = _record(node)
    return record is not None and record.released


def _check_saved(records: list[Saved]) -> None:
    for record in records:
        if record.released:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved tensors "
                "after they have already been freed): a backward() released the values it saved; "
                "pass retain_graph=True to the first backward() to keep them"
            )
        for ref, writes in record.versions:
            storage = ref()
            if storage is not None and storage.writes != writes:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: it was saved at version {writes} and is at version {storage.writes}"
                )


def _leaf_storage(node: ir.Node) -> Any:
    storage = node.leaf() if node.leaf is not None else None
    return storage if storage is not None and storage.requires_grad else None


def _unfold(root: ir.Node) -> ir.Node:
    """``root`` with every executed value that has an ``origin`` replaced by that IR (copied
    only where something below it changed)."""
    if not root.folded:  # nothing executed below: the common case costs nothing
        return root
    done: dict[int, ir.Node] = {}
    stack: list[tuple[ir.Node, bool]] = [(root, False)]
    keep: list[ir.Node] = []  # ids stay unique only while the nodes live
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if not node.folded or node.op == "stop_gradient" or _leaf_storage(node):
            done[id(node)] = node
            continue
        inputs = (node.origin,) if node.data is not None else node.operands
        if not expanded:
            stack.append((node, True))
            stack.extend((o, False) for o in inputs if id(o) not in done)
            continue
        keep.append(node)
        if node.data is not None:
            done[id(node)] = done[id(node.origin)]
            continue
        operands = tuple(done[id(o)] for o in node.operands)
        if all(a is b for a, b in zip(operands, node.operands, strict=True)):
            done[id(node)] = node
        else:
            copy = ir.Node(node.op, operands, node.attrs, aval=node.aval, sharding=node.sharding)
            copy.leaf = node.leaf
            record = _record(node)
            if record is not None:  # the copy stands for the same operation: the same record
                _keep(copy, record)
            done[id(node)] = copy
    return done[id(root)]


def _grad_leaves(root: ir.Node, records: list[Saved] | None = None) -> list[ir.Node]:
    """The values of requires-grad leaves reachable from ``root`` (not through a stop_gradient),
    each once, and into ``records`` what the operations on the way saved: a walk of the whole
    forward graph at every ``backward``, so its loop is kept to the checks themselves (nodes hash
    by identity; only a node with a leaf pays a call)."""
    seen: set[ir.Node] = set()
    leaves: list[ir.Node] = []
    stack = [root]
    pop, push, mark = stack.pop, stack.extend, seen.add
    saved = _record if records is not None and _SAVED else None
    while stack:
        node = pop()
        if node in seen:
            continue
        mark(node)
        if node.op == "stop_gradient":
            continue
        if node.leaf is not None and _leaf_storage(node) is not None:  # few nodes have a leaf
            leaves.append(node)
            continue
        if saved is not None:
            record = saved(node)
            if record is not None:
                records.append(record)  # type: ignore[union-attr]
        push(node.operands)
    return leaves


def gradients(loss: ir.Node, retain_graph: bool = False) -> list[tuple[Any, ir.Node]]:
    """For each requires-grad leaf storage reachable from the scalar ``loss``: the node of its
    gradient, one element of a single ``vjp`` node. Refused, as torch refuses it, where a value
    saved on the way was overwritten in place or released by an earlier ``backward``; releases
    them unless ``retain_graph``."""
    root = _unfold(loss)
    records: list[Saved] = []
    leaves = _grad_leaves(root, records)
    _check_saved(records)
    if not retain_graph:
        for record in records:
            record.released = True
    if not leaves:
        raise RuntimeError(
            "backward(): no parameter is reachable from the loss; its graph was cut "
            "(e.g. by detach()) or the tensors it came from no longer exist"
        )
    grads = ir.Node("vjp", (root, *leaves), (len(leaves),))
    return [(_leaf_storage(leaf), ir.Node("tuple_get", (grads,), (i,))) for i, leaf in enumerate(leaves)]


#: operations whose backward hands the gradient arriving at them to these operands unchanged when
#: the operand has the result's shape: an expanded gradient stays expanded through them (``sum``'s
#: own backward expands the gradient it gets, so a sum of a sum is an expand of an expand)
_PASSES_GRADIENT_ON = {"sum": (0,), "add": (0, 1), "sub": (0,), "reshape": (0,)}


def expanded_seed_leaves(loss: ir.Node) -> list[Any]:
    """The requires-grad leaf storages whose whole gradient, in PyTorch's autograd, is the seed of
    ``loss = x.sum()`` expanded: ``SumBackward`` returns ``grad.expand(sizes)``, a view of a 0-d
    tensor, and operations that pass a gradient on unchanged (an addition of equal shapes, a
    reshape, another sum) hand that view down to ``AccumulateGrad``. A leaf that also gets a
    gradient another way receives a materialized sum instead. The ``expanded-grad-accumulation``
    switch keeps what this returns as an expand view (``Tensor.backward``)."""
    root = _unfold(loss)
    if root.op != "sum":
        return []
    reached: list[ir.Node] = []
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.leaf is not None and _leaf_storage(node) is not None:
            reached.append(node)
            continue
        for i in _PASSES_GRADIENT_ON.get(node.op, ()):
            operand = node.operands[i]
            if node.op in ("sum", "reshape") or operand.shape == node.shape:
                stack.append(operand)
    edges: dict[ir.Node, int] = {}
    stack, seen = [root], set()
    while stack:
        node = stack.pop()
        if node in seen or node.op == "stop_gradient":
            continue
        seen.add(node)
        for operand in node.operands:
            edges[operand] = edges.get(operand, 0) + 1
            stack.append(operand)
    return [_leaf_storage(leaf) for leaf in reached if edges.get(leaf) == 1]
