"""The supervised cells of a release: its catalog, its invariants and (for JAX) the harness's own
suites, each run by the release environment's interpreter as a matrix cell, so that an abort in
the release is a record and each check gets its own JUnit file.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends import Backend
from harness.matrix.config import RELEASED_RUNTIMES, Cell
from harness.matrix.supervisor import CellRun
from harness.releases import envs
from harness.report import properties as prop
from harness.report.properties import (
    CHECK_CATALOG,
    CHECK_INVARIANTS,
    CHECK_SUITES,
    RELEASE,
    RELEASE_CHECK,
    RELEASE_RUNTIME,
)
from harness.scenarios import upstream_torch_xla as upstream

# ------------------------------------------------------------------------------ cells
#: what a release cell runs: the catalog, one test per scenario
CATALOG_TESTS = "suites/adapters/test_upstream_catalog.py"
RELEASE_CELL_DEVICES = upstream.CPU_DEVICES
#: the invariants, with the released runtime as the runtime under test
INVARIANT_TESTS = "suites/properties/test_invariants.py"
#: the harness's own suites in a JAX release's environment: the reference runtime rides on that
#: JAX, so these are the compatibility check. The report selftests are left out: JUnit, merging
#: and the dashboard never touch JAX, and they run once in the test job; so are the tests marked
#: ``jax_independent`` (their outcome is the same on every JAX).
SUITE_PATHS = ("suites/selftest", "suites/regression", "suites/properties", "suites/models")
SUITE_ARGS = ("--ignore=suites/selftest/report", "-m", "not jax_independent")
#: the suites and invariants run as the matrix's cpu-8 cell does: 8 CPU devices, the runtime
#: options at their defaults, its per-test limit
SUITE_DEVICES = 8
SUITE_TIMEOUT = 300.0
#: what each release of a runtime is checked with, one supervised cell each, in this order (the
#: quick ones first). PyTorch/XLA's suites and invariants run from ci/releases.sh.
RELEASE_CHECKS: dict[str, tuple[str, ...]] = {
    "torch_xla": (CHECK_CATALOG,),
    "jax": (CHECK_CATALOG, CHECK_INVARIANTS, CHECK_SUITES),
}
INSTALL_ID = "xharness::install"


class ReleaseCellRun(CellRun):
    """A supervised cell whose pytest runs in another interpreter (a release's environment).

    Its records say which release they belong to (``release``) and, in a ``releases`` run, which
    runtime was released and which of its checks the cell is (``release-runtime``,
    ``release-check``), so that the report can group them without knowing the cells' names."""

    def __init__(self, cell: Cell, settings: Any, progress: Any, python: str,
                 released: str | None = None, check: str | None = None) -> None:
        super().__init__(cell, settings, progress)
        self.python = python
        self.released = released or (cell.runtime_name if cell.runtime_name in RELEASED_RUNTIMES else None)
        self.check = check

    def pytest_argv(self, events: Path, stack: Path, select_file: Path | None) -> list[str]:
        rest = super().pytest_argv(events, stack, select_file)[3:]  # after "python -m pytest"
        if rest[:2] == ["-p", "harness.plugin"]:  # decided for this interpreter, not that one
            rest = rest[2:]
        plugin = [] if _autoloads_plugin(self.python) else ["-p", "harness.plugin"]
        return [self.python, "-m", "pytest", *plugin, *rest]

    def finalize_record(self, record: Any) -> Any:
        if self.check is not None and prop.REPRO not in record.properties:
            record.properties[prop.REPRO] = self._repro(record)
        record = super().finalize_record(record)
        extra = {RELEASE: self.cell.release, RELEASE_RUNTIME: self.released,
                 RELEASE_CHECK: self.check}
        for key, value in extra.items():
            if value:
                record.properties.setdefault(key, value)
        return record

    def _repro(self, record: Any) -> str:
        """The command that reruns one test of a ``releases`` cell as the cell ran it: that
        environment's pytest with the cell's device count and runtime (``xharness run`` has no
        cell of that name to rerun)."""
        env = self.cell.environment(self.settings.runtime)
        keep = ("HARNESS_RUNTIME", "JAX_PLATFORMS", "JAX_NUM_CPU_DEVICES", "PJRT_DEVICE",
                "CPU_NUM_DEVICES")
        prefix = " ".join(f"{k}={env[k]}" for k in keep if k in env)
        if record.nodeid in self.items:
            target = shlex.quote(record.nodeid)
        else:  # a record of the cell as a whole: the whole cell again
            target = shlex.join([*self.cell.paths, *self.cell.pytest_args])
        return f"{prefix} {self.python} -m pytest {target}"


_AUTOLOAD: dict[str, bool] = {}


def _autoloads_plugin(python: str) -> bool:
    """Whether ``python``'s pytest loads the harness plugin by itself (its entry point)."""
    if python not in _AUTOLOAD:
        import subprocess

        code = ("import importlib.metadata as m, sys; sys.exit(not any(e.value.startswith("
                "'harness.plugin') for e in m.entry_points(group='pytest11')))")
        _AUTOLOAD[python] = subprocess.run([python, "-c", code], capture_output=True).returncode == 0
    return _AUTOLOAD[python]


def release_cell(runtime: str, release: str, timeout: float) -> Cell:
    """The catalog cell of a release: every scenario's upstream trigger, judged."""
    return Cell(
        name=f"{runtime}-{release}",
        backend=Backend.CPU,
        devices=RELEASE_CELL_DEVICES,
        paths=(CATALOG_TESTS,),
        timeout=timeout,
        description=f"the catalog against {runtime} {release}",
        runtime_name=runtime,
        release=release,
    )


@dataclass(frozen=True)
class ReleaseCheck:
    """One supervised cell of a release: which check it is, and the cell that runs it (its
    ``runtime_name`` is the runtime under test inside: the reference runtime for the suites)."""

    kind: str
    cell: Cell

    @property
    def under_test(self) -> str:
        return self.cell.runtime_name or "reference"


def release_checks(runtime: str, release: str, timeout: float) -> list[ReleaseCheck]:
    """The cells ``xharness releases`` runs for one release (``RELEASE_CHECKS``)."""
    checks: list[ReleaseCheck] = []
    for kind in RELEASE_CHECKS.get(runtime, (CHECK_CATALOG,)):
        if kind == CHECK_CATALOG:
            checks.append(ReleaseCheck(CHECK_CATALOG, release_cell(runtime, release, timeout)))
        elif kind == CHECK_SUITES:
            checks.append(ReleaseCheck(CHECK_SUITES, _suites_cell(runtime, release)))
        else:
            checks += [ReleaseCheck(CHECK_INVARIANTS, c) for c in _invariant_cells(runtime, release)]
    return checks


def _suites_cell(runtime: str, release: str) -> Cell:
    return Cell(
        name=f"{runtime}-{release}-suites",
        devices=SUITE_DEVICES,
        paths=SUITE_PATHS,
        pytest_args=SUITE_ARGS,
        timeout=SUITE_TIMEOUT,
        description=f"the harness's suites, the reference runtime on {runtime} {release}",
        runtime_name="reference",
        release=release,
    )


def _invariant_cells(runtime: str, release: str) -> list[Cell]:
    """The invariants against the release in one cell, except those whose known failure on it
    breaks the process for the tests after them (``isolated_invariants``): a cell each."""
    from harness.scenarios.known_findings import isolated_invariants

    alone = isolated_invariants(runtime, release)
    tests = {invariant: f"{INVARIANT_TESTS}::test_{invariant.replace('-', '_')}" for invariant in alone}
    base = Cell(
        name=f"{runtime}-{release}-invariants",
        devices=SUITE_DEVICES,
        paths=(INVARIANT_TESTS,),
        pytest_args=tuple(f"--deselect={test}" for test in tests.values()),
        timeout=SUITE_TIMEOUT,
        description=f"the invariants against {runtime} {release}",
        runtime_name=runtime,
        release=release,
    )
    return [base] + [
        dataclasses.replace(base, name=f"{base.name}-{invariant}", paths=(test,), pytest_args=(),
                            description=f"the invariant {invariant} against {runtime} {release}, alone")
        for invariant, test in tests.items()
    ]


def install_error_record(cell: Cell, error: envs.ReleaseInstallError) -> Any:
    from harness.report.records import ERROR, KIND_EXIT, Attempt, TestRecord

    record = TestRecord(nodeid=INSTALL_ID, cell=cell.name, file="harness/releases/envs.py")
    record.attempts.append(Attempt(
        ERROR, kind=KIND_EXIT, message=f"cannot install {error.runtime} {error.release}: {error.reason}",
        details=error.output[-20_000:],
    ))
    record.properties = {
        prop.CELL: cell.name, prop.RUNTIME: error.runtime, prop.RELEASE: error.release,
        prop.VERDICT: "not-installed",
        prop.REPRO: f"xharness releases {error.runtime} {error.release}",
    }
    return record


