"""Runtimes under test: the reference runtime, JAX, PyTorch/XLA and any a plugin registers,
behind one small protocol.

Every adapter is an entry point of the ``xharness.runtimes`` group (``harness.entrypoints``), the
harness' own included. ``names()`` reads the registered names without importing anything;
``get(name)`` loads the adapter class, checks it against the protocol, and makes the one instance
of this process (importing its runtime only then); ``current()`` is the one this process tests,
chosen by ``HARNESS_RUNTIME`` (set per matrix cell and by ``--runtime``), the reference runtime by
default.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from harness import entrypoints, settings
from harness.adapters.base import (
    BEHAVIOURS,
    CAPABILITIES,
    Adapter,
    AdapterUnavailable,
    BaseAdapter,
    Unsupported,
    require,
)

#: what an adapter class must offer: the protocol's operations, by name
PROTOCOL_METHODS: tuple[str, ...] = tuple(
    name for name, value in vars(Adapter).items() if inspect.isfunction(value) and not name.startswith("_")
)


class UnknownRuntime(ValueError):
    """A runtime name no adapter answers to, or one whose plugin cannot be loaded."""


def names() -> tuple[str, ...]:
    """Every registered runtime's name, the harness' own first (nothing is imported)."""
    return tuple(dict.fromkeys(e.name for e in entrypoints.entry_points(entrypoints.RUNTIMES)))


def check_adapter_class(entry: entrypoints.EntryPoint, obj: Any) -> str | None:
    """Why ``obj`` is not an adapter class for ``entry``, or None."""
    if not isinstance(obj, type):
        return f"{entry.value} is a {type(obj).__name__}, not an adapter class (harness.api.Adapter)"
    if getattr(obj, "name", None) != entry.name:
        return f"the adapter's name is {getattr(obj, 'name', None)!r}, registered as {entry.name!r}: they must agree"
    capabilities = getattr(obj, "capabilities", None)
    if not isinstance(capabilities, frozenset) or not all(isinstance(c, str) for c in capabilities):
        return "capabilities must be a frozenset of capability names (harness.api.CAPABILITIES)"
    unknown = sorted(capabilities - set(CAPABILITIES) - set(BEHAVIOURS))
    if unknown:
        return (f"unknown capability {', '.join(map(repr, unknown))} (known: {', '.join(CAPABILITIES)}; "
                f"behaviours: {', '.join(BEHAVIOURS)})")
    missing = [m for m in PROTOCOL_METHODS if not callable(getattr(obj, m, None))]
    if missing and issubclass(obj, BaseAdapter):  # the operations BaseAdapter has no default for
        return (f"lacks the protocol's {', '.join(missing)}: harness.api.BaseAdapter has no default "
                "for them, every runtime implements them (the API reference: harness.api.Adapter)")
    if missing:
        return (f"lacks the protocol's {', '.join(missing)} (derive it from harness.api.BaseAdapter, "
                "which has a default for the operations a runtime may lack)")
    return None


@functools.cache
def registry() -> entrypoints.Loaded:
    """Every registered adapter class, loaded and checked once per process."""
    return entrypoints.load_group(entrypoints.RUNTIMES, check_adapter_class)


@functools.cache
def adapter_class(name: str) -> type:
    """The class registered as ``name``, loaded alone (a process testing one runtime imports no
    other adapter); :class:`UnknownRuntime` names a broken plugin's fault."""
    found = tuple(e for e in entrypoints.entry_points(entrypoints.RUNTIMES) if e.name == name)
    if not found:
        raise UnknownRuntime(f"unknown runtime {name!r}; known: {', '.join(names())}")
    # the entries of that name only: a duplicate among them is still named as one
    loaded = entrypoints.load_group(entrypoints.RUNTIMES, check_adapter_class, found)
    if name in loaded.items:
        return loaded.items[name][1]  # type: ignore[no-any-return]
    raise UnknownRuntime(str(loaded.broken[0]))


def runtime_options(name: str) -> frozenset[str] | None:
    """The runtime options runtime ``name`` honours (``BaseAdapter.options``); None when its
    adapter cannot be loaded here, so a caller shows every option rather than guess."""
    try:
        return frozenset(getattr(adapter_class(name), "options", frozenset()))
    except UnknownRuntime:
        return None


def origin(name: str) -> entrypoints.EntryPoint | None:
    """The entry point that registered runtime ``name`` (its distribution and version)."""
    return registry().origin(name)


@functools.cache
def get(name: str) -> Adapter:
    """The adapter for ``name`` (one per process).

    Args:
        name: a registered runtime (``xharness list runtimes``).

    Returns:
        The adapter, made once per process: its class is loaded, checked against the protocol and
        instantiated on first use (importing its runtime only then).

    Raises:
        UnknownRuntime: no runtime of that name is registered, or its plugin cannot be loaded (the
            message names the distribution, the entry point and the cause); a ``ValueError``.
        AdapterUnavailable: the runtime's package cannot be imported in this environment.
    """
    cls = adapter_class(name)
    try:
        adapter: Adapter = cls()
    except ModuleNotFoundError as exc:
        raise AdapterUnavailable(f"runtime {name} cannot be loaded in this environment: {exc}") from exc
    return adapter


def current() -> Adapter:
    """The runtime under test in this process.

    Returns:
        ``get(HARNESS_RUNTIME)``: the runtime a matrix cell, ``--runtime`` or the project's
        ``[tool.xharness] runtime`` chose for this process, the reference runtime by default.

    Raises:
        UnknownRuntime: ``HARNESS_RUNTIME`` names no registered runtime, or its plugin cannot be
            loaded.
        AdapterUnavailable: the runtime's package cannot be imported in this environment.
    """
    return get(settings.raw("HARNESS_RUNTIME").strip() or "reference")


__all__ = [
    "CAPABILITIES",
    "PROTOCOL_METHODS",
    "Adapter",
    "AdapterUnavailable",
    "BaseAdapter",
    "UnknownRuntime",
    "Unsupported",
    "adapter_class",
    "check_adapter_class",
    "current",
    "get",
    "names",
    "origin",
    "registry",
    "require",
    "runtime_options",
]
