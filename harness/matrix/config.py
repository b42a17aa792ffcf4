"""The device matrix: cells, parsing and validation of ``ci/matrix.toml``.

A cell is everything that must be fixed before JAX initializes its backend (backend, device count,
processes, slices) plus the runtime options and environment the suites run under. It is parsed
once, validated completely, and every mistake is reported with the file, the line and the dotted
field, because a matrix file is edited by hand and read by CI long after it was written.
"""

from __future__ import annotations

import math
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness import adapters, hardware, settings
from harness.adapters import runtimes
from harness.backends import Backend
from harness.matrix.launchers import LAUNCHERS, LOCAL, ClusterOptions
from harness.network.addresses import LOOPBACK, NAMESPACES, NETWORKS
from harness.project import Project

#: backends a cell may name; each maps to the JAX platform it selects
BACKENDS = {b.value: b.jax_platform for b in Backend}
#: runtime options a cell may set, with their defaults (the runtime reads them from the environment;
#: both come from ``harness.settings.RUNTIME_OPTIONS``)
RUNTIME_OPTIONS: dict[str, bool] = {
    o.name: o.default for o in settings.RUNTIME_OPTIONS if o.cell and isinstance(o.default, bool)}
#: runtime options a cell may set to one of a few names, with the names accepted. Absent unless a
#: cell (or ``[defaults]``) sets it: the runtime's own default applies then, since the caller's
#: environment variable is scrubbed (``OWNED_ENV``). ``matmul_precision`` is the precision the
#: reference runtime's programs ask XLA for in their matrix products (``HARNESS_MATMUL_PRECISION``;
#: default ``highest``, exact float32): a GPU cell may declare ``tensorfloat32`` to run as a GPU's
#: own default would. The names are ``harness.runtime.config.MATMUL_PRECISIONS``', spelled out
#: here because reading a matrix must not import the runtime (and JAX with it).
RUNTIME_CHOICES: dict[str, tuple[str, ...]] = settings.CELL_CHOICES
#: what else the ``runtime`` table of a cell may say: which runtime is under test, and which of
#: its releases (a release runs in its own cached environment: ``harness.releases.envs``)
RUNTIME_IDENTITY = ("name", "release")
#: runtimes under test that ``--runtime`` and ``runtime.name`` accept: every registered one, a
#: plugin's included (``harness.adapters.names``: installed metadata, nothing imported)
RUNTIMES = adapters.names()
#: runtimes whose releases live in their own environments (``runtime.release``, ``--release``):
#: a PyTorch/XLA release pins its own torch, and a JAX release is the one the reference runtime
#: rides on, so neither can be swapped inside this interpreter (``harness.releases.envs``)
RELEASED_RUNTIMES = runtimes.RELEASED

#: a cell's keys, as the table of settings declares them (``harness.settings``)
_CELL_KEYS = set(settings.keys(settings.CELL))
#: the cell keys that take one of a few names, with the names each accepts
_CHOICES: dict[str, tuple[str, ...]] = {"backend": tuple(BACKENDS), "launcher": tuple(LAUNCHERS), "network": NETWORKS}
_TOP_KEYS = {"root", "defaults", "cells"}
#: SLURM's time limit forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME_RE = re.compile(r"^(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+(:\d{2}(:\d{2})?)?)$")


def _flag(on: bool) -> str:
    return "1" if on else "0"


def _option_variables() -> dict[str, tuple[str, Callable[[Cell, str], str | None]]]:
    """The variables of the runtime options a cell may set: each option's own variable (the one
    the runtime reads), and ``HARNESS_FUNCTIONALIZATION``, the same fact said positively."""
    out: dict[str, tuple[str, Callable[[Cell, str], str | None]]] = {}
    for option in settings.RUNTIME_OPTIONS:
        if not option.cell:
            continue
        name = option.name
        if isinstance(option.default, bool):
            inverted = option.inverted
            out[option.variable] = (f"runtime.{name}", lambda c, r, n=name, i=inverted: _flag(bool(c.runtime[n]) != i))
        else:  # a choice: set only where the cell names one, else the runtime's own default applies
            out[option.variable] = (f"runtime.{name}", lambda c, r, n=name: str(c.runtime[n]) if n in c.runtime else None)
    out["HARNESS_FUNCTIONALIZATION"] = ("runtime.functionalization", lambda c, r: _flag(bool(c.runtime["functionalization"])))
    return out


#: every variable a cell's fields set in its processes: the field that owns it, and its value for a
#: cell and the runtime under test (None: not set for that cell). A cell's ``env`` may not set one
#: of them (it would contradict the field), and ``Cell.environment`` sets them all from here.
CELL_VARIABLES: dict[str, tuple[str, Callable[[Cell, str], str | None]]] = {
    "HARNESS_CELL": ("the cell's name", lambda c, r: c.name),
    "HARNESS_BACKEND": ("backend", lambda c, r: str(c.backend)),
    "JAX_PLATFORMS": ("backend", lambda c, r: BACKENDS[c.backend]),
    "HARNESS_DEVICES": ("devices", lambda c, r: str(c.devices)),
    "JAX_NUM_CPU_DEVICES": ("devices", lambda c, r: str(c.devices) if c.backend == Backend.CPU else None),
    "HARNESS_PROCESSES": ("processes", lambda c, r: str(c.processes)),
    "HARNESS_PROCESS_ID": ("processes", lambda c, r: None),  # each rank's, set by the supervisor
    "HARNESS_COORDINATOR": ("processes", lambda c, r: None),  # the launch's, set by the supervisor
    "HARNESS_SLICES": ("slices", lambda c, r: str(c.slices)),
    "HARNESS_NETWORK": ("network", lambda c, r: c.network),
    "HARNESS_NUM_SLICES": ("slices", lambda c, r: str(c.slices)),
    "HARNESS_RUNTIME": ("--runtime", lambda c, r: r),
    "HARNESS_RELEASE": ("runtime.release", lambda c, r: c.release or None),
    **_option_variables(),
}
#: environment variables a cell's fields own; setting them in ``env`` would contradict the fields
OWNED_ENV = {name: owner for name, (owner, _) in CELL_VARIABLES.items()}
#: ``devices = "all"``: a template cell, one per machine, of every accelerator the probe finds
ALL_DEVICES = "all"
#: a template's name ends so; its cells are named by the stem and the count (``gpu-all``: ``gpu-8``)
TEMPLATE_SUFFIX = "-all"
#: the fewest devices a template makes a cell of: with one, every sharding degenerates to
#: replication, which the one-device cell of the backend (``gpu``, ``tpu``) already runs
MIN_TEMPLATE_DEVICES = 2
#: backends a template may take every device of; a CPU cell names its count (any count runs)
TEMPLATE_BACKENDS: tuple[str, ...] = tuple(b for b in Backend if b.accelerator)
#: PyTorch/XLA's own name of each backend (``PJRT_DEVICE``)
PJRT_DEVICES = {b.value: b.pjrt_device for b in Backend}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_RELEASE_RE = re.compile(r"^\d+(\.\d+)*([a-z]+\d*)?(\.(post|dev)\d+)?(\+[A-Za-z0-9.]+)?$")


class MatrixError(Exception):
    """A malformed or impossible matrix file; the message names file, line and field."""

    def __init__(self, path: Path, line: int | None, field_name: str, message: str) -> None:
        self.path, self.line, self.field, self.reason = path, line, field_name, message
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {field_name}: {message}" if field_name else f"{where}: {message}")


@dataclass(frozen=True)
class Cell:
    """One named environment of the matrix."""

    name: str
    backend: str = Backend.CPU
    devices: int = 1  # per process
    processes: int = 1
    slices: int = 1
    runtime: dict[str, bool | str] = field(default_factory=lambda: dict(RUNTIME_OPTIONS))
    env: dict[str, str] = field(default_factory=dict)
    paths: tuple[str, ...] = ("suites",)
    pytest_args: tuple[str, ...] = ()
    timeout: float = 300.0  # per test, seconds
    description: str = ""
    line: int | None = None  # where the cell's table starts in the file
    runtime_name: str | None = None  # ``runtime.name``: None leaves it to ``--runtime``
    release: str | None = None  # ``runtime.release``: a release of ``runtime_name``
    all_devices: bool = False  # ``devices = "all"``: a template, resolved by the probe's count
    derived_from: str | None = None  # the template this cell was made from (``gpu-all``)
    launcher: str = LOCAL  # who starts the ranks: the supervisor, srun or mpirun
    cluster: ClusterOptions = field(default_factory=ClusterOptions)  # a launcher cell's site options
    network: str = LOOPBACK  # or NAMESPACES: each rank a host of its own (``harness.network``);
    # under a launcher, each node of the cluster is (``ci/cluster.sh start --network namespaces``)

    @property
    def stem(self) -> str:
        """What a template's cells are named by, before the count: ``gpu-`` for ``gpu-all`` and
        each of its cells; a cell of no template is its own name."""
        template = self.name if self.all_devices else self.derived_from
        return template[: -len(ALL_DEVICES)] if template else self.name

    def derive(self, devices: int) -> Cell:
        """The cell of ``devices`` devices a template stands for, named ``<stem><devices>``."""
        if not self.all_devices:
            raise ValueError(f"cell {self.name} is not a template (devices = \"all\")")
        return replace(self, name=f"{self.stem}{devices}", devices=devices, all_devices=False,
                       derived_from=self.name)

    @property
    def total_devices(self) -> int:
        return self.devices * self.processes

    @property
    def multiprocess(self) -> bool:
        return self.processes > 1

    def runtime_label(self, runtime: str | None = None) -> str:
        """A short human description of the runtime options, e.g. ``functionalization=off``: only
        those the runtime under test (``runtime``, else the cell's own, else the reference
        runtime) honours, so a runtime without options shows none ("" then)."""
        from harness import adapters

        honoured = adapters.runtime_options(runtime or self.runtime_name or "reference")
        parts = [
            f"{k}={v}" if isinstance(v, str) else f"{k}={'on' if v else 'off'}"
            for k, v in sorted(self.runtime.items()) if honoured is None or k in honoured
        ]
        return " ".join(parts)

    def environment(
        self, runtime_name: str = "reference", parent: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The variables that make a fresh process *be* this cell (before JAX initializes), and,
        for PyTorch/XLA, before it imports: its device, device count and flags come from the
        same fields, under its own variable names. ``parent`` is the environment the cell's
        processes inherit (default ``os.environ``): an accelerator cell keeps to the devices it
        already leaves visible."""
        env = {name: value for name, (_, value_of) in CELL_VARIABLES.items()
               if (value := value_of(self, runtime_name)) is not None}
        if self.backend != Backend.CPU:
            env.update(_accelerator_visibility(self, os.environ if parent is None else parent))
        if runtime_name == "torch_xla":
            env["PJRT_DEVICE"] = PJRT_DEVICES[self.backend]
            if self.backend == Backend.CPU:
                env["CPU_NUM_DEVICES"] = str(self.devices)
            env["XLA_DISABLE_FUNCTIONALIZATION"] = "0" if self.runtime["functionalization"] else "1"
            env["XLA_ENABLE_PARAM_ALIASING"] = "1" if self.runtime["param_aliasing"] else "0"
        env.update(self.env)
        return env

    def as_dict(self) -> dict[str, Any]:
        """The cell as ``xharness cells --json`` shows it. A template's device count is the word
        its file says (``"all"``) until the probe resolves it; a derived cell names its template."""
        return {
            "name": self.name,
            "backend": self.backend,
            "devices": ALL_DEVICES if self.all_devices else self.devices,
            "processes": self.processes,
            "slices": self.slices,
            "total_devices": ALL_DEVICES if self.all_devices else self.total_devices,
            **({"derived_from": self.derived_from} if self.derived_from else {}),
            "runtime": {
                **self.runtime,
                **({"name": self.runtime_name} if self.runtime_name else {}),
                **({"release": self.release} if self.release else {}),
            },
            "env": dict(self.env),
            "paths": list(self.paths),
            "pytest_args": list(self.pytest_args),
            "timeout": self.timeout,
            "description": self.description,
            "launcher": self.launcher,
            **({"cluster": {k: v for k, v in asdict(self.cluster).items() if v}}
               if self.launcher != LOCAL or self.cluster != ClusterOptions() else {}),
            **({"network": self.network} if self.network != LOOPBACK else {}),
        }


def _accelerator_visibility(cell: Cell, parent: Mapping[str, str]) -> dict[str, str]:
    """The variables that keep an accelerator cell's processes to its own devices.

    JAX takes every device the driver shows it, so on a machine with more devices than the cell
    names, the one-GPU cell would otherwise run on all of them (and claim to be one device). GPUs:
    ``CUDA_VISIBLE_DEVICES`` (also read by ROCm's HIP) lists the first ``total_devices`` of those
    the parent leaves visible, so a runner that hands the job some GPUs keeps it on them. TPUs:
    libtpu has no such list for an arbitrary count, only its bounds; a one-chip cell takes the
    first visible chip with bounds of one chip, a larger cell takes the host's chips (the probe
    asks for exactly its count, ``harness.matrix.probe``).
    """
    if cell.backend == Backend.GPU:
        return {"CUDA_VISIBLE_DEVICES": _first_visible(parent.get("CUDA_VISIBLE_DEVICES"), cell.total_devices)}
    if cell.backend == Backend.TPU and cell.total_devices == 1:
        return {
            "TPU_VISIBLE_CHIPS": _first_visible(parent.get("TPU_VISIBLE_CHIPS"), 1),
            "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
            "TPU_PROCESS_BOUNDS": "1,1,1",
        }
    return {}


def _first_visible(listed: str | None, count: int) -> str:
    """The first ``count`` entries of a visible-devices list (indices or UUIDs), or of all
    devices when the parent sets none; an empty list (nothing visible) stays empty."""
    if listed is None:
        return ",".join(str(i) for i in range(count))
    entries = [e.strip() for e in listed.split(",") if e.strip()]
    return ",".join(entries[:count])


@dataclass(frozen=True)
class Matrix:
    path: Path
    root: Path  # the directory cells run pytest from
    cells: dict[str, Cell]  # in file order, templates (``devices = "all"``) included

    @property
    def templates(self) -> dict[str, Cell]:
        return {name: c for name, c in self.cells.items() if c.all_devices}

    def listed(self, found: Callable[[str], int] | None = None) -> list[Cell]:
        """Every cell this machine has, in file order: each template replaced by its cell of
        every device the probe finds (``found(backend)``, default the probe's count) when there
        are at least two, else kept as it is (the probe then says why it cannot run). A derived
        cell the file also names explicitly is listed once, as the file says."""
        count = found or hardware.device_count
        out: dict[str, Cell] = {}
        for cell in self.cells.values():
            if cell.all_devices:
                cell = self._resolve(cell, count(cell.backend))
                if cell.name in self.cells and cell.derived_from:
                    continue  # the file's own cell of that name stands where the file puts it
            out.setdefault(cell.name, cell)
        return list(out.values())

    def select(self, names: list[str] | None, found: Callable[[str], int] | None = None) -> list[Cell]:
        """The named cells in the given order (:meth:`listed` when ``names`` is empty). A name is
        a cell of the file, a template (resolved as in :meth:`listed`), or ``<stem><N>`` of a
        template (``gpu-8`` of ``gpu-all``): that cell whatever this machine has, so a run asks
        for the hardware it means and the probe says why it cannot run here."""
        if not names:
            return self.listed(found)
        count = found or hardware.device_count
        chosen: dict[str, Cell] = {}
        for name in names:
            cell = self.cells.get(name) or self._by_count(name)
            if cell is None:
                raise MatrixError(self.path, None, "--cells", f"unknown cell {name!r} (known: {self._known()})")
            if cell.all_devices:
                cell = self._resolve(cell, count(cell.backend))
                cell = self.cells.get(cell.name, cell)
            chosen.setdefault(cell.name, cell)
        return list(chosen.values())

    def _resolve(self, template: Cell, found: int) -> Cell:
        return template.derive(found) if found >= MIN_TEMPLATE_DEVICES else template

    def _by_count(self, name: str) -> Cell | None:
        """The cell ``<stem><N>`` of a template, ``N`` at least :data:`MIN_TEMPLATE_DEVICES`."""
        for template in self.templates.values():
            digits = name[len(template.stem):]
            if name.startswith(template.stem) and digits.isdigit() and not digits.startswith("0"):
                if int(digits) >= MIN_TEMPLATE_DEVICES:
                    return template.derive(int(digits))
        return None

    def _known(self) -> str:
        names = [n for n, c in self.cells.items() if not c.all_devices]
        names += [f"{c.name} or {c.stem}N (N >= {MIN_TEMPLATE_DEVICES})" for c in self.templates.values()]
        return ", ".join(names)


#: the cells of a project whose configuration names none (``xharness init`` writes them too)
STARTER = Path(__file__).with_name("starter.toml")


def project_matrix(project: Project) -> Matrix:
    """The matrix of the user's project (``harness.project``): its matrix file, else its inline
    cells (``[[tool.xharness.cells]]``), else the starter cells. Inline and starter cells run
    from the project's root over its test paths: ``testpaths`` of ``[tool.xharness]``, else
    pytest's own ``testpaths`` of the same ``pyproject.toml``, else the root."""
    if project.matrix is not None:
        return load_matrix(project.matrix)
    paths = list(project.testpaths or _pytest_testpaths(project.root) or ["."])
    if project.cells:
        assert project.path is not None
        cells = {c["name"]: {k: v for k, v in c.items() if k != "name"} for c in project.cells}
        data = {"root": ".", "defaults": {"paths": paths}, "cells": cells}
        return _Parser(project.path, project.path.read_text(encoding="utf-8")).parse(data)
    data = tomllib.loads(STARTER.read_text(encoding="utf-8"))
    data.update(root=str(project.root), defaults={"paths": paths})
    return _Parser(STARTER, STARTER.read_text(encoding="utf-8")).parse(data)


def _pytest_testpaths(root: Path) -> list[str]:
    """pytest's ``testpaths`` from the project's ``pyproject.toml``, when it sets them."""
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    found = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("testpaths", [])
    return [p for p in found if isinstance(p, str)] if isinstance(found, list) else []


def load_matrix(path: Path) -> Matrix:
    """Read and validate a matrix file; raises :class:`MatrixError` on any problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MatrixError(path, None, "", f"cannot read the matrix file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None) or _line_from_message(str(exc))
        raise MatrixError(path, line, "", f"not valid TOML: {exc}") from None
    return _Parser(path, text).parse(data)


def _line_from_message(message: str) -> int | None:
    match = re.search(r"line (\d+)", message)
    return int(match.group(1)) if match else None


class _Parser:
    """Turns the decoded TOML into cells, pointing errors back at lines of the text."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    # -- locating fields in the text -------------------------------------------------------------
    def line_of(self, table: tuple[str, ...], key: str | None = None) -> int | None:
        """Line of ``key`` inside ``[table]`` (or of the table header when ``key`` is None).

        Handles the forms people write: ``[cells.cpu-4]``, ``[cells."cpu-4"]``, dotted keys and
        inline tables inside a parent table (``runtime = { ... }`` for ``cells.x.runtime``).
        """
        current: tuple[str, ...] = ()
        header_line: int | None = None
        subtable_line: int | None = None  # ``[table.key...]``: the key spelled as a table header
        for number, raw in enumerate(self.lines, start=1):
            line = raw.strip()
            if line.startswith("["):
                current = _split_header(line)
                if current == table and header_line is None:
                    header_line = number
                if key is not None and subtable_line is None and current[: len(table) + 1] == (*table, key):
                    subtable_line = number
                continue
            if key is None or current != table:
                continue
            if re.match(rf'^["\']?{re.escape(key)}["\']?\s*=', line):
                return number
        if subtable_line is not None:
            return subtable_line
        if header_line is not None:
            return header_line
        if len(table) > 1:  # maybe an inline table in the parent: point at its key
            return self.line_of(table[:-1], table[-1])
        return None

    def fail(self, table: tuple[str, ...], key: str | None, message: str) -> MatrixError:
        dotted = ".".join([*table, key] if key else table)
        return MatrixError(self.path, self.line_of(table, key), dotted, message)

    # -- parsing ----------------------------------------------------------------------------------
    def parse(self, data: dict[str, Any]) -> Matrix:
        for key in data:
            if key not in _TOP_KEYS:
                raise self.fail((), key, f"unknown key (expected one of {', '.join(sorted(_TOP_KEYS))})")
        root_value = data.get("root", ".")
        if not isinstance(root_value, str):
            raise self.fail((), "root", "must be a string path relative to the matrix file")
        root = (self.path.parent / root_value).resolve()
        defaults = data.get("defaults", {})
        if not isinstance(defaults, dict):
            raise self.fail((), "defaults", "must be a table")
        base = self._fields(("defaults",), defaults, {}, allow_shape=False)
        cells_data = data.get("cells")
        if not isinstance(cells_data, dict) or not cells_data:
            raise self.fail((), "cells", "the matrix needs at least one [cells.NAME] table")
        cells: dict[str, Cell] = {}
        for name, body in cells_data.items():
            table = ("cells", name)
            if not _NAME_RE.match(name):
                raise self.fail(table, None, "cell names use letters, digits, '-', '_' and '.'")
            if not isinstance(body, dict):
                raise self.fail(("cells",), name, "must be a table")
            values = self._fields(table, body, base, allow_shape=True)
            if values.get("devices") == ALL_DEVICES:
                self._check_template(table, name, values)
                values.update(devices=MIN_TEMPLATE_DEVICES, all_devices=True)
            cell = Cell(name=name, line=self.line_of(table), **values)
            self._check_shape(table, cell)
            cells[name] = cell
        return Matrix(self.path, root, cells)

    def _fields(
        self, table: tuple[str, ...], body: dict[str, Any], base: dict[str, Any], allow_shape: bool
    ) -> dict[str, Any]:
        out = dict(base)
        for key, value in body.items():
            if key not in _CELL_KEYS:
                raise self.fail(table, key, f"unknown key (expected one of {', '.join(sorted(_CELL_KEYS))})")
            out[key] = self._value(table, key, value)
        if "runtime" in out:  # merge over the defaults rather than replace them
            merged = {**RUNTIME_OPTIONS, **base.get("runtime", {}), **out["runtime"]}
            for key in RUNTIME_IDENTITY:  # name and release are fields of their own
                if key in merged:
                    out["runtime_name" if key == "name" else key] = merged.pop(key)
            out["runtime"] = merged
        if out.get("release") and out.get("runtime_name") not in RELEASED_RUNTIMES:
            raise self.fail(
                (*table, "runtime"), "release",
                f"a release needs runtime.name set to one of {', '.join(RELEASED_RUNTIMES)}",
            )
        return out

    def _value(self, table: tuple[str, ...], key: str, value: Any) -> Any:
        if key in _CHOICES:
            if value not in _CHOICES[key]:
                raise self.fail(table, key, f"unknown {key} {value!r} (expected one of {', '.join(_CHOICES[key])})")
            return value
        if key == "devices" and value == ALL_DEVICES:
            if table[0] != "cells":
                raise self.fail(table, key, f"{ALL_DEVICES!r} belongs to a cell of its own, not to [defaults]")
            return value
        if key in ("devices", "processes", "slices"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise self.fail(table, key, f"must be a positive integer, got {value!r}")
            return value
        if key == "timeout":
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or math.isinf(value):
                raise self.fail(table, key, f"must be a positive number of seconds, got {value!r}")
            return float(value)
        if key == "description":
            if not isinstance(value, str):
                raise self.fail(table, key, "must be a string")
            return value
        if key == "cluster":
            return self._cluster(table, value)
        if key in ("paths", "pytest_args"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.fail(table, key, "must be a list of strings")
            if key == "paths" and not value:
                raise self.fail(table, key, "must name at least one test path")
            return tuple(value)
        if key == "env":
            if not isinstance(value, dict):
                raise self.fail(table, key, "must be a table of NAME = \"value\"")
            for name, v in value.items():
                if not isinstance(v, str):
                    raise self.fail((*table, key), name, f"environment values are strings, got {v!r}")
                if name in OWNED_ENV:
                    raise self.fail((*table, key), name, f"set from the cell's {OWNED_ENV[name]}; change that instead")
                if name == "XLA_FLAGS" and "xla_force_host_platform_device_count" in v:
                    raise self.fail((*table, key), name, "the device count comes from the cell's devices")
                if name in settings.ENVIRONMENT and v.strip():  # checked as the environment's are
                    try:
                        settings.ENVIRONMENT[name].parse(v, "the cell's env")
                    except settings.SettingError as exc:
                        raise self.fail((*table, key), name, str(exc)) from None
                elif (warning := settings.near_miss(name)) is not None:
                    line = self.line_of((*table, key), name) or self.line_of(table, key)
                    where = f"{self.path}:{line}" if line else str(self.path)
                    print(f"xharness: warning: {where}: {'.'.join((*table, key))}: {warning}", file=sys.stderr)
            return dict(value)
        if key == "runtime":
            if not isinstance(value, dict):
                raise self.fail(table, key, "must be a table of runtime options")
            for name, v in value.items():
                if name == "name":
                    if v not in RUNTIMES:
                        raise self.fail((*table, key), name, f"unknown runtime {v!r} (expected one of {', '.join(RUNTIMES)})")
                    continue
                if name == "release":
                    if not isinstance(v, str) or not _RELEASE_RE.match(v):
                        raise self.fail((*table, key), name, f"must be a release version string like \"2.9.0\", got {v!r}")
                    continue
                if name in RUNTIME_CHOICES:
                    accepted = RUNTIME_CHOICES[name]
                    if not isinstance(v, str) or v.strip().lower() not in accepted:
                        raise self.fail(
                            (*table, key), name,
                            f"unknown {name.replace('_', ' ')} {v!r} (expected one of {', '.join(accepted)})",
                        )
                    continue
                if name not in RUNTIME_OPTIONS:
                    known = ", ".join([*RUNTIME_OPTIONS, *RUNTIME_CHOICES, *RUNTIME_IDENTITY])
                    raise self.fail((*table, key), name, f"unknown runtime option (expected one of {known})")
                if not isinstance(v, bool):
                    raise self.fail((*table, key), name, f"must be true or false, got {v!r}")
            return dict(value)
        raise AssertionError(key)  # _CELL_KEYS and this function list the same keys

    def _cluster(self, table: tuple[str, ...], value: Any) -> ClusterOptions:
        """A launcher cell's ``cluster`` table: where and how long it runs on a site's cluster."""
        if not isinstance(value, dict):
            raise self.fail(table, "cluster", "must be a table: partition, account, time_limit, nodes, "
                            "tasks_per_node, extra, sbatch")
        known = {f.name for f in fields(ClusterOptions)}
        for name, v in value.items():
            where = (*table, "cluster")
            if name not in known:
                raise self.fail(where, name, f"unknown key (expected one of {', '.join(sorted(known))})")
            if name in ("partition", "account") and not (isinstance(v, str) and re.fullmatch(r"[\w.,-]+", v)):
                raise self.fail(where, name, f"must be a {name} name, got {v!r}")
            if name == "time_limit" and not (isinstance(v, str) and _TIME_RE.match(v)):
                raise self.fail(where, name, "must be a SLURM time (\"MM\", \"MM:SS\", \"HH:MM:SS\" or "
                                f"\"D-HH[:MM[:SS]]\"), got {v!r}")
            if name in ("nodes", "tasks_per_node") and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise self.fail(where, name, f"must be a positive integer, got {v!r}")
            if name in ("extra", "sbatch") and not (isinstance(v, list) and all(isinstance(a, str) for a in v)):
                what = "launcher" if name == "extra" else "sbatch"
                raise self.fail(where, name, f"must be a list of strings (more {what} arguments)")
        return ClusterOptions(**{k: tuple(v) if k in ("extra", "sbatch") else v for k, v in value.items()})

    def _check_template(self, table: tuple[str, ...], name: str, values: dict[str, Any]) -> None:
        """A template takes every accelerator of one machine in one process: its count and name
        follow from the hardware, so nothing else may fix them."""
        backend = values.get("backend", "cpu")
        if backend not in TEMPLATE_BACKENDS:
            raise self.fail(
                table, "devices",
                f"{ALL_DEVICES!r} takes every {' or '.join(b.upper() for b in TEMPLATE_BACKENDS)} the probe finds "
                f"(backend = {' or '.join(repr(b) for b in TEMPLATE_BACKENDS)}); a {backend} cell names its count",
            )
        for key in ("processes", "slices"):
            if values.get(key, 1) != 1:
                raise self.fail(table, key, f"a cell of devices = {ALL_DEVICES!r} runs one process of one slice")
        if not name.endswith(TEMPLATE_SUFFIX):
            raise self.fail(
                table, None,
                f"a cell of devices = {ALL_DEVICES!r} is named STEM{TEMPLATE_SUFFIX}: its cells are STEM-N, "
                "N the devices the probe finds (e.g. gpu-all makes gpu-8)",
            )

    def _check_shape(self, table: tuple[str, ...], cell: Cell) -> None:
        """Constraints between fields: the cell must be a topology that can exist."""
        if cell.total_devices % cell.slices:
            raise self.fail(
                table,
                "slices",
                f"{cell.slices} slices do not divide {cell.total_devices} devices "
                f"({cell.processes} process(es) x {cell.devices})",
            )
        if cell.launcher != LOCAL and cell.slices > 1 and cell.slices != (cell.cluster.nodes or cell.processes):
            raise self.fail(
                table, "slices", f"under a launcher a slice is a node: {cell.slices} slices need "
                f"{cell.slices} nodes (cluster.nodes, or one node per process)",
            )
        if cell.network == NAMESPACES and cell.processes < 2:
            raise self.fail(
                table, "network", "namespaces make each rank a host of its own: they need 2 or more "
                f"processes, not {cell.processes} (under a launcher, the cluster's nodes are the hosts)",
            )
        if cell.processes > 1 and cell.processes % cell.slices:
            raise self.fail(
                table, "slices", f"{cell.slices} slices do not divide {cell.processes} processes: a process belongs to one slice"
            )


def _split_header(line: str) -> tuple[str, ...]:
    """``[cells."cpu-4".runtime]  # note`` -> ("cells", "cpu-4", "runtime")."""
    match = re.match(r"^\[\[?\s*(.*?)\s*\]\]?\s*(#.*)?$", line)
    inner = match.group(1) if match else line.strip("[]")
    parts = re.findall(r'"([^"]*)"|\'([^\']*)\'|([^.\s]+)', inner)
    return tuple(next((p for p in groups if p), "") for groups in parts)
