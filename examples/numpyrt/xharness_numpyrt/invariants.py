"""An invariant any runtime with meshes and layouts must keep: the device at each mesh position
holds the block that position owns, whatever order the spec names the mesh's axes in.

It is written against ``harness.api.current()``, so it holds every registered runtime to the
rule (the reference runtime, tinyjax, numpyrt), not numpyrt alone. The expected blocks are
computed here from the spec's definition; the runtime is only asked what it holds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness import api

#: mesh axis names, in the mesh's order
AXES = ("x", "y")


def check_block_placement(mesh: tuple[int, ...], spec: tuple[str | None, str | None], rows: int, cols: int) -> None:
    """Lay a ``(rows * blocks, cols * blocks)`` matrix out by ``spec`` over a mesh of ``mesh``
    shape (every device of the runtime), and check each device's block and values."""
    runtime = api.current()
    api.require(runtime, api.MESHES, api.SHARDING, api.SHARDING_READBACK)
    names = AXES[: len(mesh)]
    n = math.prod(mesh)
    handle = runtime.mesh(range(n), mesh, names)
    blocks = [1 if axis is None else mesh[names.index(axis)] for axis in spec]
    shape = (rows * blocks[0], cols * blocks[1])  # an even split on every axis: no padding
    host = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    t = runtime.mark_sharding(runtime.tensor(host), handle, spec)
    shards = runtime.device_shards(t)
    grid = np.arange(n).reshape(mesh)
    for position in np.ndindex(*mesh):
        device = int(grid[position])
        assert device in shards, f"device {device} (mesh position {position}) holds nothing under {spec}"
        index, data = shards[device]
        held = tuple(s.indices(size)[:2] for s, size in zip(index, shape, strict=True))
        owned = tuple(
            (0, size) if axis is None else (
                position[names.index(axis)] * (size // count),
                (position[names.index(axis)] + 1) * (size // count),
            )
            for size, axis, count in zip(shape, spec, blocks, strict=True)
        )
        assert held == owned, (
            f"device {device} at mesh position {position} of a {mesh} mesh {names} holds rows and "
            f"columns {held} under spec {spec}; its position owns {owned}"
        )
        np.testing.assert_array_equal(data, host[index])
    np.testing.assert_array_equal(runtime.to_host(t), host)


def _meshes(n: int) -> list[tuple[int, ...]]:
    """Every mesh over ``n`` devices with one or two axes, the 1-d mesh first (hypothesis shrinks
    toward the front: a counterexample is shown on the simplest mesh that still fails)."""
    return [(n,)] + [(a, n // a) for a in range(1, n + 1) if n % a == 0]


def _specs(axes: int) -> list[tuple[str | None, str | None]]:
    """Every spec of a 2-d array over the first ``axes`` mesh axes, unsplit first."""
    names = [None, *AXES[:axes]]
    return [(a, b) for a in names for b in names if a is None or a != b]


def _examples() -> st.SearchStrategy[dict[str, Any]]:
    # built when the check runs (xharness calls this lazily): the mesh takes every device of the
    # runtime under test, whose count the cell decides
    n = api.current().device_count()
    return st.sampled_from(_meshes(n)).flatmap(
        lambda mesh: st.fixed_dictionaries(
            {
                "mesh": st.just(mesh),
                "spec": st.sampled_from(_specs(len(mesh))),
                "rows": st.integers(1, 3),
                "cols": st.integers(1, 3),
            }
        )
    )


BLOCK_PLACEMENT = api.Invariant(
    id="numpyrt-block-placement",
    title="each device holds the block its mesh position owns, in whatever order the spec names the axes",
    check=check_block_placement,
    examples=_examples,
    catches=("transposed-placement",),
    # the matrix's dimensions and the mesh's axes: the shrunk counterexample is a 1 x 1 block on
    # the first 2-d mesh whose axes both have two devices or more
    size=lambda example: example["rows"] + example["cols"] + len(example["mesh"]),
    max_size=4,
    max_examples=30,
    needs=(api.MESHES, api.SHARDING, api.SHARDING_READBACK),
    # each example lays out a fresh tensor and records nothing, so it needs none of the reference
    # runtime's isolation between examples (which would also start that runtime for numpyrt)
    isolate=False,
)
