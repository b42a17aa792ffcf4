"""The matrix file: the shipped cells, and mistakes reported with file, line and field."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from matrix_helpers import xharness

from harness.matrix.config import Matrix, MatrixError, load_matrix

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "ci" / "matrix.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.mark.jax_independent
def test_shipped_matrix_has_the_designed_cells() -> None:
    matrix = load_matrix(SHIPPED)
    cells = matrix.cells
    assert {"cpu-1", "cpu-3", "cpu-4", "cpu-8", "cpu-2x4", "cpu-2slice", "cpu-8-nofunc", "gpu", "tpu"} <= set(cells)
    assert [cells[n].total_devices for n in ("cpu-1", "cpu-3", "cpu-4", "cpu-8")] == [1, 3, 4, 8]
    assert (cells["cpu-2x4"].processes, cells["cpu-2x4"].devices, cells["cpu-2x4"].slices) == (2, 4, 1)
    assert (cells["cpu-2slice"].processes, cells["cpu-2slice"].devices, cells["cpu-2slice"].slices) == (2, 4, 2)
    assert cells["cpu-8-nofunc"].runtime["functionalization"] is False
    assert cells["cpu-8"].runtime["functionalization"] is True
    assert (cells["gpu"].backend, cells["tpu"].backend) == ("gpu", "tpu")
    assert matrix.root == ROOT


@pytest.mark.jax_independent
def test_cell_environment_fixes_the_topology_before_jax_starts() -> None:
    cells = load_matrix(SHIPPED).cells
    env = cells["cpu-2slice"].environment("reference")
    assert env["JAX_NUM_CPU_DEVICES"] == "4" and env["JAX_PLATFORMS"] == "cpu"
    assert env["HARNESS_NUM_SLICES"] == "2" and env["HARNESS_PROCESSES"] == "2"
    assert env["HARNESS_RUNTIME"] == "reference" and env["HARNESS_CELL"] == "cpu-2slice"
    nofunc = cells["cpu-8-nofunc"].environment("reference")
    assert nofunc["HARNESS_DISABLE_FUNCTIONALIZATION"] == "1" and nofunc["HARNESS_FUNCTIONALIZATION"] == "0"
    assert cells["cpu-8"].environment()["HARNESS_DISABLE_FUNCTIONALIZATION"] == "0"


@pytest.mark.jax_independent
def test_defaults_apply_and_runtime_options_merge(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        [defaults]
        paths = ["t"]
        timeout = 7
        runtime = { param_aliasing = false }

        [cells.a]
        devices = 2
        runtime = { functionalization = false }
    """)
    cell = load_matrix(path).cells["a"]
    assert cell.paths == ("t",) and cell.timeout == 7.0
    assert cell.runtime == {"functionalization": False, "param_aliasing": False}
    assert cell.environment()["HARNESS_PARAM_ALIASING"] == "0"


@pytest.mark.jax_independent
def test_a_cell_declares_its_matmul_precision_and_its_process_runs_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``runtime = { matmul_precision = ... }`` reaches the cell's processes as
    ``HARNESS_MATMUL_PRECISION``, which the runtime reads when it starts; a cell that says
    nothing leaves the runtime's own default (the caller's variable is scrubbed: ``OWNED_ENV``)."""
    from harness.matrix.config import OWNED_ENV, RUNTIME_CHOICES
    from harness.runtime import config

    path = _write(tmp_path, """
        [cells.tf32]
        backend = "gpu"
        devices = 1
        runtime = { matmul_precision = "tensorfloat32", functionalization = false }

        [cells.plain]
        devices = 2
    """)
    cells = load_matrix(path).cells
    tf32, plain = cells["tf32"], cells["plain"]
    assert tf32.runtime == {"functionalization": False, "param_aliasing": True, "matmul_precision": "tensorfloat32"}
    assert tf32.runtime_label() == "functionalization=off matmul_precision=tensorfloat32 param_aliasing=on"
    assert tf32.as_dict()["runtime"]["matmul_precision"] == "tensorfloat32"
    env = tf32.environment("reference")
    assert env["HARNESS_MATMUL_PRECISION"] == "tensorfloat32"
    assert "HARNESS_MATMUL_PRECISION" not in plain.environment() and "HARNESS_MATMUL_PRECISION" in OWNED_ENV
    monkeypatch.setenv("HARNESS_MATMUL_PRECISION", env["HARNESS_MATMUL_PRECISION"])
    assert config._from_env().matmul_precision == "high"  # what the cell's runtime starts with
    # the matrix spells the runtime's accepted names out (reading it must not import JAX): the same
    assert set(RUNTIME_CHOICES["matmul_precision"]) == set(config.MATMUL_PRECISIONS)
    # the shipped cells declare none: they run at the runtime's default, exact float32
    assert not any("matmul_precision" in c.runtime for c in load_matrix(SHIPPED).cells.values())


@pytest.mark.jax_independent
def test_a_default_matmul_precision_applies_to_every_cell(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        [defaults]
        runtime = { matmul_precision = "HIGH" }

        [cells.a]
        devices = 2

        [cells.b]
        devices = 2
        runtime = { matmul_precision = "highest" }
    """)
    cells = load_matrix(path).cells
    assert cells["a"].environment()["HARNESS_MATMUL_PRECISION"] == "HIGH"  # the runtime reads any case
    assert cells["b"].environment()["HARNESS_MATMUL_PRECISION"] == "highest"


BAD = [
    # (file text, line, field, words in the message)
    ("[cells.a]\ndevices = 0\n", 2, "cells.a.devices", "positive integer"),
    ("[cells.a]\ndevices = 4\n\n[cells.b]\nbackend = \"cpu\"\ndevices = 3\nslices = 2\n", 7, "cells.b.slices", "do not divide"),
    ("[cells.a]\ndevices = 4\nprocesses = 3\nslices = 2\n", 4, "cells.a.slices", "do not divide"),
    ("[cells.a]\nbackend = \"fpga\"\n", 2, "cells.a.backend", "unknown backend"),
    ("[cells.a]\ndevices = 1\ncolour = \"red\"\n", 3, "cells.a.colour", "unknown key"),
    ("[cells.a]\ndevices = 1\nruntime = { functionalisation = false }\n", 3, "cells.a.runtime.functionalisation", "unknown runtime option"),
    ("[cells.a]\n[cells.a.runtime]\nfunctionalization = \"off\"\n", 3, "cells.a.runtime.functionalization", "true or false"),
    ("[cells.a]\ndevices = 1\nenv = { X = 1 }\n", 3, "cells.a.env.X", "strings"),
    ("[cells.a]\npaths = []\n", 2, "cells.a.paths", "at least one"),
    ("[cells.a]\ndevices = 2\nenv = { JAX_NUM_CPU_DEVICES = \"4\" }\n", 3, "cells.a.env.JAX_NUM_CPU_DEVICES", "devices"),
    ("[cells.a]\ntimeout = -1\n", 2, "cells.a.timeout", "positive number"),
    ("root = \"..\"\n", None, "cells", "at least one"),
    ("root = \"..\"\n\n[cell.cpu-1]\ndevices = 1\n", 3, "cell", "unknown key"),
    ("[cells.a]\ndevices = 1\n[cells.\"b c\"]\ndevices = 1\n", 3, "cells.b c", "cell names"),
    ("[cells.a]\ndevices = 1\nruntime = { matmul_precision = \"tf32\" }\n", 3, "cells.a.runtime.matmul_precision",
     "unknown matmul precision 'tf32' (expected one of default, bfloat16, high, tensorfloat32, bfloat16_3x, highest, float32)"),
    ("[cells.a]\n[cells.a.runtime]\nmatmul_precision = true\n", 3, "cells.a.runtime.matmul_precision", "expected one of"),
    ("[cells.a]\nenv = { HARNESS_MATMUL_PRECISION = \"high\" }\n", 2, "cells.a.env.HARNESS_MATMUL_PRECISION",
     "runtime.matmul_precision"),
    ("[cells.a]\nlauncher = \"pbs\"\n", 2, "cells.a.launcher", "unknown launcher 'pbs' (expected one of local, slurm, mpi)"),
    ("[cells.a]\nlauncher = \"slurm\"\ncluster = { queue = \"x\" }\n", 3, "cells.a.cluster.queue", "unknown key"),
    ("[cells.a]\nlauncher = \"slurm\"\ncluster = { time_limit = \"1h\" }\n", 3, "cells.a.cluster.time_limit",
     "SLURM time"),
    ("[cells.a]\nlauncher = \"slurm\"\ncluster = { nodes = 0 }\n", 3, "cells.a.cluster.nodes", "positive integer"),
    ("[cells.a]\ndevices = 2\nprocesses = 2\nslices = 2\nlauncher = \"slurm\"\ncluster = { nodes = 1 }\n", 4,
     "cells.a.slices", "a slice is a node"),
]


@pytest.mark.jax_independent
@pytest.mark.parametrize(("text", "line", "field", "words"), BAD, ids=[b[2] + f"-{i}" for i, b in enumerate(BAD)])
def test_impossible_cells_are_rejected_with_line_and_field(
    tmp_path: Path, text: str, line: int | None, field: str, words: str
) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    with pytest.raises(MatrixError) as caught:
        load_matrix(path)
    error = caught.value
    assert (error.line, error.field) == (line, field), str(error)
    assert words in str(error) and str(path) in str(error)


@pytest.mark.jax_independent
def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text("[cells.a]\ndevices = 1\n\n[cells.b\ndevices = 2\n")
    with pytest.raises(MatrixError) as caught:
        load_matrix(path)
    assert caught.value.line == 4 and "not valid TOML" in str(caught.value)
    assert f"{path}:4:" in str(caught.value)


@pytest.mark.jax_independent
def test_unknown_cell_is_named(tmp_path: Path) -> None:
    matrix: Matrix = load_matrix(SHIPPED)
    with pytest.raises(MatrixError, match="unknown cell 'cpu-99'"):
        matrix.select(["cpu-4", "cpu-99"])
    assert [c.name for c in matrix.select(["cpu-4", "cpu-1", "cpu-4"])] == ["cpu-4", "cpu-1"]


# -- the commands ----------------------------------------------------------------------------------
@pytest.mark.jax_independent
def test_cells_json_shape() -> None:
    proc = xharness("cells", "--json", cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert Path(data["matrix"]).name == "matrix.toml"
    by_name = {c["name"]: c for c in data["cells"]}
    for cell in by_name.values():
        assert {"name", "backend", "devices", "processes", "slices", "total_devices", "runtime", "env",
                "paths", "pytest_args", "timeout", "available", "reason"} <= set(cell)
        assert isinstance(cell["available"], bool) and cell["reason"]
    assert by_name["cpu-4"]["available"] is True
    assert by_name["cpu-2x4"]["total_devices"] == 8
    if not by_name["gpu"]["available"]:  # say why a cell cannot run here
        assert "GPU" in by_name["gpu"]["reason"]


@pytest.mark.jax_independent
def test_cells_table_lists_every_cell() -> None:
    proc = xharness("cells", cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert names == list(load_matrix(SHIPPED).cells)


@pytest.mark.jax_independent
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--cells", "cpu-4,nope"], "unknown cell 'nope'"),
        (["run", "--runtime", "torch-xla-9"], "unknown runtime"),
        (["run", "--reruns", "-1"], "--reruns"),
    ],
)
def test_run_usage_errors_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    proc = xharness(*args, "--out", str(tmp_path / "out"), cwd=ROOT, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing ran


@pytest.mark.jax_independent
def test_malformed_matrix_exits_2_with_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        [cells.a]
        devices = 2
        processes = "two"
    """)
    for args in (["cells", "--matrix", str(path)], ["run", "--matrix", str(path)]):
        proc = xharness(*args, cwd=tmp_path, timeout=60)
        assert proc.returncode == 2
        assert f"{path}:3: cells.a.processes: must be a positive integer" in proc.stderr


@pytest.mark.jax_independent  # the marks and the matrix's paths are the same on every JAX; that its
# suites collect on a JAX release is the release's own suites cell's first step
def test_multiprocess_cells_reach_every_test_marked_multiprocess() -> None:
    """The two-process cells name the modules they run (collecting every suite in each rank is
    slow): a test marked ``multiprocess`` in any other module would silently never run there."""
    import subprocess
    import sys

    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "multiprocess", "-p", "no:cacheprovider", "suites"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    # a node id line only: a conftest's summary may print other lines with "::" in them
    marked = {m.group(1) for line in listed.stdout.splitlines() if (m := re.match(r"(suites/\S+?\.py)::", line))}
    assert "suites/regression/test_catalog.py" in marked  # the collection really saw the marks
    for cell in load_matrix(SHIPPED).cells.values():
        if not cell.multiprocess:
            continue
        covered = [p.rstrip("/") for p in cell.paths]
        missing = [f for f in marked if not any(f == p or f.startswith(p + "/") for p in covered)]
        assert not missing, f"cell {cell.name} does not run {missing}"


def _invariants_marked_options_independent() -> list:
    """The invariants whose test in suites/properties/test_invariants.py carries the mark."""
    import importlib.util

    from harness.properties import INVARIANTS

    path = ROOT / "suites" / "properties" / "test_invariants.py"
    spec = importlib.util.spec_from_file_location("_xharness_marked_invariants", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    by_test = {f"test_{i.id.replace('-', '_')}": i for i in INVARIANTS}
    return [
        by_test[name] for name, fn in vars(module).items()
        if name in by_test and any(m.name == "options_independent" for m in getattr(fn, "pytestmark", ()))
    ]


SETS_OPTIONS = _invariants_marked_options_independent()


@pytest.mark.jax_independent
def test_some_invariants_are_marked_options_independent() -> None:
    assert len(SETS_OPTIONS) >= 5, [i.id for i in SETS_OPTIONS]


@pytest.mark.parametrize("invariant", SETS_OPTIONS, ids=[i.id for i in SETS_OPTIONS])
def test_invariants_marked_options_independent_draw_both_options(invariant) -> None:
    """cpu-8-nofunc leaves these invariants to cpu-8 (``options_independent``), which is only
    right while each of their examples carries both runtime options and running it sets them."""
    from hypothesis import find

    from harness.runtime import config

    example = find(invariant.examples(), lambda _: True)
    assert {"functionalization", "param_aliasing"} <= set(example), example
    example.pop("schedule", None)  # drawn while the program runs: the free-running order will do
    flipped = {**example, "functionalization": not config.options.functionalization,
               "param_aliasing": not config.options.param_aliasing}
    invariant.check(**flipped)
    assert (config.options.functionalization, config.options.param_aliasing) == (
        flipped["functionalization"], flipped["param_aliasing"])


@pytest.mark.jax_independent
def test_the_launcher_cells_parse_and_keep_their_site_options(tmp_path: Path) -> None:
    cells = load_matrix(ROOT / "ci" / "launchers.toml").cells
    assert {c.launcher for c in cells.values()} == {"slurm", "mpi"}
    path = _write(tmp_path, """
        [cells.site]
        devices = 8
        processes = 2
        launcher = "slurm"
        cluster = { partition = "a100", account = "proj", time_limit = "30:00", nodes = 2, extra = ["--gres=gpu:8"] }
    """)
    cell = load_matrix(path).cells["site"]
    assert (cell.cluster.partition, cell.cluster.time_limit, cell.cluster.extra) == ("a100", "30:00", ("--gres=gpu:8",))
    assert cell.as_dict()["cluster"] == {"partition": "a100", "account": "proj", "time_limit": "30:00", "nodes": 2,
                                         "extra": ("--gres=gpu:8",)}
