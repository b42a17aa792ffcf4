"""The rows of the kill matrix: catalog scenarios, invariants, and a user's own checks.

A user's invariant or scenario is held to the same standard as the harness' own, so it joins the
matrix the same way: ``--extra-checks MODULE:ATTR``, where ``MODULE`` is a dotted module name
(importable from the current directory) or the path of a ``.py`` file, and ``ATTR`` names an
``Invariant``, a ``Scenario``, or a list or tuple of them. The parent resolves the spec to check
the names the user gave, and every child resolves it again, because a child is a fresh process.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from harness.errors import UsageError
from harness.properties.base import Invariant
from harness.scenarios.base import Scenario

SCENARIO, INVARIANT = "scenario", "invariant"


@dataclass(frozen=True)
class Check:
    """One row: a scenario or an invariant, and the fault switches it declares."""

    id: str
    kind: str  # SCENARIO or INVARIANT
    declares: tuple[str, ...]
    target: Scenario | Invariant
    origin: str = ""  # the --extra-checks spec that brought it, "" for a registered one
    #: the plugin that registered it (``distribution version``), "" for the harness' own
    plugin: str = ""

    def unmet(self, devices: int) -> str | None:
        """Why a process with ``devices`` CPU devices cannot run this check, or None."""
        if isinstance(self.target, Scenario):
            return self.target.needs.unmet(devices)
        if devices < self.target.min_devices:
            return f"needs at least {self.target.min_devices} devices, the run has {devices}"
        return None

    @property
    def max_size(self) -> int | None:
        return self.target.max_size if isinstance(self.target, Invariant) else None

    def location(self) -> tuple[str, int | None]:
        """Where the check is defined (file relative to the current directory when inside it,
        and the line of its ``id=``), so an annotator places a missed pair on the check."""
        if isinstance(self.target, Invariant):
            code: object = self.target.check
        else:
            code = next(iter(self.target.variants.values()), None)
        try:
            source = inspect.getsourcefile(code)  # type: ignore[arg-type]
            if source is None:
                return "", None
            text = Path(source).read_text(encoding="utf-8").splitlines()
            line = next(
                (n for n, t in enumerate(text, 1) if f'id="{self.id}"' in t or f"id='{self.id}'" in t),
                None,
            )
            if line is None:
                line = inspect.getsourcelines(code)[1]  # type: ignore[arg-type]
        except (OSError, TypeError):
            return "", None
        path = Path(source).resolve()
        try:
            shown = str(path.relative_to(Path.cwd()))
        except ValueError:
            shown = str(path)
        return shown, line


def as_check(target: object, origin: str = "") -> Check:
    if isinstance(target, Scenario):
        return Check(target.id, SCENARIO, (target.fault,), target, origin)
    if isinstance(target, Invariant):
        return Check(target.id, INVARIANT, tuple(target.catches), target, origin)
    raise TypeError(type(target).__name__)


def builtin_checks() -> list[Check]:
    """The registered scenarios, then the invariants, in the order their registries list them."""
    from dataclasses import replace

    from harness.properties import registry as invariants
    from harness.scenarios import registry as scenarios

    def plugin(entry: object) -> str:
        if entry is None or getattr(entry, "builtin", True):
            return ""
        return f"{getattr(entry, 'distribution', '')} {getattr(entry, 'version', '')}"

    return [replace(as_check(s), plugin=plugin(scenarios.origin(s.id))) for s in scenarios.all_scenarios()] + [
        replace(as_check(i), plugin=plugin(invariants.origin(i.id))) for i in invariants.invariants()
    ]


def _import_path(path: Path) -> ModuleType:
    """Import a ``.py`` file under a name of its own (two files with one stem do not collide)."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"_xharness_extra_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python module: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up while it runs
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def normalize_spec(spec: str) -> str:
    """The spec with a file path made absolute, so a child resolves the very same file."""
    module, sep, attr = spec.strip().rpartition(":")
    if not sep or not module or not attr:
        raise UsageError(
            f"--extra-checks expects MODULE:ATTR (a dotted module or a .py file, and the name of "
            f"an Invariant, a Scenario, or a list of them), got {spec!r}"
        )
    if module.endswith(".py") or os.sep in module:
        path = Path(module).expanduser()
        if not path.is_file():
            raise UsageError(f"--extra-checks {spec!r}: no such file {module!r}")
        module = str(path.resolve())
    return f"{module}:{attr}"


def resolve(spec: str) -> list[Check]:
    """The checks named by one ``--extra-checks`` spec (see the module docstring)."""
    spec = normalize_spec(spec)
    module_name, _, attr = spec.rpartition(":")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            module = _import_path(Path(module_name))
        else:
            if os.getcwd() not in sys.path:  # `xharness` runs from its script directory
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except Exception as exc:  # any failure of the user's module is theirs to fix
        raise UsageError(
            f"--extra-checks {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    if not hasattr(module, attr):
        raise UsageError(f"--extra-checks {spec!r}: module {module_name!r} has no attribute {attr!r}")
    value = getattr(module, attr)
    items = list(value) if isinstance(value, list | tuple) else [value]
    checks = []
    for item in items:
        try:
            checks.append(as_check(item, spec))
        except TypeError:
            raise UsageError(
                f"--extra-checks {spec!r}: {attr} holds a {type(item).__name__}; expected a "
                "harness.properties.Invariant, a harness.scenarios.base.Scenario, or a list of them"
            ) from None
    if not checks:
        raise UsageError(f"--extra-checks {spec!r}: {attr} holds no check")
    return checks


def load_checks(extra: Iterable[str] = (), switches: Iterable[str] | None = None) -> list[Check]:
    """Every check: the registered ones, then the user's; ids are unique and every declared
    switch exists (among ``switches``, default the reference runtime's), or the user is told
    which spec is wrong."""
    if switches is None:
        from harness.runtime.faults import SWITCHES
    else:
        SWITCHES = dict.fromkeys(switches)

    checks = builtin_checks()
    for spec in extra:
        for check in resolve(spec):
            clash = next((c for c in checks if c.id == check.id), None)
            if clash is not None:
                where = f"--extra-checks {clash.origin!r}" if clash.origin else "the harness"
                raise UsageError(
                    f"--extra-checks {check.origin!r}: check id {check.id!r} is already used by {where}"
                )
            unknown = [f for f in check.declares if f not in SWITCHES]
            if unknown:
                raise UsageError(
                    f"--extra-checks {check.origin!r}: check {check.id!r} declares unknown fault "
                    f"switch(es) {', '.join(map(repr, unknown))}; known: {', '.join(SWITCHES)}"
                )
            checks.append(check)
    return checks


def select(checks: Sequence[Check], ids: Sequence[str] | None) -> list[Check]:
    """The named checks in the order given (all of them when ``ids`` is None)."""
    if ids is None:
        return list(checks)
    by_id = {c.id: c for c in checks}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise UsageError(
            f"unknown check(s) {', '.join(map(repr, unknown))}; known checks: {', '.join(by_id)}"
        )
    return [by_id[i] for i in dict.fromkeys(ids)]
