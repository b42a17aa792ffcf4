"""Every invariant: the ``xharness.invariants`` entry-point group, the harness' own and each
plugin's (``harness.entrypoints``). An entry point ``id = "pkg.module:INVARIANT"`` names an
:class:`~harness.properties.base.Invariant` whose ``id`` is the entry point's name and whose
``needs`` are capabilities the harness knows; one that fails is left out with a warning naming
its distribution."""

from __future__ import annotations

import functools
from typing import Any

from harness import adapters, entrypoints
from harness.properties.base import Invariant


def check_invariant(entry: entrypoints.EntryPoint, obj: Any) -> str | None:
    """Why ``obj`` is not an invariant for ``entry``, or None."""
    wrong = entrypoints.id_item(entry, obj, Invariant, "invariant")
    if wrong is not None:
        return wrong
    unknown = sorted(set(obj.needs) - set(adapters.CAPABILITIES))
    if unknown:
        return (f"needs unknown capability {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(adapters.CAPABILITIES)})")
    return None


@functools.cache
def loaded() -> entrypoints.Loaded:
    """Every registered invariant, loaded and checked once per process."""
    return entrypoints.load_group(entrypoints.INVARIANTS, check_invariant)


def origin(invariant_id: str) -> entrypoints.EntryPoint | None:
    """The entry point that registered ``invariant_id`` (its distribution and version)."""
    return loaded().origin(invariant_id)


def invariants() -> tuple[Invariant, ...]:
    """Every invariant, the harness' own first; a broken plugin is warned about once."""
    return tuple(obj for _, obj in loaded().items.values())


def __getattr__(name: str) -> Any:
    # ``INVARIANTS`` is read when first asked for, not when this module is imported: a plugin's
    # invariant module imports ``harness.api``, which imports this package
    if name == "INVARIANTS":
        return invariants()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UnknownInvariant(KeyError):
    """An invariant id that is not in the registry."""


def get(invariant_id: str) -> Invariant:
    for invariant in invariants():
        if invariant.id == invariant_id:
            return invariant
    broken = entrypoints.find(loaded(), invariant_id)
    if broken is not None:
        raise UnknownInvariant(str(broken))
    raise UnknownInvariant(f"unknown invariant {invariant_id!r}; known: {', '.join(i.id for i in invariants())}")


def declared_pairs() -> list[tuple[Invariant, str]]:
    """Every (invariant, fault switch) pair an invariant promises to catch."""
    return [(invariant, fault) for invariant in invariants() for fault in invariant.catches]
