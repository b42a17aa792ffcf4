"""The backends a cell, a benchmark or a scenario variant may name, declared once.

A backend is the kind of device (``cpu``, ``gpu``, ``tpu``), and each kind has its name in JAX's
platforms and in PyTorch/XLA's ``PJRT_DEVICE``; both live here with it. The strings are what the
matrix file, ``--backend`` and the reports say, so ``Backend`` is a ``str`` enumeration: a member
compares equal to its word. It sits at the bottom of the package, with nothing imported, so that
the settings' declaration, the matrix, the probe and the runtime's tolerances name the same thing.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["BACKENDS", "Backend", "platform_backend"]


class Backend(StrEnum):
    CPU = "cpu"
    GPU = "gpu"
    TPU = "tpu"

    @property
    def jax_platform(self) -> str:
        """The platform ``JAX_PLATFORMS`` names to select this backend."""
        return _JAX_PLATFORMS[self]

    @property
    def pjrt_device(self) -> str:
        """PyTorch/XLA's name of this backend (``PJRT_DEVICE``)."""
        return _PJRT_DEVICES[self]

    @property
    def accelerator(self) -> bool:
        return self is not Backend.CPU


#: every backend, in the order messages list them
BACKENDS: tuple[Backend, ...] = tuple(Backend)

_JAX_PLATFORMS = {Backend.CPU: "cpu", Backend.GPU: "cuda", Backend.TPU: "tpu"}
_PJRT_DEVICES = {Backend.CPU: "CPU", Backend.GPU: "CUDA", Backend.TPU: "TPU"}
#: platform names a device or a runtime reports, each with its backend (ROCm's GPUs are GPUs)
_PLATFORMS = {"cpu": Backend.CPU, "gpu": Backend.GPU, "cuda": Backend.GPU, "rocm": Backend.GPU,
              "tpu": Backend.TPU}


def platform_backend(platform: str) -> Backend | None:
    """The backend of a platform name as JAX or PyTorch/XLA reports it (``cuda`` is a GPU), or
    None for a platform the harness has no backend for."""
    return _PLATFORMS.get(platform.lower())
