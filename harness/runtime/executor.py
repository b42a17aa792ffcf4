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
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from harness import sched
from harness.runtime import config, faults, ir, recompiles, topology
from harness.runtime.errors import DonatedBufferError, PlaceholderAccessError

# Donation is requested for every updated parameter; when XLA cannot reuse a buffer in place the
# array is still deleted (the semantics tests rely on), so the advisory warning is only noise.
warnings.filterwarnings("ignore", message="Some donated buffers were not usable")


def crash_mode() -> str:
    """``signal`` turns a placeholder read into a real SIGSEGV, as upstream crashed."""
    return os.environ.get("HARNESS_CRASH_MODE", "raise")


def input_key(aval: ir.Aval, sharding: Any) -> tuple:
    """How a step's structure key describes a device-data input: its aval and its layout."""
    return (ir.IN, aval, sharding)


class DeviceData:
    """A (possibly sharded) device buffer, or a placeholder for one still being computed."""

    __slots__ = ("aval", "sharding", "kid", "aid", "_array", "_ready", "_error", "__weakref__")

    def __init__(
        self, aval: ir.Aval, sharding: Any, array: jax.Array | None = None, kid: int | None = None, aid: int | None = None
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
            ready.wait()
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
    """The same value laid out with another sharding."""
    array = jax.device_put(data.array(), sharding)
    return DeviceData(data.aval, sharding, array)


def to_host(data: DeviceData) -> np.ndarray:
    """The whole value on this host. In a multi-process run a replicated value is read from this
    process' own copy, as PyTorch/XLA reads one replica: gathering it (what a value split across
    processes needs) ran a program over every process for nothing, 0.5 ms a read in a two-process
    cell and 22 ms the first time for each shape (its compile), against under 0.1 ms now."""
    array = data.array()
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
) -> Executable:
    fn = ir.lower(_constraints_in_order(graph.program, device_order), roots)
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
    compiled = jitted.lower(*structs).compile()
    exe = Executable(compiled, tuple(compiled.output_shardings), order)
    metrics.compiles += 1
    return exe


def _plan(walk: _Walk, out_shardings: Sequence[Any], donate_idx: tuple[int, ...]) -> _Plan:
    """Derive a step's plan from its walk, compiling its executable (a cache miss)."""
    graph = walk.graph()
    recompiles.note(graph.program, graph.root_positions, out_shardings, donate_idx)
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
    exe = _compile(graph, tuple(unique), compiled_out, donate_idx, in_shardings, order)
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
        while True:
            with self._lock:
                if self._running == 0:
                    return
            self._idle.wait()


_operations = _Operations()


class _Worker:
    """One executor thread: executions run in submission order, like a device stream."""

    def __init__(self) -> None:
        self._queue = sched.SimpleQueue(name="executions")
        self._lock = sched.Lock(name="executor")
        self._last: sched.Latch | None = None
        self._thread: sched.Thread | None = None
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
        done = sched.Latch(name="execution done")  # set once: a latch (the same schedule point)
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                thread = sched.Thread(target=self._loop, name="harness-executor", daemon=True)
                self._thread = thread
                thread.start()
            self._last = done
            self._queue.put((job, done))
        return done

    def _loop(self) -> None:
        while True:
            job, done = self._queue.get()
            if job is None:  # shutdown
                done.set()
                return
            try:
                job()
            finally:
                done.set()
            # the finished execution's inputs and outputs must not live on in this frame while
            # it waits for the next one (a value nothing else holds would stay on the device)
            job = done = None

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
        if last is not None and not last.is_set():
            last.wait()
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
        "exe", "inputs", "outputs", "moved_in", "moved_out", "delay", "late", "tracked",
    )

    def __init__(
        self,
        exe: Executable,
        inputs: list[DeviceData],
        outputs: list[DeviceData],
        moved_in: list[Any],
        moved_out: list[Any],
    ) -> None:
        self.exe = exe
        self.inputs = inputs
        self.outputs = outputs
        self.moved_in = moved_in
        self.moved_out = moved_out
        self.delay = config.options.execution_delay  # the device speed when it was launched
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
        args = [a if m is None else jax.device_put(a, m) for a, m in zip(args, self.moved_in, strict=True)]
        sched.point("executor.launch")
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
        try:
            jax.block_until_ready(results)  # one call for every output
        except Exception:
            for result in results:
                try:
                    result.block_until_ready()
                except Exception:
                    # a late completion (``wait-gap``) can find its output already donated to a
                    # later execution, which could only run once this one had finished: done
                    if not result.is_deleted():
                        raise
        metrics.completed += 1
        self.untrack()

    def _failed(self, exc: BaseException) -> None:
        """Every output carries the failure to whoever reads it, and the execution is over."""
        try:
            if isinstance(exc, sched.Abandoned):
                raise
            for out in self.outputs:
                if out.is_placeholder:
                    out.fail(exc)
            _worker.note_failure(exc)
            self.untrack()
        except sched.Abandoned:
            # the run is being torn down: the outputs are settled once it is over (``stop``);
            # settled now, a participant still unwinding would read them as a plain error
            _worker.interrupted(self)
            raise

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
    key = (walk.key, walk.root_positions, requested, donate_idx)
    with _cache_lock:
        plan = _cache.get(key)
    if plan is None:
        plan = _plan(walk, requested, donate_idx)
        with _cache_lock:
            _cache[key] = plan
    else:
        metrics.cache_hits += 1
    exe, where = plan.exe, plan.where
    outputs = [
        DeviceData(aval, sharding, None, kid, aid)
        for aval, sharding, kid, aid in zip(plan.out_avals, plan.out_shardings, plan.out_kids, plan.out_aids, strict=True)
    ]
    moved_in, moved_out = plan.moved_in, plan.moved_out

    metrics.executions += 1
    job = _Execution(exe, inputs, outputs, moved_in, moved_out)
    if not job.late:  # upstream #5811's ``StartOperation``: known to every wait before it is queued
        job.track()
    try:
        done = _worker.submit(job)
    except sched.Abandoned:  # torn down around the submission: settled (and untracked) after it
        _worker.interrupted(job)
        raise
    if wait:
        done.wait()
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
