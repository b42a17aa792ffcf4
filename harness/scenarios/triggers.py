"""The upstream triggers: every runtime's reproducers registered in the ``xharness.upstream`` group.

A trigger is a scenario's (or a known finding's) program written in a runtime's own API, the one
``xharness report upstream`` turns into a standalone script and ``repro --runtime`` runs against a
release (``harness.scenarios.reproducer.Reproducer``). The harness' PyTorch/XLA and JAX triggers
and a plugin's are found the same way (``harness.entrypoints``): an entry point
``runtime = "pkg.module:TRIGGERS"`` names a tuple of reproducers, every one of that runtime, each
naming a registered scenario (or a known finding, the harness' or a plugin's). A plugin registers; it never
appends to the harness' own lists. One that fails to load or check is left out with a warning
naming its distribution, and a command that asks for its runtime gets that message.
"""

from __future__ import annotations

import functools
from typing import Any

from harness import adapters, entrypoints
from harness.scenarios.reproducer import Reproducer


def check_triggers(entry: entrypoints.EntryPoint, obj: Any) -> str | None:
    """Why ``obj`` is not the upstream triggers of runtime ``entry.name``, or None."""
    if not isinstance(obj, tuple | list | Reproducer):
        return f"{entry.value} is a {type(obj).__name__}, not a tuple of harness.api.Reproducer"
    items = _as_tuple(obj)
    wrong = next((item for item in items if not isinstance(item, Reproducer)), None)
    if wrong is not None or not items:
        what = "nothing" if not items else f"a {type(wrong).__name__}"
        return f"{entry.value} holds {what}, not only harness.api.Reproducer items"
    if entry.name not in adapters.names():
        return (f"runtime {entry.name!r} is not registered (known: {', '.join(adapters.names())}); "
                "register its adapter under xharness.runtimes")
    subjects = _subjects()
    seen: set[tuple[str, str]] = set()
    for rep in items:
        if rep.runtime != entry.name:
            return (f"the trigger {rep.scenario}:{rep.variant} is for runtime {rep.runtime!r}, "
                    f"registered as {entry.name!r}: they must agree (Reproducer(runtime=...))")
        if rep.scenario not in subjects:
            return (f"the trigger {rep.scenario}:{rep.variant} names no registered scenario "
                    f"(known: {', '.join(subjects)})")
        if (rep.scenario, rep.variant) in seen:
            return f"the trigger {rep.scenario}:{rep.variant} is registered twice"
        seen.add((rep.scenario, rep.variant))
        why = next((why for sig in rep.signatures if (why := sig.unresolved()) is not None), None)
        if why is not None:
            return f"the trigger {rep.scenario}:{rep.variant}: {why}"
    return None


def _subjects() -> tuple[str, ...]:
    """What a trigger may reproduce: a registered scenario (its entry point's name, nothing
    imported) or a known finding the harness declares."""
    from harness.scenarios.known_findings import names

    return (*(e.name for e in entrypoints.entry_points(entrypoints.SCENARIOS)), *names())


@functools.cache
def loaded() -> entrypoints.Loaded:
    """Every registered runtime's triggers, loaded and checked once per process."""
    return entrypoints.load_group(entrypoints.UPSTREAM, check_triggers)


def every() -> tuple[Reproducer, ...]:
    """Every registered trigger, the harness' own first."""
    return tuple(rep for _, items in loaded().items.values() for rep in _as_tuple(items))


def runtimes() -> tuple[str, ...]:
    """The runtimes with registered triggers (what ``report upstream --runtime`` accepts)."""
    return tuple(loaded().items)


def broken(runtime: str) -> entrypoints.PluginError | None:
    """Why the triggers registered for ``runtime`` cannot be used, when they cannot."""
    return entrypoints.find(loaded(), runtime)


def _as_tuple(obj: Any) -> tuple[Reproducer, ...]:
    return tuple(obj) if isinstance(obj, tuple | list) else (obj,)
