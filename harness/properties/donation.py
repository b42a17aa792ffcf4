"""Invariant 8: a donated buffer is gone, and saying so is the runtime's job.

Donation lets a step reuse an input's memory for its output (PyTorch/XLA's parameter aliasing,
``donate_argnums`` in JAX). Afterwards the old buffer is deleted; a handle that still points at it
must raise the runtime's own clear error when read (the reference runtime's
``DonatedBufferError``, JAX's "Array has been deleted"), never return whatever the memory now
holds, and the step's result must be right.

What each runtime promises is held exactly: JAX deletes a donated array in the donating call, and
a donation XLA declines (it could not reuse the buffer) is reported with the warning "Some
donated buffers were not usable", after which the array may live on holding its input; the
reference runtime, like PyTorch/XLA, promises more: a donated buffer is gone, declined or not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness import adapters
from harness.adapters import base
from harness.properties import strategies as pst
from harness.properties.base import Invariant
from harness.runtime import faults


def check_donation(values: np.ndarray, read_first: bool) -> None:
    """Donating a tensor's buffer deletes it: reading a handle to it raises the runtime's own
    error. A buffer the host has read may still be referenced by that read (XLA on CPU hands out
    zero-copy views), so the runtime may keep it instead; then it must still hold its old value."""
    rt = adapters.current()
    t = rt.tensor(values)
    handle = rt.grab(t)
    if read_first:
        before = rt.read_grabbed(handle)
        assert before is not None and np.array_equal(before, values), "a buffer grabbed before any step reads wrong"
    result = rt.donate(t)
    assert np.array_equal(rt.to_host(result), values + 1), "the donating step computed the wrong value"
    after = rt.read_grabbed(handle)  # raises for anything but the runtime's own clear error
    if read_first:
        assert after is None or np.array_equal(after, values), (
            f"the donated buffer reads {after.tolist()}, neither deleted nor its old value"
        )
    elif rt.donation_declined():  # said so, as JAX promises to: the buffer is still the input
        assert after is None or np.array_equal(after, values), (
            f"a donation the runtime declined left the buffer reading {after.tolist()}, not its old value"
        )
    else:
        assert after is None, (
            f"the donated buffer still reads {after.tolist()} ({rt.name} {rt.version()}): donation did "
            "not delete it, and the runtime did not say it declined it"
        )


@st.composite
def _donation_examples(draw: st.DrawFn) -> dict[str, Any]:
    shape = tuple(draw(st.lists(pst.ints(1, 8), max_size=2)))
    return {"read_first": draw(st.booleans()), "values": np.asarray(draw(st.lists(pst.ints(-50, 50), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))), dtype=np.float32).reshape(shape)}


DONATION = Invariant(
    id="donation",
    title="a donated buffer is deleted and reading it raises the runtime's own error",
    check=check_donation,
    examples=_donation_examples,
    size=lambda example: int(example["values"].ndim),
    max_examples=30,
    needs=(base.TENSORS, base.DONATION),
)


# ------------------------------------------------------------------------------ invariant 8b


def check_shared_buffer(materialize_first: bool, update: str, param_aliasing: bool, functionalization: bool) -> None:
    """Two tensors made to hold one value (``b.copy_(c)``) may end up holding one buffer after a
    step; updating one of them in place must never donate the buffer the other still holds:
    after a second step both read what they should."""
    from harness.runtime import config

    rt = adapters.current()
    config.configure(param_aliasing=param_aliasing, functionalization=functionalization)
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = rt.derive(rt.tensor(values))  # pending: 2v + 1
    if materialize_first:
        rt.step()
    b = rt.tensor(np.zeros_like(values))
    rt.inplace(b, "copy", c)
    rt.step()
    want = {"b": values * 2 + 1, "c": values * 2 + 1}
    target = b if update == "b" else c
    rt.inplace(target, "add", 1.0)
    want[update] = want[update] + 1
    rt.step()
    for name, t in (("b", b), ("c", c)):
        got = rt.to_host(t)
        assert np.array_equal(got, want[name]), f"{name} reads {got.tolist()}, expected {want[name].tolist()}"


@st.composite
def _shared_examples(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "materialize_first": draw(st.booleans()),
        "update": draw(pst.choice(("b", "c"))),
        "param_aliasing": draw(st.booleans()),
        "functionalization": draw(st.booleans()),
    }


SHARED_BUFFER = Invariant(
    id="shared-buffer",
    title="updating one of two tensors that share a computed value never donates the other's buffer",
    check=check_shared_buffer,
    examples=_shared_examples,
    size=lambda example: int(example["materialize_first"]) + int(example["update"] == "c"),
    max_examples=20,
    needs=(base.TENSORS, base.ALIASING, base.STEP),
)


# ------------------------------------------------------------------------------ invariant 8c


def check_shared_shards(rows: int, piece: int, assembled: bool, steps_before: int) -> None:
    """A per-device buffer donated through one array is gone for every array sharing it: a
    sharded tensor used after one of its local shards (or a piece of a tensor assembled from
    them) was donated either computes right or raises the runtime's own donated-buffer error.
    Anything else (XLA's "Invalid buffer passed to Execute()", a crash, garbage) is the runtime
    handing the executor a buffer that is gone."""
    rt = adapters.current()
    n = rt.device_count()
    mesh = rt.mesh(range(n), (n,), ("d",))
    values = np.arange(n * rows * 3, dtype=np.float32).reshape(n * rows, 3)
    whole = rt.tensor(values)
    rt.mark_sharding(whole, mesh, ("d", None))
    for _ in range(steps_before):  # the whole may be a step's output rather than a transfer
        rt.inplace(whole, "add", 0.0)
        rt.step()
    pieces = rt.local_shards(whole)
    target = rt.from_local_shards(pieces, mesh, ("d", None)) if assembled else whole
    rt.donate(pieces[piece % n])
    try:
        got = rt.to_host(rt.derive(target))
    except Exception as exc:
        if rt.is_donated_error(exc):
            return
        raise AssertionError(
            f"using a tensor whose per-device buffer {piece % n} was donated through a shard raised "
            f"{type(exc).__name__}, not the runtime's own donated-buffer error: {exc}"
        ) from exc
    assert np.array_equal(got, values * 2 + 1), "a tensor whose per-device buffer was donated computed wrong values"


@st.composite
def _shard_examples(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "rows": draw(pst.ints(1, 3)),
        "piece": draw(pst.ints(0, 7)),
        "assembled": draw(st.booleans()),
        "steps_before": draw(pst.ints(0, 2)),
    }


SHARED_SHARDS = Invariant(
    id="shared-shards",
    title="a per-device buffer donated through a local shard is refused with the runtime's own error",
    check=check_shared_shards,
    examples=_shard_examples,
    catches=(faults.DELETED_SHARD,),
    size=lambda example: example["rows"] - 1 + example["steps_before"] + int(example["assembled"]),
    max_size=0,
    max_examples=15,
    min_devices=2,
    needs=(base.TENSORS, base.MESHES, base.SHARDING, base.STEP, base.DONATION, base.LOCAL_SHARDS),
)
