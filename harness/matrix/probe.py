"""Can this machine run a cell? Answered without initializing JAX.

Probing must be cheap and side-effect free (``xharness cells`` runs it for every cell, and the
supervisor before each one), so it looks for the JAX plugin packages and the device nodes the
drivers expose instead of starting a backend.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from harness import hardware
from harness.backends import Backend
from harness.hardware import GPU_VISIBLE, TPU_VISIBLE
from harness.matrix.config import MIN_TEMPLATE_DEVICES, Cell
from harness.matrix.launchers import LOCAL, no_hosts_of_their_own, unavailable
from harness.network import fabric
from harness.network.addresses import NAMESPACES

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


@dataclass(frozen=True)
class _Accelerator:
    plugins: tuple[str, ...]  # any one of these JAX plugin modules
    missing_plugin: str
    none_found: str
    unit: str
    visible: str  # the variable that narrows what the driver shows


_ACCELERATORS = {
    Backend.GPU: _Accelerator(
        _GPU_PLUGINS, "no JAX GPU plugin installed (pip install 'xharness[gpu]')",
        "no GPU found (no /dev/nvidia* or /dev/kfd)", "GPU(s)", GPU_VISIBLE,
    ),
    Backend.TPU: _Accelerator(
        _TPU_PLUGINS, "libtpu is not installed (pip install 'xharness[tpu]')",
        "no TPU found (no /dev/accel* or /dev/vfio/*)", "TPU chip(s)", TPU_VISIBLE,
    ),
}


def _probe_accelerator(cell: Cell, accelerator: _Accelerator) -> Availability:
    if not any(_has_module(m) for m in accelerator.plugins):
        return Availability(False, accelerator.missing_plugin)
    found = hardware.device_count(cell.backend)
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
    if cell.backend == Backend.TPU and 1 < need != found:
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
    if cell.launcher != LOCAL and (why := unavailable(cell.launcher)):
        return Availability(False, why)
    if cell.network == NAMESPACES and (why := fabric.unavailable() if cell.launcher == LOCAL
                                       else no_hosts_of_their_own(cell.launcher)):
        return Availability(False, f"no hosts of their own here: {why}")
    if cell.backend == Backend.CPU:
        cores = os.cpu_count() or 1
        note = f"{cell.total_devices} CPU devices on {cores} core(s)"
        if cell.multiprocess:
            note += f", {cell.processes} processes over jax.distributed (gloo)"
        if cell.launcher != LOCAL:
            note += f", started by {cell.launcher}"
        if cell.network == NAMESPACES:
            note += ", each rank a host of its own (network namespaces)" if cell.launcher == LOCAL else \
                ", each node a host of its own (network namespaces)"
        return Availability(True, note)
    accelerator = _ACCELERATORS.get(cell.backend)
    if accelerator is not None:
        return _probe_accelerator(cell, accelerator)
    return Availability(False, f"unknown backend {cell.backend!r}")
