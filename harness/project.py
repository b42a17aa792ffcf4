"""The user's project: where it is, and what its ``[tool.xharness]`` says.

A maintainer configures the harness from their own repository, as pytest and tox are configured:
``[tool.xharness]`` in the ``pyproject.toml`` of the directory ``xharness`` runs in or the nearest
parent that has one, or the top level of an ``xharness.toml`` there (which wins when a directory
has both). Every path in it is relative to the file's directory, which is the project's root: the
cells run pytest there and the reports go there.

Without such a file the current directory is the project and nothing of this checkout's own
configuration leaks into it: ``xharness run`` runs pytest's own collection there across the starter
cells (``harness/matrix/starter.toml``), never the harness' own suites.

Every key is checked when the file is read: an unknown key, a value of the wrong type, a runtime no
plugin registers, or a path that does not exist is a :class:`ProjectError` that names the file, the
line, the key and what is accepted, before anything starts (exit 2).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import entrypoints, settings

PYPROJECT, OWN_FILE = "pyproject.toml", "xharness.toml"
#: every key of ``[tool.xharness]``, with what it accepts (declared in ``harness.settings``)
KEYS: dict[str, str] = {name: s.accepts.describe for name, s in settings.keys(settings.PROJECT).items()}


#: the header of ``[tool.xharness]`` or one of its sub-tables, as a line of a pyproject.toml
SECTION = re.compile(r"^\s*\[\[?\s*tool\s*\.\s*[\"']?xharness[\"']?\s*[.\]]", re.MULTILINE)


class ProjectError(Exception):
    """A malformed ``[tool.xharness]``; the message names the file, the line and the key."""

    def __init__(self, path: Path, line: int | None, key: str, message: str, column: int | None = None) -> None:
        self.path, self.line, self.key, self.reason, self.column = path, line, key, message, column
        where = f"{path}:{line}" if line else str(path)
        where += f":{column}" if line and column else ""
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


@dataclass(frozen=True)
class Project:
    """The project ``xharness`` runs in. ``path`` is the configuration file (None when there is
    none); every path below is absolute, resolved against ``root``."""

    root: Path
    path: Path | None = None
    testpaths: tuple[str, ...] = ()
    matrix: Path | None = None
    cells: tuple[dict[str, Any], ...] = ()
    runtime: str | None = None
    expected: Path | None = None
    reports: Path | None = None
    executor: str | None = None  # "local" or "slurm"; None: the command's default (local)
    slurm: dict[str, Any] = field(default_factory=dict)  # partition, account, options, deadline (checked)
    #: the runner labels of the workflow's cell jobs, by cell name or need (``harness.matrix.hosted``)
    runners: dict[str, tuple[str, ...]] = field(default_factory=dict)
    table: str = ""  # the table the keys are in: "tool.xharness", or "" at an xharness.toml's top
    lines: dict[str, int] = field(default_factory=dict, compare=False)
    runtime_line: int | None = field(default=None, compare=False)  # where ``runtime`` is set

    @property
    def configured(self) -> bool:
        return self.path is not None

    def reports_dir(self) -> Path:
        """Where ``run`` and ``teeth`` write unless ``--out`` says: ``reports`` of the project."""
        return self.reports or self.root / "reports"

    def describe(self) -> str:
        """``pyproject.toml [tool.xharness]`` or ``xharness.toml``: where the settings came from."""
        if self.path is None:
            return "(no [tool.xharness] found: defaults)"
        return f"{self.path} [{self.table}]" if self.table else str(self.path)


@dataclass(frozen=True)
class RuntimeChoice:
    """The runtime under test where no command line names one, and where that came from."""

    name: str
    source: str  # "environment (HARNESS_RUNTIME)", "<file>:<line> runtime", or "default"


def runtime_under_test(project: Project, environ: dict[str, str] | None = None) -> RuntimeChoice:
    """The runtime a plain run tests: ``HARNESS_RUNTIME`` when set (a cell sets it for its
    processes), else the project's ``runtime``, else the reference runtime. ``xharness run``'s
    cells, ``xharness config`` and a plain ``pytest`` in the project all read it here, so the
    three never disagree about which runtime is under test."""
    named = settings.raw("HARNESS_RUNTIME", environ).strip()
    if named:
        return RuntimeChoice(named, "environment (HARNESS_RUNTIME)")
    if project.runtime is not None:
        where = f"{project.path}:{project.runtime_line}" if project.runtime_line else str(project.path)
        return RuntimeChoice(project.runtime, f"{where} runtime")
    return RuntimeChoice("reference", "default")


def find(start: Path | None = None) -> Path | None:
    """The configuration file for ``start`` (default: the current directory): ``xharness.toml``
    or a ``pyproject.toml`` with ``[tool.xharness]``, in it or the nearest parent."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        own = directory / OWN_FILE
        if own.is_file():
            return own
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and _has_table(pyproject):
            return pyproject
        if pyproject.is_file():
            _parses(pyproject)
    return None


def toml_error(path: Path, exc: tomllib.TOMLDecodeError) -> ProjectError:
    """A file that is not TOML, as a :class:`ProjectError` naming its line and column (tomllib
    says them in its message: ``Invalid value (at line 3, column 9)``)."""
    found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
    reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc)) if found else str(exc)
    line, column = (int(found.group(1)), int(found.group(2))) if found else (None, None)
    return ProjectError(path, line, "", f"not valid TOML: {reason}", column)


def _parses(pyproject: Path) -> None:
    """A ``pyproject.toml`` met on the way up must parse, with or without ``[tool.xharness]``:
    pytest and pip read it too, and would fail later with the words far from the user (a rank's
    log), so every command stops here first, naming the line and column."""
    try:
        tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return  # unreadable: pytest will say so in its own words; not a project of ours
    except tomllib.TOMLDecodeError as exc:
        raise toml_error(pyproject.resolve(), exc) from None


def _has_table(pyproject: Path) -> bool:
    """Whether ``pyproject`` has ``[tool.xharness]`` (an unreadable file is read, and reported,
    by :func:`load`: a broken configuration must not be skipped for a parent's)."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # not UTF-8: not a project of ours, as _parses says
        return False
    return SECTION.search(text) is not None


def load(start: Path | None = None) -> Project:
    """The project of ``start`` (default: the current directory), read and checked;
    ``XHARNESS_PROJECT`` names the configuration file (or its directory) instead of the search."""
    named = settings.raw("XHARNESS_PROJECT").strip()
    if named:
        path: Path | None = Path(named).expanduser()
        assert path is not None
        if path.is_dir():
            path = find(path) if not (path / OWN_FILE).is_file() else path / OWN_FILE
            if path is None:
                raise ProjectError(Path(named), None, "",
                                   f"XHARNESS_PROJECT names a directory with no {OWN_FILE} and no "
                                   f"{PYPROJECT} with [tool.xharness]")
        elif not path.is_file():
            raise ProjectError(path, None, "", "XHARNESS_PROJECT names no file or directory")
    else:
        path = find(start)
    if path is None:
        return Project(root=(start or Path.cwd()).resolve())
    return read(path)


def read(path: Path) -> Project:
    """Read and check one configuration file."""
    path = path.resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProjectError(path, None, "", f"cannot read it: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_error(path, exc) from None
    if path.name == OWN_FILE:
        table, prefix = data, ""
    else:
        table, prefix = data.get("tool", {}).get("xharness", {}), "tool.xharness"
    if not isinstance(table, dict):
        raise ProjectError(path, None, prefix, "must be a table")
    return _Checker(path, text, prefix).project(table)


class _Checker:
    def __init__(self, path: Path, text: str, prefix: str) -> None:
        self.path, self.prefix, self.lines = path, prefix, text.splitlines()
        self.root = path.parent

    def fail(self, key: str, message: str) -> ProjectError:
        dotted = f"{self.prefix}.{key}" if self.prefix else key
        return ProjectError(self.path, self.line_of(key), dotted, message)

    def line_of(self, key: str) -> int | None:
        """The line a key is set on (the first ``key =`` or ``[[...key]]`` after the table)."""
        header = re.compile(r"^\s*\[\[?\s*tool\s*\.\s*[\"']?xharness") if self.prefix else None
        inside = header is None
        top = key.split(".")[0].split("[")[0]
        for number, line in enumerate(self.lines, 1):
            if header is not None and header.match(line):
                inside = True
                if re.search(rf"\.\s*{re.escape(top)}\s*\]", line):
                    return number
                continue
            if inside and re.match(rf"^\s*[\"']?{re.escape(top)}[\"']?\s*=", line):
                return number
            if header is None and re.match(rf"^\s*\[\[?\s*[\"']?{re.escape(top)}[\"']?\s*[.\]]", line):
                return number  # an xharness.toml's own sub-table: [slurm], [[cells]]
        return None

    def project(self, table: dict[str, Any]) -> Project:
        unknown = sorted(set(table) - set(KEYS))
        if unknown:
            accepted = "; ".join(f"{k}: {v}" for k, v in KEYS.items())
            raise self.fail(unknown[0], f"unknown key (accepted: {accepted})")
        if "matrix" in table and "cells" in table:
            raise self.fail("cells", "give the cells inline or a matrix file (matrix = ...), not both")
        testpaths = self.paths("testpaths", table.get("testpaths"))
        cells = self.cells(table.get("cells"))
        runtime = table.get("runtime")
        if runtime is not None:
            known = tuple(dict.fromkeys(e.name for e in entrypoints.entry_points(entrypoints.RUNTIMES)))
            if not isinstance(runtime, str) or runtime not in known:
                raise self.fail("runtime", f"unknown runtime {runtime!r} (registered: {', '.join(known)})")
        return Project(
            root=self.root,
            path=self.path,
            testpaths=testpaths,
            matrix=self.file("matrix", table.get("matrix")),
            cells=cells,
            runtime=runtime,
            expected=self.file("expected", table.get("expected")),
            reports=self.directory("reports", table.get("reports")),
            executor=self.choice("executor", table.get("executor"), ("local", "slurm")),
            slurm=self.slurm(table.get("slurm")),
            runners=self.runners(table.get("runners")),
            table=self.prefix,
            runtime_line=self.line_of("runtime") if runtime is not None else None,
        )

    def paths(self, key: str, value: Any) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, f"must be a non-empty list of paths, got {value!r}")
        missing = [v for v in value if not (self.root / v).exists()]
        if missing:
            raise self.fail(key, f"no such file or directory: {', '.join(missing)} (relative to {self.root})")
        return tuple(value)

    def file(self, key: str, value: Any) -> Path | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a path (a string), got {value!r}")
        path = (self.root / value).resolve()
        if not path.is_file():
            raise self.fail(key, f"no such file: {value} (relative to {self.root})")
        return path

    def directory(self, key: str, value: Any) -> Path | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a directory path (a string), got {value!r}")
        path = (self.root / value).resolve()
        if path.exists() and not path.is_dir():
            raise self.fail(key, f"{value} exists and is not a directory")
        return path

    def choice(self, key: str, value: Any, accepted: tuple[str, ...]) -> str | None:
        if value is not None and value not in accepted:
            raise self.fail(key, f"must be one of {', '.join(accepted)}, got {value!r}")
        return value

    def runners(self, value: Any) -> dict[str, tuple[str, ...]]:
        """``[tool.xharness.runners]``: runner labels by cell name or need, each a label or a list."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail("runners", "must be a table: a cell's name, or gpu, tpu, slurm, mpi or "
                            "namespaces, to a runner label or a list of labels")
        found = {}
        for name, labels in value.items():
            labels = [labels] if isinstance(labels, str) else labels
            if not (isinstance(labels, list) and labels and all(isinstance(x, str) and x.strip() for x in labels)):
                raise self.fail(f"runners.{name}", f"must be a runner label or a non-empty list of labels, got {value[name]!r}")
            found[name] = tuple(labels)
        return found

    def slurm(self, value: Any) -> dict[str, Any]:
        """``[tool.xharness.slurm]``: the defaults of the cells' jobs."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail("slurm", "must be a table: partition, account, options, deadline")
        for name, v in value.items():
            key = f"slurm.{name}"
            if name in ("partition", "account"):
                if not (isinstance(v, str) and re.fullmatch(r"[\w.,-]+", v)):
                    raise self.fail(key, f"must be a {name} name, got {v!r}")
            elif name == "options":
                if not (isinstance(v, list) and all(isinstance(a, str) for a in v)):
                    raise self.fail(key, "must be a list of strings (sbatch arguments for every job)")
            elif name == "deadline":
                if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                    raise self.fail(key, f"must be a positive number of seconds, got {v!r}")
            else:
                raise self.fail(key, "unknown key (accepted: partition, account, options, deadline)")
        return dict(value)

    def cells(self, value: Any) -> tuple[dict[str, Any], ...]:
        """Inline cells: each a table with a ``name``; its other keys are checked with the
        matrix file's rules when the matrix is made (``harness.matrix.config``)."""
        if value is None:
            return ()
        if not isinstance(value, list) or not value or not all(isinstance(c, dict) for c in value):
            raise self.fail("cells", "must be an array of tables: [[tool.xharness.cells]] with name = \"...\"")
        seen: set[str] = set()
        for index, cell in enumerate(value):
            name = cell.get("name")
            if not isinstance(name, str) or not name:
                raise self.fail(f"cells[{index}].name", "every cell needs a name (a string)")
            if name in seen:
                raise self.fail(f"cells[{index}].name", f"duplicate cell name {name!r}")
            seen.add(name)
        return tuple(dict(c) for c in value)
