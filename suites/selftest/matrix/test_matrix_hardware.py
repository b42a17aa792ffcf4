"""Cells follow the hardware: the one-device accelerator cells, the cell of every device a machine
has (``gpu-all`` resolved to ``gpu-N``), and the cells asked for by count (``--cells gpu-8``).

The probe is faked (device counts and plugin presence), so every machine shape is checked on the
CPU: which cells exist, which run and which are skipped with what reason, their device counts and
the environment their processes get.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from matrix_helpers import write_matrix

from harness import cli, hardware
from harness.executors import unit
from harness.matrix import probe as probe_mod
from harness.matrix.config import Cell, MatrixError, load_matrix
from harness.matrix.probe import probe
from harness.matrix.supervisor import CellResult
from harness.report.junit import read_records
from harness.report.records import PASSED, Attempt, TestRecord

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "ci" / "matrix.toml"


def fake_machine(monkeypatch: pytest.MonkeyPatch, gpus: int = 0, tpus: int = 0, plugins: bool = True) -> None:
    """A machine with ``gpus`` GPUs and ``tpus`` TPU chips, with or without JAX's plugins."""
    real = probe_mod._has_module
    accelerator_plugins = set(probe_mod._GPU_PLUGINS) | set(probe_mod._TPU_PLUGINS)
    monkeypatch.setattr(hardware, "gpu_count", lambda: gpus)
    monkeypatch.setattr(hardware, "tpu_count", lambda: tpus)
    monkeypatch.setattr(
        probe_mod, "_has_module", lambda name: plugins if name in accelerator_plugins else real(name)
    )
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("TPU_VISIBLE_CHIPS", raising=False)


def gpu_rows(cells: list[Cell]) -> dict[str, tuple[int | str, bool, str]]:
    return {
        c.name: (c.as_dict()["devices"], probe(c).available, probe(c).reason)
        for c in cells
        if c.backend == "gpu"
    }


# -- which cells exist and run, by machine ---------------------------------------------------------
@pytest.mark.parametrize(
    ("gpus", "expected"),
    [
        (0, {"gpu": (1, False, "no GPU found"), "gpu-all": ("all", False, "no GPU found")}),
        (1, {"gpu": (1, True, "1 GPU(s)"), "gpu-all": ("all", False, "found 1 GPU(s): gpu-all makes a cell")}),
        (2, {"gpu": (1, True, "2 GPU(s), the cell takes 1"), "gpu-2": (2, True, "2 GPU(s)")}),
        (8, {"gpu": (1, True, "8 GPU(s), the cell takes 1"), "gpu-8": (8, True, "8 GPU(s)")}),
    ],
)
def test_gpu_cells_follow_the_gpus_found(monkeypatch: pytest.MonkeyPatch, gpus: int, expected: dict) -> None:
    fake_machine(monkeypatch, gpus=gpus)
    rows = gpu_rows(load_matrix(SHIPPED).listed())
    assert list(rows) == list(expected)
    for name, (devices, available, reason) in expected.items():
        assert rows[name][:2] == (devices, available), (name, rows[name])
        assert rows[name][2].startswith(reason), (name, rows[name])


def test_without_the_plugin_every_gpu_cell_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, gpus=8, plugins=False)
    rows = gpu_rows(load_matrix(SHIPPED).listed())
    assert list(rows) == ["gpu", "gpu-8"]  # what would run, once the plugin is installed
    assert all(not available and "pip install 'xharness[gpu]'" in reason for _, available, reason in rows.values())


@pytest.mark.parametrize(("tpus", "names"), [(0, ["tpu", "tpu-all"]), (1, ["tpu", "tpu-all"]), (4, ["tpu", "tpu-4"])])
def test_tpu_cells_follow_the_chips_found(monkeypatch: pytest.MonkeyPatch, tpus: int, names: list[str]) -> None:
    fake_machine(monkeypatch, tpus=tpus)
    cells = {c.name: c for c in load_matrix(SHIPPED).listed() if c.backend == "tpu"}
    assert list(cells) == names
    assert probe(cells["tpu"]).available is (tpus >= 1)
    derived = cells[names[1]]
    assert probe(derived).available is (tpus >= 2)
    if tpus >= 2:
        assert derived.devices == tpus and derived.derived_from == "tpu-all"


def test_a_tpu_cell_of_several_chips_needs_the_whole_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """libtpu narrows a process to one chip, not to any count: tpu-4 on an 8-chip host would see 8."""
    fake_machine(monkeypatch, tpus=8)
    (cell,) = load_matrix(SHIPPED).select(["tpu-4"])
    found = probe(cell)
    assert not found.available and "exactly 4" in found.reason and "found 8" in found.reason


# -- asking for a count ----------------------------------------------------------------------------
def test_asking_for_more_gpus_than_there_are_is_a_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, gpus=2)
    matrix = load_matrix(SHIPPED)
    (cell,) = matrix.select(["gpu-4"])
    assert (cell.name, cell.devices, cell.derived_from) == ("gpu-4", 4, "gpu-all")
    found = probe(cell)
    assert not found.available
    assert found.reason == "needs 4 GPU(s), found 2 (gpu-all runs on every one found: gpu-2)"
    # gpu-all is the count found; a name twice is one cell; the file's cells keep their order
    assert [c.name for c in matrix.select(["gpu", "gpu-all", "gpu-2", "cpu-1"])] == ["gpu", "gpu-2", "cpu-1"]


@pytest.mark.parametrize("name", ["gpu-1", "gpu-0", "gpu-02", "gpu-x", "gpu-"])
def test_a_count_below_two_is_not_a_cell(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    fake_machine(monkeypatch, gpus=8)
    with pytest.raises(MatrixError, match=rf"unknown cell '{name}' \(known: .*gpu-all or gpu-N \(N >= 2\)"):
        load_matrix(SHIPPED).select([name])


def test_a_cell_the_file_names_wins_over_the_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, gpus=8)
    path = write_matrix(tmp_path, """
        [cells.gpu-all]
        backend = "gpu"
        devices = "all"
        paths = ["all"]

        [cells.gpu-8]
        backend = "gpu"
        devices = 8
        paths = ["eight"]
    """)
    matrix = load_matrix(path)
    assert [(c.name, c.paths) for c in matrix.listed()] == [("gpu-8", ("eight",))]
    assert [c.paths for c in matrix.select(["gpu-all"])] == [("eight",)]
    assert [c.paths for c in matrix.select(["gpu-4"])] == [("all",)]


# -- the cells' environments -----------------------------------------------------------------------
def test_gpu_cells_see_their_own_gpus_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, gpus=8)
    cells = {c.name: c for c in load_matrix(SHIPPED).listed()}
    one, every = cells["gpu"].environment(parent={}), cells["gpu-8"].environment(parent={})
    assert (one["JAX_PLATFORMS"], one["HARNESS_DEVICES"], one["CUDA_VISIBLE_DEVICES"]) == ("cuda", "1", "0")
    assert (every["HARNESS_CELL"], every["HARNESS_DEVICES"]) == ("gpu-8", "8")
    assert every["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert "JAX_NUM_CPU_DEVICES" not in one and "JAX_NUM_CPU_DEVICES" not in every
    # a runner that hands the job some GPUs keeps it on them
    handed = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert cells["gpu"].environment(parent=handed)["CUDA_VISIBLE_DEVICES"] == "4"
    (four,) = load_matrix(SHIPPED).select(["gpu-4"])
    assert four.environment(parent=handed)["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    uuids = {"CUDA_VISIBLE_DEVICES": "GPU-aa, GPU-bb"}
    assert cells["gpu"].environment(parent=uuids)["CUDA_VISIBLE_DEVICES"] == "GPU-aa"


def test_the_one_chip_tpu_cell_is_bounded_to_one_chip(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, tpus=4)
    cells = {c.name: c for c in load_matrix(SHIPPED).listed()}
    one = cells["tpu"].environment(parent={})
    assert (one["JAX_PLATFORMS"], one["TPU_VISIBLE_CHIPS"]) == ("tpu", "0")
    assert one["TPU_CHIPS_PER_PROCESS_BOUNDS"] == one["TPU_PROCESS_BOUNDS"] == "1,1,1"
    every = cells["tpu-4"].environment(parent={})
    assert every["HARNESS_DEVICES"] == "4" and "TPU_VISIBLE_CHIPS" not in every


def test_cpu_cells_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, gpus=8)
    env = load_matrix(SHIPPED).cells["cpu-4"].environment(parent={"CUDA_VISIBLE_DEVICES": "3"})
    assert env["JAX_NUM_CPU_DEVICES"] == "4" and env["JAX_PLATFORMS"] == "cpu"
    assert "CUDA_VISIBLE_DEVICES" not in env


@pytest.mark.parametrize(
    ("listed", "count"),
    [(None, 8), ("0,1", 2), ("", 0), ("3", 1), ("0,9,1", 1), ("-1", 0), ("GPU-aa,GPU-bb", 2), ("0,1,2,3,4,5,6,7,8", 8)],
)
def test_gpu_count_reads_the_visible_list(monkeypatch: pytest.MonkeyPatch, listed: str | None, count: int) -> None:
    """The GPUs JAX will see: what the driver shows, narrowed as the CUDA driver narrows it."""
    monkeypatch.setattr(hardware, "count_entries", lambda directory, _: 8 if directory == "/proc/driver/nvidia/gpus" else 0)
    if listed is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert hardware.gpu_count() == count


def test_hidden_gpus_are_named_as_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, gpus=0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    found = probe(load_matrix(SHIPPED).cells["gpu"])
    assert found.reason == "no GPU(s) visible (CUDA_VISIBLE_DEVICES='')"


# -- the file --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ('[cells.cpu-all]\nbackend = "cpu"\ndevices = "all"\n', "cells.cpu-all.devices", "a cpu cell names its count"),
        ('[cells.gpu-all]\nbackend = "gpu"\ndevices = "all"\nprocesses = 2\n', "cells.gpu-all.processes", "one process"),
        ('[cells.gpus]\nbackend = "gpu"\ndevices = "all"\n', "cells.gpus", "is named STEM-all"),
        ('[defaults]\ndevices = "all"\n[cells.a]\n', "defaults.devices", "a cell of its own"),
        ('[cells.gpu-all]\nbackend = "gpu"\ndevices = "most"\n', "cells.gpu-all.devices", "positive integer"),
    ],
)
def test_template_mistakes_name_the_field(tmp_path: Path, body: str, where: str, message: str) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(body)
    with pytest.raises(MatrixError) as caught:
        load_matrix(path)
    assert caught.value.field == where and message in caught.value.reason, str(caught.value)


def test_the_shipped_accelerator_cells() -> None:
    cells = load_matrix(SHIPPED).cells
    assert (cells["gpu"].devices, cells["tpu"].devices) == (1, 1)
    assert cells["gpu-all"].all_devices and cells["tpu-all"].all_devices
    assert cells["gpu-all"].paths == cells["gpu"].paths  # the same suites, on every device
    assert not any(c.all_devices for c in cells.values() if c.backend == "cpu")


# -- the commands ----------------------------------------------------------------------------------
@pytest.mark.parametrize("gpus", [0, 1, 2, 8])
def test_cells_json_by_machine(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], gpus: int) -> None:
    fake_machine(monkeypatch, gpus=gpus)
    assert cli.main(["cells", "--matrix", str(SHIPPED), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["cells"] if r["backend"] == "gpu"}
    assert rows["gpu"]["devices"] == 1 and rows["gpu"]["available"] is (gpus >= 1)
    if gpus < 2:
        assert set(rows) == {"gpu", "gpu-all"}
        assert rows["gpu-all"]["devices"] == rows["gpu-all"]["total_devices"] == "all"
        assert rows["gpu-all"]["available"] is False and rows["gpu-all"]["reason"]
    else:
        name = f"gpu-{gpus}"
        assert set(rows) == {"gpu", name}
        assert rows[name]["devices"] == rows[name]["total_devices"] == gpus
        assert rows[name]["derived_from"] == "gpu-all" and rows[name]["available"] is True
        assert rows[name]["reason"] == f"{gpus} GPU(s)"


def test_cells_table_shows_the_derived_cell(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake_machine(monkeypatch, gpus=0)
    assert cli.main(["cells", "--matrix", str(SHIPPED)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "  all  " in lines["gpu-all"] and "SKIPPED" in lines["gpu-all"]
    fake_machine(monkeypatch, gpus=2)
    assert cli.main(["cells", "--matrix", str(SHIPPED)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "gpu-all" not in lines and "runs here" in lines["gpu-2"]


def test_run_of_a_count_the_machine_lacks_skips_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_machine(monkeypatch, gpus=2)
    out = tmp_path / "out"
    code = cli.main(["run", "--matrix", str(SHIPPED), "--cells", "gpu-4", "--out", str(out), "--compile-cache", "off"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "gpu-4: skipped (needs 4 GPU(s), found 2 (gpu-all runs on every one found: gpu-2))" in printed
    (record,) = read_records(out / "junit" / "gpu-4.xml")
    assert record.classification == "skipped" and record.properties["devices"] == "4"


def test_cells_of_one_accelerator_never_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two JAX processes on one GPU: the second finds three quarters of its memory taken. The
    GPU cells run one after the other (never split into parts), while CPU cells still share."""
    fake_machine(monkeypatch, gpus=2)
    path = write_matrix(tmp_path, """
        [defaults]
        paths = ["a", "b"]

        [cells.gpu]
        backend = "gpu"
        [cells.gpu-all]
        backend = "gpu"
        devices = "all"
        [cells.c1]
        [cells.c2]
    """)
    lock = threading.Lock()
    running: dict[str, int] = {"gpu": 0, "cpu": 0}
    most: dict[str, int] = {"gpu": 0, "cpu": 0}
    launched: list[tuple[str, tuple[str, ...]]] = []

    def launch(cell: Cell, settings, progress, shard: str = "") -> tuple[CellResult, bool]:  # noqa: ANN001
        with lock:
            launched.append((cell.name, cell.paths))
            running[cell.backend] += 1
            most[cell.backend] = max(most[cell.backend], running[cell.backend])
        time.sleep(0.3)  # long enough for a wrongly scheduled second GPU cell to start meanwhile
        with lock:
            running[cell.backend] -= 1
        record = TestRecord(nodeid="t.py::test", cell=cell.name)
        record.attempts.append(Attempt(PASSED, duration=0.01))
        return CellResult(cell, [record], wall=0.3, launches=1), False

    monkeypatch.setattr(unit, "run_unit", launch)
    out = tmp_path / "out"
    code = cli.main(["run", "--matrix", str(path), "--out", str(out), "-j", "4", "--compile-cache", "off"])
    assert code == 0, capsys.readouterr().out
    assert most["gpu"] == 1
    assert sorted(name for name, _ in launched if name.startswith("gpu")) == ["gpu", "gpu-2"]
    assert all(paths == ("a", "b") for name, paths in launched if name.startswith("gpu"))
    assert sorted(p.name for p in (out / "junit").glob("*.xml")) == ["c1.xml", "c2.xml", "gpu-2.xml", "gpu.xml"]
