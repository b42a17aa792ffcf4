"""Can this machine run a cell? Answered without initializing JAX.

Probing must be cheap and side-effect free (``xharness cells`` runs it for every cell, and the
supervisor before each one), so it looks for the JAX plugin packages and the device nodes the
drivers expose instead of starting a backend.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.matrix.config import Cell

_GPU_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_rocm_plugin", "jax_rocm60_plugin")
_TPU_PLUGINS = ("libtpu",)


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""  # why not, or what was found


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _count(directory: str, pattern: str) -> int:
    try:
        return sum(1 for entry in os.listdir(directory) if re.fullmatch(pattern, entry))
    except OSError:
        return 0


def gpu_count() -> int:
    """NVIDIA GPUs the driver exposes (``/proc/driver/nvidia/gpus`` or ``/dev/nvidiaN``); AMD via /dev/kfd."""
    count = _count("/proc/driver/nvidia/gpus", r".+") or _count("/dev", r"nvidia\d+")
    if not count and Path("/dev/kfd").exists():
        count = _count("/dev/dri", r"renderD\d+")
    return count


def tpu_count() -> int:
    """TPU chips (``/dev/accelN`` on v4 and later, ``/dev/vfio/N`` on v5e/v6e)."""
    return _count("/dev", r"accel\d+") or _count("/dev/vfio", r"\d+")


@dataclass(frozen=True)
class _Accelerator:
    plugins: tuple[str, ...]  # any one of these JAX plugin modules
    missing_plugin: str
    count: Callable[[], int]
    none_found: str
    unit: str


_ACCELERATORS = {
    "gpu": _Accelerator(
        _GPU_PLUGINS, "no JAX GPU plugin installed (pip install 'xharness[gpu]')",
        gpu_count, "no GPU found (no /dev/nvidia* or /dev/kfd)", "GPU(s)",
    ),
    "tpu": _Accelerator(
        _TPU_PLUGINS, "libtpu is not installed (pip install 'xharness[tpu]')",
        tpu_count, "no TPU found (no /dev/accel* or /dev/vfio/*)", "TPU chip(s)",
    ),
}


def _probe_accelerator(cell: Cell, accelerator: _Accelerator) -> Availability:
    if not any(_has_module(m) for m in accelerator.plugins):
        return Availability(False, accelerator.missing_plugin)
    found = accelerator.count()
    if found == 0:
        return Availability(False, accelerator.none_found)
    if found < cell.devices:
        return Availability(False, f"needs {cell.devices} {accelerator.unit} per process, found {found}")
    return Availability(True, f"{found} {accelerator.unit}")


def probe(cell: Cell) -> Availability:
    """Whether ``cell`` can run here, and if not, the reason in words a CI log reader understands."""
    if not _has_module("jaxlib"):
        return Availability(False, "jaxlib is not installed")
    if cell.backend == "cpu":
        cores = os.cpu_count() or 1
        note = f"{cell.total_devices} CPU devices on {cores} core(s)"
        if cell.multiprocess:
            note += f", {cell.processes} processes over jax.distributed (gloo)"
        return Availability(True, note)
    accelerator = _ACCELERATORS.get(cell.backend)
    if accelerator is not None:
        return _probe_accelerator(cell, accelerator)
    return Availability(False, f"unknown backend {cell.backend!r}")
