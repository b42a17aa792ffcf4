"""Hypothesis strategies for the inputs distributed runtimes get wrong: meshes, specs, shapes.

They are building blocks, composed the way Hypothesis' own strategies are: draw a mesh, then
specs over *that* mesh, then shapes that spec can split (``meshes().flatmap(...)``, or
``st.data()`` inside a test). Each argument that cannot work (a mesh larger than the process'
device count, a spec naming an axis the mesh lacks, a negative rank) is refused with a
``ValueError`` when the strategy is built, not as a health-check failure deep inside a run.

What they favour, and why:

* meshes: every ordered factorization of the device count into 1 to 3 axes, size-1 axes and
  odd sizes (3) included (size-2 axes hide permutation bugs, since a swap of two is its own
  inverse), with the device order permuted (an identity order hides device-order bugs);
* specs: replicated dims, one axis, several axes on one dim, the empty spec of a 0-d value, each
  mesh axis at most once, and the spellings users write: tuples, lists, lists inside lists and
  ``jax.sharding.PartitionSpec``;
* shapes: every split dimension a multiple of its axes' sizes, with ``divisible=False`` for the
  invariants that say what must happen to an uneven one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from hypothesis import strategies as st
from jax.sharding import PartitionSpec

#: axis names drawn for meshes; ``fsdp`` is among them so FSDPv2's spec preparation gets exercised
AXIS_NAMES: tuple[str, ...] = ("fsdp", "data", "model", "x", "y")

#: the dtypes round trips and checkpoints must keep bit for bit
DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16", "int32", "bool")


def device_count() -> int:
    """Devices of the runtime under test in this process (``harness.adapters.current()``)."""
    from harness.adapters import current

    return current().device_count()


def runtime_name() -> str:
    from harness.adapters import current

    return current().name


def layout_of(mesh: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]]:
    """(device ids, mesh shape, axis names) of a mesh of any runtime under test: the reference
    runtime's and PyTorch/XLA's meshes carry them; a JAX mesh holds devices, whose ids are their
    positions in JAX's (process-major) device order."""
    import jax

    if not isinstance(mesh, jax.sharding.Mesh):
        return tuple(int(i) for i in np.asarray(mesh.device_ids).reshape(-1)), tuple(mesh.mesh_shape), tuple(mesh.axis_names)
    order = {d: i for i, d in enumerate(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))}
    return tuple(order[d] for d in mesh.devices.flat), tuple(mesh.devices.shape), tuple(mesh.axis_names)


def axis_sizes(mesh: Any) -> dict[str, int]:
    _, shape, names = layout_of(mesh)
    return dict(zip(names, shape, strict=True))


@lru_cache(maxsize=64)
def factorizations(n: int, max_axes: int = 3) -> tuple[tuple[int, ...], ...]:
    """Every ordered factorization of ``n`` into 1..``max_axes`` factors (factors of 1 included)."""
    if n < 1 or max_axes < 1:
        raise ValueError(f"cannot factor {n} devices into {max_axes} axes")
    out: list[tuple[int, ...]] = []

    def rec(rest: int, prefix: tuple[int, ...]) -> None:
        if prefix and rest == 1:
            out.append(prefix)
        if len(prefix) == max_axes:
            return
        for f in range(1, rest + 1):
            if rest % f == 0:
                rec(rest // f, prefix + (f,))

    rec(n, ())
    return tuple(sorted(set(out), key=lambda s: (len(s), s)))


# Strategy objects are built once and reused: hypothesis validates every new strategy object on
# first draw, which costs more than the draw itself, and these are drawn thousands of times.
@lru_cache(maxsize=1024)
def ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


@lru_cache(maxsize=1024)
def choice(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(options)


@lru_cache(maxsize=1024)
def perm(items: tuple[Any, ...]) -> st.SearchStrategy[list[Any]]:
    return st.permutations(items)


@lru_cache(maxsize=4096)
def _mesh(runtime: str, ids: tuple[int, ...], shape: tuple[int, ...], names: tuple[str, ...]) -> Any:
    """One mesh object per runtime and layout, so its JAX mesh and cached shardings are built once
    (an ``xr.Mesh`` for the reference runtime, the runtime's own mesh for the others)."""
    from harness.adapters import get

    return get(runtime).mesh(ids, shape, names)


def unrank_permutation(rank: int, n: int) -> tuple[int, ...]:
    """The ``rank``-th permutation of ``range(n)`` in lexicographic order (0 is the identity), so
    one integer draw picks a device order and shrinking it goes towards the identity."""
    items = list(range(n))
    out = []
    for i in range(n, 0, -1):
        index, rank = divmod(rank, math.factorial(i - 1))
        out.append(items.pop(index))
    return tuple(out)


@lru_cache(maxsize=64)
def _layouts(
    n: int, shapes: tuple[tuple[int, ...], ...], names: tuple[str, ...], required: tuple[str, ...]
) -> tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]:
    """Every (mesh shape, axis names in order) a mesh strategy can draw, simplest first."""
    free = [a for a in names if a not in required]
    out = []
    for shape in shapes:
        for extra in itertools.permutations(free, len(shape) - len(required)):
            for order in itertools.permutations((*required, *extra)):
                out.append((shape, order))
    return tuple(dict.fromkeys(out))


@st.composite
def _draw_mesh(data: st.DrawFn, runtime: str, n: int, layouts: tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]) -> Any:
    shape, names = layouts[data(ints(0, len(layouts) - 1))]
    ids = unrank_permutation(data(ints(0, math.factorial(n) - 1)), n)
    return _mesh(runtime, ids, shape, names)


def meshes(
    max_devices: int | None = None,
    *,
    max_axes: int = 3,
    axis_names: Sequence[str] = AXIS_NAMES,
    require_axes: Sequence[str] = (),
) -> st.SearchStrategy[Any]:
    """Meshes of the runtime under test over every device of the process (``xr.Mesh`` for the
    reference runtime).

    An SPMD mesh of the reference runtime covers every device once, so ``max_devices`` below the
    device count cannot be honoured and is refused, as is one above it. ``require_axes`` forces
    names onto the mesh (``("fsdp",)`` for FSDPv2), the rest are drawn from ``axis_names``.
    """
    return _meshes(runtime_name(), max_devices, max_axes, tuple(axis_names), tuple(require_axes))


@lru_cache(maxsize=64)
def _meshes(
    runtime: str, max_devices: int | None, max_axes: int, axis_names: tuple[str, ...], require_axes: tuple[str, ...]
) -> st.SearchStrategy[Any]:
    n = device_count()
    if max_devices is not None:
        if max_devices > n:
            raise ValueError(f"meshes(max_devices={max_devices}): this process has only {n} devices")
        if max_devices < n:
            raise ValueError(
                f"meshes(max_devices={max_devices}): an SPMD mesh covers every device once, and this "
                f"process has {n}; run the test in a cell with {max_devices} devices instead"
            )
    if not 1 <= max_axes <= 3:
        raise ValueError(f"meshes(max_axes={max_axes}): 1 to 3 axes")
    names = tuple(dict.fromkeys((*require_axes, *axis_names)))
    if len(names) < max_axes:
        raise ValueError(f"meshes(): {len(names)} axis names {names} for up to {max_axes} axes")
    shapes = tuple(s for s in factorizations(n, max_axes) if len(s) >= len(require_axes))
    if not shapes:
        raise ValueError(f"meshes(require_axes={require_axes}): more axes than max_axes={max_axes}")
    return _draw_mesh(runtime, n, _layouts(n, shapes, names, require_axes))


@lru_cache(maxsize=256)
def spec_groupings(axes: tuple[str, ...], ndim: int) -> tuple[tuple[Any, ...], ...]:
    """Every normal spec of rank ``ndim`` over ``axes``: each axis unused or on one dimension,
    groups ordered; the all-replicated spec first and the ones using fewer axes before the rest."""
    out: set[tuple[Any, ...]] = set()
    for placement in itertools.product(range(-1, ndim), repeat=len(axes)):
        dims: list[list[str]] = [[] for _ in range(ndim)]
        for axis, dim in zip(axes, placement, strict=True):
            if dim >= 0:
                dims[dim].append(axis)
        for orders in itertools.product(*(itertools.permutations(d) for d in dims)):
            out.add(tuple(None if not g else g[0] if len(g) == 1 else tuple(g) for g in orders))
    used = lambda spec: sum(0 if e is None else 1 if isinstance(e, str) else len(e) for e in spec)  # noqa: E731
    return tuple(sorted(out, key=lambda spec: (used(spec), repr(spec))))


@st.composite
def _specs(data: st.DrawFn, ndim: int, axes: tuple[str, ...], forms: tuple[str, ...]) -> Any:
    """One normal spec (each axis at most once) in one of ``forms``, a group of one axis written
    either as the bare name or as a one-tuple: two draws, so the search stays fast and shrinks
    towards the replicated spec written as a tuple."""
    specs = spec_groupings(axes, ndim)
    spec = specs[data(ints(0, len(specs) - 1))]
    spelling = data(ints(0, 2 * len(forms) - 1))
    if spelling % 2:
        spec = tuple((e,) if isinstance(e, str) else e for e in spec)
    return _spell(spec, forms[spelling // 2])


def _spell(spec: tuple[Any, ...], form: str) -> Any:
    if form == "tuple":
        return spec
    if form == "list":
        return list(spec)
    if form == "nested-list":
        return [list(e) if isinstance(e, tuple) else e for e in spec]
    return PartitionSpec(*spec)


SPEC_FORMS: tuple[str, ...] = ("tuple", "list", "nested-list", "PartitionSpec")


def partition_specs(
    mesh: Any, ndim: int, *, forms: Sequence[str] = SPEC_FORMS, axes: Sequence[str] | None = None
) -> st.SearchStrategy[Any]:
    """Partition specs of rank ``ndim`` over ``mesh``, in the spellings users write (``forms``).

    ``axes`` limits the axes used (default: all of the mesh's); naming one the mesh lacks is a
    ``ValueError`` here.
    """
    return _partition_specs(mesh, ndim, tuple(forms), None if axes is None else tuple(axes))


@lru_cache(maxsize=4096)
def _partition_specs(mesh: Any, ndim: int, forms: tuple[str, ...], axes: tuple[str, ...] | None) -> st.SearchStrategy[Any]:
    if ndim < 0:
        raise ValueError(f"partition_specs(ndim={ndim}): a rank is 0 or more")
    pool = tuple(mesh.axis_names) if axes is None else axes
    unknown = [a for a in pool if a not in mesh.axis_names]
    if unknown:
        raise ValueError(f"partition_specs(axes={pool}): {unknown} not in mesh axes {mesh.axis_names}")
    bad = [f for f in forms if f not in SPEC_FORMS]
    if bad or not forms:
        raise ValueError(f"partition_specs(forms={forms}): known forms are {SPEC_FORMS}")
    return _specs(ndim, pool, forms)


def split_counts(mesh: Any, spec: Any) -> list[int]:
    """How many pieces each dimension is split into (validates the spec against the mesh)."""
    sizes = axis_sizes(mesh)
    out = []
    for entry in spec:
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        for a in axes:
            if a not in sizes:
                raise ValueError(f"spec {spec!r} names axis {a!r}, not in mesh axes {mesh.axis_names}")
        out.append(math.prod(sizes[a] for a in axes))
    return out


@st.composite
def _uneven(data: st.DrawFn, dims: tuple[st.SearchStrategy[int], ...], parts: tuple[int, ...], max_multiple: int) -> tuple[int, ...]:
    shape = list(data(st.tuples(*dims)))
    i = data(choice(tuple(k for k, p in enumerate(parts) if p > 1)))
    p = parts[i]
    shape[i] = data(ints(0, max_multiple * (p - 1) - 1).map(lambda k: k + 1 + k // (p - 1)))
    return tuple(shape)


def sharded_shapes(
    mesh: Any, spec: Any, *, divisible: bool = True, max_multiple: int = 3
) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes ``spec`` can lay out over ``mesh``: each split dimension a multiple (1 to
    ``max_multiple``) of its pieces, a replicated one 1 to 4 long.

    ``divisible=False`` draws shapes where at least one split dimension does *not* divide evenly,
    for invariants that say what must happen then; a spec that splits nothing cannot make one
    and is refused.
    """
    return _sharded_shapes(tuple(split_counts(mesh, spec)), divisible, max_multiple, repr(spec), repr(mesh))


@lru_cache(maxsize=4096)
def _sharded_shapes(
    parts: tuple[int, ...], divisible: bool, max_multiple: int, spec: str, mesh: str
) -> st.SearchStrategy[tuple[int, ...]]:
    if max_multiple < 1:
        raise ValueError(f"sharded_shapes(max_multiple={max_multiple}): at least 1")
    if not divisible and not any(p > 1 for p in parts):
        raise ValueError(f"sharded_shapes(divisible=False): spec {spec} splits no dimension of {mesh}")
    dims = tuple(st.integers(1, 4) if p == 1 else st.integers(1, max_multiple).map(lambda m, p=p: m * p) for p in parts)
    return st.tuples(*dims) if divisible else _uneven(dims, parts, max_multiple)


def dtypes() -> st.SearchStrategy[np.dtype]:
    """float32, bfloat16, float16, int32, bool."""
    import ml_dtypes

    table = {"bfloat16": np.dtype(ml_dtypes.bfloat16)}
    return st.sampled_from(DTYPES).map(lambda n: table.get(n) or np.dtype(n))


def _special_bits(dtype: np.dtype) -> list[int]:
    """Bit patterns a uniform draw almost never hits and a transfer most often breaks: signed
    zeros, infinities, NaN, the smallest subnormal, the extremes."""
    bits = np.dtype(f"u{dtype.itemsize}")
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        values = np.array([0, 1, -1, info.min, info.max], dtype=dtype)
    else:
        import ml_dtypes

        with np.errstate(over="ignore"):
            finfo = ml_dtypes.finfo(dtype)
            values = np.array(
                [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, float(finfo.max), float(finfo.smallest_subnormal)],
                dtype=dtype,
            )
    return sorted({int(b) for b in values.view(bits)})


def host_arrays(shape: Sequence[int], dtype: np.dtype) -> st.SearchStrategy[np.ndarray]:
    """Host values of any bit pattern a dtype can hold, NaNs, infinities and -0.0 included (a
    round trip must keep every bit, so the values are drawn as raw bits, special ones favoured)."""
    shape = tuple(shape)
    count = math.prod(shape)
    if dtype == np.bool_:
        return st.lists(st.booleans(), min_size=count, max_size=count).map(
            lambda v: np.array(v, dtype=np.bool_).reshape(shape)
        )
    bits = np.dtype(f"u{dtype.itemsize}")
    top = (1 << (8 * dtype.itemsize)) - 1
    element = st.one_of(st.integers(0, top), st.sampled_from(_special_bits(dtype)))
    return st.lists(element, min_size=count, max_size=count).map(
        lambda v: np.array(v, dtype=bits).view(dtype).reshape(shape)
    )


@st.composite
def _mesh_spec_shape(data: st.DrawFn, max_ndim: int, meshes_: st.SearchStrategy[Any]) -> tuple[Any, Any, tuple[int, ...]]:
    mesh = data(meshes_)
    spec = data(partition_specs(mesh, data(ints(0, max_ndim))))
    return mesh, spec, data(sharded_shapes(mesh, spec))


def mesh_spec_shape(max_ndim: int = 3, **mesh_kwargs: Any) -> st.SearchStrategy[tuple[Any, Any, tuple[int, ...]]]:
    """(mesh, spec, shape) drawn together, the shape divisible: the triple most sharding
    invariants take."""
    if max_ndim < 0:
        raise ValueError(f"mesh_spec_shape(max_ndim={max_ndim}): a rank is 0 or more")
    return _mesh_spec_shape(max_ndim, meshes(**mesh_kwargs))


# ------------------------------------------------------------------------------ alias chains
# A chain is a tuple of view kinds (``harness.properties.model``: ``detach``, ``reshape``,
# ``flatten``, ``transpose``, ``permute:...``, ``rows``, ``strided``), each applied to the view the
# one before it made: a slice of a detached transpose, a reshape of a permuted detach. The same
# chain is applied to a runtime tensor (``view_chain``) and to a numpy array (``numpy_chain``), so
# a read-back through it has an exact expected value.

#: the view kinds that carry a layout through (a dimension of the view is a dimension of the
#: base): what a chain marked with a sharding may hold
LAYOUT_VIEWS: tuple[str, ...] = ("detach", "transpose", "permute")


def _family(kind: str) -> str:
    return kind.split(":", 1)[0]


def chain_shape(shape: tuple[int, ...], chain: Sequence[str]) -> tuple[int, ...]:
    """The shape at the end of ``chain`` applied to a value of ``shape``."""
    return numpy_chain(np.empty(shape, np.bool_), chain).shape


def numpy_chain(values: np.ndarray, chain: Sequence[str]) -> np.ndarray:
    """``values`` seen through every view of ``chain`` in turn (a numpy view, no copy)."""
    from harness.properties.model import apply_view

    for kind in chain:
        values = apply_view(kind, values)
    return values


def runtime_view(rt: Any, t: Any, kind: str, shape: tuple[int, ...]) -> Any:
    """The view ``kind`` of the runtime tensor ``t`` of ``shape`` (``rt``: an adapter)."""
    from harness.properties.model import permutation, view_index, view_shape

    if kind == "detach":
        return rt.alias(t, "detach")
    if kind in ("reshape", "flatten"):
        return rt.alias(t, "reshape", view_shape(kind, shape))
    if kind == "transpose":
        return rt.alias(t, "transpose")
    if kind.startswith("permute:"):
        return rt.alias(t, "transpose", permutation(kind))
    return rt.alias(t, "index", view_index(kind, shape))


def view_chain(rt: Any, t: Any, chain: Sequence[str], shape: tuple[int, ...]) -> Any:
    """The runtime tensor ``t`` of ``shape`` seen through every view of ``chain`` in turn."""
    for kind in chain:
        t = runtime_view(rt, t, kind, shape)
        shape = chain_shape(shape, (kind,))
    return t


@st.composite
def _alias_chains(data: st.DrawFn, shape: tuple[int, ...], min_length: int, max_length: int, families: tuple[str, ...]) -> tuple[str, ...]:
    from harness.properties.model import view_kinds

    chain: list[str] = []
    for _ in range(data(ints(min_length, max_length))):
        kinds = tuple(k for k in view_kinds(shape) if _family(k) in families)
        if not kinds:
            break
        chain.append(kinds[data(ints(0, len(kinds) - 1))])
        shape = chain_shape(shape, chain[-1:])
    return tuple(chain)


def alias_chains(
    shape: Sequence[int], *, min_length: int = 0, max_length: int = 4, families: Sequence[str] | None = None
) -> st.SearchStrategy[tuple[str, ...]]:
    """Chains of views of a value of ``shape``, ``min_length`` to ``max_length`` long (each length
    alike likely: a long chain is what a write-back or layout read-back gets wrong, and op by op it
    is rare), each view one that applies to the shape the chain has reached. ``families`` keeps
    only some kinds (``LAYOUT_VIEWS``: the views a sharding can be marked through); a chain stops
    early where none applies (a 0-d value has only ``detach``)."""
    from harness.properties.model import view_kinds

    shape = tuple(shape)
    known = {_family(k) for k in ("detach", "reshape", "flatten", "transpose", "permute:", "rows", "strided")}
    chosen = tuple(sorted(known)) if families is None else tuple(families)
    if not 0 <= min_length <= max_length or set(chosen) - known:
        raise ValueError(f"alias_chains(min_length={min_length}, max_length={max_length}, families={chosen}): known families {sorted(known)}")
    if min_length and not any(_family(k) in chosen for k in view_kinds(shape)):
        raise ValueError(f"alias_chains({shape}, families={chosen}): no such view applies to that shape")
    return _alias_chains_of(shape, min_length, max_length, chosen)


@lru_cache(maxsize=1024)
def _alias_chains_of(shape: tuple[int, ...], min_length: int, max_length: int, families: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...]]:
    return _alias_chains(shape, min_length, max_length, families)
