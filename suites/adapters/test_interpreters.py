"""An interpreter per release: candidates are found and probed, a release is asked which Python it
fits through pip's own resolver (offline here, over wheels written by the test), and a release
that fits none of them is an install error naming the Python it needs and how to provide one."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from fake_wheels import tiny_wheel

from harness.errors import UsageError
from harness.releases import envs, interpreters
from harness.releases.interpreters import Interpreter, InterpreterError

# the same in every interpreter whichever torch or torch_xla it holds: no release's own run repeats it
pytestmark = pytest.mark.release_independent

HERE = interpreters.running()


@pytest.fixture
def index(tmp_path: Path) -> list[str]:
    """pip arguments for a local index: ``purelib`` needs Python >=3.99 (no interpreter has it),
    ``anyfloor`` runs anywhere, ``onlyfuture`` ships a wheel for CPython 3.99 only."""
    links = tmp_path / "links"
    tiny_wheel(links, "purelib", "1.0", "py3-none-any", ">=3.99")
    tiny_wheel(links, "anyfloor", "1.0", "py3-none-any", ">=3.8")
    tiny_wheel(links, "onlyfuture", "2.0", "cp399-cp399-manylinux_2_17_x86_64", ">=3.99")
    return ["--no-index", "--find-links", str(links)]


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_running_interpreter_is_probed_and_tagged() -> None:
    found = interpreters.probe(sys.executable)
    assert found is not None and found.version == tuple(sys.version_info[:3])
    assert found.tag == f"py{sys.version_info[0]}{sys.version_info[1]}" == HERE.tag
    assert envs.env_name("jax", "0.12.0.1", "py313") == "jax-0.12.0.1-py313"


def test_what_does_not_run_is_no_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a pyenv shim of a version that is not selected is on PATH and exits 127; a python3.N that is
    # another version is not that minor's interpreter
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "python3.12", "echo 'pyenv: python3.12: command not found' >&2; exit 127")
    _script(bin_dir / "python3.13", f'exec {sys.executable} "$@"')
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv(interpreters.PYTHONS_VARIABLE, raising=False)
    assert interpreters.probe(str(bin_dir / "python3.12")) is None
    assert interpreters.probe(str(tmp_path / "missing")) is None
    assert interpreters.on_path() == ([] if HERE.minor != "3.13" else [interpreters.probe(str(bin_dir / "python3.13"))])
    assert interpreters.candidates()[0] == HERE


def test_named_interpreters_come_first_and_one_that_does_not_run_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _script(tmp_path / "other-python", f'exec {sys.executable} "$@"')
    monkeypatch.setenv(interpreters.PYTHONS_VARIABLE, f"{other}{os.pathsep}")
    pool = interpreters.candidates()
    assert pool[0].path == other and len([i for i in pool if i.minor == HERE.minor]) == 1
    monkeypatch.setenv(interpreters.PYTHONS_VARIABLE, str(tmp_path / "no-such-python"))
    with pytest.raises(InterpreterError, match="no-such-python .*does not run"):
        interpreters.candidates()
    with pytest.raises(UsageError, match="no-such-python"):  # checked before a command starts
        interpreters.apply_argument(None)
    with pytest.raises(UsageError, match="typo-python"):
        interpreters.apply_argument([str(tmp_path / "typo-python")])


def test_pip_is_asked_for_wheels_and_requires_python(index: list[str]) -> None:
    fit = interpreters.ask(["anyfloor==1.0"], HERE.dotted, index)
    assert fit.ok and fit.requires_python == (("anyfloor", ">=3.8"),)
    fit = interpreters.ask(["purelib==1.0"], HERE.dotted, index)  # found, but its floor excludes
    assert fit.resolved and not fit.ok and fit.floor() == ">=3.99"
    assert "purelib needs Python >=3.99" in fit.why_not()
    assert interpreters.ask(["purelib==1.0"], "3.99.0", index).ok
    fit = interpreters.ask(["onlyfuture==2.0"], HERE.dotted, index)  # no wheel for this Python
    assert not fit.resolved and "onlyfuture" in fit.reason
    assert f"no wheels of it for Python {HERE.dotted}" in fit.why_not()


def test_the_first_interpreter_that_fits_is_chosen(index: list[str]) -> None:
    fake = Interpreter(Path("/nowhere/python3.99"), (3, 99, 0))
    assert interpreters.choose(["purelib==1.0"], [HERE, fake], "purelib 1.0", index) == fake
    assert interpreters.choose(["anyfloor==1.0"], [HERE, fake], "anyfloor 1.0", index) == HERE


def test_a_release_no_interpreter_fits_names_its_floor_and_how_to_provide_one(index: list[str]) -> None:
    with pytest.raises(InterpreterError) as caught:
        interpreters.choose(["purelib==1.0"], [HERE], "purelib 1.0", index)
    text = str(caught.value)
    assert text.startswith("no interpreter here fits purelib 1.0 (Requires-Python >=3.99 on the index)")
    assert f"Python {HERE.dotted} ({HERE.path}): purelib needs Python >=3.99" in text
    assert "--python PATH" in text and interpreters.PYTHONS_VARIABLE in text and "ci/python.sh" in text


def test_a_release_on_no_index_is_left_to_the_build_to_name(index: list[str]) -> None:
    # pip finds it for no Python at all: not an interpreter question, the build's pip says why
    assert interpreters.choose(["nosuchdist==1.0"], [HERE], "nosuchdist 1.0", index) == HERE


def test_an_environment_is_not_built_when_no_interpreter_fits(
    tmp_path: Path, index: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(interpreters.PYTHONS_VARIABLE, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no python3.N to fall back on
    with pytest.raises(envs.ReleaseInstallError) as caught:
        envs.ensure_env("jax", "9.9.9", root=tmp_path / "envs", requirements=["purelib==1.0"],
                        pip_args=index)
    assert "no interpreter here fits jax 9.9.9 (Requires-Python >=3.99" in str(caught.value)
    assert not list((tmp_path / "envs").glob("jax-9.9.9-*"))


def _complete(root: Path, name: str, requirements: list[str]) -> Path:
    path = root / name
    (path / "bin").mkdir(parents=True)
    os.symlink(sys.executable, path / "bin" / "python")
    stamp = {"requirements": requirements, "project": envs.project_fingerprint(envs.project_root())}
    (path / envs.STAMP).write_text(__import__("json").dumps(stamp))
    return path


def test_an_environment_another_interpreter_built_is_found_and_reused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(interpreters.PYTHONS_VARIABLE, raising=False)
    path = _complete(tmp_path, "jax-9.9.9-py399", ["jax==9.9.9"])
    found = envs.find_env("jax", "9.9.9", root=tmp_path)
    assert found is not None and found.path == path
    # no index is asked: the environment proves the release fits the interpreter that built it
    env = envs.ensure_env("jax", "9.9.9", root=tmp_path, requirements=["jax==9.9.9"],
                          pip_args=["--no-index", "--no-such-option"])
    assert env.path == path and not env.built
    assert envs.find_env("jax", "9.9.8", root=tmp_path) is None


def test_an_old_pip_is_named_before_anything_is_asked(tmp_path: Path) -> None:
    old = _script(tmp_path / "python", 'echo "pip 21.0 from /somewhere (python 3.11)"')
    with pytest.raises(interpreters.PipTooOld, match=r"pip of .* is 21.0; .*needs pip >= 22.2"):
        interpreters.check_pip(str(old))
    assert interpreters.check_pip() >= interpreters.PIP_FLOOR


def test_a_command_names_the_old_pip_before_it_starts(tmp_path: Path, monkeypatch) -> None:
    old = _script(tmp_path / "python", 'echo "pip 21.0 from /somewhere (python 3.11)"')
    monkeypatch.delenv(interpreters.PYTHONS_VARIABLE, raising=False)
    monkeypatch.setattr(sys, "executable", str(old))
    with pytest.raises(UsageError, match=r"is 21.0; .* -m pip install -U pip"):
        interpreters.apply_argument(None)
