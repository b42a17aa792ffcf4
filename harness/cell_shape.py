"""The shape of the cell this process runs in, for a runtime that does not learn it from JAX.

A JAX-based runtime sees the cell through JAX itself: the matrix sets ``JAX_NUM_CPU_DEVICES`` (or
an accelerator's visibility) before JAX starts, and ``jax.devices()`` answers. A runtime built on
something else (numpy, its own device layer) reads the same facts here: every cell sets them in
the environment of its processes (``harness.matrix.config.CELL_VARIABLES``), and outside a cell
they read as a plain run's defaults, so code written against :func:`cell_shape` runs unchanged in
a cell, under ``pytest`` and in ``xharness repro``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from harness import settings


@dataclass(frozen=True)
class CellShape:
    """What a cell gives each of its processes."""

    #: the cell's name (``cpu-4``), "" outside the matrix
    name: str
    #: ``cpu``, ``gpu`` or ``tpu``
    backend: str
    #: devices this process addresses (``HARNESS_DEVICES``)
    devices: int
    #: processes of the cell (``HARNESS_PROCESSES``): more than one for a multi-process cell
    processes: int
    #: this process's rank among them, from 0 (``HARNESS_PROCESS_ID``)
    process_id: int
    #: slices the cell simulates or has (``HARNESS_SLICES``)
    slices: int

    @property
    def total_devices(self) -> int:
        """Devices over every process of the cell."""
        return self.devices * self.processes


def _jax_count() -> int:
    """The CPU device count JAX is asked for outside a cell, read where JAX reads it: a count in
    ``XLA_FLAGS`` (``xharness repro`` honours it) wins over ``JAX_NUM_CPU_DEVICES``."""
    match = re.search(r"--xla_force_host_platform_device_count[= ](\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(match.group(1)) if match else int(settings.read("JAX_NUM_CPU_DEVICES"))


def cell_shape() -> CellShape:
    """The cell this process runs in, read from the variables every cell sets.

    Outside a cell, ``HARNESS_DEVICES`` is unset and the device count is the one the pytest
    plugin and ``xharness repro`` ask JAX for (``JAX_NUM_CPU_DEVICES``, default 8), so a runtime
    that reads it agrees with a JAX-based one in the same process."""
    devices = settings.read("HARNESS_DEVICES") if settings.raw("HARNESS_DEVICES").strip() else _jax_count()
    return CellShape(
        name=settings.raw("HARNESS_CELL"),
        backend=str(settings.read("HARNESS_BACKEND")),
        devices=int(devices),
        processes=int(settings.read("HARNESS_PROCESSES")),
        process_id=int(settings.read("HARNESS_PROCESS_ID")),
        slices=int(settings.read("HARNESS_SLICES")),
    )


def launched() -> bool:
    """Whether this process is a rank a cluster launcher started (``HARNESS_LAUNCHER``: ``srun``'s
    or ``mpirun``'s), rather than one the supervisor started on its own machine."""
    return settings.raw("HARNESS_LAUNCHER") not in ("", "local")
