"""The base value a tensor and all its aliases share: its pending IR or its device data.

In-place ops on any alias rewrite it (``assign``), a step boundary or a read executes it
(``materialize``), and every storage is tracked weakly (``step.track``) so that ``mark_step``
finds all pending values, as PyTorch/XLA's device context does.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from harness.runtime import device_data, ir, step

if TYPE_CHECKING:  # a storage's owner is a tensor, which builds on this module
    from harness.runtime.tensor import Tensor


class Storage:
    """The base value shared by a tensor and all its aliases."""

    __slots__ = (
        "node", "version", "writes", "synced_from", "sharding", "base_data", "requires_grad", "grad_dep", "owner",
        "__weakref__",
    )

    def __init__(self, node: ir.Node) -> None:
        self.node = node
        self.version = 0
        self.writes = 0  # in-place updates through any alias: torch's version counter (autograd checks it)
        self.synced_from = -1  # the version whose value the last materialization computed
        self.sharding: Any = None  # requested output sharding (mark_sharding)
        self.base_data: device_data.DeviceData | None = None  # last materialized value, a donation candidate
        self.requires_grad = False  # a leaf whose gradient is wanted (a parameter)
        self.grad_dep = False  # a value computed from such leaves: keeps its IR through a sync
        self.owner: weakref.ReferenceType[Tensor] | None = None
        step.track(self)  # every storage is seen by ``mark_step`` while it lives

    @property
    def pending(self) -> bool:
        return self.node.data is None

    def assign(self, node: ir.Node) -> None:
        """A new (pending) value, after an in-place op on any alias.

        A value that is another storage's device data is copied, never adopted: adopting it would
        drop this storage's own layout and, for a parameter, its identity as a gradient leaf.
        """
        step.touch()
        if self.node.data is not None:
            self.base_data = self.node.data
        if node.data is not None or self.requires_grad:
            node = ir.Node("identity", (node,))
            if self.requires_grad:
                node.leaf = weakref.ref(self)
        self.node = node
        self.version += 1

    def materialize(self, data: device_data.DeviceData) -> None:
        """The pending value was executed: the storage now holds device data.

        A value computed from parameters keeps the IR that computed it (``origin``), so a read or a
        step between the forward pass and ``backward()`` does not cut the gradient's path.
        """
        self.node = self.computed(self.node, data)
        self.base_data = None
        self.synced_from = self.version
        self.version += 1

    def computed(self, old: ir.Node, data: device_data.DeviceData) -> ir.Node:
        """The data node that stands for ``old``, this storage's value that ``data`` computed."""
        node = ir.data_node(data)
        if self.requires_grad:
            node.leaf = weakref.ref(self)
        elif self.grad_dep:
            node.origin = old.origin if old.data is not None else old
            node.folded = node.origin is not None
        return node

    def adopt(self, done: dict[int, ir.Node], data: device_data.DeviceData | None) -> None:
        """A step computed values this storage's pending value reads (``done``: each computed
        node by id, its data node), after the value was built: another thread wrote or derived
        it while the step ran. It reads their results from now on; recomputing them instead
        would read buffers the step may have donated. ``data``: this storage's own value as the
        step computed it, which the new value replaced."""
        node = ir.substitute(self.node, done)
        if node is not self.node:
            self.node = node
            self.version += 1
        if data is not None:
            self.base_data = data
