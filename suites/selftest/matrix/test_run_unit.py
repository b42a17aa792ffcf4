"""One unit of a run, as the local executor and a SLURM job both run it: a cell of this interpreter
runs under the runtime it names, a part's logs go below its cell's, and a release cell runs in its
release's environment, or, where that release cannot be installed, ends in one record that says so
(and the run is told) without anything else of the cell running.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.executors import unit
from harness.matrix.config import Cell, Matrix
from harness.matrix.progress import CellProgress, Progress
from harness.matrix.supervisor import CellResult, RunSettings
from harness.releases import cells as release_cells
from harness.releases import envs, release_spec

pytestmark = pytest.mark.cell_independent


class Recorded:
    """A cell run that records how it was made instead of starting processes."""

    made: list[Recorded] = []

    def __init__(self, cell: Cell, settings: RunSettings, progress: CellProgress, python: str = "") -> None:
        self.cell, self.settings, self.progress, self.python = cell, settings, progress, python
        self.logs = Path("logs") / cell.name
        Recorded.made.append(self)

    def run(self) -> CellResult:
        return CellResult(self.cell, [], wall=1.0, launches=1)


@pytest.fixture
def progress() -> tuple[CellProgress, io.StringIO]:
    stream = io.StringIO()
    return CellProgress(Progress(1, stream=stream, interval=0.0), "c"), stream


@pytest.fixture
def settings(tmp_path: Path) -> RunSettings:
    Recorded.made = []
    return RunSettings(matrix=Matrix(tmp_path / "m.toml", tmp_path, {}), out_dir=tmp_path, runtime="jax")


def test_a_cell_of_this_interpreter_runs_under_the_runtime_it_names(monkeypatch: pytest.MonkeyPatch,
                                                                   settings: RunSettings,
                                                                   progress: tuple[CellProgress, Any]) -> None:
    monkeypatch.setattr(unit, "CellRun", Recorded)
    result, not_installed = unit.run_unit(Cell("c", runtime_name="torch_xla"), settings, progress[0])
    assert not not_installed and result.launches == 1
    (run,) = Recorded.made
    assert run.settings.runtime == "torch_xla" and run.logs == Path("logs") / "c"
    assert run.progress is progress[0] and result.cell.name == "c"
    unit.run_unit(Cell("d"), settings, progress[0], shard="part-2")
    part = Recorded.made[-1]
    assert part.settings.runtime == "reference" and part.logs == Path("logs") / "d" / "part-2"
    assert settings.runtime == "jax"  # the run's own settings are left as they were


def test_a_release_cell_runs_in_its_releases_environment(monkeypatch: pytest.MonkeyPatch, settings: RunSettings,
                                                         progress: tuple[CellProgress, Any]) -> None:
    asked: list[tuple[str, str]] = []

    def parse(runtime: str, text: str) -> object:
        asked.append((runtime, text))
        return SimpleNamespace(runtime=runtime, text=text)

    monkeypatch.setattr(release_spec, "parse", parse)
    built: list[tuple[object, object]] = []

    def ensure(spec: object, progress: object = None) -> object:
        built.append((spec, progress))
        return SimpleNamespace(python="/envs/x/python")

    monkeypatch.setattr(release_spec, "ensure", ensure)
    monkeypatch.setattr(release_cells, "ReleaseCellRun", Recorded)
    result, not_installed = unit.run_unit(Cell("c", runtime_name="torch_xla", release="2.9.0"), settings, progress[0])
    assert not not_installed and asked == [("torch_xla", "2.9.0")]
    assert Recorded.made[-1].python == "/envs/x/python" and Recorded.made[-1].settings.runtime == "torch_xla"
    assert Recorded.made[-1].progress is progress[0]
    ((spec, told),) = built
    assert (spec.runtime, spec.text) == ("torch_xla", "2.9.0")  # type: ignore[attr-defined]
    told("building")  # type: ignore[operator]
    assert "c: building" in progress[1].getvalue()


@pytest.mark.parametrize("failure", ["install", "spec"])
def test_a_release_that_cannot_be_installed_is_one_record_and_said(monkeypatch: pytest.MonkeyPatch,
                                                                   settings: RunSettings,
                                                                   progress: tuple[CellProgress, io.StringIO],
                                                                   failure: str) -> None:
    def ensure(spec: object, progress: object = None) -> object:
        raise envs.ReleaseInstallError("torch_xla", "2.9.0", "no matching distribution", "pip said no")

    def parse(runtime: str, text: str) -> object:
        if failure == "spec":
            raise release_spec.ReleaseSpecError("the wheel /w/x.whl is gone")
        return object()

    monkeypatch.setattr(release_spec, "parse", parse)
    monkeypatch.setattr(release_spec, "ensure", ensure)
    monkeypatch.setattr(release_cells, "ReleaseCellRun", Recorded)
    cell = Cell("c", runtime_name="torch_xla", release="2.9.0")
    result, not_installed = unit.run_unit(cell, settings, progress[0])
    assert not_installed and not Recorded.made and result.cell is cell
    (record,) = result.records
    reason = "no matching distribution" if failure == "install" else "the wheel /w/x.whl is gone"
    assert record.final.message == f"cannot install torch_xla 2.9.0: {reason}"
    assert record.properties["verdict"] == "not-installed" and record.cell == "c"
    assert f"c: error: cannot install torch_xla 2.9.0: {reason}" in progress[1].getvalue()


def test_a_cell_the_machine_cannot_run_has_one_skipped_record_saying_why() -> None:
    cell = Cell("gpu-2", backend="gpu", devices=2, processes=1)
    record = unit.skipped_cell_record(cell, "no GPU here")
    assert record.nodeid == unit.CELL_ID and record.cell == "gpu-2"
    assert record.final.outcome == "skipped"
    assert record.final.message == "cell gpu-2 not runnable here: no GPU here"
    assert record.properties == {"cell": "gpu-2", "backend": "gpu", "devices": "2", "processes": "1", "slices": "1"}


def test_the_local_executor_runs_each_unit_here(monkeypatch: pytest.MonkeyPatch, settings: RunSettings,
                                                progress: tuple[CellProgress, Any]) -> None:
    monkeypatch.setattr(unit, "CellRun", Recorded)
    local = unit.LocalExecutor()
    assert local.stats() == {"executor": "local"} and local.holds_devices
    result, not_installed = local.run(Cell("c"), settings, progress[0], "part-1", "c part 1")
    assert not not_installed and result.cell.name == "c"
    made = Recorded.made[-1]
    assert made.progress is progress[0] and made.logs == Path("logs") / "c" / "part-1"
    assert made.settings.out_dir == settings.out_dir
