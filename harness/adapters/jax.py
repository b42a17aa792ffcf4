"""JAX as a runtime under test: arrays are immutable and eager, so it offers tensors, meshes,
shardings and their read-back, a step (waiting for dispatched work) and donation, but no aliasing,
in-place ops, checkpoints of its own or FSDPv2; checks that need those are skipped with the reason."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.adapters import base


class JaxAdapter(base.BaseAdapter):
    name = "jax"
    capabilities = frozenset(
        {base.TENSORS, base.MESHES, base.SHARDING, base.SHARDING_READBACK, base.STEP, base.ASYNC_SYNC, base.DONATION}
    )

    def __init__(self) -> None:
        import jax

        self.jax = jax
        self._live: list[Any] = []
        self._declined = False  # the last donate's donation was declined, with JAX's warning

    def version(self) -> str:
        return str(self.jax.__version__)

    def _devices(self) -> list[Any]:
        return sorted(self.jax.devices(), key=lambda d: (d.process_index, d.id))

    def device_count(self) -> int:
        return len(self.jax.devices())

    def tensor(self, host: np.ndarray) -> Any:
        array = self.jax.device_put(host)
        self._live.append(array)
        return array

    def to_host(self, t: Any) -> np.ndarray:
        return np.asarray(t)

    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> Any:
        devices = self._devices()
        grid = np.array([devices[i] for i in device_ids], dtype=object).reshape(tuple(shape))
        return self.jax.sharding.Mesh(grid, tuple(axis_names))

    def mark_sharding(self, t: Any, mesh: Any, spec: tuple[Any, ...]) -> Any:
        sharding = self.jax.sharding.NamedSharding(mesh, self.jax.sharding.PartitionSpec(*spec))
        out = self.jax.device_put(t, sharding)
        self._live.append(out)
        return out

    def sharding_spec(self, t: Any) -> tuple[Any, ...] | None:
        sharding = t.sharding
        if sharding.is_fully_replicated or not isinstance(sharding, self.jax.sharding.NamedSharding):
            return None
        spec = tuple(sharding.spec)
        return spec + (None,) * (t.ndim - len(spec))

    def device_shards(self, t: Any) -> dict[int, tuple[tuple[slice, ...], np.ndarray]]:
        order = {d: i for i, d in enumerate(self._devices())}
        return {order[s.device]: (s.index, np.asarray(s.data)) for s in t.addressable_shards}

    def materialized(self, t: Any) -> bool:
        return True

    def step(self) -> None:
        self.wait()

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        if wait:
            self.jax.block_until_ready(list(tensors))

    def wait(self) -> None:
        self._live = [a for a in self._live if not a.is_deleted()]
        self.jax.block_until_ready(self._live)

    def derive(self, t: Any) -> Any:
        out = t * 2 + 1
        self._live.append(out)
        return out

    def donate(self, t: Any) -> Any:
        import warnings

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = self.jax.jit(lambda x: x + 1, donate_argnums=0)(t)
        # JAX reports a donation XLA declined with this warning, and then keeps the array
        self._declined = any("donated buffers were not usable" in str(w.message) for w in seen)
        self._live.append(out)
        return out

    def donation_declined(self) -> bool:
        return self._declined

    def grab(self, t: Any) -> Any:
        return t

    def read_grabbed(self, handle: Any) -> np.ndarray | None:
        if handle.is_deleted():
            try:
                np.asarray(handle)
            except RuntimeError as exc:  # JAX's own clear error: "Array has been deleted"
                if "deleted" in str(exc):
                    return None
                raise
            raise AssertionError("a deleted array returned data when read")
        return np.asarray(handle)
