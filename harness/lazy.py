"""A module imported on first use, for code that must stay importable without starting JAX.

``xharness list`` and the parent half of ``xharness repro`` read the catalog's records (ids,
titles, signatures, needs) but never run a variant; the scenario modules therefore name the
runtime through ``lazy("harness.runtime")``, which imports it (and JAX) only when a variant
touches an attribute. ``jax`` staying out of ``sys.modules`` after ``xharness list`` is tested.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``; the first attribute read imports it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r} ({state})>"


def lazy(name: str) -> Any:
    """``xr = lazy("harness.runtime")``: the module, imported when first used."""
    return LazyModule(name)
