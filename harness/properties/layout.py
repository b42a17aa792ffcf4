"""Invariants 3 and 4: where the runtime puts each element, and that every bit comes back.

Coverage is differential: JAX's ``NamedSharding.devices_indices_map``, built from JAX's own device
list and the mesh's device ids, says which slice of the value each device must hold; the runtime's
buffer must hold exactly that, element for element. Round trip follows a value host -> sharded ->
host, through a re-shard, and through a checkpoint loaded into a sharded model, comparing raw bits
(NaN payloads, -0.0 and bfloat16 included).
"""

from __future__ import annotations

import atexit
import functools
import itertools
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st

from harness import adapters
from harness.adapters import base
from harness.backends import Backend
from harness.properties import strategies as pst
from harness.properties.base import Invariant
from harness.properties.model import apply_view, permutation
from harness.properties.specs import expected_sharding
from harness.runtime import checkpoint, faults, nn, sharding
from harness.runtime.mesh import Mesh, normalize_spec
from harness.runtime.tensor import Tensor
from harness.runtime.testing import aligned_empty
from harness.scenarios.host_aliasing import RACE_BYTES, RACE_TRIALS

# ------------------------------------------------------------------------------ helpers


def _slices(index: tuple, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape, strict=True))


def expected_read_back(spec: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """What ``sharding_spec`` must report for a tensor laid out with the normal ``spec``, in the
    spelling read-backs use (a group of one axis is that axis)."""
    return None if all(e is None for e in spec) else spelled(spec)


def same_layout(mesh: Any, a: tuple[Any, ...] | None, b: tuple[Any, ...] | None, ndim: int) -> bool:
    """Whether two specs put the same slices on the same devices over ``mesh`` (a size-1 axis
    splits nothing, so ``("x",)`` over a size-1 ``x`` is the replicated layout)."""
    return expected_sharding(mesh, tuple(a or ())).is_equivalent_to(expected_sharding(mesh, tuple(b or ())), ndim)


def spelled(spec: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    """``spec`` with every one-axis group written as the bare axis name: ``(("x",),)`` and
    ``("x",)`` mean the same, and JAX reports either."""
    if spec is None:
        return None
    return tuple(e[0] if type(e) is tuple and len(e) == 1 else e for e in spec)


def _scribble(array: np.ndarray) -> None:
    """Flip every bit of ``array`` in place (a caller reusing its host buffer)."""
    if array.dtype == np.bool_:
        np.logical_not(array, out=array)
    else:
        bits = array.view(np.dtype(f"u{array.dtype.itemsize}"))
        np.invert(bits, out=bits)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes: a round trip may not change one bit."""
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def how_bits_differ(got: np.ndarray, want: np.ndarray) -> str:
    """Why ``same_bits`` failed, for the failure message: a runtime that only canonicalizes NaN
    payloads is told apart from one that changes numbers."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype}{list(got.shape)}, sent {want.dtype}{list(want.shape)}"
    if got.dtype.kind == "f" or got.dtype.name == "bfloat16":
        a, b = got.astype(np.float64), want.astype(np.float64)
        if np.array_equal(a, b, equal_nan=True):
            return "only NaN payloads differ"
        tiny = np.finfo(want.dtype).tiny if got.dtype.kind == "f" else 1.1754944e-38
        subnormal = (b != 0) & (np.abs(b) < tiny)
        if np.array_equal(np.where(subnormal, 0.0, b), a, equal_nan=True) and subnormal.any():
            return "only subnormal numbers differ: flushed to zero"
    return "values differ"


# ------------------------------------------------------------------------------ invariant 3


def check_coverage(mesh: Any, spec: Any, shape: tuple[int, ...]) -> None:
    """Each device holds exactly the slice JAX says it must, every element is held by exactly the
    replication count of devices, shard shapes agree with ``shard_shape``, and the runtime reports
    the spec it was given (any runtime under test: ``harness.adapters.current()``)."""
    rt = adapters.current()
    adapters.require(rt, base.TENSORS, base.SHARDING, base.SHARDING_READBACK)
    normal = normalize_spec(spec, len(shape), mesh)
    host = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    t = rt.mark_sharding(rt.tensor(host), mesh, normal)
    want = expected_sharding(mesh, normal)
    order = {d: i for i, d in enumerate(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))}
    wanted = {order[d]: index for d, index in want.devices_indices_map(shape).items()}
    shard_shape = want.shard_shape(shape)
    counts = np.zeros(shape, dtype=np.int64)
    held = rt.device_shards(t)
    for device, (index, data) in held.items():
        assert device in wanted, f"device {device} holds a shard but is not in {mesh!r}"
        got, exp = _slices(index, shape), _slices(wanted[device], shape)
        assert got == exp, f"{mesh!r} spec {normal!r} shape {shape}: device {device} holds {got}, JAX says {exp}"
        assert data.shape == shard_shape, f"device {device}: shard shape {data.shape}, JAX says {shard_shape}"
        assert np.array_equal(data, host[wanted[device]]), f"device {device}: shard values are not {exp}"
        counts[wanted[device]] += 1
    if len(held) == len(wanted):  # every device addressable: count the copies of each element
        replicas = len(wanted) // math.prod(pst.split_counts(mesh, normal))
        assert (counts == replicas).all(), (
            f"{mesh!r} spec {normal!r} shape {shape}: elements held {sorted(set(counts.reshape(-1).tolist()))} "
            f"times, every one should be held {replicas} times"
        )
    reported = rt.sharding_spec(t)
    assert spelled(reported) == expected_read_back(normal) or same_layout(mesh, reported, normal, len(shape)), (
        f"the runtime reports {reported!r} for a tensor marked {normal!r}"
    )


def _coverage_examples() -> st.SearchStrategy[dict[str, Any]]:
    return pst.mesh_spec_shape(3).map(lambda m: {"mesh": m[0], "spec": m[1], "shape": m[2]})


def _dims_and_axes(example: dict[str, Any]) -> int:
    return len(example["shape"]) + len(example["mesh"].axis_names) - 1


# ------------------------------------------------------------------------------ invariant 4


@functools.lru_cache(maxsize=1)
def _scratch() -> Path:
    """One scratch directory per process for the checkpoints round trips write (each example
    overwrites the last: saves are atomic renames), removed when the process exits."""
    path = Path(tempfile.mkdtemp(prefix="xharness-roundtrip-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


class _Holder(nn.Module):
    """A model of one parameter, the smallest thing a checkpoint is restored into."""

    def __init__(self, value: np.ndarray) -> None:
        super().__init__()
        self.w = nn.Parameter(value)


def _read_through(rt: Any, t: Any, values: np.ndarray, chain: tuple[str, ...], where: str) -> None:
    """The sharded tensor read through ``chain`` (views of slices of detached views...) holds the
    very bits numpy's views of ``values`` do: a read-back of a view gathers from the shards by the
    view's own index arithmetic, which a plain read never exercises. Needs ``aliasing``."""
    if not chain or base.ALIASING not in rt.capabilities:
        return
    got, want = rt.to_host(pst.view_chain(rt, t, chain, values.shape)), pst.numpy_chain(values, chain)
    assert same_bits(got, want), f"{where}, read through the views {chain}: {how_bits_differ(got, want)}"


def check_round_trip(mesh: Any, spec: Any, respec: Any, values: np.ndarray, chain: tuple[str, ...] = ()) -> None:
    """host -> sharded -> host keeps every bit, also after re-sharding, after a checkpoint save/load, and (reference runtime) after loading that
    checkpoint into a model sharded another way; each sharded value is read through the views of
    ``chain`` too. Any runtime under test; the checkpoint steps need its ``save`` capability."""
    rt = adapters.current()
    adapters.require(rt, base.TENSORS, base.SHARDING)
    ndim = values.ndim
    first, second = normalize_spec(spec, ndim, mesh), normalize_spec(respec, ndim, mesh)
    t = rt.tensor(values)
    back = rt.to_host(t)
    assert back.dtype == values.dtype, f"the runtime turned {values.dtype} into {back.dtype}"
    assert same_bits(back, values), (
        f"host -> device -> host changed the value ({values.dtype}, {values.shape}: {how_bits_differ(back, values)})"
    )
    t = rt.mark_sharding(t, mesh, first)
    got = rt.to_host(t)
    assert same_bits(got, values), (
        f"host -> {first!r} -> host changed the value ({values.dtype}, {values.shape}: {how_bits_differ(got, values)})"
    )
    _read_through(rt, t, values, chain, f"host -> {first!r}")
    t = rt.mark_sharding(t, mesh, second)
    got = rt.to_host(t)
    assert same_bits(got, values), (
        f"re-sharding {first!r} -> {second!r} changed the value ({how_bits_differ(got, values)})"
    )
    _read_through(rt, t, values, chain, f"re-sharding {first!r} -> {second!r}")
    if base.SAVE not in rt.capabilities:
        return
    path = str(_scratch() / "roundtrip.xh")
    if rt.name != "reference":
        rt.save({"w": t}, path)
        got = rt.load(path)["w"]
        assert same_bits(got, values), (
            f"a checkpoint changed the value ({values.dtype}, {values.shape}: {how_bits_differ(got, values)})"
        )
        return
    checkpoint.save({"w": t, "nested": [t.detach(), {"host": values}]}, path)
    loaded = checkpoint.load(path)
    for where, value in (("w", loaded["w"]), ("nested[0]", loaded["nested"][0]), ("nested[1]", loaded["nested"][1]["host"])):
        got = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        assert same_bits(got, values), f"checkpoint entry {where} changed the value ({values.dtype}, {values.shape})"
    array = loaded["nested"][1]["host"]
    assert isinstance(array, np.ndarray) and array.flags.writeable, "a loaded array is read-only (a view of the file?)"
    _scribble(array)  # the caller owns what load returned: writing it touches nothing else
    assert same_bits(loaded["w"].numpy(), values), "writing a loaded array changed a loaded tensor"
    model = _Holder(np.zeros_like(values))
    sharding.mark_sharding(model.w, mesh, first)
    model.load_state_dict({"w": loaded["w"]})
    assert same_bits(model.w.numpy(), values), "loading the checkpoint into a sharded model changed the value"
    assert spelled(sharding.sharding_spec(model.w)) == expected_read_back(first), (
        f"loading into a parameter sharded {first!r} left it {sharding.sharding_spec(model.w)!r}"
    )


@st.composite
def _round_trip_examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes())
    ndim = draw(pst.ints(0, 3))
    spec = draw(pst.partition_specs(mesh, ndim))
    respec = draw(pst.partition_specs(mesh, ndim))
    parts = [math.lcm(a, b) for a, b in zip(_parts(mesh, spec, ndim), _parts(mesh, respec, ndim), strict=True)]
    shape = tuple(p * draw(pst.ints(1, 2)) for p in parts)
    dtype = draw(pst.dtypes())
    values = draw(pst.host_arrays(shape, dtype))
    return {"mesh": mesh, "spec": spec, "respec": respec, "values": values, "chain": draw(pst.alias_chains(shape))}


def _parts(mesh: Mesh, spec: Any, ndim: int) -> list[int]:
    return pst.split_counts(mesh, normalize_spec(spec, ndim, mesh))


def _values_size(example: dict[str, Any]) -> int:
    return example["values"].ndim + len(example["mesh"].axis_names) - 1


COVERAGE = Invariant(
    id="coverage",
    title="each device holds exactly the slice JAX's devices_indices_map gives it",
    check=check_coverage,
    examples=_coverage_examples,
    size=_dims_and_axes,
    max_examples=60,
    needs=(base.TENSORS, base.SHARDING, base.SHARDING_READBACK),
)

ROUND_TRIP = Invariant(
    id="round-trip",
    title="host -> sharded -> host keeps every bit, through re-sharding and checkpoints",
    check=check_round_trip,
    examples=_round_trip_examples,
    size=_values_size,
    max_examples=60,
    needs=(base.TENSORS, base.SHARDING),
)


# ------------------------------------------------------------------------------ invariant 4b


def check_host_copy(values: np.ndarray, chain: tuple[str, ...] = ()) -> None:
    """A tensor made from a host array holds a copy: the caller writing its array afterwards
    (reusing a buffer, as data loaders do) leaves the tensor alone.

    How a runtime can break it depends on the backend, and so does what makes the check's verdict
    a fact rather than luck. XLA on CPU can adopt a suitably aligned host buffer without copying
    (jax-ml/jax#37830): one aligned buffer shows it every time, so four small attempts are enough
    and the check stays fast. On a GPU (any backend but the CPU) ``device_put`` returns before the
    transfer has read the buffer, so a write right after it reaches the device array only when it
    wins the race; one example of a few bytes would fail now and pass on its replay, which
    hypothesis calls flaky. There each example's values are tiled to ``RACE_BYTES`` (4 MiB, where
    the field run saw 43 of 50 writes win) and tried ``RACE_TRIALS`` (16) times, fresh buffer each
    time: a runtime with the race fails every replay of the example but with probability
    0.14 ** 16 = 2.2e-14 (``harness.scenarios.host_aliasing``), one that copies first passes them
    all. The first tensor is also read through the views of ``chain`` (where the runtime has
    aliasing): a view can read the adopted buffer even where a plain read was copied first."""
    rt = adapters.current()
    adapters.require(rt, base.TENSORS)
    backend = jax.default_backend()
    if backend != Backend.CPU:
        _check_host_copy_racing(rt, values, backend)
        return
    for attempt in range(4):  # fresh buffers: whether one is adopted depends on its alignment
        host = values.copy()
        if attempt == 0:  # one 64-byte aligned buffer, which XLA on CPU adopts if it can
            host = aligned_empty(values.shape, values.dtype)
            host[...] = values
        t = rt.tensor(host)
        _scribble(host)
        assert same_bits(rt.to_host(t), values), (
            f"the tensor changed when its host array was written after it was made ({values.dtype}, {values.shape}): "
            "the device buffer aliases the caller's memory"
        )
        if attempt == 0 and chain and base.ALIASING in rt.capabilities:
            got, want = rt.to_host(pst.view_chain(rt, t, chain, values.shape)), pst.numpy_chain(values, chain)
            if not same_bits(got, want):
                # the write is to blame only if a tensor whose array nobody wrote reads otherwise:
                # a view that changes bits by itself (a NaN quieted by the view's computation) is
                # the round-trip invariant's to judge, not aliasing
                untouched = rt.to_host(pst.view_chain(rt, rt.tensor(values.copy()), chain, values.shape))
                assert same_bits(got, untouched), (
                    f"the tensor read through the views {chain} changed when its host array was written after "
                    f"it was made ({values.dtype}, {values.shape}): the device buffer aliases the caller's memory"
                )


def _check_host_copy_racing(rt: Any, values: np.ndarray, backend: str) -> None:
    """The host-copy check where the transfer may read the host buffer after the tensor was made:
    big enough, and often enough, that the outcome is the runtime's, not the race's."""
    reps = max(1, -(-RACE_BYTES // max(values.nbytes, 1)))
    tiled = np.broadcast_to(values, (reps, *values.shape))
    for trial in range(RACE_TRIALS):
        host = aligned_empty(tiled.shape, values.dtype)
        host[...] = tiled
        t = rt.tensor(host)
        _scribble(host)
        assert same_bits(rt.to_host(t), tiled), (
            f"the tensor changed when its host array was written right after it was made ({values.dtype}, "
            f"{values.shape} tiled {reps} times; trial {trial + 1} of {RACE_TRIALS}): the transfer to the "
            f"{backend} read the caller's memory after the tensor was made"
        )


@st.composite
def _host_copy_examples(draw: st.DrawFn) -> dict[str, Any]:
    shape = tuple(draw(st.lists(pst.ints(1, 64), max_size=2)))
    return {"values": draw(pst.host_arrays(shape, draw(pst.dtypes()))), "chain": draw(pst.alias_chains(shape))}


HOST_COPY = Invariant(
    id="host-copy",
    title="a tensor made from a host array holds a copy of it",
    check=check_host_copy,
    examples=_host_copy_examples,
    size=lambda example: int(example["values"].size),
    max_examples=40,
    catches=(faults.HOST_ALIASING,),
    max_size=16,  # elements
    needs=(base.TENSORS,),
)


# ------------------------------------------------------------------------------ invariant 3b


def check_uneven_split(mesh: Any, spec: Any, shape: tuple[int, ...]) -> None:
    """Laying a value out by a spec that cannot split one of its dimensions evenly is refused at
    once with a ``ValueError`` (JAX refuses uneven shards; a runtime that accepts the annotation
    fails later, in a step far from the mistake, or pads silently). A runtime that declares it
    pads such splits (``pads-uneven``, PyTorch/XLA) is held to that instead: the value, device data
    or pending, reads back exactly after a step, the padding invisible."""
    rt = adapters.current()
    normal = normalize_spec(spec, len(shape), mesh)
    host = np.arange(math.prod(shape), dtype=np.float32).reshape(shape) + 1  # no zero: padding shows
    t = rt.tensor(host)
    values = [("device data", t, host)]
    if base.STEP in rt.capabilities:  # a pending value takes another path: an annotation node
        values.append(("a pending value", rt.derive(t), host * np.float32(2) + np.float32(1)))
    pads = base.PADS_UNEVEN in rt.capabilities
    for what, value, want in values:
        try:
            marked = rt.mark_sharding(value, mesh, normal)
        except ValueError:
            continue
        if not pads:
            raise AssertionError(
                f"marking {what} of shape {shape} with {normal!r} over {mesh!r} (axis sizes {pst.axis_sizes(mesh)}) "
                "was accepted: a dimension does not divide evenly"
            )
        if base.STEP in rt.capabilities:
            rt.step()
        got = rt.to_host(marked)
        assert got.shape == want.shape and np.array_equal(got, want), (
            f"{what} of shape {shape}, padded by {normal!r} over axis sizes {pst.axis_sizes(mesh)}, "
            f"read back {got.tolist()}, expected {want.tolist()}"
        )


@st.composite
def _uneven_examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes())
    ndim = draw(pst.ints(1, 3))
    spec = draw(pst.partition_specs(mesh, ndim))
    parts = _parts(mesh, spec, ndim)
    if not any(p > 1 for p in parts):  # nothing to split unevenly: split dimension 0 over every axis
        spec = (tuple(mesh.axis_names),) + (None,) * (ndim - 1)
        parts = _parts(mesh, spec, ndim)
    if not any(p > 1 for p in parts):
        return {"mesh": mesh, "spec": spec, "shape": ()}  # a 1-device mesh: see check
    return {"mesh": mesh, "spec": spec, "shape": draw(pst.sharded_shapes(mesh, spec, divisible=False))}


def _check_uneven(mesh: Any, spec: Any, shape: tuple[int, ...]) -> None:
    if shape:  # on one device every split is even: nothing to refuse
        check_uneven_split(mesh, spec, shape)


UNEVEN_SPLIT = Invariant(
    id="uneven-split",
    title="a spec that cannot split a dimension evenly is refused when it is given",
    check=_check_uneven,
    examples=_uneven_examples,
    size=_dims_and_axes,
    max_examples=60,
    needs=(base.TENSORS, base.SHARDING),
)


# ------------------------------------------------------------------------------ invariant 3c


def check_view_sharding(
    mesh: Any, spec: Any, values: np.ndarray, perm: tuple[int, ...], chain: tuple[str, ...] = ()
) -> None:
    """Sharding a permuted view lays the view out by the spec: after a step the base holds the
    spec permuted back, and the base, the chain's last view, the marked view and a slice of it read the
    right values (whether the base was device data or pending when the view was marked).

    ``chain`` (``strategies.alias_chains`` over ``LAYOUT_VIEWS``: detaches, transposes,
    permutations) comes between the base and the permutation: the layout has to find its way back
    through every link, as a write does, and a permutation of a permuted detach is where an
    inverse that only holds in 2-d, or a negative dimension left as written, shows."""
    rt = adapters.current()
    ndim = values.ndim
    normal = normalize_spec(spec, ndim, mesh)
    t = rt.tensor(values)
    links = [t]
    for kind in chain:
        links.append(pst.runtime_view(rt, links[-1], kind, pst.chain_shape(values.shape, chain[: len(links) - 1])))
    view = rt.alias(links[-1], "transpose", perm)
    view = rt.mark_sharding(view, mesh, normal)
    rt.step()
    assert np.array_equal(rt.to_host(t), values), "the base's values changed"
    if chain:  # the last link before the permutation (the ones before it read through it)
        got, want = rt.to_host(links[-1]), pst.numpy_chain(values, chain)
        assert np.array_equal(got, want), f"the view {chain} of the base reads {got.tolist()}, numpy {want.tolist()}"
    want = pst.numpy_chain(values, chain).transpose(perm)
    assert np.array_equal(rt.to_host(view), want), f"the view {(*chain, f'permute{perm}')}'s values are wrong"
    # a slice of the marked view reads its part of the layout
    got = rt.to_host(pst.runtime_view(rt, view, "rows", want.shape))
    assert np.array_equal(got, apply_view("rows", want)), f"the rows of the marked view read {got.tolist()}"
    if base.VIEW_BASE_LAYOUT not in rt.capabilities:
        return  # the runtime keeps a view's annotation on the view (PyTorch/XLA): values only
    dims = _base_dims(chain, perm, ndim)
    wanted: list[Any] = [None] * ndim
    for i, d in enumerate(dims):
        wanted[d] = normal[i]
    reported = rt.sharding_spec(t)
    assert spelled(reported) == expected_read_back(tuple(wanted)) or same_layout(mesh, reported, tuple(wanted), ndim), (
        f"marking the view {(*chain, f'permute{perm}')} with {normal!r} left the base laid out "
        f"{rt.sharding_spec(t)!r}, expected {tuple(wanted)!r}"
    )


def _base_dims(chain: tuple[str, ...], perm: tuple[int, ...], ndim: int) -> list[int]:
    """For each dimension of the view ``chain`` then ``permute(perm)`` makes, the base's dimension
    it is (every link a detach, a transpose or a permutation)."""
    dims = list(range(ndim))
    for kind in (*chain, "permute:" + ",".join(map(str, perm))):
        if kind == "transpose":
            dims = dims[::-1]
        elif kind.startswith("permute:"):
            dims = [dims[d % ndim] for d in permutation(kind)]
    return dims


@st.composite
def _view_examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes())
    ndim = draw(pst.ints(2, 3))
    perm = draw(pst.choice(tuple(p for p in itertools.permutations(range(ndim)) if p != tuple(range(ndim)))))
    if draw(st.booleans()):
        perm = tuple(d - ndim for d in perm)  # written with negative dimensions
    chain = draw(pst.alias_chains((2,) * ndim, max_length=3, families=pst.LAYOUT_VIEWS))
    spec = draw(pst.partition_specs(mesh, ndim))
    view_shape = draw(pst.sharded_shapes(mesh, spec))
    shape = [0] * ndim
    for i, d in enumerate(_base_dims(chain, perm, ndim)):
        shape[d] = view_shape[i]
    values = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    return {"mesh": mesh, "spec": spec, "values": values, "perm": perm, "chain": chain}


VIEW_SHARDING = Invariant(
    id="view-sharding",
    title="sharding a permuted view lays the base out by the spec permuted back",
    check=check_view_sharding,
    examples=_view_examples,
    size=lambda example: example["values"].ndim + len(example["mesh"].axis_names) - 1 + len(example["chain"]),
    max_examples=40,
    needs=(base.TENSORS, base.SHARDING, base.SHARDING_READBACK, base.ALIASING, base.STEP),
)
