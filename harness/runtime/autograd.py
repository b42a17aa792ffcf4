"""``loss.backward()``: one ``vjp`` node over the recorded graph.

There is no tape. At ``backward`` the loss' IR is walked for the nodes that are values of
requires-grad leaves (parameters); a ``vjp`` node takes the loss and those leaves as operands, and
each leaf's ``.grad`` becomes (or is accumulated with) one element of it. The derivative itself is
``jax.vjp`` at lowering time (see ``ir``), so it is JAX's, and it compiles together with the
forward pass and the optimizer update in the step's single executable.
"""

from __future__ import annotations

from harness.runtime import ir
from harness.runtime.tensor import Storage, Tensor


def _grad_leaves(root: ir.Node) -> list[ir.Node]:
    seen: set[int] = set()
    leaves: list[ir.Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "stop_gradient":
            continue
        if node.leaf is not None and node.leaf.requires_grad:
            leaves.append(node)
            continue
        stack.extend(node.operands)
    return leaves


def backward(loss: Tensor) -> None:
    if loss.shape != ():
        raise ValueError(f"backward() needs a scalar loss, got shape {loss.shape}")
    if not loss.requires_grad:
        raise RuntimeError("backward(): the loss does not depend on any tensor with requires_grad=True")
    leaves = _grad_leaves(loss.node)
    if not leaves:
        return
    grads = ir.Node("vjp", (loss.node, *leaves), (len(leaves),))
    for i, leaf in enumerate(leaves):
        storage: Storage = leaf.leaf
        owner = storage.owner() if storage.owner is not None else None
        if owner is None:
            continue
        g = Tensor._from_node(ir.Node("tuple_get", (grads,), (i,)))
        owner.grad = g if owner.grad is None else owner.grad + g
