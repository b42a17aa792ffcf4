"""Whether every installed plugin loads: a broken plugin is never green.

``list`` and the other commands that only read the registries warn about a broken item and go on
(``harness.entrypoints.warn``): listing must still work while a plugin is being fixed. A command
that *judges* a runtime (``run``, ``repro``, ``teeth``, ``report upstream`` on a plugin's
runtime) must not: a scenario module that fails to
import would simply be missing from the run, and the run would be green. Those commands load
every group first and refuse to start (exit 2) while any item is broken, naming each one's
distribution, entry point and cause.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness import entrypoints
from harness.errors import UsageError


@dataclass(frozen=True)
class PluginState:
    """What loading every group found: the distributions that register items (the harness'
    own included), and every broken item's error."""

    distributions: tuple[str, ...]
    broken: tuple[entrypoints.PluginError, ...]


def state() -> PluginState:
    """Load every plugin's items of every group (runtimes, scenarios, invariants, upstream
    triggers) and say what it found. The harness' own items are not imported here (their suites check them, and some
    start JAX, which a command's parent process must not): only their names are read, so that a
    plugin item that takes one of their names is still reported."""
    checks = ((entrypoints.RUNTIMES, _adapter_check), (entrypoints.SCENARIOS, _scenario_check),
              (entrypoints.INVARIANTS, _invariant_check), (entrypoints.UPSTREAM, _trigger_check))
    broken: list[entrypoints.PluginError] = []
    dists: dict[str, None] = {}
    for group, check in checks:
        every = entrypoints.entry_points(group)
        dists.update(dict.fromkeys(f"{e.distribution} {e.version}" for e in every))
        own = {e.name: e for e in every if e.builtin}
        plugins = tuple(e for e in every if not e.builtin)
        for entry in plugins:
            if entry.name in own:
                broken.append(entrypoints.PluginError(
                    entry, f"duplicate name {entry.name!r}: {own[entry.name].origin} has it"))
        loadable = tuple(e for e in plugins if e.name not in own)
        if loadable:  # a group's checks are imported only for a plugin's items
            broken += entrypoints.load_group(group, check(), loadable).broken
    return PluginState(tuple(dists), tuple(broken))


def _adapter_check() -> entrypoints.Check:
    from harness import adapters

    return adapters.check_adapter_class


def _scenario_check() -> entrypoints.Check:
    from harness.scenarios import registry

    return registry.check_scenario


def _invariant_check() -> entrypoints.Check:
    from harness.properties import registry  # it starts JAX: only when a plugin has invariants

    return registry.check_invariant


def _trigger_check() -> entrypoints.Check:
    from harness.scenarios import triggers

    return triggers.check_triggers


def require_loadable(command: str) -> None:
    """Refuse to run ``command`` while any plugin is broken (module docstring)."""
    found = state().broken
    if not found:
        return
    lines = "\n".join(f"  {error}" for error in found)
    raise UsageError(
        f"{len(found)} plugin item(s) cannot be loaded, so {command} would leave them out and could "
        f"not be trusted; fix or uninstall the distribution(s):\n{lines}"
    )
