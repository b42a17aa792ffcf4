"""A project's own scenarios and invariants as ordinary items of its pytest run.

A maintainer registers scenarios and invariants for their runtime through entry points
(``harness.entrypoints``). As a pytest plugin's tests are items of the run that loads it, these
are items of every pytest run in the maintainer's repository, and so of every cell of
``xharness run`` there and of the CI that ``xharness init`` writes, with no test file to write:

* each scenario in both modes, ``<file>::<scenario-id>[fixed]`` and ``[injected]``, where
  ``<file>`` is the module that defines the ``Scenario`` and the item's line is its definition.
  The injected run must reproduce one of the scenario's signatures. The fixed run of a runtime
  as installed is judged by the project's expected table (``[tool.xharness] expected``) as
  ``xharness repro`` judges it; without a table, and on the reference runtime, it must pass;
* each invariant, ``<file>::<invariant-id>``, run against the runtime under test;
* each item of the project's distributions that cannot be loaded, as a failing item naming the
  distribution, the entry point and the cause: a broken plugin is never green.

Which items are the project's: those registered by the distribution the project's own
``pyproject.toml`` builds, and by the one that registers the project's runtime (which may be
installed from elsewhere). Scenarios of another runtime than the one under test are not items:
their triggers drive a runtime this run does not test. A cell that cannot host a scenario skips it
with the reason, as the catalog's suites do.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from harness import entrypoints
from harness.project import Project, runtime_under_test
from harness.report import properties as prop

#: the seed every scenario item runs with (the catalog's suites use the same)
SEED = 0
FIXED, INJECTED = "fixed", "injected"


class ProjectChecks:
    """The pytest plugin object (registered by ``harness.plugin`` for a configured project)."""

    def __init__(self, project: Project) -> None:
        self.project = project

    @pytest.hookimpl(tryfirst=True)  # before -k/-m deselection and the supervisor's selection
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        items.extend(collect(session, self.project))


def distributions(project: Project, runtime: str) -> set[str]:
    """The distributions whose items are the project's (module docstring)."""
    found = set()
    try:
        data = tomllib.loads((project.root / "pyproject.toml").read_text(encoding="utf-8"))
        name = data.get("project", {}).get("name")
        if isinstance(name, str) and name.strip():
            found.add(entrypoints.normal_name(name))
    except (OSError, tomllib.TOMLDecodeError):
        pass
    if runtime != "reference":  # the harness' own: no distribution to add, and no metadata to scan
        found.update(e.distribution for e in entrypoints.entry_points(entrypoints.RUNTIMES)
                     if e.name == runtime and not e.builtin)
    found.discard(entrypoints.OWN_DISTRIBUTION)
    return found


def collect(session: pytest.Session, project: Project) -> list[pytest.Item]:
    """The project's items, grouped under one collector per defining file."""
    runtime = runtime_under_test(project).name
    owners = distributions(project, runtime)
    if not owners:  # before any registry is imported: the invariants' starts JAX
        return []
    from harness import adapters
    from harness.properties import registry as invariant_registry
    from harness.scenarios import registry as scenario_registry

    items: list[pytest.Item] = []
    files: dict[Path, Definitions] = {}

    def parent(path: Path) -> Definitions:
        if path not in files:
            files[path] = Definitions.from_parent(session, path=path)
        return files[path]

    registering = project.root / "pyproject.toml"  # where a broken item's entry point is declared
    groups = ((adapters.registry(), None), (scenario_registry.loaded(), ScenarioItem),
              (invariant_registry.loaded(), InvariantItem))
    for loaded, kind in groups:
        for error in loaded.broken:
            if error.entry.distribution in owners:
                items.append(BrokenPlugin.from_parent(parent(registering), name=_broken_name(error.entry),
                                                      error=error))
        if kind is None:
            continue
        for entry, obj in loaded.items.values():
            if entry.distribution not in owners:
                continue
            if kind is ScenarioItem and obj.runtime != runtime:
                continue
            path, line = definition(entry)
            modes = (FIXED, INJECTED) if kind is ScenarioItem else (None,)
            for mode in modes:
                name = f"{entry.name}[{mode}]" if mode else entry.name
                items.append(kind.from_parent(parent(path), name=name, obj=obj, mode=mode, line=line,
                                              project=project))
    return items


def _broken_name(entry: entrypoints.EntryPoint) -> str:
    return f"plugin[{entry.distribution}:{entry.group}:{entry.name}]"


def definition(entry: entrypoints.EntryPoint) -> tuple[Path, int]:
    """The file that defines the object ``entry`` names, and the line of its definition there
    (the module is imported already: the entry point was loaded)."""
    module_name, _, attr = entry.value.partition(":")
    module = sys.modules[module_name.strip()]
    path = Path(module.__file__ or "").resolve()
    name = attr.strip().split(".")[0]
    return path, _line_of(path, name)


def _line_of(path: Path, name: str) -> int:
    """The line of the top-level statement that binds ``name`` (1 when none can be found)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return 1
    for node in tree.body:
        targets: Iterable[ast.expr] = ()
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = (node.target,)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return node.lineno
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node.lineno
    return 1


class Definitions(pytest.File):
    """A module of the project that defines scenarios or invariants: the parent of their items,
    so that their node ids and JUnit class names are the user's module, not the harness'."""

    def collect(self) -> Iterable[pytest.Item]:
        return ()  # the items are made by ``collect`` above, from the registries


class ProjectCheckFailed(Exception):
    """A project item's check did not hold; its message is the whole report."""


class _DefinedItem(pytest.Item):
    def __init__(self, *, obj: Any, mode: str | None, line: int, project: Project, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.obj, self.mode, self.line, self.project = obj, mode, line, project

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line - 1, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, ProjectCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)


class ScenarioItem(_DefinedItem):
    """One scenario in one mode, run in this process as the catalog's suites run the harness'
    own scenarios."""

    def runtest(self) -> None:
        import jax

        from harness.scenarios import expected, runner

        scenario, inject = self.obj, self.mode == INJECTED
        for key, value in ((prop.SCENARIO, scenario.id), (prop.MODE, self.mode), (prop.SEED, str(SEED))):
            self.user_properties.append((key, value))
        devices, processes = len(jax.devices()), jax.process_count()
        unmet = scenario.needs.unmet(devices, processes)
        if unmet:
            pytest.skip(f"{scenario.id}: {unmet}")
        cell = self.config.getoption("cell", None)
        result = runner.run(scenario, inject, SEED, devices, cell)
        self.user_properties.append((prop.REPRO, result.repro))
        if result.outcome == runner.SKIPPED:
            pytest.skip(f"{scenario.id}: every variant skipped: "
                        + "; ".join(f"{v.variant}: {v.error}" for v in result.skipped))
        details = "\n".join(f"  {v.variant}: {v.outcome} {v.error}\n{v.traceback}".rstrip()
                            for v in result.variants)
        if inject:
            names = {sig.name for sig in scenario.signatures}
            ran = [v for v in result.variants if v.outcome != runner.SKIPPED]
            if result.outcome != runner.REPRODUCED or not all(v.signature in names for v in ran):
                raise ProjectCheckFailed(
                    f"{scenario.id} [injected]: {result.outcome}, where its fault switch "
                    f"{scenario.fault!r} on must show one of its signatures ({', '.join(sorted(names))})"
                    f"\nreplay: {result.repro}\n{details}")
            self.user_properties.append((prop.SIGNATURE, result.signature))
            return
        table = self._table() if scenario.runtime != "reference" else None
        if table is None:
            if result.outcome != runner.PASSED:
                raise ProjectCheckFailed(f"{scenario.id} [fixed]: {result.outcome}, where its fault "
                                         f"switch off must pass\nreplay: {result.repro}\n{details}")
            return
        actual = expected.actual_outcome(result.outcome, {s.name for s in scenario.signatures},
                                         [v.__dict__ for v in result.variants])
        verdict = table.judge(scenario.runtime, result.version, scenario.id, actual,
                              backend=result.backend or expected.DEFAULT_BACKEND)
        self.user_properties += [(prop.VERDICT, verdict.verdict), (prop.EXPECTED, verdict.expected or ""),
                                 (prop.ACTUAL, actual), (prop.REASON, verdict.reason),
                                 (prop.RELEASE, result.version)]
        if not verdict.green:
            raise ProjectCheckFailed(
                f"{scenario.id} [fixed] on {scenario.runtime} {result.version}: {verdict.verdict}: "
                f"{verdict.reason} ({table.path})\nreplay: {result.repro}\n{details}")

    def _table(self) -> Any:
        from harness.scenarios import expected, known_findings

        if self.project.expected is None:
            return None
        return expected.load(self.project.expected, scenarios=known_findings.table_names())


class InvariantItem(_DefinedItem):
    """One invariant against the runtime under test, under the loaded hypothesis profile."""

    def runtest(self) -> None:
        self.obj.hypothesis_test()()


class BrokenPlugin(pytest.Item):
    """An item of the project's distributions that cannot be loaded: it fails, saying why."""

    def __init__(self, *, error: entrypoints.PluginError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise ProjectCheckFailed(str(self.error))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return str(excinfo.value)
