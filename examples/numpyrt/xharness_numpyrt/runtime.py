"""numpyrt: a sharded-array runtime over numpy alone.

It is small on purpose, but it has the parts every sharded-array runtime has, so that the plugin
around it tests what matters in one:

* a :class:`Platform` of numbered :class:`Device` objects; a device's memory is the numpy
  buffers it was handed (:meth:`Device.put` copies, so a buffer is never the caller's memory);
* a :class:`Mesh`, a grid of those devices with one name per axis;
* :func:`shard`, which lays an :class:`Array` out by a partition spec (one mesh axis name, or
  ``None``, per array dimension): the array is cut into blocks along the named axes, and the
  device at each mesh position holds the block that position owns; :func:`gather` puts the
  blocks back together and :func:`spec_of` reads the spec back.

The runtime knows nothing of the harness: it is started with a device count
(``Platform(count)``), the way a real runtime reads its own configuration. The adapter is what
reads the cell's count from ``harness.api.cell_shape()`` and hands it over.

Its fault switches (:data:`SWITCHES`, turned on for a block with :func:`fault`) re-create bugs
of the kind sharded runtimes ship. The one switch, ``transposed-placement``, pairs blocks with
devices in the wrong order when a spec names the mesh's axes in another order than the mesh
lays them out: every device still holds one block of the right shape and every value still
gathers right, so a value round trip cannot see it; only where each block lives is wrong, which
in a real runtime sends a collective the wrong neighbour's data.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

__all__ = [
    "SWITCHES",
    "Array",
    "Device",
    "Mesh",
    "MeshError",
    "NumpyRtError",
    "Platform",
    "Shard",
    "ShardingError",
    "Spec",
    "apply",
    "fault",
    "faults_on",
    "gather",
    "put",
    "shard",
    "spec_of",
]

#: a partition spec: per array dimension, the mesh axis it is split along, or None (not split)
Spec = tuple[str | None, ...]

# ------------------------------------------------------------------------------- fault switches
#: the runtime's fault switches: each re-creates one bug, and all are off unless a block turns
#: one on (``with fault(name):``); the harness reaches them through the adapter
SWITCHES: dict[str, str] = {
    "transposed-placement": "shard pairs blocks with devices in the order the spec names the "
    "mesh axes instead of the mesh's own order: when the spec names them in another order (a "
    "transposed layout), blocks land on the wrong devices while every value still gathers right",
}

_on: set[str] = set()


def faults_on() -> frozenset[str]:
    """The switches on right now: what a counterexample was found with."""
    return frozenset(_on)


@contextmanager
def fault(name: str) -> Iterator[None]:
    """Turn switch ``name`` on for the block; nesting the same switch keeps it on until the
    outermost block ends, so a check may turn on a switch its caller already turned on."""
    if name not in SWITCHES:
        raise ValueError(f"unknown fault switch {name!r}; known: {', '.join(SWITCHES)}")
    was_on = name in _on
    _on.add(name)
    try:
        yield
    finally:
        if not was_on:
            _on.discard(name)


# ---------------------------------------------------------------------------------------- errors
class NumpyRtError(Exception):
    """Anything numpyrt refuses to do; its subclasses say which part refused."""


class MeshError(NumpyRtError, ValueError):
    """A mesh that cannot exist on this platform (unknown or repeated devices, a wrong shape)."""


class ShardingError(NumpyRtError, ValueError):
    """A spec that cannot lay this array out on this mesh. numpyrt does not pad: a dimension
    that a mesh axis does not divide is refused, never split unevenly."""


# --------------------------------------------------------------------------- devices and meshes
@dataclass(frozen=True)
class Device:
    """One device: a number, and the buffers put on it."""

    id: int

    def put(self, data: np.ndarray) -> np.ndarray:
        """A buffer of the device holding a copy of ``data``: the transfer. A copy, so that
        writing the caller's array afterwards never changes what the device holds."""
        buffer = np.array(data, copy=True, order="C")
        buffer.setflags(write=False)  # device memory is written by the runtime only
        return buffer

    def __repr__(self) -> str:
        return f"numpyrt:{self.id}"


class Platform:
    """The devices this process addresses, numbered from 0: the order mesh ids index."""

    def __init__(self, device_count: int) -> None:
        if device_count < 1:
            raise ValueError(f"a platform needs at least one device, got {device_count}")
        self.devices: tuple[Device, ...] = tuple(Device(i) for i in range(device_count))

    def __len__(self) -> int:
        return len(self.devices)

    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> Mesh:
        """A mesh of the devices ``device_ids`` (this platform's numbers), laid out row-major
        over ``shape``, one name per axis."""
        ids = [int(i) for i in device_ids]
        shape, names = tuple(int(s) for s in shape), tuple(axis_names)
        if len(shape) != len(names):
            raise MeshError(f"a mesh of shape {shape} needs {len(shape)} axis names, got {names}")
        if len(set(names)) != len(names):
            raise MeshError(f"axis names repeat: {names}")
        if math.prod(shape) != len(ids):
            raise MeshError(f"a mesh of shape {shape} holds {math.prod(shape)} devices, got {len(ids)} ids")
        if len(set(ids)) != len(ids):
            raise MeshError(f"device ids repeat: {ids}")
        unknown = [i for i in ids if not 0 <= i < len(self.devices)]
        if unknown:
            raise MeshError(f"no device {unknown[0]} on a platform of {len(self.devices)} device(s)")
        grid = np.empty(len(ids), dtype=object)
        grid[:] = [self.devices[i] for i in ids]
        return Mesh(grid.reshape(shape), names)


@dataclass(frozen=True, eq=False)
class Mesh:
    """A grid of devices (``devices[position]``) with one name per axis."""

    devices: np.ndarray  # of Device, shaped like the mesh
    axis_names: tuple[str, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    def device_at(self, position: tuple[int, ...]) -> Device:
        """The device at mesh coordinates ``position``."""
        device: Device = self.devices[position]
        return device

    def axis(self, name: str) -> int:
        """The position of axis ``name`` among the mesh's axes."""
        try:
            return self.axis_names.index(name)
        except ValueError:
            raise ShardingError(f"the mesh has no axis {name!r} (axes: {self.axis_names})") from None

    def size(self, name: str | None) -> int:
        """How many blocks axis ``name`` cuts a dimension into (1 for None: not split)."""
        return 1 if name is None else self.shape[self.axis(name)]


# -------------------------------------------------------------------------------------- arrays
@dataclass(frozen=True)
class Shard:
    """What one device holds of an array: where the piece sits in the whole, and its buffer."""

    device: Device
    index: tuple[slice, ...]
    data: np.ndarray


@dataclass(frozen=True, eq=False)
class Array:
    """A global value held as shards. ``mesh`` is None for an array that was only ``put``: it
    lives whole on one device, like a freshly transferred array in any runtime."""

    shape: tuple[int, ...]
    dtype: np.dtype
    spec: Spec
    mesh: Mesh | None
    shards: tuple[Shard, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)


def put(platform: Platform, host: np.ndarray) -> Array:
    """A new array holding a copy of ``host``, whole, on the platform's first device."""
    host = np.asarray(host)
    device = platform.devices[0]
    whole = tuple(slice(None) for _ in host.shape)
    return Array(host.shape, host.dtype, (None,) * host.ndim, None,
                 (Shard(device, whole, device.put(host)),))


def gather(array: Array) -> np.ndarray:
    """The array's value on the host, put together from its shards. Every element must be
    covered by some shard: a hole is the runtime's own bug, reported rather than read as
    uninitialized memory."""
    out = np.empty(array.shape, array.dtype)
    covered = np.zeros(array.shape, dtype=bool)
    for piece in array.shards:
        out[piece.index] = piece.data
        covered[piece.index] = True
    if not covered.all():
        raise NumpyRtError(f"{int((~covered).sum())} element(s) of a {array.shape} array are on no device")
    return out


def spec_of(array: Array) -> Spec | None:
    """The spec the array is laid out by, one entry per dimension; None when nothing is split
    (a replicated or a freshly put array), so that "not sharded" reads one way only."""
    return None if all(axis is None for axis in array.spec) else array.spec


def shard(array: Array, mesh: Mesh, spec: Sequence[str | None]) -> Array:
    """A new array with ``array``'s value laid out over ``mesh`` by ``spec``: the device at each
    mesh position holds the block that position owns (its coordinate along each named axis picks
    the block of that dimension); along a mesh axis the spec does not name, the blocks are
    replicated. A spec shorter than the array leaves the trailing dimensions whole."""
    layout = _normalized(spec, array.shape, mesh)
    value = gather(array)  # from whatever layout the array has now
    pieces = []
    for position, device in _placements(mesh, layout):
        index = _block_index(position, mesh, layout, array.shape)
        pieces.append(Shard(device, index, device.put(value[index])))
    return Array(array.shape, array.dtype, layout, mesh, tuple(pieces))


def apply(array: Array, fn: Callable[[np.ndarray], np.ndarray]) -> Array:
    """An elementwise ``fn`` of the array, computed on each device on the block it holds, so the
    result keeps the layout (no gather: that is what makes a runtime distributed)."""
    pieces = tuple(
        Shard(piece.device, piece.index, piece.device.put(fn(piece.data))) for piece in array.shards
    )
    dtype = pieces[0].data.dtype if pieces else array.dtype
    return Array(array.shape, dtype, array.spec, array.mesh, pieces)


# ------------------------------------------------------------------------------------ layouts
def _normalized(spec: Sequence[str | None], shape: tuple[int, ...], mesh: Mesh) -> Spec:
    """``spec`` checked against the array and the mesh, padded with None to the array's rank."""
    spec = tuple(spec)
    if len(spec) > len(shape):
        raise ShardingError(f"a spec of {len(spec)} entries for a {len(shape)}-d array: {spec}")
    layout = spec + (None,) * (len(shape) - len(spec))
    named = [axis for axis in layout if axis is not None]
    if len(set(named)) != len(named):
        raise ShardingError(f"a mesh axis may split one dimension only: {layout}")
    for dim, (size, axis) in enumerate(zip(shape, layout, strict=True)):
        blocks = mesh.size(axis)
        if size % blocks:
            raise ShardingError(
                f"dimension {dim} of size {size} does not split into {blocks} blocks along "
                f"{axis!r}; numpyrt does not pad uneven splits"
            )
    return layout


def _placements(mesh: Mesh, layout: Spec) -> list[tuple[tuple[int, ...], Device]]:
    """Each mesh position, in the mesh's coordinates, with the device that holds its block."""
    if "transposed-placement" not in _on:
        return [(position, mesh.device_at(position)) for position in np.ndindex(*mesh.shape)]
    # the bug: the blocks are walked in the order the spec names the axes (then the axes it
    # does not name), but handed to the devices in the mesh's own row-major order. With the
    # spec naming the axes in the mesh's order the two walks agree, which is why a layout
    # along the mesh's first axis, or over a 1-d mesh, never shows it.
    order = [mesh.axis(axis) for axis in layout if axis is not None]
    order += [axis for axis in range(len(mesh.shape)) if axis not in order]
    walk = np.ndindex(*(mesh.shape[axis] for axis in order))
    flat = mesh.devices.reshape(-1)
    placed = []
    for k, walked in enumerate(walk):
        position = [0] * len(mesh.shape)
        for axis, coordinate in zip(order, walked, strict=True):
            position[axis] = coordinate
        placed.append((tuple(position), flat[k]))
    return placed


def _block_index(
    position: tuple[int, ...], mesh: Mesh, layout: Spec, shape: tuple[int, ...]
) -> tuple[slice, ...]:
    """The slice of the whole array that the mesh position ``position`` owns."""
    index = []
    for size, axis in zip(shape, layout, strict=True):
        if axis is None:
            index.append(slice(None))
            continue
        step = size // mesh.size(axis)
        block = position[mesh.axis(axis)]
        index.append(slice(block * step, (block + 1) * step))
    return tuple(index)
