"""Every setting the harness reads, declared once: its name, what it accepts, its default, where it
may be set, and one line of meaning.

A CI harness is configured through the environment more than anything (a workflow's ``env:``, a
matrix cell, a user's shell), so a typo there must never look like a failing test and never be
ignored. Three places hold settings: the environment (``HARNESS_*`` and ``XHARNESS_*`` variables,
and the JAX variable the harness interprets), a matrix cell (``ci/matrix.toml``'s keys), and a
project's ``[tool.xharness]`` (``harness.project``). Each is declared here; the modules that read
them read through :func:`read`, the parsers of the matrix file and the project file take their key
lists from here, ``xharness config`` shows them with their sources, and the documentation's table
of settings is generated from this declaration (docs/reference/settings.md; ``xharness config
--markdown`` prints the same).

Every command checks the environment before it starts anything (:func:`check_environment`, called
by ``harness.cli``): a bad value is a :class:`SettingError` (exit 2) that names the variable, where
it came from, the value and what is accepted; a variable that looks like the harness' own but is
not declared (a ``HARNESS_``/``XHARNESS_`` prefix, or a near miss of a declared name) is a warning
that names the closest declared one.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.backends import Backend
from harness.errors import UsageError
from harness.switches import SWITCHES

ENV, CELL, PROJECT = "environment", "matrix cell", "[tool.xharness]"
WHERE = (ENV, CELL, PROJECT)
PREFIXES = ("HARNESS_", "XHARNESS_")


class SettingError(UsageError, ValueError):
    """A setting with a value it does not accept; the message names the setting, its source, the
    value and what is accepted. A ``ValueError`` too: the runtime, reading a bad value in a process
    nobody checked first, raises it as it raised its own."""


# ------------------------------------------------------------------------------ what a value may be
@dataclass(frozen=True)
class Accepts:
    """How a setting's text becomes its value; ``parse`` raises ``ValueError`` with the reason."""

    describe: str

    def parse(self, text: str) -> Any:
        return text


@dataclass(frozen=True)
class Text(Accepts):
    describe: str = "any text"


@dataclass(frozen=True)
class Number(Accepts):
    """A finite number above (or from) ``minimum``."""

    describe: str = ""
    minimum: float = 0.0
    inclusive: bool = True

    def parse(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("not a number") from None
        low = value >= self.minimum if self.inclusive else value > self.minimum
        if not math.isfinite(value) or not low:
            raise ValueError("out of range")
        return value


@dataclass(frozen=True)
class Integer(Accepts):
    describe: str = ""
    minimum: int = 1

    def parse(self, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError("not a whole number") from None
        if value < self.minimum:
            raise ValueError("out of range")
        return value


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Flag(Accepts):
    describe: str = f"{', '.join(_TRUE)} or {', '.join(_FALSE)}"

    def parse(self, text: str) -> bool:
        word = text.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError("not a yes/no value")


@dataclass(frozen=True)
class Choice(Accepts):
    """One of a few names, in any case; ``values`` is a tuple, or a function that lists them
    when a value is checked (the registered runtimes are known only then)."""

    describe: str = ""
    values: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()

    def names(self) -> tuple[str, ...]:
        return _names(self.values)

    def parse(self, text: str) -> str:
        word = text.strip().lower()
        if word not in self.names():
            raise ValueError("not one of the names")
        return word


@dataclass(frozen=True)
class Names(Accepts):
    """A comma-separated list of names, each one of ``values`` (as :class:`Choice`)."""

    describe: str = ""
    values: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()

    def parse(self, text: str) -> tuple[str, ...]:
        given = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
        unknown = [n for n in given if n not in _names(self.values)]
        if unknown:
            raise ValueError(f"unknown name(s) {', '.join(map(repr, unknown))}")
        return given


def _names(values: tuple[str, ...] | Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
    return values if isinstance(values, tuple) else tuple(values())


def runtime_names() -> tuple[str, ...]:
    """Every registered runtime (``harness.entrypoints``): what ``HARNESS_RUNTIME`` may name."""
    from harness import entrypoints

    return tuple(dict.fromkeys(e.name for e in entrypoints.entry_points(entrypoints.RUNTIMES)))


# ------------------------------------------------------------------------------ the declaration
@dataclass(frozen=True)
class Setting:
    name: str
    accepts: Accepts
    default: str  # as text; "" for none
    meaning: str
    where: str = ENV
    #: set by the harness for the processes it starts (a cell's, a rank's): documented so that
    #: nothing is unknown, and checked like any other, but not for a user to set
    internal: bool = False

    def parse(self, text: str, source: str = ENV) -> Any:
        """The value of ``text``, or :class:`SettingError` naming the setting and ``source``."""
        try:
            return self.accepts.parse(text)
        except ValueError as exc:
            accepted = self.accepts.describe
            if isinstance(self.accepts, Choice | Names):  # the names themselves, where they are few
                names = [n for n in _names(self.accepts.values) if n]
                accepted += f" ({', '.join(names)})" if len(names) <= 20 else ""
            raise SettingError(f"{self.name}={text!r} (from {source}): {exc}; accepted: {accepted}") from None


_SECONDS = Number("a number of seconds above 0", minimum=0.0, inclusive=False)
_DELAY = Number("a number of seconds, 0 or more", minimum=0.0)
_PATH = Text("a path")

SETTINGS: tuple[Setting, ...] = (
    # -- the environment, for users
    Setting("HARNESS_FAULTS", Names("fault switches of the reference runtime, comma-separated",
                                    values=tuple(SWITCHES)),
            "", "fault switches on for the whole process (the catalog's bugs, re-created)"),
    Setting("HARNESS_CRASH_MODE", Choice("raise or signal", values=("raise", "signal")), "raise",
            "signal turns a placeholder read into a real SIGSEGV, as upstream crashed"),
    Setting("HARNESS_RUNTIME", Choice("a registered runtime (xharness list runtimes)",
                                      values=runtime_names),
            "reference", "the runtime under test in this process (set per cell and by --runtime)"),
    Setting("HARNESS_MATMUL_PRECISION", Choice("default, high, highest, or JAX's other names",
                                               values=lambda: matmul_precisions()),
            "highest", "the precision the reference runtime's matrix products ask XLA for"),
    Setting("HARNESS_WAIT_TIMEOUT", _SECONDS, "600",
            "how long a runtime wait (a sync, wait_device_ops) may block before it raises"),
    Setting("HARNESS_EXECUTION_DELAY", _DELAY, "0", "seconds each execution is held before it runs (races made wide)"),
    Setting("HARNESS_COMPLETION_DELAY", _DELAY, "0", "seconds each execution is held before it completes"),
    Setting("HARNESS_NUM_SLICES", Integer("a whole number, 1 or more"), "1", "slices the reference runtime simulates"),
    Setting("HARNESS_DISABLE_FUNCTIONALIZATION", Flag(), "0",
            "run the reference runtime without functionalization (XLA_DISABLE_FUNCTIONALIZATION)"),
    Setting("HARNESS_PARAM_ALIASING", Flag(), "1", "donate the buffers a step supersedes (XLA_ENABLE_PARAM_ALIASING)"),
    Setting("HARNESS_INIT_TIMEOUT", _SECONDS, "120", "seconds a rank waits for jax.distributed to start"),
    Setting("HARNESS_HEARTBEAT_TIMEOUT", _SECONDS, "30", "seconds without a heartbeat before jax.distributed gives a rank up"),
    Setting("HARNESS_CELL", Text("a cell name"), "", "the matrix cell this process is (tests marked cell(name) read it)"),
    Setting("JAX_NUM_CPU_DEVICES", Integer("a whole number, 1 or more"), "8",
            "CPU devices JAX makes (the pytest plugin asks for 8 unless this or XLA_FLAGS sets a count)"),
    Setting("XHARNESS_PROJECT", _PATH, "", "the [tool.xharness] file (or its directory) instead of the search"),
    Setting("XHARNESS_COMPILE_CACHE", Text("a directory, or off"), "~/.cache/xharness/jax",
            "JAX's persistent compilation cache, shared by cells and runs"),
    Setting("XHARNESS_COMPILE_CACHE_MAX_MB", Number("a number of megabytes above 0", minimum=0.0, inclusive=False),
            "512", "the size the compilation cache is trimmed to after a run"),
    Setting("XHARNESS_ENV_DIR", _PATH, "~/.cache/xharness/envs", "where release environments are built and cached"),
    Setting("XHARNESS_EAGER_PYTHON", _PATH, "",
            "an interpreter with torch and numpy for the semantics oracle (default: the newest torch environment in XHARNESS_ENV_DIR, built by xharness eager)"),
    Setting("XHARNESS_PIP_ARGS", Text("pip arguments, split as a shell splits words"), "",
            "extra arguments for every pip run that builds or lists releases (an index mirror...)"),
    Setting("XHARNESS_RUNS", Integer("a whole number, 1 or more"), "3",
            "fresh processes each race or crash trigger of a release runs in; the verdict counts them all"),
    Setting("XHARNESS_PYTHONS", Text(f"interpreter paths separated by {os.pathsep!r}"), "",
            "interpreters to build release environments with, before the one running"),
    # -- the environment, read by the ci/ scripts
    Setting("XHARNESS_SKIP_NEWEST", Text("any non-empty value skips"), "", "ci/test.sh: skip the suites on the newest declared JAX"),
    Setting("XHARNESS_SKIP_RELEASES", Text("any non-empty value skips"), "", "ci/test.sh: skip the PyTorch/XLA release step"),
    Setting("XHARNESS_NEWEST_OUT", _PATH, "reports/newest", "ci/newest.sh: its reports"),
    Setting("XHARNESS_BENCH_OUT", _PATH, "reports/slurm-bench", "ci/slurm_bench.sh: its runs and bench.json"),
    Setting("XHARNESS_RELEASES_OUT", _PATH, "reports/releases", "ci/releases.sh: its reports"),
    Setting("XHARNESS_UPSTREAM_OUT", _PATH, "reports/upstream", "ci/upstream.sh: its reports"),
    Setting("XHARNESS_MUTANTS_OUT", _PATH, "reports/mutants", "ci/mutants.sh: its reports"),
    Setting("XHARNESS_MUTANT_JOBS", Integer("a whole number, 1 or more"), "2", "ci/mutants.sh: mutants run at once"),
    Setting("XHARNESS_MUTATION_JOBS", Integer("a whole number, 1 or more"), "2",
            "ci/mutation.sh: mutmut's children at once"),
    Setting("XHARNESS_MUTATION_DIR", _PATH, ".mutation", "ci/mutation.py: its scratch copies, mutmut's cache"),
    Setting("XHARNESS_MUTATION_HITS", _PATH, "", "ci/mutation.py sets it for a profile whose tests start the code: "
            "where those processes write the mutated functions they call"),
    Setting("XHARNESS_EXAMPLE_PYTHON", _PATH, ".venv/bin/python", "ci/example.sh: the Python its fresh environment is made with"),
    Setting("XHARNESS_PYTHON_DIR", _PATH, "~/.cache/xharness/python", "ci/python.sh: where it keeps the interpreters it makes"),
    Setting("XHARNESS_PYTHON_FROM", Choice("debian, or empty", values=("", "debian")), "",
            "ci/python.sh: debian skips the interpreters already here"),
    Setting("XHARNESS_DEBIAN_MIRROR", Text("a URL"), "http://deb.debian.org/debian", "ci/python.sh: the Debian archive"),
    Setting("XHARNESS_CLUSTER_DIR", _PATH, "/tmp/xharness-cluster", "ci/cluster.sh: the one-machine cluster's files"),
    Setting("XHARNESS_CLUSTER_NETWORK", Choice("loopback, namespaces, or empty", values=("", "loopback", "namespaces")),
            "", "ci/cluster.sh start: each node a host of its own (namespaces); empty: as the running cluster"),
    Setting("XHARNESS_PYTHON", _PATH, ".venv/bin/python",
            "ci/cluster.sh: the Python that holds the namespaced cluster's hosts"),
    Setting("XHARNESS_CLUSTER_REQUIRED", Choice("1 or empty", values=("", "1")), "",
            "ci/test.sh sets 1 for suites/cluster, which it started the cluster for: a cluster test that "
            "finds none answering fails instead of skipping"),
    Setting("XHARNESS_CLUSTER_NODES", Integer("a whole number, 1 or more"), "2", "ci/cluster.sh: its nodes"),
    Setting("XHARNESS_CLUSTER_CPUS", Integer("a whole number, 1 or more"), "4", "ci/cluster.sh: CPUs each node declares"),
    Setting("XHARNESS_CLUSTER_PORT", Integer("a port number", minimum=1024), "16817",
            "ci/cluster.sh: slurmctld's port; node k listens on the next k"),
    # -- the environment, set by the harness for the processes it starts
    *(Setting(name, accepts, default, meaning, internal=True) for name, accepts, default, meaning in (
        ("HARNESS_BACKEND", Choice("cpu, gpu or tpu", values=tuple(Backend)), Backend.CPU, "the cell's backend"),
        ("HARNESS_DEVICES", Integer("a whole number, 1 or more"), "",
         "the cell's devices per process; unset outside a cell, where api.cell_shape() reads JAX's CPU "
         "count (XLA_FLAGS, else JAX_NUM_CPU_DEVICES)"),
        ("HARNESS_PROCESSES", Integer("a whole number, 1 or more"), "1", "the cell's processes"),
        ("HARNESS_PROCESS_ID", Integer("a whole number, 0 or more", minimum=0), "0", "this rank of a multi-process cell"),
        ("HARNESS_COORDINATOR", Text("host:port"), "", "jax.distributed's coordinator of a multi-process cell"),
        ("HARNESS_SLICES", Integer("a whole number, 1 or more"), "1", "the cell's slices"),
        ("HARNESS_NETWORK", Choice("loopback or namespaces", values=("loopback", "namespaces")), "loopback",
         "the cell's network: namespaces when each rank is a host of its own"),
        ("HARNESS_FUNCTIONALIZATION", Flag(), "1", "the cell's runtime.functionalization"),
        ("HARNESS_RELEASE", Text("a release"), "", "the cell's runtime.release"),
        ("HARNESS_SKIP_SLICE_DISCOVERY", Text("true, or anything else"), "",
         "the reference runtime's skip-discovery guard (as PyTorch/XLA's flag)"),
        ("HARNESS_TURN_SEED", Integer("a whole number, 0 or more", minimum=0), "0", "the ranks' turn order seed"),
        ("HARNESS_TURN_DIR", _PATH, "", "where the ranks take turns"),
        ("HARNESS_TURN_ORDER", Text("a comma-separated order of ranks"), "", "the ranks' turn order"),
        ("HARNESS_TURN_TIMEOUT", _SECONDS, "", "how long a rank waits for its turn"),
        ("HARNESS_LAUNCHER", Choice("local, slurm or mpi", values=("", "local", "slurm", "mpi")), "",
         "who started this rank: a launcher's rank calls jax.distributed.initialize() without arguments"),
        ("HARNESS_RANK_EVENTS", _PATH, "", "a launched rank's events file, {rank} in its name"),
        ("HARNESS_RANK_LOG", _PATH, "", "a launched rank's log, {rank} in its name"),
        ("HARNESS_SLICES_FROM_NODES", Flag(), "", "a launched multi-slice cell: one slice per launcher node"),
        ("HARNESS_SLICE_ID", Integer("a whole number, 0 or more", minimum=0), "0",
         "a launched rank's slice, its launcher node's index"),
    )),
)


#: the names of a matmul precision that are accepted, each with its canonical name (JAX's
#: ``jax.lax.Precision`` aliases: the same three levels under the names of the formats they use).
#: The runtime stores the canonical name; a cell, the environment and ``configure`` accept any.
MATMUL_PRECISIONS: dict[str, str] = {
    "default": "default",
    "bfloat16": "default",
    "high": "high",
    "tensorfloat32": "high",
    "bfloat16_3x": "high",
    "highest": "highest",
    "float32": "highest",
}


def matmul_precisions() -> tuple[str, ...]:
    """The precision names the reference runtime accepts, without importing the runtime."""
    return tuple(MATMUL_PRECISIONS)


@dataclass(frozen=True)
class RuntimeOption:
    """One option of the reference runtime (a field of ``harness.runtime.config.Options``): the
    variable that sets it for a process, whose declaration above gives its type and default, and
    whether a matrix cell's ``runtime`` table may set it. The runtime's defaults, the variables it
    reads and the options a cell may name all come from this one table."""

    name: str
    variable: str
    cell: bool = False
    inverted: bool = False  # the variable says the opposite (``HARNESS_DISABLE_FUNCTIONALIZATION``)

    @property
    def default(self) -> Any:
        return self._option(ENVIRONMENT[self.variable].parse(ENVIRONMENT[self.variable].default))

    def read(self, environ: Mapping[str, str] | None = None) -> Any:
        """The option's value in a process' environment (its default when unset)."""
        return self._option(read(self.variable, environ))

    def _option(self, parsed: Any) -> Any:
        """The variable's parsed value as the option holds it: a canonical precision name, a
        flag turned around where the variable says the opposite."""
        if self.name == "matmul_precision":
            return MATMUL_PRECISIONS[str(parsed).strip().lower()]
        return (not parsed) if self.inverted else parsed


RUNTIME_OPTIONS: tuple[RuntimeOption, ...] = (
    RuntimeOption("functionalization", "HARNESS_DISABLE_FUNCTIONALIZATION", cell=True, inverted=True),
    RuntimeOption("param_aliasing", "HARNESS_PARAM_ALIASING", cell=True),
    RuntimeOption("execution_delay", "HARNESS_EXECUTION_DELAY"),
    RuntimeOption("completion_delay", "HARNESS_COMPLETION_DELAY"),
    RuntimeOption("num_slices", "HARNESS_NUM_SLICES"),
    RuntimeOption("wait_timeout", "HARNESS_WAIT_TIMEOUT"),
    RuntimeOption("matmul_precision", "HARNESS_MATMUL_PRECISION", cell=True),
)
OPTIONS_BY_NAME: dict[str, RuntimeOption] = {o.name: o for o in RUNTIME_OPTIONS}

#: the names of a choice a cell's ``runtime`` table may set (``harness.matrix.config``)
CELL_CHOICES: dict[str, tuple[str, ...]] = {"matmul_precision": matmul_precisions()}

#: a matrix cell's keys and a project's ``[tool.xharness]`` keys: checked by their parsers (which
#: point at the line), declared here with the rest
KEYS: tuple[Setting, ...] = (
    Setting("backend", Choice("cpu, gpu or tpu", values=tuple(Backend)), Backend.CPU, "the devices' kind", CELL),
    Setting("devices", Text("a whole number, 1 or more; \"all\" on a gpu/tpu cell named STEM-all"), "1",
            "devices per process", CELL),
    Setting("processes", Integer("a whole number, 1 or more"), "1", "processes, joined by jax.distributed", CELL),
    Setting("slices", Integer("a whole number, 1 or more"), "1", "slices; divides the devices (and processes)", CELL),
    Setting("runtime", Text("a table: functionalization, param_aliasing, matmul_precision, name, release"), "",
            "the runtime under test and its options", CELL),
    Setting("env", Text("a table of NAME = \"value\" (checked as the environment's)"), "",
            "extra environment of the cell's processes", CELL),
    Setting("paths", Text("a list of test paths"), "[defaults]", "test paths, relative to the matrix' root", CELL),
    Setting("pytest_args", Text("a list of strings"), "", "extra pytest arguments", CELL),
    Setting("timeout", _SECONDS, "300", "per-test time limit", CELL),
    Setting("description", Text(), "", "free text shown by xharness cells", CELL),
    Setting("launcher", Choice("local, slurm or mpi", values=("local", "slurm", "mpi")), "local",
            "who starts the cell's ranks: the supervisor, srun or mpirun", CELL),
    Setting("network", Choice("loopback or namespaces", values=("loopback", "namespaces")), "loopback",
            "how a multi-process cell's ranks reach each other: the loopback they share, or each a host "
            "of its own (a network and UTS namespace on a bridge, 198.18.0.0/15; needs root)", CELL),
    Setting("cluster", Text("a table: partition, account, time_limit, nodes, tasks_per_node, extra, sbatch"), "",
            "where a cell runs on a site's cluster: a launcher cell's srun and a cell's job under "
            "--on slurm (--partition, --account, --time, ...)", CELL),
    Setting("testpaths", Text("a list of existing paths, relative to the file"), "pytest's testpaths, else .",
            "test paths for the cells", PROJECT),
    Setting("matrix", _PATH, "", "a matrix file in ci/matrix.toml's format", PROJECT),
    Setting("cells", Text("an array of tables, each a matrix cell with a name"), "the starter cells",
            "inline cells instead of a matrix file", PROJECT),
    Setting("runtime", Choice("a registered runtime", values=runtime_names), "reference",
            "the runtime under test where a cell names none", PROJECT),
    Setting("expected", _PATH, "", "the expected-outcomes table of the project's scenarios", PROJECT),
    Setting("reports", _PATH, "reports", "where run and teeth write", PROJECT),
    Setting("executor", Choice("local or slurm", values=("local", "slurm")), "local",
            "where run's cells run: this machine's processes, or jobs of a SLURM cluster (--on)", PROJECT),
    Setting("slurm", Text("a table: partition, account, options (a list of sbatch arguments), deadline "
                          "(seconds)"), "",
            "the cells' jobs under executor = \"slurm\" (a cell's own cluster table wins)", PROJECT),
    Setting("runners", Text("a table: a cell's name, or gpu, tpu, slurm, mpi or namespaces, to a runner label "
                            "or a list of labels"), "",
            "the runners of the workflow's cell jobs for cells a hosted runner cannot run (xharness cells "
            "--github); a cell none serves is listed in the report as not run, with the reason", PROJECT),
)

ENVIRONMENT: dict[str, Setting] = {s.name: s for s in SETTINGS}


def keys(where: str) -> dict[str, Setting]:
    """The keys of a matrix cell (``CELL``) or of ``[tool.xharness]`` (``PROJECT``), in order."""
    return {s.name: s for s in KEYS if s.where == where}


# ------------------------------------------------------------------------------ reading
def raw(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The text of declared variable ``name`` as set ("" when unset), unchecked: for a hot path
    that parses and caches it itself (``HARNESS_FAULTS``) or a flag the runtime sets and clears
    (``HARNESS_SKIP_SLICE_DISCOVERY``). Every command has checked it already (module docstring)."""
    if name not in ENVIRONMENT:
        raise KeyError(f"{name} is not a declared setting (harness.settings.SETTINGS)")
    return (os.environ if environ is None else environ).get(name, "")


def read(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The value of environment setting ``name``: parsed from the environment when set and not
    empty, else from its default (``None`` when it has none)."""
    raw = (os.environ if environ is None else environ).get(name, "")
    key = (name, raw)
    if key in _PARSED:  # the runtime asks some on hot paths: each text is parsed once
        return _PARSED[key]
    setting = ENVIRONMENT[name]
    text = raw if raw.strip() else setting.default
    value = None if not text.strip() and not isinstance(setting.accepts, Choice | Names) else setting.parse(text)
    _PARSED[key] = value
    return value


#: (name, text) -> the value :func:`read` parsed from it (a bad text raises, and is not kept)
_PARSED: dict[tuple[str, str], Any] = {}


def text(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of ``name`` as a replay line writes it: the checked value, normalized."""
    value = read(name, environ)
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def check_environment(environ: Mapping[str, str] | None = None, source: str = "the environment",
                      names: Iterable[str] | None = None) -> list[str]:
    """Check every declared variable that is set (or those of ``names``): the first bad value
    raises :class:`SettingError`. Returns the warnings for variables that look like settings but
    are not declared, each naming the closest declared one."""
    env = os.environ if environ is None else environ
    for name in names if names is not None else ENVIRONMENT:
        raw = env.get(name)
        if raw is not None and raw.strip():
            ENVIRONMENT[name].parse(raw, source)
    return [warning for name in env if (warning := near_miss(name)) is not None]


def near_miss(name: str) -> str | None:
    """A warning for an undeclared variable that looks like a setting, or None."""
    if name in ENVIRONMENT:
        return None
    close = difflib.get_close_matches(name, list(ENVIRONMENT), n=1, cutoff=0.85)
    if not name.startswith(PREFIXES) and not close:
        return None
    hint = f"; did you mean {close[0]}?" if close else f" (see xharness config for the {len(ENVIRONMENT)} declared ones)"
    return f"{name} is set but is no setting of the harness{hint}"


# ------------------------------------------------------------------------------ showing
@dataclass(frozen=True)
class Effective:
    """One row of ``xharness config``: a setting, its value, and where that value came from."""

    name: str
    value: str
    source: str
    where: str
    meaning: str
    internal: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source, "where": self.where,
                "meaning": self.meaning, "internal": self.internal}


def effective(environ: Mapping[str, str] | None = None,
              project: Callable[[str], tuple[str, str] | None] | None = None,
              matrix: str = "") -> list[Effective]:
    """Every declared setting with its value and source: the environment's variables (set, or
    their defaults), ``[tool.xharness]``'s keys (``project(key)`` gives the value and the file,
    or None for the default), and a cell's keys, whose values are each cell's in ``matrix``."""
    env = os.environ if environ is None else environ
    rows = []
    for s in SETTINGS:
        raw = env.get(s.name, "")
        if raw.strip():
            rows.append(Effective(s.name, raw, "environment", ENV, s.meaning, s.internal))
        else:
            rows.append(Effective(s.name, s.default, "default", ENV, s.meaning, s.internal))
    for s in keys(PROJECT).values():
        found = project(s.name) if project is not None else None
        if found is not None:
            rows.append(Effective(s.name, found[0], found[1], PROJECT, s.meaning))
        else:
            rows.append(Effective(s.name, s.default, "default", PROJECT, s.meaning))
    for s in keys(CELL).values():
        rows.append(Effective(s.name, "per cell", matrix or "the matrix", CELL, s.meaning))
    return rows


def markdown_table() -> str:
    """The documentation's table of settings (docs/reference/settings.md, generated when the site
    is built; ``xharness config --markdown`` prints it)."""
    lines = ["| setting | where | accepts | default | meaning |", "|---|---|---|---|---|"]
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    for s in (*SETTINGS, *KEYS):
        where = "environment, set by the harness" if s.internal else s.where
        default = f"`{s.default}`" if s.default else ""
        lines.append(f"| `{s.name}` | {where} | {cell(s.accepts.describe)} | {cell(default)} | {cell(s.meaning)} |")
    return "\n".join(lines) + "\n"
