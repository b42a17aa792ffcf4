"""``loss.backward()``: one ``vjp`` node over the recorded graph.

There is no tape. At ``backward`` the loss' IR is walked for the nodes that are values of
requires-grad leaves (parameters); a ``vjp`` node takes the loss and those leaves as operands, and
each leaf's ``.grad`` becomes (or is accumulated with) one element of it. The derivative itself is
``jax.vjp`` at lowering time (see ``ir``), so it is JAX's, and it compiles together with the
forward pass and the optimizer update in the step's single executable.

A value that was already executed (read with ``.item()``, or synced by a ``mark_step`` before
``backward``) is device data, but it keeps the IR that computed it (``Node.origin``); the walk
unfolds such values back into that IR, so logging the loss first does not cut the gradient.
"""

from __future__ import annotations

from harness.runtime import ir
from harness.runtime.tensor import Storage, Tensor


def _leaf_storage(node: ir.Node) -> Storage | None:
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
        if _leaf_storage(node) is not None:
            leaves.append(node)
            continue
        stack.extend(node.operands)
    return leaves


def backward(loss: Tensor) -> None:
    if loss.shape != ():
        raise ValueError(f"backward() needs a scalar loss, got shape {loss.shape}")
    if not loss.requires_grad:
        raise RuntimeError("backward(): the loss does not depend on any tensor with requires_grad=True")
    root = _unfold(loss.node)
    leaves = _grad_leaves(root)
    if not leaves:
        raise RuntimeError(
            "backward(): no parameter is reachable from the loss; its graph was cut "
            "(e.g. by detach()) or the tensors it came from no longer exist"
        )
    grads = ir.Node("vjp", (root, *leaves), (len(leaves),))
    for i, leaf in enumerate(leaves):
        storage = _leaf_storage(leaf)
        owner = storage.owner() if storage is not None and storage.owner is not None else None
        if owner is None:
            continue
        g = Tensor._from_node(ir.Node("tuple_get", (grads,), (i,)))
        owner.grad = g if owner.grad is None else owner.grad + g
