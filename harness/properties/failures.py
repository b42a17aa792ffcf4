"""Invariant 10: an operation that fails midway leaves the runtime as it was.

Bugs of failure paths hide where something goes wrong halfway: cleanup that runs only on a normal
exit (a guard that restores its environment flag, a lock released by hand), a file rewritten
where it lies, a cache filled before the work it records fails (a plan with no executable, a
compile counted that never happened, a discovery counted that found nothing). No ordinary test
reaches them: the runtime's seams (``harness.runtime.seams``) fail where asked, as SQLite's test
harness fails every I/O call in turn.

An example is a small program of runtime operations (create, derive, update in place, a kernel
call, a step, a read, a save, a load, a fresh discovery) and a point where one seam fails: its
``nth`` reach in the program. The operation that reaches it must raise the injected error (or
the runtime's own error raised from it), never swallow it or let it out later. Afterwards:

- the kernel guard and its skip-discovery flag, and every runtime lock, are as before;
- a cache that records an operation's success gained only what succeeded: plans and compile
  notes one per compile that completed, and the compile counter likewise; kernel lowerings one
  per lowering that completed; discoveries (count and topology) one per discovery that did.
  Memo caches of sub-results computed before the failure (packed scalars, shape structs) may
  keep them, but every new entry must be true;
- no execution failure is left for an unrelated later wait to report;
- the checkpoint directory holds exactly what it held (the previous file intact, no temporary);
- every earlier tensor reads its value (the values a failed step's execution was computing
  carry its error instead, and only those); the next step, a load, and the rest of the program
  work, and a failed discovery is not counted against the one that follows.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st

from harness.adapters import base
from harness.properties.base import Invariant
from harness.properties.strategies import choice, ints
from harness.runtime import kernels, plan_cache, seams, testing, topology
from harness.runtime.checkpoint import load, save
from harness.runtime.step import mark_step, wait_device_ops
from harness.runtime.tensor import Tensor, tensor
from harness.runtime.transfers import to_host

SHAPE = (1, 1, 2, 4)  # (batch, heads, sequence, head size): a kernel's input, and small
#: which operations reach each seam
REACHING: dict[str, tuple[str, ...]] = {
    "write": ("save",),
    "rename": ("save",),
    "lower": ("step", "read", "save"),
    "compile": ("step", "read", "save"),
    "execute": ("step", "read", "save"),
    "kernel": ("kernel",),
    "discover": ("rediscover",),
}
WORK = ("derive", "inplace", "kernel")  # operations that leave a value pending
OTHER = ("create", "step", "read", "save", "load")


@dataclass(frozen=True)
class Op:
    """One operation: ``arg`` picks a tensor (modulo how many there are), a scalar, or a flavour
    (a step that waits by ``wait_device_ops`` or by ``mark_step(wait=True)``)."""

    kind: str
    arg: int = 0

    def __repr__(self) -> str:
        return f"{self.kind}({self.arg})"


def _attention(q: np.ndarray) -> np.ndarray:
    """``kernels.attention_kernel(q, q, q)`` in numpy."""
    scores = np.einsum("bhqd,bhkd->bhqk", q, q) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", weights, q)


def _fresh_kernel() -> Any:
    """A kernel no earlier example lowered: its lowering, and the kernel seam, run again."""

    def kernel(q: Any, k: Any, v: Any) -> Any:
        return kernels.attention_kernel(q, k, v)

    return kernel


def _caused_by(exc: BaseException | None, fired: BaseException) -> bool:
    """``exc`` is the injected error, or the runtime's own error raised from it."""
    return exc is not None and (exc is fired or exc.__cause__ is fired)


class _World:
    """The program's tensors, the values they must hold, and the checkpoint directory."""

    def __init__(self, directory: Path, fresh_kernels: bool) -> None:
        self.directory = directory
        self.path = directory / "state.ckpt"
        self.fresh_kernels = fresh_kernels
        self.tensors: list[Tensor] = []
        self.values: list[np.ndarray] = []
        self.pending: list[bool] = []
        self.saved: list[np.ndarray] | None = None
        self.last = 0  # the tensor the latest operation made or wrote: what a read reads
        self._add(tensor(self._initial(0)), self._initial(0), pending=False)

    @staticmethod
    def _initial(seed: int) -> np.ndarray:
        return (np.arange(int(np.prod(SHAPE)), dtype=np.float32).reshape(SHAPE) % (seed + 2)) - 1

    def _add(self, t: Tensor, value: np.ndarray, pending: bool) -> None:
        self.tensors.append(t)
        self.values.append(value)
        self.pending.append(pending)
        self.last = len(self.tensors) - 1

    def model(self) -> tuple[list[np.ndarray], list[bool], list[np.ndarray] | None]:
        return list(self.values), list(self.pending), self.saved

    def files(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.directory.iterdir())}

    def prepare(self, op: Op) -> None:
        """What comes before the operation proper: a fresh discovery starts from none."""
        if op.kind == "rediscover":
            topology.reset()

    def run(self, op: Op) -> None:
        i = op.arg % len(self.tensors)
        t = self.tensors[i]
        if op.kind == "create":
            value = self._initial(op.arg)
            self._add(tensor(value), value, pending=False)
        elif op.kind == "derive":
            self._add(t * 2.0 + float(op.arg % 3), self.values[i] * 2 + op.arg % 3, pending=True)
        elif op.kind == "inplace":
            t.add_(float(op.arg % 3 + 1))
            self.values[i] = self.values[i] + (op.arg % 3 + 1)
            self.pending[i] = True
            self.last = i
        elif op.kind == "kernel":
            # the runtime's own kernel, lowered once per process; a fresh one where its seam is armed
            kernel = _fresh_kernel() if self.fresh_kernels else kernels.attention_kernel
            self._add(kernels.trace_kernel(kernel, t, t, t), _attention(self.values[i]), pending=True)
        elif op.kind == "step":
            if op.arg % 2:
                mark_step(wait=True)
            else:
                mark_step()
                wait_device_ops()
            self.pending = [False] * len(self.tensors)
        elif op.kind == "read":
            self._expect(self.last, self.tensors[self.last].numpy())
            self.pending[self.last] = False
        elif op.kind == "save":
            save({"tensors": self.tensors, "step": len(self.tensors)}, self.path)
            self.saved = list(self.values)
            self.pending = [False] * len(self.tensors)
        elif op.kind == "load":
            self._expect_checkpoint()
        elif op.kind == "rediscover":
            topology.discover()
        else:
            raise ValueError(f"unknown operation {op.kind!r}")

    def _expect(self, i: int, got: np.ndarray, what: str = "") -> None:
        want = self.values[i]
        assert got.shape == want.shape and np.allclose(got, want, **testing.tolerance(np.float32)), (
            f"tensor {i}{what} reads {got.ravel().tolist()}, expected {want.ravel().tolist()}"
        )

    def _expect_checkpoint(self) -> None:
        if self.saved is None:
            assert not self.path.exists(), "a checkpoint file exists though no save succeeded"
            return
        loaded = load(self.path)
        got = loaded["tensors"]
        assert len(got) == len(self.saved), f"the checkpoint holds {len(got)} tensors, {len(self.saved)} were saved"
        for k, (t, want) in enumerate(zip(got, self.saved, strict=True)):
            value = t.numpy()
            assert np.allclose(value, want, **testing.tolerance(np.float32)), (
                f"the checkpoint's tensor {k} reads {value.ravel().tolist()}, saved {want.ravel().tolist()}"
            )

    def after_failure(self, op: Op, model: tuple, fired: BaseException) -> None:
        """The failed operation changed no value: every earlier tensor reads its value, except
        those the failed execution of a step that had already handed its values out was
        computing, which must carry its error; then they are dropped and the next step runs."""
        values, pending, saved = model
        assert len(self.tensors) == len(values), (
            f"the failed {op!r} left {len(self.tensors) - len(values)} new tensor(s) behind"
        )
        self.values, self.pending, self.saved = list(values), list(pending), saved
        lost = set()
        if op.kind == "step" and op.arg % 2 == 0 and isinstance(fired, seams.InjectedFailure) and fired.seam == "execute":
            lost = {i for i, p in enumerate(pending) if p}
        for i in sorted(lost):
            try:
                self.tensors[i].numpy()
            except BaseException as exc:  # noqa: BLE001 - which error it is, is the check
                if not _caused_by(exc, fired):
                    raise AssertionError(
                        f"tensor {i}, computed by the failed execution, raised {type(exc).__name__}: {exc}, "
                        "not the execution's error"
                    ) from exc
            else:
                raise AssertionError(f"tensor {i}, computed by the failed execution, reads a value")
        keep = [i for i in range(len(self.tensors)) if i not in lost]
        self.tensors = [self.tensors[i] for i in keep]
        self.values = [self.values[i] for i in keep]
        self.pending = [self.pending[i] for i in keep]
        self.last = len(self.tensors) - 1
        if not self.tensors:  # every value was lost: the next operations need one
            self._add(tensor(self._initial(0)), self._initial(0), pending=False)
        if op.kind == "rediscover":
            topology.discover()
            count = topology.discovery_count()
            assert count == 1, f"after a failed discovery, the next one is discovery number {count}"
        self.finish("after the failure")

    def finish(self, when: str = "at the end") -> None:
        """A step, then every tensor and the checkpoint read back."""
        mark_step()
        wait_device_ops()
        self.pending = [False] * len(self.tensors)
        for i, t in enumerate(self.tensors):
            self._expect(i, t.numpy(), f" ({when})")
        self._expect_checkpoint()


def _expect_raised(raised: BaseException | None, fired: BaseException, op: Op) -> None:
    if raised is None:
        raise AssertionError(f"{op!r} reached the failing seam and returned normally: the failure was swallowed ({fired})")
    if not _caused_by(raised, fired):
        raise AssertionError(
            f"{op!r} failed at an injected seam but raised {type(raised).__name__}: {raised}"
        ) from raised


def _new(after: dict, before: dict) -> dict:
    return {k: v for k, v in after.items() if k not in before}


def _expect_restored(before: seams.State, after: seams.State, armed: seams.Armed, reached: dict[str, int], op: Op) -> None:
    """The state around the failed operation: see the module docstring."""
    done = {s: armed.reached.get(s, 0) - reached.get(s, 0) - (s == armed.seam) for s in seams.SEAMS}
    problems: list[str] = []
    if after.skip_flag != before.skip_flag:
        problems.append(f"the skip-discovery flag is {after.skip_flag!r}, was {before.skip_flag!r}")
    if after.guards != before.guards:
        problems.append(f"{after.guards} kernel guard(s) open, {before.guards} before")
    if after.held:
        problems.append(f"locks still held: {', '.join(after.held)}")
    for what, moved in (
        ("the compile counter moved by", after.compiles - before.compiles),
        ("the plan cache gained", after.plans - before.plans),
        ("recompiles noted", sum(not any(n is b for b in before.notes) for n in after.notes)),
    ):
        if moved != done["compile"]:
            problems.append(f"{what} {moved} for {done['compile']} compile(s) that completed")
    if done["compile"] == 0 and after.last_reason != before.last_reason:
        problems.append(f"the last compile reason changed to {after.last_reason!r} with no compile completed")
    lowered = _new(after.lowered, before.lowered)
    if len(lowered) != done["kernel"] or any(not hasattr(v, "compile") for v in lowered.values()):
        problems.append(f"the kernel lowerings gained {list(lowered.values())} for {done['kernel']} lowering(s) that completed")
    for key, struct in _new(after.structs, before.structs).items():
        if struct != jax.ShapeDtypeStruct(*key):
            problems.append(f"the shape struct cached for {key} is {struct}")
    for (dtype, raw), data in _new(after.scalars, before.scalars).items():
        if not np.array_equal(to_host(data), np.frombuffer(raw, dtype=dtype)):
            problems.append(f"the packed scalars cached for {np.frombuffer(raw, dtype=dtype).tolist()} read otherwise")
    if after.discoveries - before.discoveries != done["discover"]:
        problems.append(
            f"discovery count moved by {after.discoveries - before.discoveries} for {done['discover']} discovery(ies) that completed"
        )
    if done["discover"] == 0 and after.topology is not before.topology:
        problems.append("the discovered topology changed with no discovery completed")
    if after.failure is not None:
        problems.append(f"an execution failure is left for a later wait to report: {after.failure}")
    assert not problems, f"after {op!r} failed at seam {armed.seam!r} (reach {armed.nth}): " + "; ".join(problems)


def check_failure_safety(program: list[Op], seam: str, nth: int) -> None:
    """Run ``program`` with ``seam`` failing at its ``nth`` reach; see the module docstring."""
    if seam in ("lower", "compile"):
        plan_cache.clear_cache()  # a program compiled by an earlier example would reach no compile
    with tempfile.TemporaryDirectory(prefix="xh-failures-") as directory:
        world = _World(Path(directory), fresh_kernels=seam == "kernel")
        with seams.failing(seam, nth) as armed:  # disarmed for the final read-back
            failed = _run_armed(world, program, armed)
        _escape_checked(world.finish, armed, failed, "the end of the program")


def _run_armed(world: _World, program: list[Op], armed: seams.Armed) -> Op | None:
    """Run the program; the operation during which the seam fails is checked on the spot.
    Returns that operation (None when the program never reached the seam that often)."""
    failed: Op | None = None
    for op in program:
        world.prepare(op)
        if failed is not None:
            _escape_checked(lambda op=op: world.run(op), armed, failed, repr(op))
            continue
        before, files, model, reached = seams.state(), world.files(), world.model(), dict(armed.reached)
        try:
            world.run(op)
            raised: BaseException | None = None
        except Exception as exc:  # noqa: BLE001 - which error, and whose, is the check
            raised = exc
        fired = armed.fired
        if fired is None:
            if raised is not None:
                raise raised
            continue
        failed = op
        _expect_raised(raised, fired, op)
        _expect_restored(before, seams.state(), armed, reached, op)
        now = world.files()
        assert now == files, (
            f"the failed {op!r} changed the checkpoint directory: {sorted(files)} -> {sorted(now)}"
            + ("" if sorted(now) != sorted(files) else " (a file's bytes changed)")
        )
        _escape_checked(
            lambda op=op, model=model, fired=fired: world.after_failure(op, model, fired), armed, failed, "the check after it"
        )
    return failed


def _escape_checked(run: Any, armed: seams.Armed, failed: Op | None, where: str) -> None:
    """Run a later part of the program: the injected failure must not come out of it."""
    try:
        run()
    except Exception as exc:
        fired = armed.fired
        if fired is not None and _caused_by(exc, fired) and failed is not None:
            raise AssertionError(f"the failure injected in {failed!r} at seam {armed.seam!r} escaped to {where}") from exc
        raise


# ------------------------------------------------------------------------------ the examples


def _op(kinds: tuple[str, ...]) -> st.SearchStrategy[Op]:
    return st.builds(Op, choice(kinds), ints(0, 5))


def _to_seam(seam: str) -> st.SearchStrategy[list[Op]]:
    """Operations that reach ``seam`` once: a step, a read or a save after one or two pending
    values (with nothing pending it reaches nothing; two values make another program)."""
    reaching = REACHING[seam]
    if not set(reaching) & {"step", "read", "save"}:
        return _op(reaching).map(lambda op: [op])
    return st.tuples(st.lists(_op(WORK), min_size=1, max_size=2), _op(reaching)).map(lambda m: [*m[0], m[1]])


#: how many reaches of a seam an example may let pass before the failing one (a save writes
#: five chunks and flushes: any of them may fail)
NTH: dict[str, int] = {"write": 4}


@st.composite
def _examples(draw: st.DrawFn) -> dict[str, Any]:
    """A seam and its failing reach, and a program of plain operations around at least that
    many operations that reach it."""
    seam = draw(choice(tuple(seams.SEAMS)))
    nth = draw(ints(1, NTH.get(seam, 2)))
    moves = draw(st.lists(st.one_of(_to_seam(seam), _op(WORK + OTHER).map(lambda op: [op])), min_size=1, max_size=3))
    missing = max(0, (nth if seam not in NTH else 1) - sum(any(op.kind in REACHING[seam] for op in m) for m in moves))
    moves += [draw(_to_seam(seam)) for _ in range(missing)]
    return {"program": [op for move in moves for op in move], "seam": seam, "nth": nth}


def _size(example: dict[str, Any]) -> int:
    return len(example["program"]) - 1 + example["nth"] - 1


FAILURE_SAFETY = Invariant(
    id="failure-safety",
    title="an operation that fails at any seam (write, rename, lowering, compile, kernel, execution, "
    "discovery) raises there and leaves the runtime as it was",
    check=check_failure_safety,
    examples=_examples,
    size=_size,
    max_size=3,
    max_examples=20,
    # the seams are the reference runtime's own, like its fault switches
    needs=(base.FAULT_SWITCHES,),
    mutants=(
        "17-kernel-guard-restores-only-on-normal-exit",
        "18-compile-counted-before-it-succeeds",
        "19-save-bypasses-atomic-writer",
        "20-discovery-counted-on-entry",
        "21-sync-lock-released-only-on-success",
        "22-waiting-sync-hands-out-values-first",
    ),
)
