"""The plan cache: a step's structure, compiled once.

A plan is what a step derives from its structure (the executable ``jax.jit`` compiled with the
requested output layouts and donation, the distinct roots, the layouts inputs and outputs are
moved to): an identical step finds it by its walk's key and derives nothing again. Lowering and
compiling happen on the caller's thread, so that a graph that cannot compile fails the
``mark_step`` that asked for it; each is a failure seam (``lower``, ``compile``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax

from harness.runtime import ir, recompiles, seams, topology
from harness.runtime.device_data import DeviceData, input_key
from harness.runtime.graphs import Graph, Walk
from harness.runtime.transfers import canonical_sharding, metrics, replicated_over


@dataclass
class Executable:
    compiled: Any
    output_shardings: tuple
    arg_order: tuple[int, ...] = ()  # graph input index of each compiled argument
    donated: tuple[int, ...] = ()  # compiled argument positions donated to the execution
    name: str = ""  # what an error about one of its executions calls the program


def describe_program(program: ir.Program, number: int) -> str:
    """A short name for a program in an error: its number, its ops and its inputs."""
    ops: dict[str, int] = {}
    inputs: list[str] = []
    for entry in program:
        if entry[0] == ir.IN:
            inputs.append(ir.aval_text(entry[2][1]))
        elif entry[0] != ir.SCALAR:
            name = str(entry[0])
            ops[name] = ops.get(name, 0) + 1
    common = sorted(ops.items(), key=lambda item: -item[1])[:6]
    op_text = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in common)
    more = ", ..." if len(ops) > len(common) else ""
    shown = ", ".join(inputs[:6]) + (", ..." if len(inputs) > 6 else "")
    return f"program {number} ({sum(ops.values())} ops: {op_text}{more}; inputs {shown or 'none'})"


@dataclass
class Plan:
    """What a step derives from its structure, kept with its executable so that an identical step
    derives nothing again: distinct roots, layouts, moves, the output avals and shardings."""

    exe: Executable
    where: tuple[int, ...]  # for each requested root, its slot among the distinct roots
    out_avals: tuple
    out_shardings: tuple  # the sharding each output's device data carries
    out_kids: tuple  # each output's input description interned: what the next step's walk reads
    out_aids: tuple  # each output's aval id: what its data node is keyed by
    moved_in: tuple  # per compiled argument: the layout to move it to first, or None
    moved_out: tuple  # per output: the layout to move it to after, or None


_cache: dict[tuple, Any] = {}
_cache_lock = threading.Lock()


def _compile(
    graph: Graph,
    roots: tuple[int, ...],
    out_shardings: tuple,
    donate: tuple[int, ...],
    in_shardings: tuple,
    device_order: tuple,
    precision: str | None = None,
) -> Executable:
    seams.reach("lower")
    fn = ir.lower(_constraints_in_order(graph.program, device_order), roots, precision)
    # Replicated data lives on a 1-d mesh of its own; when it meets data split over a user mesh of
    # another shape, JAX can name the layout of an output it chose itself on the wrong mesh and
    # fail (IndivisibleError). Two causes, two guards: input layouts go to ``jit`` itself rather
    # than onto the abstract arguments (where they would land on the traced types), and JAX names
    # outputs on the mesh of the first argument, so split inputs go first.
    order = tuple(sorted(range(len(graph.inputs)), key=lambda i: _is_replicated(in_shardings[i])))
    position = {graph_index: arg for arg, graph_index in enumerate(order)}

    def reordered(*args: Any) -> tuple:
        return fn(*(args[position[i]] for i in range(len(order))))

    jitted = jax.jit(
        reordered,
        in_shardings=tuple(in_shardings[i] for i in order),
        out_shardings=out_shardings,
        donate_argnums=tuple(position[i] for i in donate),
    )
    structs = [jax.ShapeDtypeStruct(graph.inputs[i].aval.shape, graph.inputs[i].aval.dtype) for i in order]
    seams.reach("compile")
    compiled = jitted.lower(*structs).compile()
    metrics.compiles += 1
    donated = tuple(sorted(position[i] for i in donate))
    return Executable(compiled, tuple(compiled.output_shardings), order, donated,
                      describe_program(graph.program, metrics.compiles))


def derive(walk: Walk, out_shardings: Sequence[Any], donate_idx: tuple[int, ...], precision: str | None = None) -> Plan:
    """Derive a step's plan from its walk, compiling its executable (a cache miss)."""
    graph = walk.graph()
    # distinct roots only: the same value requested twice is computed and returned once
    unique: list[int] = []
    where: list[int] = []
    for pos in graph.root_positions:
        if pos not in unique:
            unique.append(pos)
        where.append(unique.index(pos))
    shardings: list[Any] = [None] * len(unique)
    for slot, sharding in zip(where, out_shardings, strict=True):
        if sharding is not None:
            shardings[slot] = sharding
    order = _program_order(graph.inputs, shardings, graph.program)
    in_shardings = tuple(_in_order(d.sharding, order) for d in graph.inputs)
    compiled_out = tuple(s if s is None or _order(s) == order else None for s in shardings)
    exe = _compile(graph, tuple(unique), compiled_out, donate_idx, in_shardings, order, precision)
    # noted once compiled: a program whose lowering or compile failed was never compiled, and
    # noted, the retry that compiles it would be explained as "the same program as a recent one"
    recompiles.note(graph.program, graph.root_positions, out_shardings, donate_idx)
    avals = tuple(walk.nodes[pos].aval for pos in unique)
    # a requested layout is kept as the very object asked for; XLA's choice is canonicalized
    result_shardings = tuple(
        shardings[i] if shardings[i] is not None else canonical_sharding(exe.output_shardings[i], len(avals[i].shape))
        for i in range(len(unique))
    )
    inputs = graph.inputs
    moved_in = tuple(in_shardings[i] if _order(in_shardings[i]) != _order(inputs[i].sharding) else None for i in exe.arg_order)
    moved_out = tuple(
        s if _order(s) != _order(exe.output_shardings[i]) else None for i, s in enumerate(result_shardings)
    )
    kids = tuple(ir.intern(input_key(aval, sharding)) for aval, sharding in zip(avals, result_shardings, strict=True))
    aids = tuple(ir.aval_id(aval) for aval in avals)
    return Plan(exe, tuple(where), avals, result_shardings, kids, aids, moved_in, moved_out)


def _is_replicated(sharding: Any) -> bool:
    return bool(getattr(sharding, "is_fully_replicated", True))


def _order(sharding: Any) -> tuple:
    return tuple(sharding._device_assignment)


def _node_shardings(program: ir.Program) -> list[Any]:
    """The shardings annotated on the program's nodes (``custom_sharding`` constraints)."""
    return [entry[3] for entry in program if entry[0] != ir.IN and entry[3] is not None]


def _program_order(inputs: Sequence[DeviceData], requested: Sequence[Any], program: ir.Program = ()) -> tuple:
    """The device order one executable runs on.

    XLA runs an SPMD program on one device assignment, and ``jax.jit`` refuses layouts listing
    the same devices in another order (in its arguments, its results and the sharding constraints
    inside it). A mesh may order its devices any way (PyTorch/XLA's ``Mesh(device_ids, ...)``
    takes any permutation), so the first split layout, requested output first, then constraints,
    then inputs, decides; values laid out in another order are brought to it (see ``execute``),
    and replicated constraints are restated over it (``_constraints_in_order``).
    """
    for sharding in (*requested, *_node_shardings(program), *(d.sharding for d in inputs)):
        if sharding is not None and not _is_replicated(sharding):
            return _order(sharding)
    return topology.discover().devices


def _constraints_in_order(program: ir.Program, order: tuple) -> ir.Program:
    """``program`` with every replicated constraint over another device order restated over
    ``order`` (replication does not depend on the order; ``jax.jit`` does)."""
    if not any(not _is_replicated(s) or _order(s) != order for s in _node_shardings(program)):
        return program
    out = []
    for entry in program:
        if entry[0] != ir.IN and entry[3] is not None and _is_replicated(entry[3]) and _order(entry[3]) != order:
            entry = (*entry[:3], replicated_over(order))
        out.append(entry)
    return tuple(out)


def _in_order(sharding: Any, order: tuple) -> Any:
    """``sharding`` if it already lists ``order``, else the replicated layout over ``order``
    (the input is moved there before the execution: the value is the same)."""
    if _order(sharding) == order:
        return sharding
    return replicated_over(order)


def compile_count() -> int:
    return metrics.compiles


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
    recompiles.forget()


def lookup(key: tuple) -> Plan | None:
    """The plan of a step whose structure key is ``key``, if one was derived."""
    with _cache_lock:
        return _cache.get(key)


def store(key: tuple, plan: Plan) -> None:
    with _cache_lock:
        _cache[key] = plan


def cached_plans() -> list[Any]:
    """The compiled plans in the plan cache, oldest first (a copy)."""
    with _cache_lock:
        return list(_cache.values())


# what the failure-safety invariant reads of this module (``harness.runtime.seams``)
seams.register_lock("executor plan cache lock", _cache_lock)
seams.register_state("compiles", lambda: metrics.compiles)
seams.register_state("plans", lambda: len(_cache))
