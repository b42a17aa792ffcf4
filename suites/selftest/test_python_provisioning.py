"""ci/python.sh makes a newer Python available where the machine has none: it prints the path of a
working interpreter (one that imports ssl, sqlite3, ctypes and builds a venv with pip), and says
why where it cannot, with exit 2 for a usage error and 3 for a Python it cannot provide."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

# interpreters and their virtual environments: the same outcome on every JAX
pytestmark = pytest.mark.jax_independent

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "ci/python.sh"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("argv", [[], ["3"], ["python3.13"], ["3.13.0"], ["x.y"]])
def test_a_version_that_is_not_3_N_is_a_usage_error(argv: list[str]) -> None:
    proc = _run(*argv)
    assert proc.returncode == 2 and "usage: ci/python.sh 3.N" in proc.stderr and proc.stdout == ""


def test_a_python_debian_has_no_release_of_is_named(tmp_path: Path) -> None:
    proc = _run("3.99", env={"XHARNESS_PYTHON_DIR": str(tmp_path), "XHARNESS_PYTHON_FROM": "debian"})
    assert proc.returncode == 3 and proc.stdout == ""
    assert "Python 3.99 is not on PATH nor in pyenv" in proc.stderr and "pass its path" in proc.stderr


def test_a_python_on_path_is_found_first(tmp_path: Path) -> None:
    import sys

    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    link = tmp_path / f"python{minor}"
    link.symlink_to(sys.executable)
    proc = _run(minor, env={"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(link)


@pytest.mark.skipif(not (shutil.which("apt-get") and shutil.which("dpkg")
                         and Path("/usr/share/keyrings/debian-archive-keyring.gpg").is_file()),
                    reason="the Debian route needs apt-get, dpkg and Debian's archive keyring")
def test_the_debian_route_unpacks_a_python_that_builds_a_venv_with_pip(tmp_path: Path) -> None:
    """The route a Debian 12 machine without Python 3.13 takes (forced here, where pyenv has
    one): trixie's packages with their own C library, about 10 s and 60 MB."""
    cache = tmp_path / "python"
    proc = _run("3.13", env={"XHARNESS_PYTHON_DIR": str(cache), "XHARNESS_PYTHON_FROM": "debian"})
    assert proc.returncode == 0, proc.stderr
    python = Path(proc.stdout.strip())
    assert python == cache / "3.13/usr/bin/python3.13" and python.is_file()
    check = subprocess.run([str(python), "-c", "import ssl, sqlite3, ctypes, readline, sys; "
                            "print(sys.version_info[:2])"], capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.strip() == "(3, 13)", check.stderr
    venv = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True, capture_output=True)
    pip = subprocess.run([str(venv / "bin/python"), "-m", "pip", "--version"], capture_output=True,
                         text=True)
    assert pip.returncode == 0 and "python 3.13" in pip.stdout
    again = _run("3.13", env={"XHARNESS_PYTHON_DIR": str(cache), "XHARNESS_PYTHON_FROM": "debian"})
    assert again.returncode == 0 and again.stdout == proc.stdout  # cached: no second download
    assert "fetching" not in again.stderr
