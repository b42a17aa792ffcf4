"""Plugins: what installed distributions register with the harness through entry points.

Five groups extend the harness without forking it, the way ``pytest11`` extends pytest:
``xharness.runtimes`` (``name = "pkg.module:AdapterClass"``), ``xharness.scenarios``
(``id = "pkg.module:SCENARIO"``), ``xharness.invariants`` (``id = "pkg.module:INVARIANT"``) and
``xharness.upstream`` (``runtime = "pkg.module:TRIGGERS"``: the runtime's upstream triggers, what
``xharness report upstream`` files) and ``xharness.findings`` (``runtime = "pkg.module:FINDINGS"``:
the bugs the checks found in that runtime, ``harness.api.KnownFinding``). The harness registers its own runtimes, scenarios, invariants
and triggers through the same groups in its ``pyproject.toml``, so a built-in item and a plugin's
are found, loaded and checked by one path.

Reading a group's *names* reads installed metadata only; loading an item imports its module, which
may fail. A failure is a :class:`PluginError` that names the distribution, its version and the
entry point, so that whoever reads it knows which package to fix. Each room checks what it loaded
(an adapter class, a ``Scenario``, an ``Invariant``, a runtime's triggers) and reports a wrong type the same way.

One source tree may run without its metadata (``python -m harness.cli`` from a checkout that was
never installed): the harness' own entry points are then read from its ``pyproject.toml``, the
same table the installed metadata is made from.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

RUNTIMES, SCENARIOS, INVARIANTS = "xharness.runtimes", "xharness.scenarios", "xharness.invariants"
#: a runtime's upstream triggers (``harness.scenarios.triggers``), named by the runtime
UPSTREAM = "xharness.upstream"
#: a runtime's known findings (``harness.scenarios.known_findings``), named by the runtime
FINDINGS = "xharness.findings"
GROUPS = (RUNTIMES, SCENARIOS, INVARIANTS, UPSTREAM, FINDINGS)
#: the distribution whose entry points are the built-in items; its items win a clash of names
OWN_DISTRIBUTION = "xharness"


@dataclass(frozen=True)
class EntryPoint:
    """One registered item: its group, its name (a runtime's name, a check's id), the object
    reference ``module:attr``, and the distribution that registered it."""

    group: str
    name: str
    value: str
    distribution: str
    version: str

    @property
    def builtin(self) -> bool:
        return self.distribution == OWN_DISTRIBUTION

    @property
    def origin(self) -> str:
        """``dist 1.2 (xharness.runtimes: name = module:attr)``: what an error message names."""
        return f"{self.distribution} {self.version} ({self.group}: {self.name} = {self.value})"

    def load(self) -> Any:
        """The object the entry point names; a :class:`PluginError` when it cannot be imported."""
        module_name, _, attr = self.value.partition(":")
        try:
            obj: Any = importlib.import_module(module_name.strip())
            for part in attr.strip().split(".") if attr.strip() else ():
                obj = getattr(obj, part)
        except ModuleNotFoundError as exc:
            raise PluginError(self, f"cannot import {module_name.strip()}: {exc}") from exc
        except AttributeError as exc:
            raise PluginError(self, f"{module_name.strip()} has no {attr.strip()}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - a plugin's import may raise anything
            raise PluginError(self, f"importing it raised {type(exc).__name__}: {exc}") from exc
        return obj


class PluginError(Exception):
    """A registered item that cannot be used: the message names its distribution and entry point."""

    def __init__(self, entry: EntryPoint, reason: str) -> None:
        self.entry, self.reason = entry, reason
        super().__init__(f"plugin {entry.origin}: {reason}")


@functools.cache
def _installed() -> tuple[EntryPoint, ...]:
    """Every item of the groups that installed distributions register (names only).

    Read once per process for all groups: a command-line child asks for a scenario by id, and
    each distribution's name and version are read from its metadata once, not per entry point
    (a distribution's ``METADATA`` carries its whole README, and parsing it is most of the cost)."""
    found: list[EntryPoint] = []
    named: dict[int, tuple[str, str]] = {}
    every = metadata.entry_points()  # one scan of the installed distributions, duplicates dropped
    for ep in (ep for group in GROUPS for ep in every.select(group=group)):
        dist = ep.dist
        if dist is None:
            name, version = "(unknown distribution)", "?"
        else:
            if id(dist) not in named:
                meta = dist.metadata
                named[id(dist)] = (normal_name(meta["Name"] or "(unnamed distribution)"), meta["Version"] or "?")
            name, version = named[id(dist)]
        found.append(EntryPoint(ep.group, ep.name, ep.value, name, version))
    return tuple(found)


@functools.cache
def entry_points(group: str) -> tuple[EntryPoint, ...]:
    """Every item of ``group`` (names only, nothing imported): the harness' own first, then the
    installed distributions' in the order ``importlib.metadata`` finds them."""
    found = [e for e in _installed() if e.group == group]
    if not any(e.builtin for e in found):
        found[:0] = _own_from_source(group)
    # a build backend may write a group's names in any order: by distribution, then name
    return tuple(sorted(found, key=lambda e: (not e.builtin, e.distribution, e.name)))


def normal_name(name: str) -> str:
    """A distribution's name as packaging compares it (PEP 503): lower case, every run of ``-``,
    ``_`` and ``.`` one ``-``; a project's ``My_Plug.Dist`` is the metadata's ``my-plug-dist``."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def _own_from_source(group: str) -> list[EntryPoint]:
    """The harness' own items of ``group`` read from its ``pyproject.toml``, for a source tree
    that runs without installed metadata (module docstring); empty when there is none."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return []
    if normal_name(str(project.get("name", ""))) != OWN_DISTRIBUTION:
        return []
    table = project.get("entry-points", {}).get(group, {})
    version = str(project.get("version", "?"))
    return [EntryPoint(group, name, value, OWN_DISTRIBUTION, version) for name, value in table.items()]


@dataclass
class Loaded:
    """What a group's items turned out to be: the usable ones by name, each with its entry
    point, and the broken ones with their errors."""

    items: dict[str, tuple[EntryPoint, Any]] = field(default_factory=dict)
    broken: list[PluginError] = field(default_factory=list)

    def origin(self, name: str) -> EntryPoint | None:
        item = self.items.get(name)
        return item[0] if item else None


def id_item(entry: EntryPoint, obj: Any, cls: type, what: str) -> str | None:
    """Why ``obj`` is not a ``cls`` whose ``id`` is the entry point's name, or None (the first
    check of a scenario and of an invariant)."""
    if not isinstance(obj, cls):
        return f"{entry.value} is a {type(obj).__name__}, not a harness.api.{cls.__name__}"
    if obj.id != entry.name:
        return f"the {what}'s id is {obj.id!r}, registered as {entry.name!r}: they must agree"
    return None


#: ``check(entry, obj)`` returns why ``obj`` is not an item of the group, or None
Check = Callable[[EntryPoint, Any], str | None]


def load_group(group: str, check: Check, names: tuple[EntryPoint, ...] | None = None) -> Loaded:
    """Load every item of ``group`` and check each: a duplicate name (the harness' own item, or
    the first one found, keeps it), an import that fails, or an object ``check`` rejects is a
    :class:`PluginError` in ``broken``; the rest are ``items``. Loading a whole group says each
    broken item on stderr (:func:`warn`), so that no command that loads plugins keeps quiet about
    one; the commands that judge a runtime refuse to run instead (``harness.commands.plugins``)."""
    loaded = Loaded()
    for entry in names if names is not None else entry_points(group):
        clash = loaded.origin(entry.name) or next(
            (e.entry for e in loaded.broken if e.entry.name == entry.name and e.entry.builtin), None
        )
        if clash is not None:
            loaded.broken.append(PluginError(entry, f"duplicate name {entry.name!r}: {clash.origin} has it"))
            continue
        try:
            obj = entry.load()
            reason = check(entry, obj)
        except PluginError as exc:
            loaded.broken.append(exc)
            continue
        if reason:
            loaded.broken.append(PluginError(entry, reason))
            continue
        loaded.items[entry.name] = (entry, obj)
    if names is None:
        warn(loaded.broken)
    return loaded


_warned: set[str] = set()


def warn(errors: list[PluginError]) -> None:
    """Say each broken item once per process, on stderr, and go on: a command that does not
    need a broken plugin must not fail because of it."""
    for error in errors:
        text = str(error)
        if text not in _warned:
            _warned.add(text)
            print(f"xharness: warning: {text} (left out)", file=sys.stderr)


def find(loaded: Loaded, name: str) -> PluginError | None:
    """The error of the broken item called ``name``, when there is one: a command that needs it
    says why it cannot have it instead of calling the name unknown."""
    return next((e for e in loaded.broken if e.entry.name == name), None)


def reset() -> None:
    """Forget what was read (tests install and remove distributions)."""
    _installed.cache_clear()
    entry_points.cache_clear()
    _warned.clear()
