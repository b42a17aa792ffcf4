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

from typing import Any

from harness.runtime import ir

# This module sees nodes and the storages their ``leaf`` references point to, never tensors:
# ``tensor`` builds on it (``Tensor.backward``), not the other way round.


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
            done[id(node)] = copy
    return done[id(root)]


def _grad_leaves(root: ir.Node) -> list[ir.Node]:
    """The values of requires-grad leaves reachable from ``root`` (not through a stop_gradient),
    each once: a walk of the whole forward graph at every ``backward``, so its loop is kept to
    the checks themselves (nodes hash by identity; only a node with a leaf pays a call)."""
    seen: set[ir.Node] = set()
    leaves: list[ir.Node] = []
    stack = [root]
    pop, push, mark = stack.pop, stack.extend, seen.add
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
        push(node.operands)
    return leaves


def gradients(loss: ir.Node) -> list[tuple[Any, ir.Node]]:
    """For each requires-grad leaf storage reachable from the scalar ``loss``: the node of its
    gradient, one element of a single ``vjp`` node."""
    root = _unfold(loss)
    leaves = _grad_leaves(root)
    if not leaves:
        raise RuntimeError(
            "backward(): no parameter is reachable from the loss; its graph was cut "
            "(e.g. by detach()) or the tensors it came from no longer exist"
        )
    grads = ir.Node("vjp", (root, *leaves), (len(leaves),))
    return [(_leaf_storage(leaf), ir.Node("tuple_get", (grads,), (i,))) for i, leaf in enumerate(leaves)]
