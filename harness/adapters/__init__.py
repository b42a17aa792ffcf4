"""Runtimes under test: the reference runtime, JAX and PyTorch/XLA behind one small protocol.

``get(name)`` loads an adapter (importing its runtime only then); ``current()`` is the one this
process tests, chosen by ``HARNESS_RUNTIME`` (set per matrix cell and by ``--runtime``), the
reference runtime by default.
"""

from __future__ import annotations

import functools
import importlib
import os

from harness.adapters.base import (
    CAPABILITIES,
    Adapter,
    AdapterUnavailable,
    BaseAdapter,
    Unsupported,
    require,
)
from harness.adapters.runtimes import RUNTIMES

#: adapter name -> "module:class"
#: each runtime's adapter class, ``module:Class`` (from the table of runtime facts)
ADAPTERS: dict[str, str] = {name: facts.adapter for name, facts in RUNTIMES.items()}


class UnknownRuntime(ValueError):
    """A runtime name no adapter answers to."""


@functools.cache
def get(name: str) -> Adapter:
    """The adapter for ``name`` (one per process)."""
    if name not in ADAPTERS:
        raise UnknownRuntime(f"unknown runtime {name!r}; known: {', '.join(ADAPTERS)}")
    module, _, cls = ADAPTERS[name].partition(":")
    try:
        adapter = getattr(importlib.import_module(module), cls)()
    except ModuleNotFoundError as exc:
        raise AdapterUnavailable(f"runtime {name} cannot be loaded in this environment: {exc}") from exc
    return adapter


def current() -> Adapter:
    """The runtime under test in this process (``HARNESS_RUNTIME``, default ``reference``)."""
    return get(os.environ.get("HARNESS_RUNTIME", "") or "reference")


__all__ = [
    "ADAPTERS",
    "CAPABILITIES",
    "Adapter",
    "AdapterUnavailable",
    "BaseAdapter",
    "UnknownRuntime",
    "Unsupported",
    "current",
    "get",
    "require",
]
