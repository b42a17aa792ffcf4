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

from harness.matrix.config import MIN_TEMPLATE_DEVICES, Cell

_GPU_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_rocm_plugin", "jax_rocm60_plugin")
_TPU_PLUGINS = ("libtpu",)
#: the variables that narrow the devices a process sees (``harness.matrix.config`` sets them)
GPU_VISIBLE = "CUDA_VISIBLE_DEVICES"
TPU_VISIBLE = "TPU_VISIBLE_CHIPS"


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
    """GPUs JAX would see: those the driver exposes (NVIDIA: ``/proc/driver/nvidia/gpus`` or
    ``/dev/nvidiaN``; AMD: render nodes with ``/dev/kfd``), narrowed by ``CUDA_VISIBLE_DEVICES``
    when the environment sets it, as the driver narrows them for the cell's processes."""
    count = _count("/proc/driver/nvidia/gpus", r".+") or _count("/dev", r"nvidia\d+")
    if not count and Path("/dev/kfd").exists():
        count = _count("/dev/dri", r"renderD\d+")
    return _visible(count, os.environ.get(GPU_VISIBLE))


def tpu_count() -> int:
    """TPU chips (``/dev/accelN`` on v4 and later, ``/dev/vfio/N`` on v5e/v6e), narrowed by
    ``TPU_VISIBLE_CHIPS`` when the environment sets it."""
    count = _count("/dev", r"accel\d+") or _count("/dev/vfio", r"\d+")
    return _visible(count, os.environ.get(TPU_VISIBLE))


def _visible(present: int, listed: str | None) -> int:
    """How many of ``present`` devices a visible-devices list leaves: its entries up to the first
    that names no device (the CUDA driver ignores the rest), an index below ``present`` or a
    UUID (``GPU-...``, ``MIG-...``, which cannot be checked without the driver)."""
    if listed is None:
        return present
    seen = 0
    for entry in (e.strip() for e in listed.split(",")):
        if not entry:
            continue
        if entry.lstrip("-").isdigit() and not 0 <= int(entry) < present:
            break
        seen += 1
    return min(seen, present)


def device_count(backend: str) -> int:
    """Accelerators of ``backend`` this machine shows (``gpu``, ``tpu``): the count a template
    cell (``devices = "all"``) takes. CPU devices are made to the cell's count, not found: 0."""
    if backend == "gpu":
        return gpu_count()
    if backend == "tpu":
        return tpu_count()
    return 0


@dataclass(frozen=True)
class _Accelerator:
    plugins: tuple[str, ...]  # any one of these JAX plugin modules
    missing_plugin: str
    none_found: str
    unit: str
    visible: str  # the variable that narrows what the driver shows


_ACCELERATORS = {
    "gpu": _Accelerator(
        _GPU_PLUGINS, "no JAX GPU plugin installed (pip install 'xharness[gpu]')",
        "no GPU found (no /dev/nvidia* or /dev/kfd)", "GPU(s)", GPU_VISIBLE,
    ),
    "tpu": _Accelerator(
        _TPU_PLUGINS, "libtpu is not installed (pip install 'xharness[tpu]')",
        "no TPU found (no /dev/accel* or /dev/vfio/*)", "TPU chip(s)", TPU_VISIBLE,
    ),
}


def _probe_accelerator(cell: Cell, accelerator: _Accelerator) -> Availability:
    if not any(_has_module(m) for m in accelerator.plugins):
        return Availability(False, accelerator.missing_plugin)
    found = device_count(cell.backend)
    if found == 0:
        listed = os.environ.get(accelerator.visible)
        if listed is not None:
            return Availability(False, f"no {accelerator.unit} visible ({accelerator.visible}={listed!r})")
        return Availability(False, accelerator.none_found)
    if cell.all_devices:  # a template the caller did not resolve (Matrix.listed/select do)
        if found < MIN_TEMPLATE_DEVICES:
            return Availability(
                False,
                f"found {found} {accelerator.unit}: {cell.name} makes a cell of every one when there are "
                f"{MIN_TEMPLATE_DEVICES} or more",
            )
        return Availability(False, f"found {found} {accelerator.unit}: run it as {cell.stem}{found}")
    need = cell.total_devices
    if found < need:
        reason = f"needs {need} {accelerator.unit}, found {found}"
        if cell.derived_from and found >= MIN_TEMPLATE_DEVICES:
            reason += f" ({cell.derived_from} runs on every one found: {cell.stem}{found})"
        elif cell.derived_from:
            reason += f" ({cell.derived_from} needs {MIN_TEMPLATE_DEVICES} or more)"
        return Availability(False, reason)
    if cell.backend == "tpu" and 1 < need != found:
        return Availability(
            False,
            f"needs a host of exactly {need} {accelerator.unit}, found {found}: JAX takes every chip of "
            "the host, and a cell keeps to fewer only with one chip",
        )
    note = f"{found} {accelerator.unit}"
    if need < found:
        note += f", the cell takes {need}"
    return Availability(True, note)


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
