"""What accelerators this machine shows, counted from the device nodes their drivers expose.

Several rooms ask (the matrix probe for the cells it can run, a scenario that needs a multi-slice
TPU), and none may start a JAX backend to find out, so the counting lives here, at the bottom,
with nothing but the file system under it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.backends import Backend

#: the variables that narrow the devices a process sees (``harness.matrix.config`` sets them)
GPU_VISIBLE = "CUDA_VISIBLE_DEVICES"
TPU_VISIBLE = "TPU_VISIBLE_CHIPS"


def count_entries(directory: str, pattern: str) -> int:
    """Entries of ``directory`` whose names match ``pattern``; 0 when it cannot be read."""
    try:
        return sum(1 for entry in os.listdir(directory) if re.fullmatch(pattern, entry))
    except OSError:
        return 0


def gpu_count() -> int:
    """GPUs JAX would see: those the driver exposes (NVIDIA: ``/proc/driver/nvidia/gpus`` or
    ``/dev/nvidiaN``; AMD: render nodes with ``/dev/kfd``), narrowed by ``CUDA_VISIBLE_DEVICES``
    when the environment sets it, as the driver narrows them for the cell's processes."""
    count = count_entries("/proc/driver/nvidia/gpus", r".+") or count_entries("/dev", r"nvidia\d+")
    if not count and Path("/dev/kfd").exists():
        count = count_entries("/dev/dri", r"renderD\d+")
    return _visible(count, os.environ.get(GPU_VISIBLE))


def tpu_count() -> int:
    """TPU chips (``/dev/accelN`` on v4 and later, ``/dev/vfio/N`` on v5e/v6e), narrowed by
    ``TPU_VISIBLE_CHIPS`` when the environment sets it."""
    count = count_entries("/dev", r"accel\d+") or count_entries("/dev/vfio", r"\d+")
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
    if backend == Backend.GPU:
        return gpu_count()
    if backend == Backend.TPU:
        return tpu_count()
    return 0
