"""The walk of a step's pending IR: its structure key, its inputs, and its program.

Every step is walked in full; what an identical walk already derived (the program, the layouts,
the executable) is found by the walk's ``key`` in the plan cache (``harness.runtime.plan_cache``).
A graph's Python scalars of one dtype are packed into one vector input, shared between equal packs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from harness.runtime import ir, layouts, seams
from harness.runtime.device_data import DeviceData
from harness.runtime.transfers import metrics, replicated


@dataclass
class Graph:
    """A pending graph ready to run: its program, its inputs and where its roots are."""

    program: ir.Program
    inputs: list[DeviceData]
    root_positions: tuple[int, ...]  # program position of each requested root, in request order


_intern = ir.intern


class Walk:
    """One post-order walk of the roots' IR: everything a step needs to find its executable and
    run it, and enough to build the program when the executable is new.

    Every step records its ops and is walked in full; what is skipped on a steady step is only the
    re-derivation of what an identical walk already derived (the program, the layouts, the
    compiled executable), found by ``key``.

    The key is one flat tuple of ints, node after node: an input is its interned description
    and its input index; any other node its interned kind (op, attributes and operand count, and
    the layout of a sharding constraint), then the positions of its operands. A kind says how
    many positions follow, so two keys are equal only for equal structures; ints cost nothing to
    hash or compare, and no tuple is built per node.
    """

    __slots__ = ("key", "nodes", "inputs", "root_positions", "scalar_inputs", "input_index")

    def __init__(self, roots: Sequence[ir.Node]) -> None:
        position: dict[ir.Node, int] = {}
        keys: list[Any] = []
        nodes: list[ir.Node] = []
        inputs: list[Any] = []
        input_index: dict[DeviceData, int] = {}
        scalar_inputs: dict[np.dtype, tuple[int, list[Any]]] = {}  # dtype -> (input index, values)
        SCALAR = ir.SCALAR
        emit = keys.append
        visit = nodes.append
        for root in roots:
            if root in position:
                continue
            stack = [root]
            push = stack.append
            pop = stack.pop
            while stack:
                node = pop()
                if node in position:
                    continue
                data = node.data
                if data is not None:
                    k = input_index.get(data)
                    if k is None:
                        k = input_index[data] = len(inputs)
                        inputs.append(data)
                    kid = data.kid
                    if kid is None:
                        kid = data.kid = _intern(data.key)
                    position[node] = len(nodes)
                    visit(node)
                    emit(kid)
                    emit(k)
                    continue
                operands = node.operands
                for o in operands:
                    if o not in position:  # walk the operands first, the first one first
                        push(node)
                        for o in reversed(operands):
                            if o not in position:
                                push(o)
                        break
                else:
                    kind = node.kind
                    if kind is None:
                        kind = node.kind = ir.kind_id(node.op, node.attrs, len(operands))
                    position[node] = len(nodes)
                    visit(node)
                    if node.op is SCALAR:
                        dtype = node.attrs[0]
                        slot = scalar_inputs.get(dtype)
                        if slot is None:
                            slot = scalar_inputs[dtype] = (len(inputs), [])
                            inputs.append(None)  # the packed values, once all are known
                        slot[1].append(node.value)
                        emit(kind)
                        continue
                    emit(kind if node.sharding is None else _intern((kind, layouts.representative(node.sharding, len(node.aval.shape)))))
                    for o in operands:
                        emit(position[o])
        for dtype, (index, values) in scalar_inputs.items():
            inputs[index] = scalar_input(dtype, values)
        self.key = tuple(keys)
        self.nodes = nodes
        self.inputs: list[DeviceData] = inputs
        self.input_index = input_index
        self.scalar_inputs = scalar_inputs
        self.root_positions = tuple([position[r] for r in roots])

    def program(self) -> ir.Program:
        """The lowering program (only needed when the step's executable is new)."""
        program: list[tuple] = []
        position: dict[ir.Node, int] = {}
        counts: dict[np.dtype, int] = {}
        IN, SCALAR = ir.IN, ir.SCALAR
        for node in self.nodes:
            position[node] = len(program)
            data = node.data
            if data is not None:
                program.append((IN, self.input_index[data], data.key))
            elif node.op is SCALAR:
                dtype = node.attrs[0]
                k = counts.get(dtype, 0)
                counts[dtype] = k + 1
                program.append((SCALAR, (self.scalar_inputs[dtype][0], k), (), None))
            else:
                program.append((node.op, node.attrs, tuple([position[o] for o in node.operands]), node.sharding))
        return tuple(program)

    def graph(self) -> Graph:
        return Graph(self.program(), self.inputs, self.root_positions)


def build_graph(roots: Sequence[ir.Node]) -> Graph:
    """Post-order walk of the roots' IR into a hashable program (inputs deduplicated)."""
    return Walk(roots).graph()


# The values of a graph's Python scalars of one dtype, packed into one vector input. Equal packs
# share one buffer (upstream's ``DataCacheArena`` shares equal scalars), so a steady loop
# transfers nothing, and a schedule that changes one value transfers one small vector a step.
SCALAR_CACHE_SIZE = 256
_scalar_cache: OrderedDict[tuple, DeviceData] = OrderedDict()
_scalar_lock = threading.Lock()


def scalar_input(dtype: np.dtype, values: list[Any]) -> DeviceData:
    host = np.array(values, dtype=dtype)
    key = (dtype, host.tobytes())
    with _scalar_lock:
        data = _scalar_cache.get(key)
        if data is not None:
            _scalar_cache.move_to_end(key)
            return data
    sharding = replicated()
    data = DeviceData(ir.Aval(host.shape, host.dtype), sharding, jax.device_put(host, sharding))
    metrics.transfers_to_device += 1
    with _scalar_lock:
        _scalar_cache[key] = data
        if len(_scalar_cache) > SCALAR_CACHE_SIZE:
            _scalar_cache.popitem(last=False)
    return data


def _scalars() -> dict[tuple, Any]:
    with _scalar_lock:
        return dict(_scalar_cache)


# what the failure-safety invariant reads of this module (``harness.runtime.seams``)
seams.register_lock("executor scalar cache lock", _scalar_lock)
seams.register_state("scalars", _scalars)
