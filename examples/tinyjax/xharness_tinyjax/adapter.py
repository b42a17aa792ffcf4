"""The runtime under test, behind xharness' adapter protocol (``harness.api.Adapter``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

import numpy as np

from harness import api

#: the runtime's fault switches: each re-creates one bug, off unless a check turns it on
SWITCHES = {
    "dropped-axis": "mark_sharding drops the last sharded dimension of the spec (that dimension "
    "is replicated instead of split)",
}


class TinyJaxAdapter(api.BaseAdapter):
    name = "tinyjax"
    capabilities = frozenset(
        {api.TENSORS, api.MESHES, api.SHARDING, api.SHARDING_READBACK, api.STEP, api.FAULT_SWITCHES}
    )

    def __init__(self) -> None:
        import jax

        self.jax = jax
        self.on: set[str] = set()

    def version(self) -> str:
        return version("xharness-tinyjax")

    def device_count(self) -> int:
        return len(self.jax.devices())

    # -- tensors and layouts
    def tensor(self, host: np.ndarray) -> Any:
        return self.jax.device_put(np.array(host, copy=True))

    def to_host(self, t: Any) -> np.ndarray:
        return np.asarray(t)

    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> Any:
        devices = self.jax.devices()
        grid = np.array([devices[i] for i in device_ids], dtype=object).reshape(tuple(shape))
        return self.jax.sharding.Mesh(grid, tuple(axis_names))

    def mark_sharding(self, t: Any, mesh: Any, spec: tuple[Any, ...]) -> Any:
        spec = tuple(spec)
        if "dropped-axis" in self.on:
            sharded = [i for i, axis in enumerate(spec) if axis is not None]
            if sharded:
                spec = spec[: sharded[-1]] + (None,) + spec[sharded[-1] + 1:]
        sharding = self.jax.sharding.NamedSharding(mesh, self.jax.sharding.PartitionSpec(*spec))
        return self.jax.device_put(t, sharding)

    def sharding_spec(self, t: Any) -> tuple[Any, ...] | None:
        sharding = t.sharding
        if not isinstance(sharding, self.jax.sharding.NamedSharding):
            return None
        spec = tuple(sharding.spec) + (None,) * (t.ndim - len(tuple(sharding.spec)))
        return None if all(axis is None for axis in spec) else spec

    def device_shards(self, t: Any) -> dict[int, tuple[tuple[slice, ...], np.ndarray]]:
        order = {d: i for i, d in enumerate(self.jax.devices())}
        return {order[s.device]: (s.index, np.asarray(s.data)) for s in t.addressable_shards}

    def derive(self, t: Any) -> Any:
        return t * 2 + 1

    # -- steps: the runtime is eager, so a step boundary has nothing pending
    def step(self) -> None:
        pass

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        for t in tensors:
            t.block_until_ready()

    # -- fault switches
    def fault_switches(self) -> Mapping[str, str]:
        return dict(SWITCHES)

    def faults_on(self) -> frozenset[str]:
        return frozenset(self.on)

    @contextmanager
    def inject(self, fault: str) -> Iterator[None]:
        if fault not in SWITCHES:
            raise ValueError(f"unknown fault switch {fault!r}; known: {', '.join(SWITCHES)}")
        was_on = fault in self.on
        self.on.add(fault)
        try:
            yield
        finally:
            if not was_on:
                self.on.discard(fault)
