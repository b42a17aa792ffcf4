"""The command line for real runtimes: every mistake a user can make gets its message and its own
exit code, a release that will not install is named and the others still run, and matrix cells
name their runtime and release in their ``runtime`` table."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from harness.cli import main
from harness.matrix.config import MatrixError, load_matrix
from harness.report.junit import read_records

HAS_TORCH_XLA = importlib.util.find_spec("torch_xla") is not None


@pytest.fixture
def offline_envs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Release environments in a scratch directory, pip offline: a release fails at once."""
    monkeypatch.setenv("XHARNESS_ENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("XHARNESS_PIP_ARGS", "--no-index")
    return tmp_path


@pytest.mark.release_independent
def test_a_release_that_will_not_install_is_exit_3_and_the_others_still_run(offline_envs: Path, capsys) -> None:
    out = offline_envs / "reports"
    code = main(["releases", "torch_xla", "0.0.1", "0.0.2", "--out", str(out)])
    assert code == 3
    captured = capsys.readouterr()
    for release in ("0.0.1", "0.0.2"):  # the first failure did not stop the second release
        assert f"cannot install torch_xla {release}: pip install torch==0.0.0" not in captured.err
        assert f"cannot install torch_xla {release}: pip install torch>=0.0,<={release} torch-xla=={release}" in captured.err
        assert f"torch_xla {release}: NOT INSTALLED" in captured.out
        (record,) = read_records(out / "junit" / f"torch_xla-{release}.xml")
        assert record.classification == "error"
        assert record.final.message.startswith(f"cannot install torch_xla {release}")
        assert "torch<=" in record.final.details and "ERROR" in record.final.details  # pip's own words
        assert record.properties["verdict"] == "not-installed"
    assert (out / "index.html").exists() and (out / "junit.xml").exists()


@pytest.mark.release_independent
def test_a_wheel_is_a_release_whose_cell_and_environment_are_keyed_by_its_hash(offline_envs: Path, capsys) -> None:
    from harness.releases import release_spec

    wheel = offline_envs / "dist" / "torch_xla-2.9.0+mine-cp311-cp311-linux_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"not really a wheel")
    spec = release_spec.parse("torch_xla", str(wheel))
    out = offline_envs / "reports"
    assert main(["releases", "torch_xla", str(wheel), "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert f"cannot install torch_xla wheel-{spec.digest}: pip install {wheel} torch>=2.9,<=2.9.0" in err
    (record,) = read_records(out / "junit" / f"torch_xla-wheel-{spec.digest}.xml")
    assert record.properties["verdict"] == "not-installed"
    assert not (offline_envs / "envs" / spec.env_name).exists()  # the failed build is gone


@pytest.mark.skipif(HAS_TORCH_XLA, reason="torch_xla is importable here")
def test_installed_names_this_interpreters_runtime_and_is_a_usage_error_without_one(capsys) -> None:
    assert main(["repro", "aliased-save", "--runtime", "torch_xla", "--release", "installed"]) == 2
    assert "'installed' names the torch_xla of" in capsys.readouterr().err


@pytest.mark.release_independent
def test_repro_against_a_release_that_will_not_install_is_exit_3(offline_envs: Path, capsys) -> None:
    assert main(["repro", "aliased-save", "--runtime", "torch_xla", "--release", "0.0.3"]) == 3
    assert "cannot install torch_xla 0.0.3" in capsys.readouterr().err


@pytest.mark.release_independent
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["repro", "aliased-save", "--runtime", "torch_xla", "--inject"], "has none: against a real runtime"),
        (["repro", "aliased-save", "--release", "2.9.0"], "add --runtime torch_xla"),
        (["repro", "no-such-scenario", "--runtime", "torch_xla"], "unknown scenario 'no-such-scenario'"),
        (["repro", "aliased-save", "--runtime", "tensorflow"], "unknown runtime 'tensorflow'"),
        (["releases", "torch_xla", "two.nine"], "not a release version: 'two.nine'"),
        (["releases", "torch_xla", "dist/torch_xla-2.9.0-cp311-cp311-linux_x86_64.whl"], "no such wheel file"),
        (["repro", "aliased-save", "--runtime", "torch_xla", "--release", "/nonexistent/dist"], "no such wheel file or directory"),
        (["run", "--runtime", "torch_xla", "--release", "./nope.whl", "--cells", "cpu-1"], "--release: no such wheel file"),
        (["run", "--release", "2.9.0", "--cells", "cpu-1"], "add --runtime torch_xla"),
        (["run", "--runtime", "reference", "--release", "0.10", "--cells", "cpu-1"], "add --runtime torch_xla or jax"),
    ],
)
def test_usage_errors_are_exit_2(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(HAS_TORCH_XLA, reason="torch_xla is importable here")
def test_a_runtime_that_is_not_here_and_no_release_is_exit_4(capsys) -> None:
    assert main(["repro", "aliased-save", "--runtime", "torch_xla"]) == 4
    assert "torch_xla is not importable by" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main(["run", "--runtime", "torch_xla", "--cells", "cpu-1", "--out", "/nonexistent/never"])
    assert stopped.value.code == 4


def _matrix(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(body)
    return path


@pytest.mark.release_independent
def test_a_cell_names_its_runtime_and_release_in_its_runtime_table(tmp_path: Path) -> None:
    matrix = load_matrix(_matrix(tmp_path, (
        '[cells.old]\ndevices = 2\nruntime = { functionalization = false }\n'
        '[cells.xla]\ndevices = 4\nruntime = { name = "torch_xla", release = "2.9.0", param_aliasing = false }\n'
    )))
    old, xla = matrix.cells["old"], matrix.cells["xla"]
    assert old.runtime == {"functionalization": False, "param_aliasing": True}  # old files unchanged
    assert (old.runtime_name, old.release) == (None, None)
    assert xla.runtime == {"functionalization": True, "param_aliasing": False}
    assert (xla.runtime_name, xla.release) == ("torch_xla", "2.9.0")
    assert xla.as_dict()["runtime"] == {"functionalization": True, "param_aliasing": False,
                                        "name": "torch_xla", "release": "2.9.0"}
    env = xla.environment("torch_xla")
    assert env["PJRT_DEVICE"] == "CPU" and env["CPU_NUM_DEVICES"] == "4"
    assert env["XLA_ENABLE_PARAM_ALIASING"] == "0" and env["XLA_DISABLE_FUNCTIONALIZATION"] == "0"
    assert env["HARNESS_RELEASE"] == "2.9.0" and env["HARNESS_RUNTIME"] == "torch_xla"
    assert "PJRT_DEVICE" not in old.environment()
    jax = load_matrix(_matrix(tmp_path, '[cells.j]\ndevices = 8\nruntime = { name = "jax", release = "0.10.0" }\n')).cells["j"]
    assert (jax.runtime_name, jax.release) == ("jax", "0.10.0")  # a JAX release has its environment too
    assert jax.environment("jax")["HARNESS_RELEASE"] == "0.10.0" and "PJRT_DEVICE" not in jax.environment("jax")


@pytest.mark.release_independent
@pytest.mark.parametrize(
    ("runtime", "line", "field", "message"),
    [
        ('{ name = "tensorflow" }', 2, "cells.a.runtime.name", "unknown runtime 'tensorflow'"),
        ('{ release = "2.9.0" }', 2, "cells.a.runtime.release", "a release needs runtime.name"),
        ('{ name = "reference", release = "0.10.2" }', 2, "cells.a.runtime.release", "a release needs runtime.name"),
        ('{ name = "torch_xla", release = 2.9 }', 2, "cells.a.runtime.release", "release version string"),
    ],
)
def test_a_bad_runtime_table_names_line_and_field(tmp_path: Path, runtime: str, line: int, field: str, message: str) -> None:
    with pytest.raises(MatrixError) as caught:
        load_matrix(_matrix(tmp_path, f"[cells.a]\nruntime = {runtime}\n"))
    assert (caught.value.line, caught.value.field) == (line, field)
    assert message in caught.value.reason


@pytest.mark.release_independent
def test_a_release_no_interpreter_fits_is_exit_3_naming_the_python_it_needs(
    offline_envs: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """JAX 0.11 and later need Python 3.12 or newer: a release whose Requires-Python excludes
    every interpreter here is not installed, and the message says which Python to provide."""
    from fake_wheels import tiny_wheel

    links = offline_envs / "links"
    tiny_wheel(links, "jax", "9.9.9", "py3-none-any", ">=3.99")
    tiny_wheel(links, "jaxlib", "9.9.9", "py3-none-any", ">=3.99")
    monkeypatch.setenv("XHARNESS_PIP_ARGS", f"--no-index --find-links {links}")
    monkeypatch.setenv("PATH", str(offline_envs / "no-pythons-here"))
    monkeypatch.delenv("XHARNESS_PYTHONS", raising=False)
    out = offline_envs / "reports"
    assert main(["releases", "jax", "9.9.9", "--out", str(out)]) == 3
    captured = capsys.readouterr()
    assert "cannot install jax 9.9.9: no interpreter here fits jax 9.9.9 (Requires-Python >=3.99 on the index)" in captured.err
    assert "--python PATH" in captured.err and "ci/python.sh" in captured.err
    (record,) = read_records(out / "junit" / "jax-9.9.9.xml")
    assert record.classification == "error" and record.properties["verdict"] == "not-installed"
    assert not list((offline_envs / "envs").glob("jax-9.9.9-*"))  # nothing half-built


@pytest.mark.release_independent
def test_a_named_interpreter_that_does_not_run_is_a_usage_error(offline_envs: Path, capsys) -> None:
    code = main(["releases", "jax", "0.10.2", "--python", str(offline_envs / "no-such-python"),
                 "--out", str(offline_envs / "reports")])
    assert code == 2
    assert "no-such-python (from --python or $XHARNESS_PYTHONS) does not run" in capsys.readouterr().err
    assert not (offline_envs / "envs").exists()  # checked before anything was built
