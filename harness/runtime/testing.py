"""Test isolation for suites that exercise the runtime in one long-lived process.

A test can leave state behind that a fresh process would not have: changed options, a pending
graph that failed on purpose (a reproduced bug would then fail every later ``mark_step``), or a
simulated multi-slice topology. ``isolated()`` undoes all three; the project's suites use it as an
autouse fixture, and so can a user's own suite.

A comparison with numpy states the numerics it allows instead of a tolerance tuned on one machine:
``tolerance(dtype, precision, backend)`` is the ``rtol``/``atol`` pair for a computation of that
dtype under that matmul precision on that backend, in the spirit of JAX's own test tolerances
(per-dtype tables, looser on accelerators). A float32 product is exact float32 on a CPU or under
``"highest"``, but TF32 on a GPU and one bfloat16 pass on a TPU under ``"default"``: a test that
holds on the CPU at ``rtol=1e-5`` fails on an H100 at the runtime's ``"high"`` though nothing is
wrong. ``lowered_text()`` and ``compiled_texts()`` show what the programs ask XLA for, where a CPU cannot
show it in a number.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from harness.backends import Backend, platform_backend
from harness.runtime import config, executor, graphs, ir, plan_cache, step, topology


@contextmanager
def isolated(reset_topology: bool = False) -> Iterator[None]:
    """Run a block, then restore options, drop pending values and, if asked or if the block
    simulated a different slice count, forget the discovered topology."""
    previous = config.configure()
    try:
        yield
    finally:
        try:
            executor.wait_device_ops(raise_errors=False)
        finally:
            step.forget_pending()
            config.restore(previous)
            found = topology.discovered()
            if reset_topology or (found is not None and found.num_slices != max(1, config.options.num_slices)):
                topology.reset()


def aligned_empty(shape: tuple[int, ...], dtype: Any = np.float32, alignment: int = 64) -> np.ndarray:
    """A writeable array whose data starts on an ``alignment`` boundary, as data loaders' (pinned)
    buffers do. XLA's CPU client adopts such a buffer instead of copying it, so a check of host
    copies needs one: numpy's own allocations are 64-byte aligned only by chance."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(size + alignment, np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + size].view(dtype).reshape(shape)


#: (rtol, atol) of a computation whose matrix products are exact in its own dtype: a float32 result
#: then differs from a float64 numpy reference by summation order and rounding only
_EXACT: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float64): (1e-12, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (5e-3, 5e-3),
    np.dtype(jnp.bfloat16): (2e-2, 2e-2),
    np.dtype(np.complex128): (1e-12, 1e-12),
    np.dtype(np.complex64): (1e-5, 1e-6),
}
#: (rtol, atol) of a float32 computation whose products XLA runs in a narrower format. TF32 keeps
#: 10 mantissa bits (the field's H100 run missed numpy by up to 4.7e-2 relative, near zero, and
#: 7e-4 absolute); one bfloat16 pass keeps 7, about four times the error. With the products'
#: operands rounded so on a CPU (``jax.lax.reduce_precision``, which reproduces the field's
#: figures), the suites' float32 comparisons use at most a tenth of the TF32 entry and a quarter
#: of the bfloat16 one. Both stay far below the error of a real bug (a lost reduction, a wrong
#: layout, a wrong operand: order 1).
_REDUCED: dict[str, tuple[float, float]] = {
    "tensorfloat32": (5e-2, 5e-3),
    "bfloat16": (1e-1, 2e-2),
}
#: dtypes whose products the matmul precision narrows (wider ones are exact, narrower ones are
#: already in a narrow format whatever the precision says)
_NARROWED = {np.dtype(np.float32), np.dtype(np.complex64)}


def product_format(precision: str | None = None, backend: str | None = None) -> str:
    """The format XLA runs float32 matrix products in under ``precision`` (any accepted name;
    the runtime's ``matmul_precision`` when None) on ``backend`` (``jax.default_backend()`` when
    None): ``float32``, ``tensorfloat32`` or ``bfloat16``.

    A CPU computes float32 products in float32 whatever the precision; a GPU runs ``default`` and
    ``high`` as TF32; a TPU runs ``default`` as one bfloat16 pass and ``high`` as three (counted
    at TF32's level). A backend not known here is assumed to narrow as far as a TPU does: its
    tolerance errs on the loose side rather than fail a correct runtime for its numerics."""
    level = config.matmul_precision(config.options.matmul_precision if precision is None else precision)
    where = platform_backend(backend or jax.default_backend())
    if level == "highest" or where is Backend.CPU:
        return "float32"
    if where is Backend.GPU or level == "high":
        return "tensorfloat32"
    return "bfloat16"


def tolerance(
    dtype: Any,
    precision: str | None = None,
    backend: str | None = None,
    *,
    minimum: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """``dict(rtol=..., atol=...)`` for comparing a runtime computation of ``dtype`` with numpy.

    ``dtype`` is the computation's dtype (a dtype, a type, a name or an array); ``precision`` and
    ``backend`` default to the runtime's configured matmul precision and JAX's default backend,
    so a test written once holds in every cell of the matrix, including one that declares
    ``matmul_precision = "tensorfloat32"`` on a GPU. ``minimum`` is what the computation itself
    needs where its products are exact (error that grows over several optimizer steps, a
    finite-difference reference): the result is never tighter than it. Integer and boolean
    results compare exactly (0, 0).
    """
    # an array (or a jax.Array, a Tensor) stands for its dtype; a scalar type is a dtype itself
    dt = np.dtype(dtype if isinstance(dtype, type | str | np.dtype) else getattr(dtype, "dtype", dtype))
    if not jnp.issubdtype(dt, jnp.inexact):
        rtol, atol = 0.0, 0.0
    elif dt in _EXACT:
        rtol, atol = _EXACT[dt]
        if dt in _NARROWED:
            fmt = product_format(precision, backend)
            if fmt != "float32":
                rtol, atol = _REDUCED[fmt]
    else:  # other narrow floats (float8 and the like): a few units of their own epsilon
        eps = float(jnp.finfo(dt).eps)
        rtol, atol = 4 * eps, 4 * eps
    if minimum:
        rtol = max(rtol, float(minimum.get("rtol", 0.0)))
        atol = max(atol, float(minimum.get("atol", 0.0)))
    return {"rtol": rtol, "atol": atol}


def lowered_text(*tensors: Any, precision: str | None = None) -> str:
    """The StableHLO text of the program that computes ``tensors`` (pending runtime tensors), lowered
    as the executor lowers a step (``graphs.build_graph``, then ``ir.lower`` under
    ``precision``, the runtime's when None), before any backend's passes: the same text on every
    backend, so a check of what the program asks for holds on a GPU as on a CPU. Nothing runs
    and the tensors stay pending. Layouts are left out (the program is lowered unsharded)."""
    graph = graphs.build_graph([t.rt_operand() for t in tensors])
    fn = ir.lower(graph.program, graph.root_positions, precision)
    structs = [jax.ShapeDtypeStruct(d.aval.shape, d.aval.dtype) for d in graph.inputs]
    return jax.jit(fn).lower(*structs).as_text()


def compiled_texts() -> list[str]:
    """The HLO text of every executable in the runtime's compile cache, oldest first.

    It is what XLA runs, after its own passes, so its spelling is the backend's: on a CPU each
    matrix product is a ``dot`` naming the precision it was compiled under
    (``operand_precision={highest,highest}``; none at ``default``), where a GPU may have turned it
    into a library call with the precision in its configuration. ``lowered_text`` is the same on
    every backend."""
    return [plan.exe.compiled.as_text() for plan in plan_cache.cached_plans()]
