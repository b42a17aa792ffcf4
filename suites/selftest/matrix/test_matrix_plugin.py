"""The plugin on its own: device count before JAX starts, markers, fixtures, options."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import pytest

from harness.plugin import user_chose_device_count

MARKED = '''
    import os
    import jax
    import pytest

    def test_device_count():
        assert jax.device_count() == int(os.environ["EXPECT_DEVICES"])

    @pytest.mark.devices(3)
    def test_needs_three():
        pass

    @pytest.mark.devices(99)
    def test_needs_many():
        pass

    @pytest.mark.processes(2)
    def test_needs_processes():
        pass

    @pytest.mark.slices(2)
    def test_needs_slices():
        pass

    @pytest.mark.cell("cpu-4", "cpu-8")
    def test_only_in_cells():
        pass

    def test_fixtures(devices, mesh, runtime):
        import harness.runtime
        assert runtime is harness.runtime
        assert devices == jax.devices()
        assert mesh.mesh_shape == (len(devices),) and mesh.axis_names == ("data",)
'''


def _pytest(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()  # nothing of an enclosing cell or xdist worker
             if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS", "JAX_PLATFORMS", "PYTEST_ADDOPTS")
             and not k.startswith(("PYTEST_XDIST", "HARNESS_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--strict-markers", "-rs", "-q", *args],
        cwd=tmp_path, env={**clean, **env}, capture_output=True, text=True, timeout=120,
    )


@pytest.fixture
def marked(tmp_path: Path) -> Path:
    (tmp_path / "test_marked.py").write_text(textwrap.dedent(MARKED))
    return tmp_path


@pytest.mark.jax_independent
@pytest.mark.parametrize(
    ("environ", "chosen"),
    [
        ({}, False),
        ({"JAX_NUM_CPU_DEVICES": "2"}, True),
        ({"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}, True),
        ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=4 --x=1"}, True),
        ({"XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}, False),
        ({"XLA_FLAGS": "--xla_force_host_platform_device_count_extra=4"}, False),
    ],
)
def test_user_device_count_is_found_anywhere_in_xla_flags(environ: dict[str, str], chosen: bool) -> None:
    assert user_chose_device_count(environ) is chosen


def test_plain_run_asks_for_eight_devices_and_markers_skip_with_reasons(marked: Path) -> None:
    proc = _pytest(marked, EXPECT_DEVICES="8")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "3 passed, 4 skipped" in out
    assert "needs 99 devices, this process has 8" in out
    assert "needs 2 processes, this process has 1" in out
    assert "needs 2 slices, this process has 1" in out
    assert "runs only in cell(s) cpu-4, cpu-8; this is a run outside the matrix" in out


def test_cell_option_slices_env_and_user_device_count(marked: Path) -> None:
    flags = "--xla_cpu_enable_fast_math=false --xla_force_host_platform_device_count=3"
    proc = _pytest(marked, "--cell", "cpu-4", "-k", "not fixtures", XLA_FLAGS=flags, EXPECT_DEVICES="3",
                   HARNESS_NUM_SLICES="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed, 2 skipped, 1 deselected" in proc.stdout  # cell and slices now met


def test_works_under_xdist(marked: Path) -> None:
    proc = _pytest(marked, "-p", "xdist", "-n", "2", EXPECT_DEVICES="8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed, 4 skipped" in proc.stdout


def test_fixtures_in_this_process(devices: list[object], mesh: object, runtime: object) -> None:
    assert devices == jax.devices()
    assert mesh.mesh_shape == (jax.device_count(),)  # type: ignore[attr-defined]
    assert mesh.axis_names == ("data",)  # type: ignore[attr-defined]
    assert runtime.__name__ == "harness.runtime"  # type: ignore[attr-defined]


@pytest.mark.jax_independent
def test_bad_marker_argument_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_bad.py").write_text("import pytest\n\n@pytest.mark.devices('eight')\ndef test_x():\n    pass\n")
    proc = _pytest(tmp_path)
    assert proc.returncode != 0
    assert "needs a positive integer" in proc.stdout + proc.stderr


@pytest.mark.jax_independent
def test_time_limit_outside_the_supervisor_dumps_stacks_and_exits(tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text("import time\n\ndef test_ok():\n    pass\n\ndef test_slow():\n    time.sleep(60)\n")
    proc = _pytest(tmp_path, "--xharness-timeout", "1.5")
    assert proc.returncode != 0
    assert "Timeout (0:00:01.500000)!" in proc.stderr
    assert 'test_slow.py", line 7 in test_slow' in proc.stderr
