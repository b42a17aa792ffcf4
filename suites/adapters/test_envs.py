"""Release environments: one per (runtime, release), reused once complete, and a release that
will not install is an error naming it (pip runs offline here, so the failure is quick)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.adapters import runtimes
from harness.releases import envs

# the same in every interpreter whichever torch or torch_xla it holds: no release's own run repeats it
pytestmark = pytest.mark.release_independent

OFFLINE = ["--no-index"]  # pip fails at once on any requirement it would have to download


def test_env_dir_defaults_to_the_user_cache_and_the_variable_overrides(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(envs.ENV_DIR_VARIABLE, raising=False)
    assert envs.env_root() == Path.home() / ".cache/xharness/envs"
    monkeypatch.setenv(envs.ENV_DIR_VARIABLE, str(tmp_path / "e"))
    assert envs.env_root() == tmp_path / "e"
    assert envs.env_name("torch_xla", "2.9.0") == f"torch_xla-2.9.0-py{sys.version_info[0]}{sys.version_info[1]}"


def test_the_release_pins_torch_and_torch_xla_together() -> None:
    assert envs.requirements_for("torch_xla", "2.5.1") == ["torch>=2.5,<=2.5.1", "torch-xla==2.5.1"]
    # torch has no 2.8.1 or 2.6.1: those torch_xla releases go with the torch of their minor
    assert envs.requirements_for("torch_xla", "2.8.1")[0] == "torch>=2.8,<=2.8.1"
    from packaging.requirements import Requirement

    torch = Requirement(runtimes.torch_for("2.9.0")).specifier
    assert torch.contains("2.9.0") and not torch.contains("2.9.1") and not torch.contains("2.8.0")
    assert Requirement(runtimes.torch_for("2.6.1")).specifier.contains("2.6.0")
    with pytest.raises(envs.ReleaseInstallError, match="runtime 'jaxlib' has no release environments"):
        envs.requirements_for("jaxlib", "0.4")


def test_a_release_that_does_not_install_names_itself_and_leaves_nothing(tmp_path: Path) -> None:
    said: list[str] = []
    with pytest.raises(envs.ReleaseInstallError) as caught:
        envs.ensure_env("torch_xla", "0.0.1", root=tmp_path, pip_args=OFFLINE,
                        requirements=["xharness-no-such-distribution==0.0.1"], progress=said.append)
    err = caught.value
    assert (err.runtime, err.release) == ("torch_xla", "0.0.1")
    text = str(err)
    assert text.startswith("cannot install torch_xla 0.0.1: pip install xharness-no-such-distribution==0.0.1 exited with 1")
    assert "xharness-no-such-distribution" in text  # the tail of pip's own output
    name = envs.env_name("torch_xla", "0.0.1")
    assert not (tmp_path / name).exists()  # a failed build is removed...
    assert "xharness-no-such-distribution" in (tmp_path / f"{name}.build.log").read_text()  # ...its log kept
    assert any("building" in s for s in said)
    assert envs.find_env("torch_xla", "0.0.1", root=tmp_path) is None


def _fake_complete_env(root: Path, release: str, requirements: list[str] | None = None,
                       freeze: list[str] | None = None) -> Path:
    path = root / envs.env_name("torch_xla", release)
    (path / "bin").mkdir(parents=True)
    os.symlink(sys.executable, path / "bin" / "python")
    project = envs.project_root()
    stamp = {"runtime": "torch_xla", "release": release,
             "requirements": requirements or envs.requirements_for("torch_xla", release),
             "project": envs.project_fingerprint(project), "freeze": freeze or ["torch==" + release]}
    (path / envs.STAMP).write_text(json.dumps(stamp))
    return path


def test_a_complete_environment_is_reused_without_running_pip(tmp_path: Path) -> None:
    path = _fake_complete_env(tmp_path, "9.9.9")
    said: list[str] = []
    env = envs.ensure_env("torch_xla", "9.9.9", root=tmp_path, pip_args=OFFLINE, progress=said.append)
    assert env.path == path and not env.built and said == []
    assert env.python == path / "bin" / "python"
    assert env.stamp()["freeze"] == ["torch==9.9.9"]
    assert envs.find_env("torch_xla", "9.9.9", root=tmp_path) is not None
    assert (tmp_path / f"{path.name}.lock").exists()  # builds of one env are serialized


def test_an_environment_without_its_stamp_is_an_interrupted_build_and_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / envs.env_name("torch_xla", "0.0.2")
    (path / "bin").mkdir(parents=True)
    (path / "half-written").write_text("")
    said: list[str] = []
    with pytest.raises(envs.ReleaseInstallError, match="cannot install torch_xla 0.0.2"):
        envs.ensure_env("torch_xla", "0.0.2", root=tmp_path, pip_args=OFFLINE,
                        requirements=["xharness-no-such-distribution==0.0.2"], progress=said.append)
    assert any("removing the incomplete environment" in s for s in said)
    assert not path.exists()


def test_an_environment_built_with_the_old_exact_pins_is_reused_not_rebuilt(tmp_path: Path) -> None:
    """Environments built when torch was pinned to ``torch==V`` hold what the new pins ask for."""
    old = ["torch==2.5.1", "torch-xla==2.5.1"]
    path = _fake_complete_env(tmp_path, "2.5.1", old, ["torch==2.5.1", "torch_xla==2.5.1", "numpy==2.0"])
    said: list[str] = []
    env = envs.ensure_env("torch_xla", "2.5.1", root=tmp_path, pip_args=OFFLINE, progress=said.append)
    assert env.path == path and not env.built and said == []


@pytest.mark.parametrize(
    ("freeze", "wanted", "held"),
    [
        (["torch==2.5.0", "torch-xla==2.5.1"], ["torch>=2.5,<=2.5.1", "torch-xla==2.5.1"], True),
        (["torch==2.6.0", "torch-xla==2.5.1"], ["torch>=2.5,<=2.5.1", "torch-xla==2.5.1"], False),
        (["torch==2.5.1"], ["torch>=2.5,<=2.5.1", "torch-xla==2.5.1"], False),  # torch_xla missing
        (["torch-xla==2.9.0"], ["/dist/torch_xla-2.9.0-cp311-cp311-linux_x86_64.whl"], False),
    ],
)
def test_an_environment_is_reused_only_when_its_freeze_meets_every_requirement(
    freeze: list[str], wanted: list[str], held: bool
) -> None:
    assert envs.satisfies({"requirements": ["something else"], "freeze": freeze}, wanted) is held


def test_remove_env_deletes_one_environment_under_its_lock(tmp_path: Path) -> None:
    path = _fake_complete_env(tmp_path, "9.9.8")
    other = _fake_complete_env(tmp_path, "9.9.9")
    assert envs.remove_env("torch_xla", "9.9.8", root=tmp_path)
    assert not path.exists() and other.exists()
    assert not envs.remove_env("torch_xla", "9.9.8", root=tmp_path)  # nothing left to remove
