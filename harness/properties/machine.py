"""Invariant 6: sync and aliasing, as a state machine checked against a numpy model.

Upstream's aliasing bugs (#8482: a save read a stale functional alias; #8422: a save-side sync
donated buffers a pending graph still read) need a *sequence* of operations: an alias, a write
through it, a step, a save. The machine draws such sequences: tensors, aliases of them (detach,
reshape, flatten, transpose, row and strided slices, views of views), in-place ops through any
alias, new values computed from them, ``mark_step``, ``sync(wait=False)``, ``wait_device_ops``,
reads, save/load and the gradient-accumulation helper's handle collection, with functionalization
and parameter aliasing on and off. The numpy model (``model.AliasModel``) says what every tensor
must hold after each one.

Checked after every operation: every tensor that is device data (not pending) holds the model's
value, and every device buffer a test grabbed earlier either still holds the value it had or, once
donated, raises the runtime's ``DonatedBufferError``: never other data. Pending tensors are not
read after every operation (a read syncs, which would hide exactly the bugs that need pending
state); ``read`` operations and the end of every program read them all.

The same operations serve two drivers: ``programs()`` (a straight-line program: the invariant's
examples, shrunk to the fewest operations) and ``SyncAliasMachine`` (a hypothesis
``RuleBasedStateMachine``, for suites that want stateful testing's own reporting). The seam for
races: ``CollectHandles`` runs the accumulation helper's collection right after an asynchronous
sync; under a controlled scheduler its interleaving with the executor becomes a choice, which is
how the machine catches ``race-on-handles``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from harness import adapters
from harness.adapters import base
from harness.properties.base import Invariant
from harness.properties.model import BASE_SHAPES, AliasModel, view_kinds
from harness.properties.strategies import runtime_view
from harness.properties.swarm import enabled_in_order, swarm
from harness.runtime import config, faults

MAX_TENSORS = 12
SCALARS = (1.0, 2.0, -1.0, 0.5)

# ------------------------------------------------------------------------------ operations
# A tensor reference counts back from the newest tensor (0 is the one just made), modulo how many
# there are: every program is valid, shrinking (which deletes operations) keeps it valid, and the
# simplest reference, 0, is the tensor the previous operation made, which is what a bug's short
# sequence usually needs (``t2 = t1.detach(); t2.add_(t2); save(t1)`` is 0, 0, 1).


@dataclass(frozen=True)
class Create:
    seed: int


@dataclass(frozen=True)
class Alias:
    src: int
    kind: int  # index into the view kinds that apply to the source's shape


@dataclass(frozen=True)
class InPlace:
    dst: int
    op: str  # add | sub | mul
    scalar: float


@dataclass(frozen=True)
class InPlaceTensor:
    dst: int
    src: int  # used when its shape matches, else the destination itself (t.add_(t), as #8482)
    op: str  # add | copy


@dataclass(frozen=True)
class Derive:
    src: int  # a new value, src * 2 + 1, still pending


@dataclass(frozen=True)
class MarkStep:
    pass


@dataclass(frozen=True)
class Sync:
    targets: tuple[int, ...]
    wait: bool


@dataclass(frozen=True)
class Wait:
    pass


@dataclass(frozen=True)
class Read:
    target: int


@dataclass(frozen=True)
class SaveLoad:
    targets: tuple[int, ...]


@dataclass(frozen=True)
class Grab:
    target: int  # read, then keep its device buffer to check it later


@dataclass(frozen=True)
class CollectHandles:
    targets: tuple[int, ...]


@dataclass(frozen=True)
class ReadHandles:
    targets: tuple[int, ...]  # a waiting sync, then the handles must be readable at once


Op = Create | Alias | InPlace | InPlaceTensor | Derive | MarkStep | Sync | Wait | Read | SaveLoad | Grab | CollectHandles | ReadHandles

def _inplace(dst: st.SearchStrategy[int]) -> st.SearchStrategy[InPlace]:
    """An in-place op with a Python scalar on the tensor ``dst`` refers to."""
    return st.builds(InPlace, dst, st.sampled_from(("add", "sub", "mul")), st.sampled_from(SCALARS))


_ref = st.integers(0, MAX_TENSORS - 1)
_refs = st.lists(_ref, min_size=1, max_size=3).map(tuple)


#: every operation kind, with its weight in a drawn program: aliasing, in-place writes, steps,
#: saves and handle collection (what the known bugs are made of) come up more often
VOCABULARY: dict[str, tuple[int, Any]] = {
    "alias": (2, lambda ref, refs: st.builds(Alias, ref, st.integers(0, 8))),
    "inplace": (2, lambda ref, refs: _inplace(ref)),
    "inplace_tensor": (2, lambda ref, refs: st.builds(InPlaceTensor, ref, ref, st.sampled_from(("add", "copy")))),
    "collect": (2, lambda ref, refs: st.builds(CollectHandles, refs)),
    "save": (2, lambda ref, refs: st.builds(SaveLoad, refs)),
    "mark_step": (2, lambda ref, refs: st.just(MarkStep())),
    "derive": (1, lambda ref, refs: st.builds(Derive, ref)),
    "create": (1, lambda ref, refs: st.builds(Create, st.integers(0, 4))),
    "sync": (1, lambda ref, refs: st.builds(Sync, refs, st.booleans())),
    "read": (1, lambda ref, refs: st.builds(Read, ref)),
    "wait": (1, lambda ref, refs: st.just(Wait())),
    "grab": (1, lambda ref, refs: st.builds(Grab, ref)),
    "read_handles": (1, lambda ref, refs: st.builds(ReadHandles, refs)),
}


def operations(vocabulary: tuple[str, ...] | None = None, reach: int = MAX_TENSORS) -> st.SearchStrategy[Op]:
    """One operation of the machine's vocabulary (all of it, or the named kinds), drawn by the
    kinds' weights; tensor references go back at most ``reach`` tensors (a focused search looks at
    the few newest, where a bug's short sequence lives)."""
    names = tuple(VOCABULARY) if vocabulary is None else vocabulary
    unknown = [n for n in names if n not in VOCABULARY]
    if unknown or not names:
        raise ValueError(f"operations({names}): unknown kinds {unknown}; known: {tuple(VOCABULARY)}")
    return _operations(names, reach)


@lru_cache(maxsize=4096)
def _operations(names: tuple[str, ...], reach: int) -> st.SearchStrategy[Op]:
    """Built once per (kinds, reach): a swarm asks for many subsets, each thousands of times, and
    hypothesis validates every new strategy object on its first draw."""
    ref = st.integers(0, reach - 1)
    refs = st.lists(ref, min_size=1, max_size=3).map(tuple)
    built = {n: VOCABULARY[n][1](ref, refs) for n in names}
    weighted = [built[n] for n in names] + [built[n] for n in names if VOCABULARY[n][0] > 1]
    return st.one_of(*weighted)


def _aliased_writes() -> st.SearchStrategy[list[Op]]:
    """An alias, one or two writes through it or through its source, then a save of either or
    both: the shape of a checkpoint that misses a write made through another alias (#8482). Drawn
    op by op, the three line up in about one program in a hundred; a block always holds them."""
    pair = st.integers(0, 1)  # the alias just made (0) or its source (1)
    write = st.one_of(_inplace(pair), st.builds(InPlaceTensor, pair, pair, st.sampled_from(("add", "copy"))))
    return st.tuples(
        st.builds(Alias, st.just(0), st.integers(0, 8)),
        st.lists(write, min_size=1, max_size=2),
        st.builds(SaveLoad, st.lists(pair, min_size=1, max_size=2).map(tuple)),
    ).map(lambda parts: [parts[0], *parts[1], parts[2]])


def _pending_readers() -> st.SearchStrategy[list[Op]]:
    """A value derived from a tensor (pending: it reads the tensor's buffer), a write to that
    tensor, then a sync of the tensor alone or with others: where a partial sync that donates
    frees a buffer a pending value still reads (#8422's mechanism)."""
    return st.tuples(
        st.builds(Derive, st.just(0)),
        _inplace(st.just(1)),
        st.builds(Sync, st.lists(st.integers(0, 1), min_size=1, max_size=2).map(tuple), st.booleans()),
    ).map(list)


def _alias_chain() -> st.SearchStrategy[list[Op]]:
    """A view of one of the two newest tensors (the 3-d base among them at the start), one to
    three views of each view just made, then a write through the last: a write that has to find
    its way back through every link of a chain (a cyclic 3-d permutation inverted wrong, a
    negative dimension left unnormalized, a slice of a transposed detach). Drawn op by op, three
    aliases of the newest tensor in a row come up in a few programs in a thousand."""
    write = st.one_of(_inplace(st.just(0)), st.builds(InPlaceTensor, st.just(0), st.just(0), st.sampled_from(("add", "copy"))))
    return st.tuples(
        st.builds(Alias, st.integers(0, 1), st.integers(0, 8)),
        st.lists(st.builds(Alias, st.just(0), st.integers(0, 8)), min_size=1, max_size=3),
        write,
    ).map(lambda parts: [parts[0], *parts[1], parts[2]])


#: sequences of operations drawn as one block (``programs(motifs=...)``): the operations still
#: come up one by one as well, and shrinking takes a block apart when fewer operations fail too
MOTIFS: dict[str, Callable[[], st.SearchStrategy[list[Op]]]] = {
    "aliased_writes": _aliased_writes,
    "pending_readers": _pending_readers,
    "alias_chain": _alias_chain,
}


def programs(
    max_ops: int = 12,
    scheduled: bool | None = None,
    vocabulary: tuple[str, ...] | None = None,
    param_aliasing: bool | None = None,
    reach: int = MAX_TENSORS,
    min_ops: int = 1,
    motifs: tuple[str, ...] = (),
    swarmed: bool = True,
) -> st.SearchStrategy[dict[str, Any]]:
    """A runtime configuration, a straight-line program of operations and, when the runtime under
    test runs its executor on ``harness.sched`` primitives (the reference runtime), a schedule
    policy: hypothesis then chooses the interleaving of the program with the executor thread too,
    and shrinks it to the fewest preemptions (``scheduled=False`` leaves the threads free).
    ``vocabulary`` narrows the operations (a focused search finds a long sequence sooner);
    ``param_aliasing`` fixes that option instead of drawing it; ``min_ops`` keeps programs from
    being shorter than the sequences a focused search is after (hypothesis favours short lists);
    ``motifs`` (names in ``MOTIFS``) mixes in blocks of operations that only mean something
    together, half of the draws, so that the sequence a family of bugs needs is not left to
    chance; ``min_ops`` then counts blocks, and the program is still cut at ``max_ops``.

    ``swarmed`` (the default) draws, per program, which operation kinds and motifs it may use
    (``harness.properties.swarm``) before drawing the program from them alone: combinations the
    whole vocabulary dilutes (long alias chains, writes on values left pending) come up many
    times as often. ``swarmed=False`` draws every program from the whole vocabulary."""
    if scheduled is None:
        scheduled = base.FAULT_SWITCHES in adapters.current().capabilities
    unknown = [m for m in motifs if m not in MOTIFS]
    if unknown:
        raise ValueError(f"programs(motifs={motifs}): unknown {unknown}; known: {tuple(MOTIFS)}")
    names = tuple(VOCABULARY) if vocabulary is None else vocabulary
    operations(names, reach)  # refuses unknown kinds here, not at the first draw
    features = (*names, *motifs)
    program: st.SearchStrategy[list[Op]]
    if swarmed:
        program = swarm(features).flatmap(
            lambda enabled: _program(enabled_in_order(features, enabled), reach, min_ops, max_ops)
        )
    else:
        program = _program(features, reach, min_ops, max_ops)
    fields: dict[str, st.SearchStrategy[Any]] = {
        "functionalization": st.booleans(),
        "param_aliasing": st.booleans() if param_aliasing is None else st.just(param_aliasing),
        "program": program,
    }
    if scheduled:
        from harness import sched

        fields["schedule"] = sched.hypothesis_schedules()
    return st.fixed_dictionaries(fields)


@lru_cache(maxsize=4096)
def _program(features: tuple[str, ...], reach: int, min_ops: int, max_ops: int) -> st.SearchStrategy[list[Op]]:
    """Programs over the enabled ``features``: operation kinds (in ``VOCABULARY``) drawn one by
    one, and motifs (in ``MOTIFS``) drawn as blocks; built once per enabled set."""
    kinds = tuple(f for f in features if f in VOCABULARY)
    blocks = [MOTIFS[f]() for f in features if f in MOTIFS]
    if not blocks:
        return st.lists(operations(kinds, reach), min_size=min_ops, max_size=max_ops)
    if kinds:
        blocks.insert(0, operations(kinds, reach).map(lambda op: [op]))
    return st.lists(st.one_of(*blocks), min_size=min_ops, max_size=max_ops).map(
        lambda drawn: [op for block in drawn for op in block][:max_ops]
    )


# ------------------------------------------------------------------------------ interpreter


def _initial(seed: int) -> np.ndarray:
    """Small integers, so every operation stays exact; odd seeds make a 3-d base."""
    shape = BASE_SHAPES[seed % len(BASE_SHAPES)]
    return ((np.arange(np.prod(shape)) * (seed + 1)) % 7 - 3).astype(np.float32).reshape(shape)


class Interpreter:
    """Runs operations on the runtime under test and on the model in lockstep and compares them.

    An operation that needs a capability the runtime lacks (grabbing buffers, asynchronous syncs,
    checkpoints) is recorded as skipped and changes neither side."""

    def __init__(self) -> None:
        self.rt = adapters.current()
        self.model = AliasModel()
        self.tensors: list[Any] = []
        self.grabbed: list[tuple[Any, np.ndarray]] = []
        self.done: list[Op] = []
        self.skipped: set[str] = set()
        self._dir: tempfile.TemporaryDirectory[str] | None = None  # made at the first save
        self._saves = 0
        for seed in (1, 0):  # a 3-d base, then a 2-d one (reference 0: the newest)
            self._add(self.rt.tensor(_initial(seed)), self.model.create(_initial(seed)))

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()

    def _add(self, t: Any, index: int) -> None:
        assert index == len(self.tensors)
        self.tensors.append(t)

    def _t(self, ref: int) -> int:
        return len(self.tensors) - 1 - ref % len(self.tensors)

    def _room(self) -> bool:
        return len(self.tensors) < MAX_TENSORS

    def _can(self, capability: str) -> bool:
        if capability in self.rt.capabilities:
            return True
        self.skipped.add(capability)
        return False

    def _where(self) -> str:
        options = f"functionalization {config.options.functionalization}, param_aliasing {config.options.param_aliasing}"
        return f"after {self.done} ({self.rt.name}; {options})"

    def _expect(self, i: int, got: np.ndarray, what: str) -> None:
        want = self.model.read(i)
        assert got.shape == want.shape and np.array_equal(got, want), (
            f"{what} tensor {i} {self._where()}: runtime {got.tolist()}, model {want.tolist()}"
        )

    def apply(self, op: Op) -> None:
        self.done.append(op)
        m, ts, rt = self.model, self.tensors, self.rt
        if isinstance(op, Create):
            if self._room():
                self._add(rt.tensor(_initial(op.seed)), m.create(_initial(op.seed)))
        elif isinstance(op, Alias):
            if self._room():
                i = self._t(op.src)
                kinds = view_kinds(m.shape(i))
                kind = kinds[op.kind % len(kinds)]
                self._add(runtime_view(rt, ts[i], kind, m.shape(i)), m.alias(i, kind))
        elif isinstance(op, InPlace):
            i = self._t(op.dst)
            rt.inplace(ts[i], op.op, op.scalar)
            value, scalar = m.read(i), np.float32(op.scalar)
            m.write(i, {"add": value + scalar, "sub": value - scalar, "mul": value * scalar}[op.op])
        elif isinstance(op, InPlaceTensor):
            i, j = self._t(op.dst), self._t(op.src)
            if m.shape(j) != m.shape(i):
                j = i
            source = m.read(j)
            rt.inplace(ts[i], op.op, ts[j])
            m.write(i, m.read(i) + source if op.op == "add" else source)
        elif isinstance(op, Derive):
            if self._room():
                i = self._t(op.src)
                self._add(rt.derive(ts[i]), m.create(m.read(i) * np.float32(2) + np.float32(1)))
        elif isinstance(op, MarkStep):
            rt.step()
        elif isinstance(op, Sync):
            if op.wait or self._can(base.ASYNC_SYNC):
                rt.sync([ts[self._t(r)] for r in op.targets], op.wait)
        elif isinstance(op, Wait):
            if self._can(base.ASYNC_SYNC):
                rt.wait()
        elif isinstance(op, Read):
            i = self._t(op.target)
            self._expect(i, rt.to_host(ts[i]), "reading")
        elif isinstance(op, SaveLoad):
            if self._can(base.SAVE):
                self._save_load(sorted({self._t(r) for r in op.targets}))
        elif isinstance(op, Grab):
            if self._can(base.DONATION):
                i = self._t(op.target)
                handle = rt.grab(ts[i])
                value = rt.read_grabbed(handle)
                assert value is not None, f"a buffer grabbed just now reads as donated {self._where()}"
                self.grabbed.append((handle, value.copy()))  # the storage's buffer, not the view's
        elif isinstance(op, CollectHandles):
            if self._can(base.ASYNC_SYNC):
                rt.collect_handles([ts[self._t(r)] for r in op.targets])
        elif isinstance(op, ReadHandles):
            if self._can(base.ASYNC_SYNC):
                chosen = [ts[self._t(r)] for r in op.targets]
                rt.sync(chosen, True)
                rt.read_handles(chosen)
        else:  # pragma: no cover - the vocabulary is closed
            raise TypeError(op)

    def _save_load(self, chosen: list[int]) -> None:
        self._saves += 1
        if self._dir is None:  # most programs save nothing: a directory each cost 0.5 ms
            self._dir = tempfile.TemporaryDirectory(prefix="xharness-machine-")
        path = str(Path(self._dir.name) / f"{self._saves}.xh")
        self.rt.save({str(i): self.tensors[i] for i in chosen}, path)
        loaded = self.rt.load(path)
        for i in chosen:
            self._expect(i, np.asarray(loaded[str(i)]), "the checkpoint of")
            if self._room():
                self._add(self.rt.tensor(np.asarray(loaded[str(i)])), self.model.create(self.model.read(i)))

    def check_materialized(self) -> None:
        """Every tensor that is device data holds the model's value; every grabbed buffer holds
        what it held, or raises the runtime's own clear error for a donated buffer."""
        for i, t in enumerate(self.tensors):
            if self.rt.materialized(t):
                self._expect(i, self.rt.to_host(t), "device data of")
        for k, (handle, value) in enumerate(self.grabbed):
            now = self.rt.read_grabbed(handle)
            if now is None:
                continue
            assert np.array_equal(now, value), (
                f"grabbed buffer {k} {self._where()} now reads {now.tolist()}, it held {value.tolist()}"
            )

    def check_all(self) -> None:
        """Read every tensor (syncing what is pending) and compare with the model."""
        for i, t in enumerate(self.tensors):
            self._expect(i, self.rt.to_host(t), "reading")
        if base.ASYNC_SYNC in self.rt.capabilities:
            self.rt.wait()


def run_program(functionalization: bool, param_aliasing: bool, program: list[Op], schedule: Any = None) -> None:
    """Run one program against the model, checking after every operation and at the end; under
    ``schedule`` (a ``harness.sched`` policy) the program and the executor thread interleave as it
    decides, and a failure carries the schedule that replays it."""
    config.configure(functionalization=functionalization, param_aliasing=param_aliasing)

    def body() -> None:
        interp = Interpreter()
        try:
            for op in program:
                interp.apply(op)
                interp.check_materialized()
            interp.check_all()
        finally:
            interp.close()

    if schedule is None:
        body()
        return
    from harness import sched

    sched.check(body, schedule)


SYNC_ALIASING = Invariant(
    id="sync-aliasing",
    title="aliases, in-place ops, steps, syncs, saves and reads agree with a numpy model",
    check=run_program,
    examples=lambda: programs(12, reach=4, min_ops=3),
    size=lambda example: len(example["program"]),
    max_size=5,
    max_examples=100,
    needs=(base.TENSORS, base.ALIASING, base.STEP),
)


SAVE_ALIASING = Invariant(
    id="save-aliasing",
    title="a checkpoint holds every alias' latest value and leaves every live buffer alone",
    check=run_program,
    examples=lambda: programs(
        6, scheduled=False, vocabulary=("alias", "inplace_tensor", "inplace", "derive", "save", "mark_step", "read"), reach=2,
        min_ops=2, motifs=("aliased_writes",),
        swarmed=False,  # its motif is the rare sequence; a swarm doubled its time in compiles
    ),
    catches=(faults.ALIASED_SAVE,),
    size=lambda example: len(example["program"]),
    max_size=5,
    max_examples=100,
    search_examples=800,
    needs=(base.TENSORS, base.ALIASING, base.STEP, base.SAVE),
)

VIEW_WRITES = Invariant(
    id="view-writes",
    title="writes through views of views (3-d permutations, negative dimensions, slices) land where numpy's do",
    check=run_program,
    examples=lambda: programs(
        5, scheduled=False, vocabulary=("alias", "inplace", "inplace_tensor", "read"), reach=2, min_ops=2,
        motifs=("alias_chain",),
    ),
    size=lambda example: len(example["program"]),
    max_examples=100,
    needs=(base.TENSORS, base.ALIASING),
)

BUFFER_SHARING = Invariant(
    id="buffer-sharing",
    title="a step never donates a buffer another live tensor still holds (copies, steps, writes)",
    check=run_program,
    examples=lambda: programs(
        8, scheduled=False, vocabulary=("create", "derive", "inplace_tensor", "inplace", "mark_step", "read"),
        param_aliasing=True, reach=3, min_ops=5,
    ),
    size=lambda example: len(example["program"]),
    max_size=8,
    max_examples=100,
    needs=(base.TENSORS, base.ALIASING, base.STEP),
)

PARTIAL_SYNC = Invariant(
    id="partial-sync",
    title="a sync of some tensors leaves alone the buffers other pending values still read",
    check=run_program,
    examples=lambda: programs(
        5, scheduled=False, vocabulary=("inplace", "derive", "sync"),
        param_aliasing=True, reach=2, min_ops=2, motifs=("pending_readers",),
        swarmed=False,  # three kinds and a motif: a swarm adds little here and costs compiles
    ),
    catches=(faults.PARTIAL_SYNC_DONATION,),
    size=lambda example: len(example["program"]),
    max_size=4,
    max_examples=300,  # short programs: the budget buys breadth around the motif
    search_examples=400,
    needs=(base.TENSORS, base.ALIASING, base.STEP),
)

SYNC_WAITS = Invariant(
    id="sync-waits",
    title="after a waiting sync or wait_device_ops every handle is filled, in any interleaving",
    check=run_program,
    examples=lambda: programs(
        5, vocabulary=("derive", "inplace", "sync", "collect", "read_handles", "mark_step"), reach=1, min_ops=2,
        swarmed=False,  # its bug needs the schedule, not a rare sequence; a swarm only costs compiles
    ),
    catches=(faults.RACE_ON_HANDLES,),
    size=lambda example: len(example["program"]),
    max_size=4,
    max_examples=80,
    search_examples=400,
    needs=(base.TENSORS, base.ALIASING, base.STEP, base.ASYNC_SYNC, base.HANDLES),
)


def check_waiting_sync(before: str, how: str, schedule: Any = None) -> None:
    """Once a waiting sync, ``wait_device_ops`` or the accumulation helper's collection returns,
    every handle of the tensors it covered is filled, whether or not that call itself launched
    the work (an earlier asynchronous sync may have), and after ``wait_device_ops`` no execution
    is still running, in any interleaving with the executor."""
    rt = adapters.current()

    def body() -> None:
        launched, completed = rt.executions()
        t = rt.derive(rt.tensor(np.ones((2, 3), np.float32)))
        if before == "async-sync":
            rt.sync([t], False)
        elif before == "step":
            rt.step()
        if how == "sync-wait":
            rt.sync([t], True)
            rt.read_handles([t])
        elif how == "wait":
            rt.sync([t], False)
            rt.wait()
            now_launched, now_completed = rt.executions()
            running = (now_launched - launched) - (now_completed - completed)
            assert running == 0, f"wait_device_ops() returned with {running} execution(s) still running"
            rt.read_handles([t])
        else:
            rt.collect_handles([t])
        assert np.array_equal(rt.to_host(t), np.full((2, 3), 3, np.float32)), "the synced value is wrong"

    if schedule is None:
        body()
        return
    from harness import sched

    sched.check(body, schedule)


def _waiting_examples() -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {
        "before": st.sampled_from(("nothing", "async-sync", "step")),
        "how": st.sampled_from(("collect", "sync-wait", "wait")),
    }
    if base.FAULT_SWITCHES in adapters.current().capabilities:
        from harness import sched

        fields["schedule"] = sched.hypothesis_schedules()
    return st.fixed_dictionaries(fields)


WAITING_SYNC = Invariant(
    id="waiting-sync",
    title="after a waiting sync, wait_device_ops or handle collection every handle is filled",
    check=check_waiting_sync,
    examples=_waiting_examples,
    catches=(faults.RACE_ON_HANDLES, faults.WAIT_GAP),
    size=lambda example: ("nothing", "async-sync", "step").index(example["before"]),
    max_size=0,
    max_examples=40,
    needs=(base.TENSORS, base.STEP, base.ASYNC_SYNC, base.HANDLES),
)


# ------------------------------------------------------------------------------ the machine


class SyncAliasMachine(RuleBasedStateMachine):
    """The same operations as rules of a hypothesis state machine (``TestCase`` for pytest)."""

    def __init__(self) -> None:
        super().__init__()
        self.interp: Interpreter | None = None
        self._stack = ExitStack()

    @initialize(functionalization=st.booleans(), param_aliasing=st.booleans())
    def configure(self, functionalization: bool, param_aliasing: bool) -> None:
        from harness.runtime.testing import isolated

        self._stack.enter_context(isolated())
        config.configure(functionalization=functionalization, param_aliasing=param_aliasing)
        self.interp = Interpreter()
        self._stack.callback(self.interp.close)

    def _do(self, op: Op) -> None:
        assert self.interp is not None
        self.interp.apply(op)

    ready = precondition(lambda self: self.interp is not None)

    @ready
    @rule(seed=st.integers(0, 4))
    def create(self, seed: int) -> None:
        self._do(Create(seed))

    @ready
    @rule(src=_ref, kind=st.integers(0, 8))
    def alias(self, src: int, kind: int) -> None:
        self._do(Alias(src, kind))

    @ready
    @rule(dst=_ref, op=st.sampled_from(("add", "sub", "mul")), scalar=st.sampled_from(SCALARS))
    def inplace(self, dst: int, op: str, scalar: float) -> None:
        self._do(InPlace(dst, op, scalar))

    @ready
    @rule(dst=_ref, src=_ref, op=st.sampled_from(("add", "copy")))
    def inplace_tensor(self, dst: int, src: int, op: str) -> None:
        self._do(InPlaceTensor(dst, src, op))

    @ready
    @rule(src=_ref)
    def derive(self, src: int) -> None:
        self._do(Derive(src))

    @ready
    @rule()
    def mark_step(self) -> None:
        self._do(MarkStep())

    @ready
    @rule(refs=_refs, wait=st.booleans())
    def sync(self, refs: tuple[int, ...], wait: bool) -> None:
        self._do(Sync(refs, wait))

    @ready
    @rule()
    def wait_device_ops(self) -> None:
        self._do(Wait())

    @ready
    @rule(ref=_ref)
    def read(self, ref: int) -> None:
        self._do(Read(ref))

    @ready
    @rule(refs=_refs)
    def save_load(self, refs: tuple[int, ...]) -> None:
        self._do(SaveLoad(refs))

    @ready
    @rule(ref=_ref)
    def grab(self, ref: int) -> None:
        self._do(Grab(ref))

    @ready
    @rule(refs=_refs)
    def collect_handles(self, refs: tuple[int, ...]) -> None:
        self._do(CollectHandles(refs))

    @ready
    @rule(refs=_refs)
    def read_handles(self, refs: tuple[int, ...]) -> None:
        self._do(ReadHandles(refs))

    @ready
    @rule(block=st.one_of(*(make() for make in MOTIFS.values())))
    def motif(self, block: list[Op]) -> None:
        """A block of operations that only mean something together (``MOTIFS``: a chain of views
        written through, an aliased write then a save, a pending reader then a sync): rules are
        drawn one at a time, and the machine's rules are already swarmed by hypothesis itself
        (a random subset of them per run), so a block is how a chain of four views gets in."""
        for op in block:
            self._do(op)

    @invariant()
    def device_data_agrees(self) -> None:
        if self.interp is not None:
            self.interp.check_materialized()

    def teardown(self) -> None:
        try:
            if self.interp is not None:
                self.interp.check_all()
        finally:
            self._stack.close()
