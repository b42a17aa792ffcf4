"""The catalog entry for the transposed-placement bug: its trigger, and how it shows itself.

The trigger is the smallest layout that tells the two walks of the mesh apart: a 2-d mesh whose
axes both have two or more devices, and a spec that names them in the other order (rows along
the mesh's second axis, columns along its first). The bug leaves every value intact, so the
variant reads where each block lives, and raises :class:`MisplacedShard` when a device holds a
block its mesh position does not own.
"""

from __future__ import annotations

import numpy as np

from harness import api


class MisplacedShard(AssertionError):
    """A device holds the block of another mesh position than its own."""


def _owned(
    position: tuple[int, ...], mesh_shape: tuple[int, ...], names: tuple[str, ...],
    spec: tuple[str | None, ...], shape: tuple[int, ...],
) -> tuple[tuple[int, int], ...]:
    """The (start, stop) of each dimension the mesh position ``position`` owns: computed here,
    from the spec's definition, never by asking the runtime."""
    owned = []
    for size, axis in zip(shape, spec, strict=True):
        if axis is None:
            owned.append((0, size))
            continue
        step = size // mesh_shape[names.index(axis)]
        block = position[names.index(axis)]
        owned.append((block * step, (block + 1) * step))
    return tuple(owned)


def _transposed_spec(ctx: api.Context) -> None:
    """Split rows along the mesh's second axis and columns along its first, on a
    2 x (devices / 2) mesh, then check which block each device holds, and the values."""
    runtime = api.get("numpyrt")
    names, mesh_shape = ("x", "y"), (2, ctx.devices // 2)
    mesh = runtime.mesh(range(ctx.devices), mesh_shape, names)
    spec = ("y", "x")  # the mesh's axes, named in the other order
    host = ctx.normal(3 * mesh_shape[1], 2 * mesh_shape[0])
    t = runtime.mark_sharding(runtime.tensor(host), mesh, spec)
    shards = runtime.device_shards(t)
    grid = np.arange(ctx.devices).reshape(mesh_shape)
    positions = list(np.ndindex(*mesh_shape))
    owners = {_owned(p, mesh_shape, names, spec, host.shape): p for p in positions}
    for position in positions:
        device = int(grid[position])
        index, data = shards[device]
        held = tuple(s.indices(n)[:2] for s, n in zip(index, host.shape, strict=True))
        if held != _owned(position, mesh_shape, names, spec, host.shape):
            raise MisplacedShard(
                f"device {device} at mesh position {position} holds the block of mesh position "
                f"{owners.get(held, 'none')} (rows and columns {held}) under spec {spec}"
            )
        np.testing.assert_array_equal(data, host[index])
    # reached only with every block in place: the values alone never showed the bug
    np.testing.assert_array_equal(runtime.to_host(t), host)


TRANSPOSED_PLACEMENT = api.Scenario(
    id="numpyrt-transposed-placement",
    title="a spec naming the mesh's axes in the other order puts blocks on the wrong devices",
    upstream=(),
    component="numpyrt shard",
    trigger="lay a matrix out by ('y', 'x') over a 2 x n/2 mesh of axes ('x', 'y') and read "
    "which block each device holds",
    fault="transposed-placement",
    signatures=(
        api.Signature(
            "misplaced-shard",
            "xharness_numpyrt.scenarios:MisplacedShard",
            "holds the block of mesh position",
        ),
    ),
    variants={"transposed-spec": _transposed_spec},
    needs=api.Needs(
        devices=4,
        device_multiple=2,
        why="the two walks of the mesh differ only on a 2-d mesh whose axes both have 2 or more "
        "devices",
    ),
    story="Blocks are handed to devices in the order the spec names the mesh axes, devices in "
    "the mesh's own order. Each device still holds one block of the right shape and every value "
    "gathers right, so value round trips pass; a collective over the mesh would then combine the "
    "wrong neighbours' data.",
    runtime="numpyrt",
)
