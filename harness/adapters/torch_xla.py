"""PyTorch/XLA as a runtime under test, through its own API.

Lazy tensors with views, in-place ops, ``mark_step`` and SPMD sharding, as the reference runtime
mirrors them. What the adapter declares is what the release in this interpreter offers, probed at
construction: sharding read-back needs the per-device shard API, ``collect_handles`` the
gradient-accumulation helper's device-data call. It never declares what it cannot observe on
this runtime: a discovery count (PyTorch/XLA keeps none), the catalog's fault switches (a release
has none), donation read-back (there is no handle on a donated buffer to read from Python), or the
reference runtime's own training API.

The runtime is configured before it is imported: ``PJRT_DEVICE=CPU`` with ``CPU_NUM_DEVICES``
(PyTorch/XLA ignores JAX's device-count flags) when no device was chosen, and SPMD mode, which a
process cannot leave, is entered at once so that every tensor made here is an SPMD tensor.

Sharding read-back recovers the partition spec from what the runtime holds: its tile assignment
(``_get_xla_sharding_spec``) is compared with the assignment each candidate spec over the
tensor's mesh produces. Where several spellings give one layout (a size-1 axis splits nothing)
the spelling the tensor was marked with is reported; when the runtime's layout matches no
candidate, the runtime's own sharding text is reported, so a lost or foreign sharding shows.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness import settings
from harness.adapters import base

_DEFAULT_CPU_DEVICES = "8"


def _configure_environment() -> None:
    """Before the import: CPU devices unless a device was chosen, and the count JAX's flags
    asked for (the plugin sets ``JAX_NUM_CPU_DEVICES``), so both runtimes see one topology."""
    if not os.environ.get("PJRT_DEVICE"):
        os.environ["PJRT_DEVICE"] = "CPU"
    if os.environ["PJRT_DEVICE"] == "CPU" and not os.environ.get("CPU_NUM_DEVICES"):
        os.environ["CPU_NUM_DEVICES"] = settings.raw("JAX_NUM_CPU_DEVICES").strip() or _DEFAULT_CPU_DEVICES


class TorchXlaAdapter(base.TorchStyleAliasing, base.BaseAdapter):
    name = "torch_xla"
    #: a cell sets them as PyTorch/XLA's own variables (``harness.matrix.config.Cell.environment``)
    options = frozenset({"functionalization", "param_aliasing"})

    def __init__(self) -> None:
        _configure_environment()
        try:
            import torch
            import torch_xla
            import torch_xla.core.xla_model as xm
            import torch_xla.distributed.spmd as xs
            import torch_xla.runtime as xr
        except ImportError as exc:
            raise base.AdapterUnavailable(
                f"torch_xla cannot be imported here ({exc}); run it in a release's environment: "
                "xharness releases torch_xla VERSION, or xharness run --runtime torch_xla --release "
                "VERSION"
            ) from exc
        self.torch, self.torch_xla, self.xm, self.xs, self.xr = torch, torch_xla, xm, xs, xr
        self.C = torch_xla._XLAC
        xr.use_spmd()
        self.device = torch_xla.device() if hasattr(torch_xla, "device") else xm.xla_device()
        # id -> (weak reference, mesh, spec): tensors compare elementwise, so no WeakKeyDictionary
        self._meshes: dict[int, tuple[weakref.ref[Any], Any, tuple[Any, ...]]] = {}
        self.capabilities = frozenset(self._probe())
        self._helper_waits = _helper_waits()

    def _probe(self) -> set[str]:
        # PyTorch/XLA shards a dimension that does not divide by padding the last shards
        caps = {base.TENSORS, base.MESHES, base.SHARDING, base.STEP, base.ALIASING, base.SAVE, base.PADS_UNEVEN}
        if all(hasattr(self.C, f) for f in ("_get_local_shards", "_get_local_shard_replica_and_indices",
                                            "_get_xla_sharding_spec")):
            caps.add(base.SHARDING_READBACK)
        if hasattr(self.C, "_get_tensors_xla_device_data_node"):
            caps.add(base.ASYNC_SYNC)
        if hasattr(self.C, "_xla_sync_multi"):  # the partial sync training programs draw
            caps.add(base.TRAINING_PROGRAMS)
        if hasattr(self.xs.Mesh, "get_op_sharding"):
            caps.add(base.OP_SHARDING)
        try:
            from torch_xla.experimental import spmd_fully_sharded_data_parallel as fsdp

            if hasattr(fsdp, "_prepare_spmd_partition_spec"):
                caps.add(base.FSDP)
        except ImportError:
            pass
        return caps

    def version(self) -> str:
        return str(self.torch_xla.__version__)

    def device_count(self) -> int:
        return int(self.xr.global_runtime_device_count())

    # -- tensors
    def tensor(self, host: np.ndarray) -> Any:
        return self._from_host(np.array(host, copy=True)).to(self.device)

    def _from_host(self, host: np.ndarray) -> Any:
        torch = self.torch
        host = np.require(host, requirements="C")  # keeps a 0-d array 0-d (ascontiguousarray does not)
        if host.dtype.name == "bfloat16":  # numpy has no bfloat16 of its own: move the bits
            return torch.from_numpy(host.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(host)

    def _to_numpy(self, t: Any) -> np.ndarray:
        torch = self.torch
        cpu = t.detach().cpu()
        if cpu.dtype == torch.bfloat16:
            import ml_dtypes

            return cpu.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return cpu.numpy()

    def to_host(self, t: Any) -> np.ndarray:
        return self._to_numpy(t)

    # -- meshes and shardings
    def mesh(self, device_ids: Sequence[int], shape: Sequence[int], axis_names: Sequence[str]) -> Any:
        return self.xs.Mesh(np.asarray(list(device_ids)), tuple(shape), tuple(axis_names))

    def _own_mesh(self, mesh: Any) -> Any:
        if isinstance(mesh, self.xs.Mesh):
            return mesh
        return self.mesh(mesh.device_ids, mesh.mesh_shape, mesh.axis_names)

    def mark_sharding(self, t: Any, mesh: Any, spec: tuple[Any, ...]) -> Any:
        own = self._own_mesh(mesh)
        if self.C._get_xla_sharding_spec(t):  # the runtime refuses to annotate twice
            self.C._xla_clear_sharding(t)
        self.xs.mark_sharding(t, own, tuple(spec))
        key = id(t)
        self._meshes[key] = (weakref.ref(t, lambda _r: self._meshes.pop(key, None)), own, tuple(spec))
        return t

    def _marked(self, t: Any) -> tuple[Any, tuple[Any, ...]] | None:
        entry = self._meshes.get(id(t))
        if entry is None or entry[0]() is not t:
            return None
        return entry[1], entry[2]

    def sharding_spec(self, t: Any) -> tuple[Any, ...] | None:
        text = str(self.C._get_xla_sharding_spec(t))
        if not text or "replicated" in text:
            return None
        marked_with = self._marked(t)
        if marked_with is None:
            return (text,)
        mesh, marked = marked_with
        found = _parse_tiles(text)
        if found is None:
            return (text,)
        matches = [s for s in _candidates(mesh, t.dim()) if _same(_tiles(mesh, s), found)]
        if not matches:
            return (text,)
        if tuple(marked) in matches:
            return tuple(marked)
        return min(matches, key=lambda s: sum(len(e) if isinstance(e, tuple) else e is not None for e in s))

    def device_shards(self, t: Any) -> dict[int, tuple[tuple[slice, ...], np.ndarray]]:
        shards = self.C._get_local_shards([t])[0]
        indices = self.C._get_local_shard_replica_and_indices([t])[0]
        out = {}
        for (data, device), (_replica, index) in zip(shards, indices, strict=True):
            if index is Ellipsis:
                index = tuple(slice(0, n, 1) for n in t.shape)
            out[int(str(device).rsplit(":", 1)[1])] = (tuple(index), self._to_numpy(data))
        return out

    def op_sharding(self, mesh: Any, spec: Any) -> Any:
        return self._own_mesh(mesh).get_op_sharding(spec)

    def prepare_fsdp_spec(self, shape: tuple[int, ...], mesh: Any) -> Any:
        from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
            _prepare_spmd_partition_spec,
        )

        return _prepare_spmd_partition_spec(self.torch.zeros(shape))

    # -- steps, aliases, in-place ops
    def materialized(self, t: Any) -> bool:
        return not self.C._check_tensor_need_materialization([t])[0]

    def step(self) -> None:
        if hasattr(self.torch_xla, "sync"):  # mark_step's newer name
            self.torch_xla.sync()
        else:
            self.xm.mark_step()

    def sync(self, tensors: Sequence[Any], wait: bool) -> None:
        self.C._xla_sync_multi(list(tensors), devices=[], wait=wait, sync_xla_data=True)

    def wait(self) -> None:
        self.xm.wait_device_ops()

    def collect_handles(self, tensors: Sequence[Any]) -> list[Any]:
        """What this release's gradient-accumulation helper does: an asynchronous sync that
        leaves pending data, a wait for device ops if the helper waits (the #9128 fix), then the
        graphs' device-data nodes (deduplicated by handle inside the runtime). Without the wait
        this sequence dies on SIGSEGV in SPMD mode on 2.5.1 and 2.9.0 alike (measured on CPU):
        the adapter does what the release ships, it does not re-create the bug."""
        self.C._xla_sync_multi(list(tensors), devices=[], wait=False, sync_xla_data=False)
        if self._helper_waits:
            self.xm.wait_device_ops()
        _ids, values = self.C._get_tensors_xla_device_data_node(list(tensors))
        return list(values)

    def read_handles(self, tensors: Sequence[Any]) -> list[Any]:
        _ids, values = self.C._get_tensors_xla_device_data_node(list(tensors))
        return list(values)

    def derive(self, t: Any) -> Any:
        return t * 2 + 1

    def training_dialect(self) -> base.TrainingDialect:
        """A training program in torch's own API on the XLA device: parameters are device leaves
        (``torch.tensor(..., device=device, requires_grad=True)``), the optimizers torch's, the
        learning rate set through the parameter groups, the compile count XLA's ``CompileTime``
        metric. A sync of chosen tensors is the call ``sync`` makes (``xm.unlazy``'s)."""
        device = "torch_xla.device()" if hasattr(self.torch_xla, "device") else "xm.xla_device()"
        step = "torch_xla.sync()" if hasattr(self.torch_xla, "sync") else "xm.mark_step()"
        return base.TrainingDialect(
            prelude=(
                "import numpy as np\nimport torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm\n"
                "import torch_xla.debug.metrics as met\nimport torch_xla.distributed.spmd as xs\n"
                f"import torch_xla.runtime as xr\n\nxr.use_spmd()\ndevice = {device}\n"
            ),
            options="",
            tensor="torch.tensor({array}, device=device)",
            parameter="torch.tensor({array}, device=device, requires_grad=True)",
            mesh="xs.Mesh(np.array({ids}), {shape}, {names})",
            mark_sharding="xs.mark_sharding({t}, {mesh}, {spec})",
            sgd="torch.optim.SGD({params}, lr={lr}, momentum={momentum}, weight_decay={weight_decay})",
            adam="torch.optim.Adam({params}, lr={lr}, eps={eps})",
            set_lr="for group in {opt}.param_groups:\n    group['lr'] = {lr}",
            mark_step=step,
            sync="torch_xla._XLAC._xla_sync_multi({tensors}, devices=[], wait=True, sync_xla_data=True)",
            read="{t}.detach().cpu().numpy()",
            compile_count='(met.metric_data("CompileTime") or (0,))[0]',
        )

    # -- persistence
    def save(self, tensors: dict[str, Any], path: str) -> None:
        self.xm.save(dict(tensors), path)

    def load(self, path: str) -> dict[str, np.ndarray]:
        loaded = self.torch.load(path, weights_only=False)
        return {k: self._to_numpy(v) if hasattr(v, "detach") else np.asarray(v) for k, v in loaded.items()}


def _helper_waits() -> bool:
    """Whether the release's gradient-accumulation helper waits for device ops before collecting
    device-data handles; a release without the helper gets the safe sequence."""
    import importlib
    import inspect

    try:
        helper = importlib.import_module("torch_xla.experimental.gradient_accumulation")
        return "wait_device_ops" in inspect.getsource(helper)
    except (ImportError, OSError, TypeError):
        return True


# ------------------------------------------------------------------------------ tile assignments
_TILES = re.compile(r"devices=\[([\d,]+)\]([^ }]*)(.*)")


def _parse_tiles(text: str) -> tuple[tuple[int, ...], tuple[int, ...], bool] | None:
    """``{devices=[2,1,2]1,2,0,3 last_tile_dim_replicate}`` (or the iota form ``<=[4]`` /
    ``<=[2,2]T(1,0)``) -> tile dims, device order, whether the last dim is replication."""
    match = _TILES.search(text)
    if not match:
        return None
    dims = tuple(int(d) for d in match.group(1).split(","))
    devices_text = match.group(2)
    iota = re.match(r"<=\[([\d,]+)\](?:T\(([\d,]+)\))?", devices_text)
    if iota:
        shape = [int(d) for d in iota.group(1).split(",")]
        ids = np.arange(math.prod(shape)).reshape(shape)
        if iota.group(2):
            ids = ids.transpose([int(p) for p in iota.group(2).split(",")])
        devices = tuple(int(i) for i in ids.reshape(-1))
    else:
        devices = tuple(int(d) for d in devices_text.split(",") if d)
    return dims, devices, "last_tile_dim_replicate" in match.group(3)


def _tiles(mesh: Any, spec: tuple[Any, ...]) -> tuple[tuple[int, ...], tuple[int, ...], bool]:
    """The GSPMD tile assignment of ``spec`` over ``mesh``: per dimension the product of its
    axes; devices in the order of those axes, the unused ones last (replication)."""
    names = list(mesh.axis_names)
    sizes = dict(zip(names, mesh.mesh_shape, strict=True))
    ids = np.asarray(mesh.device_ids).reshape(tuple(mesh.mesh_shape))
    used: list[str] = []
    dims = []
    for entry in spec:
        group = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        used.extend(group)
        dims.append(math.prod(sizes[a] for a in group))
    rest = [a for a in names if a not in used]
    order = [names.index(a) for a in used + rest]
    devices = tuple(int(i) for i in ids.transpose(order).reshape(-1))
    replicas = math.prod(sizes[a] for a in rest)
    return (*dims, replicas) if replicas > 1 else tuple(dims), devices, replicas > 1


def _same(a: tuple[tuple[int, ...], tuple[int, ...], bool], b: tuple[tuple[int, ...], tuple[int, ...], bool]) -> bool:
    """One layout: the same tiles held by the same devices. The order of the devices inside one
    replication group means nothing (each holds the whole tile), and runtimes differ on it."""

    def groups(t: tuple[tuple[int, ...], tuple[int, ...], bool]) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
        dims, devices, replicated = t
        if not replicated:
            return dims, tuple((d,) for d in devices)
        rows = np.asarray(devices).reshape(-1, dims[-1])
        tiles = dims[:-1]
        return tiles, tuple(tuple(sorted(int(d) for d in row)) for row in rows)

    return groups(a) == groups(b)


def _candidates(mesh: Any, ndim: int) -> list[tuple[Any, ...]]:
    """Every spec over ``mesh`` for ``ndim`` dimensions: each axis in at most one dimension,
    groups in every order (a few hundred at most for the meshes checks draw)."""
    names = list(mesh.axis_names)
    out: list[tuple[Any, ...]] = []
    for placement in itertools.product(range(ndim + 1), repeat=len(names)):
        groups: list[list[str]] = [[] for _ in range(ndim)]
        for axis, where in zip(names, placement, strict=True):
            if where < ndim:
                groups[where].append(axis)
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            out.append(tuple(None if not g else g[0] if len(g) == 1 else tuple(g) for g in orders))
    return out
