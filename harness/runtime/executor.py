"""Device data, the graph cache, compilation and asynchronous execution.

Like PyTorch/XLA's ``XLAGraphExecutor``: a sync walks the pending IR of the tensors being
synced, looks its program up in a cache (compiling with ``jax.jit`` on a miss, with the requested
output shardings and donation), then hands the execution to one executor thread and returns at
once. The outputs are *placeholder* device data, filled when the execution completes; reading one
waits for it. ``wait_device_ops()`` waits for everything submitted so far.

That wait has two steps, as upstream's has since pytorch/xla#5811: the executor thread's barrier
(everything queued so far was dispatched), then the operation tracker (every execution started has
completed on the device). A barrier alone is not enough once completion happens elsewhere: the
``wait-gap`` switch re-creates the v2.1 runtime, where the execution was registered by a closure
run later on another thread, so a wait could find nothing registered and return early.

Lowering and compilation happen on the caller's thread so that a graph that cannot compile fails
the ``mark_step`` that asked for it; only execution is asynchronous.

The executor thread and the placeholders synchronize through ``harness.sched``'s primitives, and
the places where the caller and the executor thread touch the same device data are schedule
points. Outside a controlled run they are ``threading``'s primitives and the points do nothing;
inside one (``harness.sched.check_pct`` and friends) the scheduler decides who goes first at each
of them, which is how the race of upstream issue #9128 is found and replayed without a slow
device. The executor thread is stopped around every run (``on_activate``/``on_deactivate``) so
that the first submission inside a run starts it again as a participant.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from harness import sched
from harness.runtime import config, faults, ir, recompiles, seams, topology
from harness.runtime.errors import (
    DonatedBufferError,
    ExecutionTimeoutError,
    InvalidBufferError,
    PlaceholderAccessError,
)

# Donation is requested for every updated parameter. JAX promises that a donated array is deleted
# by the donating call, and reports a donation XLA declined (it could not reuse the buffer) with
# this warning; some releases then leave that array alive. The runtime's own promise is the
# stronger one PyTorch/XLA makes: a donated buffer is gone. It deletes a declined one itself once
# the execution has completed (``_Execution._complete``), so the warning is only noise here.
warnings.filterwarnings("ignore", message="Some donated buffers were not usable")


def crash_mode() -> str:
    """``signal`` turns a placeholder read into a real SIGSEGV, as upstream crashed."""
    return os.environ.get("HARNESS_CRASH_MODE", "raise")


def input_key(aval: ir.Aval, sharding: Any) -> tuple:
    """How a step's structure key describes a device-data input: its aval and its layout."""
    return (ir.IN, aval, sharding)


class DeviceData:
    """A (possibly sharded) device buffer, or a placeholder for one still being computed."""

    __slots__ = ("aval", "sharding", "kid", "aid", "shares", "_array", "_ready", "_error", "_ticket", "__weakref__")

    def __init__(
        self,
        aval: ir.Aval,
        sharding: Any,
        array: jax.Array | None = None,
        kid: int | None = None,
        aid: int | None = None,
        ticket: Ticket | None = None,
    ) -> None:
        self.aval = aval
        self.sharding = sharding
        # ``key`` interned, and the aval's id: known in advance for a step's outputs (their plan
        # interned them once), else found when a graph walk or a data node first needs them
        self.kid = kid
        self.aid = aid
        self._array = array
        self._error: BaseException | None = None
        self._ready: sched.Latch | None = None if array is not None else sched.Latch(name="placeholder")
        self._ticket = ticket  # the execution computing it: what a bounded wait names
        # its per-device buffers may also be another array's (``local_shards``,
        # ``from_local_shards``): one can be deleted while this array's own flag says it is not
        self.shares = False

    @property
    def key(self) -> tuple:
        """This input's compile-cache description."""
        return input_key(self.aval, self.sharding)

    @property
    def is_placeholder(self) -> bool:
        return self._ready is not None and not self._ready.is_set()

    def fill(self, array: jax.Array) -> None:
        sched.point("DeviceData.fill")
        self._array = array
        assert self._ready is not None
        self._ready.set()

    def fail(self, error: BaseException) -> None:
        sched.point("DeviceData.fail")
        self._settle(error)

    def _settle(self, error: BaseException) -> None:
        """Fail without a schedule point: for an execution whose controlled run is being torn
        down, where a point would only raise again before the readers are released."""
        self._error = error
        assert self._ready is not None
        self._ready.set()

    def array(self) -> jax.Array:
        """The buffer, waiting for its execution if it is still a placeholder."""
        ready = self._ready
        if ready is not None and not ready.is_set():  # a filled one is read without a point
            await_latch(ready, "reading a value", self._ticket)
        if self._error is not None:
            raise self._error
        assert self._array is not None
        if self._array.is_deleted():
            raise DonatedBufferError(
                f"buffer with shape {ir.aval_text(self.aval)} is deleted: it was donated to a later "
                "execution while a tensor still referenced it"
            )
        return self._array

    def handle(self) -> int:
        """Opaque handle of shard 0, read *without* waiting, as ``PjRtShardedData::GetHandle``.

        On a placeholder there is no shard yet: upstream dereferenced it anyway and crashed. The
        schedule point sits before the reads, where the executor thread may or may not have filled
        the placeholder yet: the two orders of issue #9128.
        """
        sched.point("DeviceData.handle")
        if self._error is not None:  # the execution finished, and failed: say so, not "pending"
            raise self._error
        array = self._array
        if array is None:
            if crash_mode() == "signal":
                ctypes.string_at(0)  # shards[0] of an unfilled placeholder: a null read, SIGSEGV
            raise PlaceholderAccessError(
                f"GetHandle() on placeholder device data (shape {ir.aval_text(self.aval)}): "
                "its execution has not completed"
            )
        if array.is_deleted():
            raise DonatedBufferError(f"buffer with shape {ir.aval_text(self.aval)} is deleted")
        # A filled buffer may still be in flight on the device: on an accelerator a transfer
        # (``xr.tensor``) and an execution return before the device is done, and the buffer's
        # pointer is only there once it is. Waiting for it here, a wait that always ends the same
        # way, keeps what this point observes the schedule's decision, not the device's speed.
        array.block_until_ready()
        return int(array.addressable_shards[0].data.unsafe_buffer_pointer())


# --------------------------------------------------------------------------- host transfers


@dataclass
class Metrics:
    """Counters a test or benchmark can read (``xr.metrics()``)."""

    compiles: int = 0
    executions: int = 0
    completed: int = 0  # executions whose device work finished (``executions`` counts launches)
    cache_hits: int = 0
    transfers_to_device: int = 0


metrics = Metrics()


def replicated() -> NamedSharding:
    """Every device holds the whole value: where unsharded tensors live (SPMD's single device)."""
    topo = topology.discover()
    return _replicated(topo.devices)


_replicated_cache: dict[tuple, NamedSharding] = {}


def _replicated(devices: tuple) -> NamedSharding:
    sharding = _replicated_cache.get(devices)
    if sharding is None:
        mesh = jax.sharding.Mesh(np.array(devices, dtype=object), ("devices",))
        sharding = _replicated_cache[devices] = NamedSharding(mesh, PartitionSpec())
    return sharding


_canonical_cache: dict[tuple, Any] = {}


def canonical_sharding(sharding: Any, ndim: int) -> Any:
    """One object per layout, so equal layouts give equal compile-cache keys.

    XLA reports output shardings in its own spelling (``P('x',)`` for ``P('x', None)``, or the
    user's mesh for a replicated value); ``NamedSharding`` compares specs literally, so without this
    the second step of every loop would look new and compile again.
    """
    key = (sharding, ndim)
    hit = _canonical_cache.get(key)
    if hit is not None:
        return hit
    if sharding.is_fully_replicated:
        canon = replicated()
    elif isinstance(sharding, NamedSharding) and len(sharding.spec) < ndim:
        canon = NamedSharding(sharding.mesh, PartitionSpec(*sharding.spec, *([None] * (ndim - len(sharding.spec)))))
    else:
        canon = sharding
    _canonical_cache[key] = canon
    return canon


def to_device(value: np.ndarray, sharding: Any = None) -> DeviceData:
    """Host array -> device data with the given sharding (replicated by default)."""
    sharding = sharding if sharding is not None else replicated()
    host = np.asarray(value)
    array = jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    metrics.transfers_to_device += 1
    return DeviceData(ir.Aval(host.shape, host.dtype), sharding, array)


def reshard(data: DeviceData, sharding: Any) -> DeviceData:
    """The same value laid out with another sharding.

    ``jax.device_put`` may hand the new array the old one's per-device buffers (JAX 0.10 does,
    between replicated layouts over the same devices). The two are not marked as sharing them
    (``DeviceData.shares``): looking at per-device buffers makes JAX keep one array object per
    device for every parameter, which ``jax.live_arrays()`` then counts as memory held twice; the
    old value is the storage's previous one, which no later step reads or donates."""
    array = jax.device_put(data.array(), sharding)
    return DeviceData(data.aval, sharding, array)


def to_host(data: DeviceData) -> np.ndarray:
    """The whole value on this host. In a multi-process run a replicated value is read from this
    process' own copy, as PyTorch/XLA reads one replica: gathering it (what a value split across
    processes needs) ran a program over every process for nothing, 0.5 ms a read in a two-process
    cell and 22 ms the first time for each shape (its compile), against under 0.1 ms now."""
    array = data.array()
    ticket = data._ticket
    if ticket is not None and not ticket.done.is_set() and not sched.is_controlled():
        # the device work may still be running: wait for it here, bounded, rather than in
        # JAX's own unbounded block inside ``np.asarray``
        await_latch(ticket.done, "reading a value", ticket)
        if data._error is not None:
            raise data._error
    if array.is_fully_addressable:
        return np.asarray(array)
    if array.sharding.is_fully_replicated:
        return np.asarray(array.addressable_data(0))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(array, tiled=True))


def device_bytes(array: jax.Array) -> int:
    """Bytes ``array`` occupies on this process' devices (a replicated value counts once per
    device), from its layout: reading its shards would create arrays of their own."""
    if array.is_deleted():
        return 0
    sharding = array.sharding
    shard = int(np.prod(sharding.shard_shape(array.shape), dtype=np.int64)) * array.dtype.itemsize
    return shard * len(sharding.addressable_devices)


def live_device_bytes() -> int:
    """Bytes of every live (not deleted) JAX array of the process on its devices, whoever holds it."""
    return sum(device_bytes(a) for a in jax.live_arrays())


# --------------------------------------------------------------------------- graphs and the cache


@dataclass
class Graph:
    """A pending graph ready to run: its program, its inputs and where its roots are."""

    program: ir.Program
    inputs: list[DeviceData]
    root_positions: tuple[int, ...]  # program position of each requested root, in request order


_intern = ir.intern


class _Walk:
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
                    emit(kind if node.sharding is None else _intern((kind, node.sharding)))
                    for o in operands:
                        emit(position[o])
        for dtype, (index, values) in scalar_inputs.items():
            inputs[index] = _scalar_input(dtype, values)
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
    return _Walk(roots).graph()


# The values of a graph's Python scalars of one dtype, packed into one vector input. Equal packs
# share one buffer (upstream's ``DataCacheArena`` shares equal scalars), so a steady loop
# transfers nothing, and a schedule that changes one value transfers one small vector a step.
SCALAR_CACHE_SIZE = 256
_scalar_cache: OrderedDict[tuple, DeviceData] = OrderedDict()
_scalar_lock = threading.Lock()


def _scalar_input(dtype: np.dtype, values: list[Any]) -> DeviceData:
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
class _Plan:
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


def _plan(walk: _Walk, out_shardings: Sequence[Any], donate_idx: tuple[int, ...], precision: str | None = None) -> _Plan:
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
    kids = tuple(_intern(input_key(aval, sharding)) for aval, sharding in zip(avals, result_shardings, strict=True))
    aids = tuple(ir.aval_id(aval) for aval in avals)
    return _Plan(exe, tuple(where), avals, result_shardings, kids, aids, moved_in, moved_out)


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
            entry = (*entry[:3], _replicated(order))
        out.append(entry)
    return tuple(out)


def _in_order(sharding: Any, order: tuple) -> Any:
    """``sharding`` if it already lists ``order``, else the replicated layout over ``order``
    (the input is moved there before the execution: the value is the same)."""
    if _order(sharding) == order:
        return sharding
    return _replicated(order)


def compile_count() -> int:
    return metrics.compiles


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()
    recompiles.forget()


# --------------------------------------------------------------------------- asynchronous execution


class Ticket:
    """What a wait on one execution knows about it, without holding its inputs: its number, its
    program, the latch set when the executor thread is done with it, and the execution itself
    (weakly) so that a wait that gives up can fail it."""

    __slots__ = ("number", "program", "done", "job", "dispatched", "given_up", "__weakref__")

    def __init__(self, number: int, program: str) -> None:
        self.number = number
        self.program = program
        self.done = sched.Latch(name="execution done")  # set once: a latch (the same schedule point)
        self.job: Callable[[], _Execution | None] = _nobody  # the execution sets it (``_Execution``)
        self.dispatched: float | None = None  # when the executor thread launched it
        self.given_up = False  # a wait gave up on it: what it does later is nobody's concern

    def describe(self) -> str:
        return f"execution {self.number} of {self.program}"


def _nobody() -> None:
    return None


def wait_timeout() -> float | None:
    """The deadline of a wait on an execution, in seconds (None: unbounded). A controlled run
    (``harness.sched``) waits without one: there its scheduler decides who runs, and a timeout
    would be a schedule choice of its own."""
    limit = config.options.wait_timeout
    if limit is None or limit <= 0 or sched.is_controlled():
        return None
    return float(limit)


def await_latch(latch: sched.Latch, what: str, ticket: Ticket | None) -> None:
    """``latch.wait()``, bounded by ``wait_timeout``: past it the stuck work is given up (its
    values fail with the error) and ``ExecutionTimeoutError`` is raised with the evidence."""
    limit = wait_timeout()
    if latch.wait(limit) or latch.is_set():
        return
    raise _worker.give_up(what, ticket, limit or 0.0)


def executor_stack(thread: threading.Thread | None) -> str:
    """The Python stack of ``thread`` as it is now, innermost call last."""
    if thread is None or thread.ident is None:
        return "(no executor thread)"
    frame = sys._current_frames().get(thread.ident)
    if frame is None:
        return f"(thread {thread.name} is not running)"
    return "".join(traceback.format_stack(frame)).rstrip()


def check_inputs_live(
    args: Sequence[jax.Array], inputs: Sequence[DeviceData], order: Sequence[int], ticket: Ticket
) -> None:
    """Refuse to hand XLA an input one of whose per-device buffers is gone.

    A global array's ``is_deleted()`` is true only when the whole array was deleted; a per-device
    buffer it shares with another array (a single-device piece assembled with
    ``make_array_from_single_device_arrays``, a reshard over the same devices) can be donated or
    deleted through that other array while the flag stays false. XLA then rejects the execution
    on that device only, and the other devices run on: JAX 0.10 dies with SIGSEGV, later
    releases raise or wait for ever on a collective. The runtime's own error names the input.

    Looking at the per-device buffers makes JAX build (and keep) one array object per device, so
    they are looked at only for inputs that may share them (``DeviceData.shares``); every other
    input is checked by the global flag, which ``DeviceData.array`` read already. ``args[k]`` is
    the array of ``inputs[order[k]]``.
    """
    for position, index in enumerate(order):
        data = inputs[index]
        if not data.shares:
            continue
        array = args[position]
        if array.is_deleted():
            where = "every device"
        else:
            pieces = getattr(array, "_arrays", None)
            if pieces is None:
                pieces = [shard.data for shard in array.addressable_shards]
            gone = [k for k, piece in enumerate(pieces) if piece.is_deleted()]
            if not gone:
                continue
            order = getattr(array.sharding, "_addressable_device_assignment", None)
            names = [str(order[k]) if order is not None and k < len(order) else f"piece {k}" for k in gone]
            where = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        raise DonatedBufferError(
            f"buffer with shape {ir.aval_text(data.aval)} is deleted: input {position} of "
            f"{ticket.describe()}, laid out {_layout_text(data.sharding)}, has no buffer on "
            f"{where} (it was donated or deleted through an array sharing it); the execution "
            "was not launched"
        )


def _as_xla_would(
    args: Sequence[jax.Array], inputs: Sequence[DeviceData], order: Sequence[int], ticket: Ticket
) -> None:
    """What XLA says when handed a deleted per-device buffer, without handing it over."""
    try:
        check_inputs_live(args, inputs, order, ticket)
    except DonatedBufferError as exc:
        raise InvalidBufferError(
            "INVALID_ARGUMENT: Invalid buffer passed to Execute(): Buffer has been deleted or "
            f"donated ({exc})"
        ) from None


def _layout_text(sharding: Any) -> str:
    spec = getattr(sharding, "spec", None)
    mesh = getattr(sharding, "mesh", None)
    if spec is None or mesh is None:
        return str(sharding)
    axes = ", ".join(f"{name!r}: {size}" for name, size in mesh.shape.items())
    return f"{tuple(spec)} on mesh ({axes})"


class ExecutionAbandoned(RuntimeError):
    """The output of an execution that never completed because its controlled run was torn down
    (``harness.sched``): it carries this instead of staying a placeholder nobody will fill."""


class _Operations:
    """Executions started and not yet completed: the second step of ``wait_device_ops``.

    Upstream's ``OperationTracker`` (pytorch/xla#5811). The executor thread's barrier only says
    that the queue was drained; an execution still completing on another thread is seen here. The
    count and the idle event change together under the lock, so ``idle`` is set exactly when the
    count is zero, even when a torn-down run cuts an update short (a set or release completes).
    """

    def __init__(self) -> None:
        self._lock = sched.Lock(name="operations")
        self._idle = sched.Event(name="operations idle")
        self._idle.set()
        self._running = 0

    @property
    def running(self) -> int:
        return self._running

    def start(self) -> None:
        with self._lock:
            self._running += 1
            if self._running == 1:
                self._idle.clear()

    def finish(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                self._idle.set()

    def wait(self) -> None:
        limit = wait_timeout()
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            with self._lock:
                if self._running == 0:
                    return
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise _worker.give_up("wait_device_ops", None, limit or 0.0,
                                      f"{self._running} execution(s) still counted as running")
            self._idle.wait(left)


_operations = _Operations()


class _Worker:
    """One executor thread: executions run in submission order, like a device stream."""

    def __init__(self) -> None:
        self._queue = sched.SimpleQueue(name="executions")
        self._lock = sched.Lock(name="executor")
        self._last: Ticket | None = None
        self._thread: sched.Thread | None = None
        self._running: Ticket | None = None  # what the executor thread is running now
        self._failure: BaseException | None = None  # the first failed execution since the last wait
        self._interrupted: list[_Execution] = []  # cut short by a torn-down run, to settle after it
        self._closures: list[sched.Thread] = []  # late completions (``wait-gap``), joined on stop

    def note_failure(self, exc: BaseException) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = exc

    def take_failure(self) -> BaseException | None:
        if self._failure is None:  # the common case, without a lock round trip
            return None
        with self._lock:
            failure, self._failure = self._failure, None
        return failure

    def interrupted(self, job: _Execution) -> None:
        self._interrupted.append(job)

    def closure(self, target: Any) -> None:
        """Run ``target`` on a short-lived thread, as upstream's IO thread pool ran ``lockfn``."""
        thread = sched.Thread(target=target, name="io-closure", daemon=True)
        self._closures = [t for t in self._closures if t.is_alive()]
        self._closures.append(thread)
        thread.start()

    def submit(self, job: _Execution) -> sched.Latch:
        done = job.ticket.done
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                # each thread reads its own queue: one given up (``give_up``) keeps its old one
                thread = sched.Thread(target=self._loop, args=(self._queue,), name="harness-executor", daemon=True)
                self._thread = thread
                thread.start()
            self._last = job.ticket
            self._queue.put((job, done))
        return done

    def _loop(self, jobs: sched.SimpleQueue) -> None:
        while True:
            job, done = jobs.get()
            if job is None:  # shutdown
                done.set()
                return
            self._running = job.ticket
            try:
                job()
            finally:
                if self._running is job.ticket:  # a given-up thread that returns late clears nothing
                    self._running = None
                done.set()
            # the finished execution's inputs and outputs must not live on in this frame while
            # it waits for the next one (a value nothing else holds would stay on the device)
            job = done = None

    def give_up(self, what: str, ticket: Ticket | None, limit: float, detail: str = "") -> ExecutionTimeoutError:
        """A wait passed its deadline: the execution the executor thread is stuck in, and every
        one queued behind it, fail with the returned error (their values raise it when read),
        and the next submission starts a fresh executor thread. The stuck thread is left to
        JAX (it cannot be interrupted); if it ever returns, it finds its queue closed."""
        with self._lock:
            thread, stuck, queued = self._thread, self._running, self._queue
            self._queue = sched.SimpleQueue(name="executions")
            self._thread = None
            self._last = None
        abandoned: list[_Execution] = []
        stuck_job = stuck.job() if stuck is not None else None
        if stuck_job is not None:
            abandoned.append(stuck_job)
        while not queued.empty():
            job, done = queued.get_nowait()
            if job is not None:
                abandoned.append(job)
            done.set()
        queued.put((None, sched.Latch(name="closed")))
        subject = stuck or ticket
        since = ""
        if subject is not None and subject.dispatched is not None:
            since = f", launched {time.monotonic() - subject.dispatched:.1f} s ago"
        head = f"{what}: " + (f"{subject.describe()}{since} has not completed" if subject else "the executions")
        parts = [
            f"{head} within {limit:g} s (the runtime's wait_timeout: xr.configure(wait_timeout=...) "
            "or HARNESS_WAIT_TIMEOUT)" + (f"; {detail}" if detail else ""),
        ]
        if ticket is not None and subject is not ticket:
            parts.append(f"the value waited for comes from {ticket.describe()}, queued behind it")
        if abandoned:
            parts.append(f"{len(abandoned)} execution(s) fail with this error, the stuck one and those queued behind it")
        name = thread.name if thread is not None else "executor"
        error = ExecutionTimeoutError(
            ". ".join(parts) + f". The executor thread ({name}) is at:\n{executor_stack(thread)}"
        )
        for job in abandoned:
            job.give_up(error)
        return error

    def shutdown(self) -> None:
        """Drain and stop the thread before the interpreter tears JAX down under it; then let
        the closures it started finish, so that none outlives a run into the next."""
        with self._lock:
            thread = self._thread
            done: sched.Latch | None = None
            if thread is not None and thread.is_alive():
                done = sched.Latch(name="shutdown")
                self._queue.put((None, done))
        if thread is not None and done is not None:
            done.wait(timeout=30)
            thread.join(timeout=30)
        closures, self._closures = self._closures, []
        for closure in closures:
            closure.join(timeout=30)

    def restart(self) -> None:
        """Before a controlled run: stop the thread started outside it and start from an empty
        queue, so that the run's first submission starts the executor as one of its threads."""
        self.shutdown()
        with self._lock:
            self._queue = sched.SimpleQueue(name="executions")
            self._thread = None
            self._last = None
            self._running = None

    def stop(self) -> None:
        """After a controlled run: stop the thread. What a torn-down run left queued never runs
        and what it cut short never completes, so their outputs fail (``ExecutionAbandoned``)
        and their completion is signalled: nobody waits for ever."""
        self.shutdown()
        with self._lock:
            queued = self._queue
            self._queue = sched.SimpleQueue(name="executions")
            interrupted, self._interrupted = self._interrupted, []
        for job in interrupted:
            job.abandon()
        while not queued.empty():
            job, done = queued.get_nowait()
            if job is not None:
                job.abandon()
            done.set()

    def wait_all(self, raise_errors: bool = True) -> None:
        sched.point("wait_device_ops")
        last = self._last
        if last is not None and not last.done.is_set():
            await_latch(last.done, "wait_device_ops", last)
        sched.point("wait_device_ops.client")
        _operations.wait()
        failure = self.take_failure()
        if failure is not None and raise_errors:
            raise failure


_worker = _Worker()
atexit.register(_worker.shutdown)
sched.on_activate(_worker.restart)
sched.on_deactivate(_worker.stop)


class _Execution:
    """One launched graph: what the executor thread runs for it."""

    __slots__ = (
        "exe", "inputs", "outputs", "moved_in", "moved_out", "delay", "nap", "late", "tracked", "ticket", "donated",
        "__weakref__",
    )

    def __init__(
        self,
        exe: Executable,
        inputs: list[DeviceData],
        outputs: list[DeviceData],
        moved_in: list[Any],
        moved_out: list[Any],
        ticket: Ticket,
    ) -> None:
        self.ticket = ticket
        ticket.job = weakref.ref(self)
        self.donated: list[jax.Array] = []  # what this execution was given to consume
        self.exe = exe
        self.inputs = inputs
        self.outputs = outputs
        self.moved_in = moved_in
        self.moved_out = moved_out
        self.delay = config.options.execution_delay  # the device speed when it was launched
        self.nap = config.options.completion_delay  # how long the device runs after dispatch
        # v2.1's order: the execution is registered by a closure after dispatch (``wait-gap``)
        self.late = faults.active(faults.WAIT_GAP)
        self.tracked = False

    def track(self) -> None:
        _operations.start()
        self.tracked = True  # no point since the count changed: a torn-down run cannot split them

    def untrack(self) -> None:
        if self.tracked:
            _operations.finish()
            self.tracked = False

    def __call__(self) -> None:
        """The executor thread's part: dispatch, then completion here or, late, on a closure."""
        self.ticket.dispatched = time.monotonic()
        try:
            results = self._dispatch()
            if self.late:
                _worker.closure(lambda: self._close(results))
                return
            self._complete(results)
        except BaseException as exc:
            self._failed(exc)

    def _close(self, results: list[jax.Array]) -> None:
        """Upstream's ``lockfn``: only now is the execution known to ``wait_device_ops``."""
        try:
            sched.point("executor.track")
            self.track()
            self._complete(results)
        except BaseException as exc:
            self._failed(exc)

    def _dispatch(self) -> list[jax.Array]:
        exe, inputs, outputs = self.exe, self.inputs, self.outputs
        args = [inputs[i].array() for i in exe.arg_order]
        if not faults.active(faults.DELETED_SHARD):
            check_inputs_live(args, inputs, exe.arg_order, self.ticket)
        elif crash_mode() != "signal":
            # the bug trusts the global array's flag and hands XLA the gone buffer, which JAX 0.10
            # answers with SIGSEGV (crash mode does exactly that); here XLA's own complaint is
            # raised instead, so that a test process survives the reproduced bug
            _as_xla_would(args, inputs, exe.arg_order, self.ticket)
        if exe.donated:  # a moved argument's original is donated too: the tensor's buffer is gone
            self.donated = [args[p] for p in exe.donated]
        args = [a if m is None else jax.device_put(a, m) for a, m in zip(args, self.moved_in, strict=True)]
        if exe.donated:
            self.donated += [args[p] for p in exe.donated if self.moved_in[p] is not None]
        sched.point("executor.launch")
        seams.reach("execute")
        if self.delay and not sched.is_controlled():  # under control, the scheduler decides
            time.sleep(self.delay)
        results = exe.compiled(*args)
        results = [r if m is None else jax.device_put(r, m) for r, m in zip(results, self.moved_out, strict=True)]
        for out, result in zip(outputs, results, strict=True):
            out.fill(result)
        return results

    def _complete(self, results: list[jax.Array]) -> None:
        # filled first (readers may start), then the execution ends only when the device is done,
        # so that ``wait_device_ops`` means what upstream's does: every execution has completed
        if self.nap:  # a slow device: done later than dispatched, whoever is scheduled meanwhile
            time.sleep(self.nap)
        try:
            jax.block_until_ready(results)  # one call for every output
        except Exception:
            for result in results:
                try:
                    jax.block_until_ready(result)
                except Exception:
                    # a late completion (``wait-gap``) can find its output already donated to a
                    # later execution, which could only run once this one had finished: done
                    if not result.is_deleted():
                        raise
        self._consume_donated()
        metrics.completed += 1
        self.untrack()

    def _consume_donated(self) -> None:
        """Delete what this execution was donated and JAX left alive (a donation XLA declined, or
        a moved argument's original), now that the execution no longer reads it: the runtime's
        promise is that a donated buffer is gone, on every release."""
        donated, self.donated = self.donated, []
        for array in donated:
            if not array.is_deleted():
                try:
                    array.delete()
                except Exception:  # already gone through an array sharing its buffers
                    pass

    def _failed(self, exc: BaseException) -> None:
        """Every output carries the failure to whoever reads it, and the execution is over."""
        try:
            if isinstance(exc, sched.Abandoned):
                raise
            if self.ticket.given_up:  # its failure was reported when the wait gave up on it
                return
            for out in self.outputs:  # filled ones too: a failed execution's values are garbage
                if out._error is None:
                    out.fail(exc)
            _worker.note_failure(exc)
            self.untrack()
        except sched.Abandoned:
            # the run is being torn down: the outputs are settled once it is over (``stop``);
            # settled now, a participant still unwinding would read them as a plain error
            _worker.interrupted(self)
            raise

    def give_up(self, error: BaseException) -> None:
        """A wait gave up on this execution (``_Worker.give_up``): its values fail with
        ``error``, it stops counting as running, and waiting for it ends."""
        self.ticket.given_up = True
        for out in self.outputs:
            if out._error is None:
                out._settle(error)
        self.untrack()
        self.ticket.done.set()

    def abandon(self) -> None:
        for out in self.outputs:
            if out.is_placeholder:
                out._settle(
                    ExecutionAbandoned(
                        f"the execution producing this {ir.aval_text(out.aval)} value was abandoned "
                        "with the controlled run that launched it"
                    )
                )
        self.untrack()  # it will never complete: no later wait may count on it


def execute(
    roots: Sequence[ir.Node],
    out_shardings: Sequence[Any],
    donate: Iterable[DeviceData] = (),
    wait: bool = False,
) -> list[DeviceData]:
    """Compile (or fetch) and launch the graph of ``roots``; returns one placeholder per root."""
    walk = _Walk(roots)
    inputs = walk.inputs
    donate_ids = {id(d) for d in donate}
    donate_idx = tuple([i for i, d in enumerate(inputs) if id(d) in donate_ids]) if donate_ids else ()
    requested = tuple(out_shardings)
    precision = config.options.matmul_precision  # part of the key: another precision, another program
    key = (walk.key, walk.root_positions, requested, donate_idx, precision)
    with _cache_lock:
        plan = _cache.get(key)
    if plan is None:
        plan = _plan(walk, requested, donate_idx, precision)
        with _cache_lock:
            _cache[key] = plan
    else:
        metrics.cache_hits += 1
    exe, where = plan.exe, plan.where
    metrics.executions += 1
    ticket = Ticket(metrics.executions, exe.name)
    outputs = [
        DeviceData(aval, sharding, None, kid, aid, ticket)
        for aval, sharding, kid, aid in zip(plan.out_avals, plan.out_shardings, plan.out_kids, plan.out_aids, strict=True)
    ]
    job = _Execution(exe, inputs, outputs, plan.moved_in, plan.moved_out, ticket)
    if not job.late:  # upstream #5811's ``StartOperation``: known to every wait before it is queued
        job.track()
    try:
        done = _worker.submit(job)
    except sched.Abandoned:  # torn down around the submission: settled (and untracked) after it
        _worker.interrupted(job)
        raise
    if wait:
        await_latch(done, "a waiting sync", ticket)
        failed = next((o._error for o in outputs if o._error is not None), None)
        if failed is not None:  # this execution's own failure, reported here and not again
            earlier = _worker.take_failure()
            if earlier is not None and earlier is not failed:
                _worker.note_failure(earlier)  # an earlier, unrelated failure stays queued
            raise failed
    return [outputs[slot] for slot in where]


def wait_device_ops(raise_errors: bool = True) -> None:
    """Wait for every execution submitted so far; raise the first that failed since the last wait.

    ``raise_errors=False`` only waits and forgets the failure (cleanup between tests)."""
    _worker.wait_all(raise_errors)


def cached_plans() -> list[Any]:
    """The compiled plans in the plan cache, oldest first (a copy)."""
    with _cache_lock:
        return list(_cache.values())


def _scalars() -> dict[tuple, Any]:
    with _scalar_lock:
        return dict(_scalar_cache)


# what the failure-safety invariant reads of this module (``harness.runtime.seams``)
seams.register_lock("executor plan cache lock", _cache_lock)
seams.register_lock("executor scalar cache lock", _scalar_lock)
seams.register_lock("executor thread lock", _worker._lock)
seams.register_lock("operation tracker lock", _operations._lock)
seams.register_state("compiles", lambda: metrics.compiles)
seams.register_state("plans", lambda: len(_cache))
seams.register_state("scalars", _scalars)
seams.register_state("failure", lambda: _worker._failure)
