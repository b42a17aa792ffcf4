"""The reference SPMD runtime: lazy tensors in the style of PyTorch/XLA, traced to JAX.

``import harness.runtime as xr``. The public names mirror the PyTorch/XLA calls they stand for
(``mark_step``, ``mark_sharding``, ``Mesh``, ``HybridMesh``, ``save``/``load``, FSDPv2); the
upstream bugs of the catalog live in the code paths as fault switches (``xr.faults.SWITCHES``,
``xr.faults.inject(name)``).
"""

from harness.runtime import faults, fsdp, kernels, models, nn, optim
from harness.runtime.accumulation import gradient_accumulation
from harness.runtime.autograd import no_grad
from harness.runtime.checkpoint import load, save
from harness.runtime.config import configure, options
from harness.runtime.errors import (
    CheckpointError,
    DonatedBufferError,
    DuplicateDiscoveryError,
    ExecutionTimeoutError,
    InvalidBufferError,
    PlaceholderAccessError,
    RuntimeFault,
    ShardingLostError,
)
from harness.runtime.mesh import HybridMesh, Mesh, normalize_spec
from harness.runtime.nn import manual_seed
from harness.runtime.plan_cache import compile_count
from harness.runtime.recompiles import last_compile_reason
from harness.runtime.sharding import clear_sharding, is_sharded, mark_sharding, sharding_spec
from harness.runtime.shards import from_local_shards, local_shards
from harness.runtime.step import device_data, forget_pending, mark_step, sync, wait_device_ops
from harness.runtime.tensor import Tensor, cat, ones, tensor, where, zeros
from harness.runtime.topology import Topology, discover, discovery_count
from harness.runtime.transfers import metrics

__all__ = [
    "CheckpointError",
    "DonatedBufferError",
    "DuplicateDiscoveryError",
    "ExecutionTimeoutError",
    "InvalidBufferError",
    "HybridMesh",
    "Mesh",
    "PlaceholderAccessError",
    "RuntimeFault",
    "ShardingLostError",
    "Tensor",
    "Topology",
    "cat",
    "clear_sharding",
    "compile_count",
    "configure",
    "device_data",
    "discover",
    "discovery_count",
    "faults",
    "forget_pending",
    "from_local_shards",
    "fsdp",
    "gradient_accumulation",
    "is_sharded",
    "kernels",
    "last_compile_reason",
    "load",
    "local_shards",
    "manual_seed",
    "mark_sharding",
    "mark_step",
    "no_grad",
    "metrics",
    "models",
    "nn",
    "normalize_spec",
    "ones",
    "optim",
    "options",
    "save",
    "sharding_spec",
    "sync",
    "tensor",
    "wait_device_ops",
    "where",
    "zeros",
]


def device() -> str:
    """The one SPMD device name, for ``.to(device)`` calls written in PyTorch/XLA style."""
    return "xla:0"
