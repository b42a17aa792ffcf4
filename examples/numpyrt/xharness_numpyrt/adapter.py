"""numpyrt behind xharness' adapter protocol (``harness.api.Adapter``).

The adapter is the only place where numpyrt meets the harness. It does two things a runtime not
built on JAX must do itself:

* it learns the cell's device count from ``api.cell_shape()``: the matrix sets the cell's shape
  in every process's environment, and that is the count JAX would see too, so numpyrt's devices
  and the harness' agree without numpyrt importing JAX;
* it says what numpyrt can do (``capabilities``) and leaves the rest to ``api.BaseAdapter``,
  whose defaults raise ``api.Unsupported``: a check that needs a step boundary, aliases or
  checkpoints is then skipped with that reason instead of run against something faked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from harness import api
from xharness_numpyrt import __version__, runtime


class NumpyRtAdapter(api.BaseAdapter):
    """numpyrt, one platform per process, sized by the cell."""

    name = "numpyrt"
    capabilities = frozenset(
        {api.TENSORS, api.MESHES, api.SHARDING, api.SHARDING_READBACK, api.FAULT_SWITCHES}
    )

    def __init__(self) -> None:
        # read once, when the harness first asks for the runtime: a cell's shape is fixed for the
        # life of its processes, as a real runtime's devices are fixed once it has started
        self.cell = api.cell_shape()
        # this process's devices only: in a multi-process cell each rank addresses
        # ``cell.devices`` of the cell's ``cell.total_devices`` (numpyrt has no collectives to
        # reach the others, so it never claims them)
        self.platform = runtime.Platform(self.cell.devices)

    def version(self) -> str:
        """The installed distribution's version (what ``expected.toml`` rows match), or the
        package's own when it runs from a source tree that was never installed."""
        try:
            return version("xharness-numpyrt")
        except PackageNotFoundError:
            return __version__

    def device_count(self) -> int:
        return len(self.platform)

    # -- tensors and layouts
    def tensor(self, host: np.ndarray) -> runtime.Array:
        return runtime.put(self.platform, host)

    def to_host(self, t: runtime.Array) -> np.ndarray:
        return runtime.gather(t)

    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> runtime.Mesh:
        return self.platform.mesh(device_ids, shape, axis_names)

    def mark_sharding(self, t: runtime.Array, mesh: runtime.Mesh, spec: tuple[Any, ...]) -> runtime.Array:
        # numpyrt's arrays are immutable: the laid-out array is a new one, as the protocol allows
        return runtime.shard(t, mesh, spec)

    def sharding_spec(self, t: runtime.Array) -> tuple[Any, ...] | None:
        return runtime.spec_of(t)

    def device_shards(self, t: runtime.Array) -> dict[int, tuple[tuple[slice, ...], np.ndarray]]:
        # keyed by device number: the platform's order is the order mesh ids index. A copy of
        # each buffer, so that a check cannot change what a device holds by writing to it.
        return {piece.device.id: (piece.index, np.array(piece.data)) for piece in t.shards}

    def derive(self, t: runtime.Array) -> runtime.Array:
        return runtime.apply(t, lambda block: block * 2 + 1)

    # -- fault switches: the runtime's own, passed through
    def fault_switches(self) -> Mapping[str, str]:
        return dict(runtime.SWITCHES)

    def inject(self, fault: str) -> AbstractContextManager[None]:
        return runtime.fault(fault)

    def faults_on(self) -> frozenset[str]:
        return runtime.faults_on()
