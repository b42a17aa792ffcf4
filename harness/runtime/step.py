"""Step boundaries and partial syncs: where pending IR becomes device data.

``mark_step`` syncs every live pending tensor in one execution and donates the buffers that
in-place updates replaced (``param_aliasing``), as PyTorch/XLA's step marker does. ``sync`` syncs
a chosen set (``.numpy()``, ``save``) and, unless told otherwise, donates nothing: a partial sync
cannot know which pending graphs still read the old buffers (upstream issue #8422).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from harness import sched
from harness.runtime import autograd, config, executor, faults, ir, seams
from harness.runtime.device_data import DeviceData

if TYPE_CHECKING:  # ``tensor`` builds on this module; only the type checker looks back
    from harness.runtime.storage import Storage
    from harness.runtime.tensor import Tensor

# Every storage, weakly, in creation order (PyTorch/XLA's device context tracks its tensors the
# same way): a step walks pending values in the same order every time and records the same
# program, the compile-cache key. Plain weak references without callbacks cost little to make;
# the dead ones are dropped when the list is read, or when it has doubled since the last prune.
# Appending takes no lock (``list.append`` is atomic); a prune rewrites only the prefix it read,
# in one slice assignment, so a storage registered meanwhile by another thread is kept.
_live: list[weakref.ReferenceType[Storage]] = []
_live_append = _live.append
# one prune at a time; a scheduler-aware lock, since a prune holds it across a schedule point
_live_lock = sched.Lock(name="live storages")
_prune_at = 4096
#: storages registered and values written so far: a step compares it before and after it runs,
#: to know whether another thread built on the values it was computing (``_adopt``)
_touched = 0


def touch() -> None:
    """A storage was registered or written (``Storage``)."""
    global _touched
    _touched += 1


def track(storage: Storage) -> None:
    """Register a new storage (``Storage.__init__``)."""
    global _touched
    _touched += 1
    _live_append(weakref.ref(storage))
    if len(_live) >= _prune_at:
        with _live_lock:
            _prune()


def _prune(keep: Callable[[Storage], bool] | None = None) -> list[Storage]:
    """Drop dead references, and live ones ``keep`` refuses (the caller holds ``_live_lock``);
    returns the live storages kept."""
    global _prune_at
    n = len(_live)
    alive: list[Storage] = []
    refs: list[weakref.ReferenceType[Storage]] = []
    for ref in _live[:n]:
        storage = ref()
        if storage is not None and (keep is None or keep(storage)):
            alive.append(storage)
            refs.append(ref)
    # another thread may register storages meanwhile: they are past ``n``, and stay
    sched.point("step.prune")
    _live[:n] = refs
    _prune_at = max(4096, 2 * len(refs))
    return alive


def live_storages() -> list[Storage]:
    with _live_lock:
        return _prune()

# a scheduler-aware lock: it is held across ``execute`` and its submission to the executor thread,
# which are schedule points, and a plain lock held there would hide a waiting thread's turn
_sync_lock = sched.RLock(name="sync")


def _pending(storages: Iterable[Storage]) -> list[Storage]:
    seen: set[int] = set()
    out = []
    for s in storages:
        if s.pending and id(s) not in seen:
            seen.add(id(s))
            out.append(s)
    return out


def sync(tensors: Iterable[Tensor] | None = None, *, wait: bool = False, donate: bool | None = None) -> None:
    """Execute the pending values of ``tensors`` (all live tensors when None)."""
    with _sync_lock:  # one sync at a time: each walks and materializes the shared live set
        _sync(tensors, wait, donate)


def _sync(tensors: Iterable[Tensor] | None, wait: bool, donate: bool | None) -> None:
    touched = _touched  # from here on, another thread's work may build on what this step computes
    live = live_storages()
    storages = _pending(live if tensors is None else (t.rt_storage for t in tensors))
    if not storages:
        if wait:
            executor.wait_device_ops()
        return
    if donate is None:  # only a full step may donate: a partial sync cannot see every reader
        partial_donates = tensors is not None and faults.active(faults.PARTIAL_SYNC_DONATION)
        donate = config.options.param_aliasing if tensors is None or partial_donates else False
    candidates: list[DeviceData] = []
    if donate:
        held = {id(s.node.data) for s in live if not s.pending}
        candidates = [s.base_data for s in storages if s.base_data is not None and id(s.base_data) not in held]
        if candidates:
            kept = _read_by_origins(storages, live, candidates)
            candidates = [c for c in candidates if id(c) not in kept]
    roots = [s.node for s in storages]
    outputs = executor.execute(roots, [s.sharding for s in storages], candidates, wait)
    if _touched == touched:
        for storage, data in zip(storages, outputs, strict=True):
            storage.materialize(data)
    else:
        _adopt(storages, roots, outputs)


def _adopt(storages: list[Storage], roots: list[ir.Node], outputs: list[DeviceData]) -> None:
    """Hand the step's results to a live set another thread changed while the step ran (at its
    schedule points: the submission, the locks). A storage written meanwhile holds a new value
    built on the one the step computed, and a value derived meanwhile reads it too: each reads
    the result instead of the computation, so that no write is lost (materializing it would put
    the old value back) and nothing recomputes from a buffer the step donated."""
    done: dict[int, ir.Node] = {}
    written: dict[int, DeviceData] = {}
    for storage, root, data in zip(storages, roots, outputs, strict=True):
        if storage.node is root:
            storage.materialize(data)
            done[id(root)] = storage.node
        else:
            done[id(root)] = storage.computed(root, data)
            written[id(storage)] = data
    for storage in live_storages():
        if storage.pending:
            storage.adopt(done, written.get(id(storage)))


def _read_by_origins(storages: list[Storage], live: list[Storage], candidates: list[DeviceData]) -> set[int]:
    """The candidates a value computed from parameters reads, through the IR its gradient is
    taken through later (``Storage.materialize`` keeps it as the value's origin), so those
    buffers must outlive the step: the values this sync computes, and the ones an earlier read
    or partial sync already computed, whose origins are still live. (``x.mul_(2); h = x @ w.T;
    mark_step(); h.sum().backward()``: the step replaced ``x``'s buffer, and ``h``'s origin
    still computes ``x * 2`` from it; the same with ``h.numpy()`` before the step, where ``h``
    is no longer pending when the step runs.)

    A parameter's value that an update has since replaced (the loss of a step whose optimizer
    update is in the same sync) is followed only from a graph no ``backward`` has released: a
    released one can never be differentiated again (``autograd``: torch refuses it), and an
    ordinary training loop's loss is released before its step, so its parameters' old buffers
    are still donated. An unreleased graph through an updated parameter (``t3 = w - w.sum()``
    after ``opt.step()``, differentiated after the step) recomputes that old value, and keeps
    what it reads."""
    wanted = {id(c) for c in candidates}
    found: set[int] = set()
    roots = [s.node for s in storages if s.grad_dep]
    roots += [s.node.origin for s in live if s.grad_dep and not s.pending and s.node.origin is not None]
    # each node once per way it is reached: one reached first through a superseded parameter
    # value may be part of a current one too (both read the same buffer), and must be followed then
    seen: set[tuple[int, bool]] = set()
    for root in roots:
        superseded: list[ir.Node] = []
        released = _walk(root, False, seen, wanted, found, superseded)
        while superseded and not released:
            node = superseded.pop()
            released = _walk(node, True, seen, wanted, found, superseded) or released
    return found


def _walk(root: ir.Node, through: bool, seen: set[tuple[int, bool]], wanted: set[int], found: set[int],
          superseded: list[ir.Node]) -> bool:
    """``_read_by_origins``' walk from ``root``: the wanted buffers it reads go into ``found``,
    the superseded parameter values it meets into ``superseded`` (followed when ``through``);
    whether a ``backward`` released a node on the way."""
    released = False
    # (node, whether it is part of a parameter's current value: what that value is computed from)
    stack: list[tuple[ir.Node, bool]] = [(root, through)]
    while stack:
        node, inside = stack.pop()
        if (id(node), inside) in seen:
            continue
        seen.add((id(node), inside))
        released = released or autograd.released(node)
        leaf = node.leaf() if node.leaf is not None else None
        if leaf is not None:
            if leaf.node is node:
                inside = True
            elif not inside:  # superseded by an update
                superseded.append(node)
                continue
        if node.data is not None:
            if id(node.data) in wanted:
                found.add(id(node.data))
            if node.origin is not None:  # a value computed earlier: its gradient goes through this
                stack.append((node.origin, False))
            continue
        stack.extend((o, inside) for o in node.operands)
    return released


def mark_step(wait: bool = False) -> None:
    """End the step: run everything pending as one graph."""
    sync(None, wait=wait)


def wait_device_ops() -> None:
    """Wait for every execution submitted so far; raise the first that failed since the last wait."""
    executor.wait_device_ops()


def device_data(tensors: Iterable[Tensor]) -> list[DeviceData]:
    """The device-data leaves of the tensors' graphs, deduplicated by buffer handle.

    PyTorch/XLA's ``_get_tensors_xla_device_data_node``: it asks every leaf for its handle, which
    reads shard 0 of the buffer, so every execution producing those leaves must have completed.
    """
    sched.point("device_data")
    seen_nodes: set[int] = set()
    by_handle: dict[int, DeviceData] = {}
    stack: list[ir.Node] = [t.node for t in tensors]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if node.data is not None:
            by_handle.setdefault(node.data.handle(), node.data)
        stack.extend(node.operands)
    return list(by_handle.values())


def forget_pending() -> int:
    """Stop tracking every pending value, so that a graph that failed (a reproduced bug) does not
    fail every later ``mark_step`` of the process. Returns how many were dropped; reading one of
    them later still syncs it on its own."""
    dropped = 0

    def keep(storage: Storage) -> bool:
        nonlocal dropped
        dropped += storage.pending
        return not storage.pending

    with _live_lock:
        _prune(keep)
    return dropped


# a failed operation must leave these locks released (``harness.runtime.seams``)
seams.register_lock("sync lock", _sync_lock)
seams.register_lock("live storage lock", _live_lock)
