"""The reference runtime (``harness.runtime``) as a runtime under test: every capability, and the
fault switches the catalog's teeth are measured with."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from importlib import metadata
from typing import Any

import numpy as np

from harness import settings
from harness.adapters import base


class ReferenceAdapter(base.TorchStyleAliasing, base.BaseAdapter):
    name = "reference"
    capabilities = frozenset(base.CAPABILITIES)
    options = frozenset(o.name for o in settings.RUNTIME_OPTIONS)  # every one: they are its own

    def __init__(self) -> None:
        import harness.runtime as xr

        self.xr = xr

    def version(self) -> str:
        return _installed_version()

    def fault_switches(self) -> Mapping[str, str]:
        return dict(self.xr.faults.SWITCHES)

    def inject(self, fault: str) -> AbstractContextManager[None]:
        return self.xr.faults.inject(fault)

    def faults_on(self) -> frozenset[str]:
        return frozenset(self.xr.faults.enabled())

    def device_count(self) -> int:
        return self.xr.discover().device_count

    def tensor(self, host: np.ndarray) -> Any:
        return self.xr.tensor(host, dtype=host.dtype)

    def to_host(self, t: Any) -> np.ndarray:
        return t.numpy()

    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> Any:
        return self.xr.Mesh(list(device_ids), tuple(shape), tuple(axis_names))

    def mark_sharding(self, t: Any, mesh: Any, spec: tuple[Any, ...]) -> Any:
        return self.xr.mark_sharding(t, mesh, spec)

    def sharding_spec(self, t: Any) -> tuple[Any, ...] | None:
        return self.xr.sharding_spec(t)

    def device_shards(self, t: Any) -> dict[int, tuple[tuple[slice, ...], np.ndarray]]:
        if t.rt_storage.pending:
            self.xr.sync([t], wait=True)
        (data,) = self.xr.device_data([t])
        order = {d: i for i, d in enumerate(self.xr.discover().devices)}
        return {order[s.device]: (s.index, np.asarray(s.data)) for s in data.array().addressable_shards}

    def donate(self, t: Any) -> Any:
        previous = self.xr.configure(param_aliasing=True)
        try:
            t.add_(1)
            self.xr.mark_step(wait=True)
        finally:
            self.xr.configure(param_aliasing=previous.param_aliasing)
        return t

    def materialized(self, t: Any) -> bool:
        return not t.rt_storage.pending and not t.rt_views

    def step(self) -> None:
        self.xr.mark_step()

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        self.xr.sync(list(tensors), wait=wait)

    def wait(self) -> None:
        self.xr.wait_device_ops()

    def derive(self, t: Any) -> Any:
        return t * 2.0 + 1.0

    def save(self, tensors: dict[str, Any], path: str) -> None:
        self.xr.save(tensors, path)

    def load(self, path: str) -> dict[str, np.ndarray]:
        return {k: v.numpy() if isinstance(v, self.xr.Tensor) else np.asarray(v) for k, v in self.xr.load(path).items()}

    def grab(self, t: Any) -> Any:
        t.numpy()
        (data,) = self.xr.device_data([t])
        return data

    def read_grabbed(self, handle: Any) -> np.ndarray | None:
        from harness.runtime import transfers

        try:
            return transfers.to_host(handle)
        except self.xr.DonatedBufferError:
            return None

    def local_shards(self, t: Any) -> list[Any]:
        return self.xr.local_shards(t)

    def from_local_shards(self, pieces: Sequence[Any], mesh: Any, spec: tuple[Any, ...]) -> Any:
        return self.xr.from_local_shards(list(pieces), mesh, spec)

    def is_donated_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self.xr.DonatedBufferError)

    def collect_handles(self, tensors: Sequence[Any]) -> list[Any]:
        from harness.runtime.accumulation import collect_loop_inputs

        handles = collect_loop_inputs(list(tensors))
        assert not any(h.is_placeholder for h in handles), "collected an unfilled placeholder"
        return handles

    def executions(self) -> tuple[int, int]:
        metrics = self.xr.metrics
        return metrics.executions, metrics.completed

    def read_handles(self, tensors: Sequence[Any]) -> list[Any]:
        return self.xr.device_data(list(tensors))

    def discovery_count(self) -> int:
        return self.xr.discovery_count()

    def prepare_fsdp_spec(self, shape: tuple[int, ...], mesh: Any) -> Any:
        """Spec preparation reads only the shape, so the parameter is a pending value: no device
        transfer, and thousands of examples a second."""
        from harness.runtime import ir
        from harness.runtime.tensor import Tensor

        zero = ir.const(0.0, np.dtype(np.float32))
        param = Tensor.from_node(ir.Node("broadcast_to", (zero,), (tuple(shape),)))
        return self.xr.fsdp.prepare_partition_spec(param, mesh)

    def op_sharding(self, mesh: Any, spec: Any) -> Any:
        return mesh.get_op_sharding(spec)

    def training_dialect(self) -> base.TrainingDialect:
        return REFERENCE_DIALECT


#: a training program in the reference runtime's own API (``import harness.runtime as xr``)
REFERENCE_DIALECT = base.TrainingDialect(
    prelude="import numpy as np\n\nimport harness.runtime as xr\n",
    options="xr.configure(functionalization={functionalization}, param_aliasing={param_aliasing})",
    tensor="xr.tensor({array})",
    parameter="xr.nn.Parameter({array})",
    mesh="xr.Mesh({ids}, {shape}, {names})",
    mark_sharding="xr.mark_sharding({t}, {mesh}, {spec})",
    sgd="xr.optim.SGD({params}, lr={lr}, momentum={momentum}, weight_decay={weight_decay})",
    adam="xr.optim.Adam({params}, lr={lr}, eps={eps})",
    set_lr="{opt}.lr = {lr}",
    mark_step="xr.mark_step()",
    sync="xr.sync({tensors}, wait=True)",
    read="{t}.numpy()",
    compile_count="xr.compile_count()",
    where="xr.where({cond}, {a}, {b})",
)


@functools.cache
def _installed_version() -> str:
    """The harness' own version, read once per process: every scenario result records it, and
    reading it parses the distribution's whole metadata (its README included)."""
    return metadata.version("xharness")
