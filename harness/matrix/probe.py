"""Can this machine run a cell? Answered without initializing JAX.

Probing must be cheap and side-effect free (``xharness cells`` runs it for every cell, and the
supervisor before each one), so it looks for the JAX plugin packages and the device nodes the
drivers expose instead of starting a backend.
"""

from __future__ import annotations

import importlib.util
import os
import re
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
    if cell.backend == "gpu":
        if not any(_has_module(m) for m in _GPU_PLUGINS):
            return Availability(False, "no JAX GPU plugin installed (pip install 'xharness[gpu]')")
        found = gpu_count()
        if found == 0:
            return Availability(False, "no GPU found (no /dev/nvidia* or /dev/kfd)")
        if found < cell.devices:
            return Availability(False, f"needs {cell.devices} GPU(s) per process, found {found}")
        return Availability(True, f"{found} GPU(s)")
    if cell.backend == "tpu":
        if not any(_has_module(m) for m in _TPU_PLUGINS):
            return Availability(False, "libtpu is not installed (pip install 'xharness[tpu]')")
        found = tpu_count()
        if found == 0:
            return Availability(False, "no TPU found (no /dev/accel* or /dev/vfio/*)")
        if found < cell.devices:
            return Availability(False, f"needs {cell.devices} TPU chip(s) per process, found {found}")
        return Availability(True, f"{found} TPU chip(s)")
    return Availability(False, f"unknown backend {cell.backend!r}")
