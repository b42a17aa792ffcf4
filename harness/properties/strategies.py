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
    """Devices of this process' runtime (starts JAX's backend)."""
    from harness.runtime import topology

    return topology.discover().device_count


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


def meshes(
    max_devices: int | None = None,
    *,
    max_axes: int = 3,
    axis_names: Sequence[str] = AXIS_NAMES,
    require_axes: Sequence[str] = (),
) -> st.SearchStrategy[Any]:
    """``xr.Mesh`` objects over every device of the process.

    An SPMD mesh of the reference runtime covers every device once, so ``max_devices`` below the
    device count cannot be honoured and is refused, as is one above it. ``require_axes`` forces
    names onto the mesh (``("fsdp",)`` for FSDPv2), the rest are drawn from ``axis_names``.
    """
    from harness.runtime.mesh import Mesh

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
    shapes = [s for s in factorizations(n, max_axes) if len(s) >= len(require_axes)]
    if not shapes:
        raise ValueError(f"meshes(require_axes={tuple(require_axes)}): more axes than max_axes={max_axes}")

    @st.composite
    def draw(data: st.DrawFn) -> Mesh:
        shape = data(st.sampled_from(shapes))
        free = [a for a in names if a not in require_axes]
        chosen = list(require_axes) + data(st.permutations(free))[: len(shape) - len(require_axes)]
        order = data(st.permutations(chosen))
        ids = data(st.permutations(range(n)))
        return Mesh(ids, shape, order)

    return draw()


def _axis_groups(mesh: Any, ndim: int, axes: Sequence[str]) -> st.SearchStrategy[tuple[Any, ...]]:
    """One entry per dimension: None, one axis, or a tuple of axes; each axis at most once."""

    @st.composite
    def draw(data: st.DrawFn) -> tuple[Any, ...]:
        pool = data(st.permutations(list(axes)))
        entries: list[Any] = []
        for _ in range(ndim):
            kind = data(st.sampled_from(("none", "one", "many")))
            if kind == "none" or not pool:
                entries.append(None)
            elif kind == "one":
                entries.append(pool.pop())
            else:
                k = data(st.integers(1, len(pool)))
                entries.append(tuple(pool.pop() for _ in range(k)))
        return tuple(entries)

    return draw()


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
    if ndim < 0:
        raise ValueError(f"partition_specs(ndim={ndim}): a rank is 0 or more")
    pool = tuple(mesh.axis_names) if axes is None else tuple(axes)
    unknown = [a for a in pool if a not in mesh.axis_names]
    if unknown:
        raise ValueError(f"partition_specs(axes={pool}): {unknown} not in mesh axes {mesh.axis_names}")
    bad = [f for f in forms if f not in SPEC_FORMS]
    if bad or not forms:
        raise ValueError(f"partition_specs(forms={tuple(forms)}): known forms are {SPEC_FORMS}")
    return st.tuples(_axis_groups(mesh, ndim, pool), st.sampled_from(tuple(forms))).map(lambda p: _spell(*p))


def _parts(mesh: Any, spec: Any) -> list[int]:
    """How many pieces each dimension is split into (validates the spec against the mesh)."""
    sizes = mesh.shape()
    out = []
    for entry in spec:
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        for a in axes:
            if a not in sizes:
                raise ValueError(f"spec {spec!r} names axis {a!r}, not in mesh axes {mesh.axis_names}")
        out.append(math.prod(sizes[a] for a in axes))
    return out


def sharded_shapes(
    mesh: Any, spec: Any, *, divisible: bool = True, max_multiple: int = 3
) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes ``spec`` can lay out over ``mesh``: each split dimension a multiple (1 to
    ``max_multiple``) of its pieces, a replicated one 1 to 4 long.

    ``divisible=False`` draws shapes where at least one split dimension does *not* divide evenly,
    for invariants that say what must happen then; a spec that splits nothing cannot make one
    and is refused.
    """
    parts = _parts(mesh, spec)
    if max_multiple < 1:
        raise ValueError(f"sharded_shapes(max_multiple={max_multiple}): at least 1")
    if not divisible and not any(p > 1 for p in parts):
        raise ValueError(f"sharded_shapes(divisible=False): spec {spec!r} splits no dimension of {mesh!r}")

    dims = [
        st.integers(1, 4) if p == 1 else st.integers(1, max_multiple).map(lambda m, p=p: m * p) for p in parts
    ]
    if divisible:
        return st.tuples(*dims)
    uneven = [i for i, p in enumerate(parts) if p > 1]

    @st.composite
    def draw(data: st.DrawFn) -> tuple[int, ...]:
        shape = list(data(st.tuples(*dims)))
        i = data(st.sampled_from(uneven))
        p = parts[i]
        shape[i] = data(st.integers(1, max_multiple * p).filter(lambda d, p=p: d % p != 0))
        return tuple(shape)

    return draw()


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


def mesh_spec_shape(max_ndim: int = 3, **mesh_kwargs: Any) -> st.SearchStrategy[tuple[Any, Any, tuple[int, ...]]]:
    """(mesh, spec, shape) drawn together, the shape divisible: the triple most sharding
    invariants take."""
    if max_ndim < 0:
        raise ValueError(f"mesh_spec_shape(max_ndim={max_ndim}): a rank is 0 or more")

    @st.composite
    def draw(data: st.DrawFn) -> tuple[Any, Any, tuple[int, ...]]:
        mesh = data(meshes(**mesh_kwargs))
        spec = data(partition_specs(mesh, data(st.integers(0, max_ndim))))
        return mesh, spec, data(sharded_shapes(mesh, spec))

    return draw()
