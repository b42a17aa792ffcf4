"""The pip requirement that installs a distribution again, read from how it was installed here: every
form pip records (an index, a version-control URL at a commit or a revision, an archive, a local
directory), the exact reason a line only this machine can use is refused, and a local checkout
turned into its remote at its commit."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from harness import install_source
from harness.install_source import InstallLine, requirement

pytestmark = pytest.mark.cell_independent


def test_a_local_path_is_refused_with_the_path_as_the_runner_would_need_it() -> None:
    found = requirement("xharness", "1.2", {"url": "file:///wheels/my%20builds/xharness-1.2-py3-none-any.whl",
                                            "archive_info": {}})
    assert found == InstallLine(
        "xharness @ file:///wheels/my%20builds/xharness-1.2-py3-none-any.whl", "archive",
        "/wheels/my builds/xharness-1.2-py3-none-any.whl is a path on the machine xharness was installed on; "
        "a CI runner has no such path: publish the build or install from a git URL")
    directory = requirement("xharness", "1.2", {"url": "file:///src/xharness", "dir_info": {}, "subdirectory": "py"})
    assert (directory.requirement, directory.source) == ("xharness @ file:///src/xharness#subdirectory=py", "directory")
    assert directory.local_only.startswith("/src/xharness is a path on the machine")


@pytest.mark.parametrize(("vcs_info", "line"), [
    ({"vcs": "git", "requested_revision": "v1.2"}, "xharness @ git+https://example.org/o/x.git@v1.2"),
    ({"vcs": "git", "commit_id": "ab12", "requested_revision": "main"}, "xharness @ git+https://example.org/o/x.git@ab12"),
    ({"vcs": "git"}, "xharness @ git+https://example.org/o/x.git"),
    ({"commit_id": "ab12"}, "xharness @ git+https://example.org/o/x.git@ab12"),
    ({"vcs": "hg", "commit_id": "ef56"}, "xharness @ hg+https://example.org/o/x.git@ef56"),
])
def test_a_version_control_url_names_its_commit_else_its_revision(vcs_info: dict[str, str], line: str) -> None:
    assert requirement("xharness", "1.2", {"url": "https://example.org/o/x.git", "vcs_info": vcs_info}) == (
        InstallLine(line, "vcs"))


def test_a_remote_archive_or_directory_is_installed_from_its_url() -> None:
    assert requirement("xharness", "1.2", {"url": "https://example.org/x.tar.gz", "archive_info": {}}) == (
        InstallLine("xharness @ https://example.org/x.tar.gz", "archive"))
    assert requirement("xharness", "1.2", {"url": "https://example.org/src", "dir_info": {}}) == (
        InstallLine("xharness @ https://example.org/src", "directory"))
    assert requirement("xharness", "1.2", {"dir_info": {}}) == InstallLine("xharness==1.2", "index")


# ------------------------------------------------------------------------------ what is installed here
def _dist(site: Path, folder: str, name: str, direct_url: str | None) -> None:
    info = site / folder
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(direct_url)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return tmp_path / "site"


def test_a_distribution_that_is_not_installed_is_named(site: Path) -> None:
    with pytest.raises(metadata.PackageNotFoundError) as caught:
        install_source.installed("xharness-plug-absent")
    assert caught.value.name == "xharness-plug-absent"


@pytest.mark.parametrize("direct_url", [None, "{not json", '"the url was lost"', "[1, 2]"])
def test_without_a_record_pip_wrote_the_version_pins_it(site: Path, direct_url: str | None) -> None:
    _dist(site, "Xharness_Plug-1.0.dist-info", "Xharness-Plug", direct_url)
    assert install_source.installed("xharness_plug") == InstallLine("Xharness-Plug==1.0", "index")


def test_the_copy_pip_recorded_a_source_in_is_preferred(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A source checkout's metadata comes first on the path (the command runs from the checkout);
    the installed copy, later on the path, is the one pip says where it came from."""
    _dist(site, "xharness_plug.egg-info", "xharness-plug", None)
    later = site.parent / "installed"
    monkeypatch.setattr(sys, "path", [*sys.path, str(later)])
    _dist(later, "xharness_plug-1.0.dist-info", "xharness-plug", json.dumps(
        {"url": "https://example.org/o/plug.git", "vcs_info": {"vcs": "git", "commit_id": "ab12"}}))
    assert [d.read_text("direct_url.json") is None for d in metadata.distributions(name="xharness-plug")] == [
        True, False]
    assert install_source.installed("xharness-plug") == InstallLine(
        "xharness-plug @ git+https://example.org/o/plug.git@ab12", "vcs")


def _git(path: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _checkout(site: Path, tmp_path: Path, remote: str | None, commit: bool = True) -> Path:
    source = tmp_path / "plug"
    source.mkdir()
    _git(source, "init", "-q")
    if remote is not None:
        _git(source, "remote", "add", "origin", remote)
    if commit:
        (source / "README").write_text("plug\n")
        _git(source, "add", "README")
        _git(source, "commit", "-q", "-m", "first")
    _dist(site, "xharness_plug-1.0.dist-info", "xharness-plug",
          json.dumps({"url": source.as_uri(), "dir_info": {"editable": True}}))
    return source


@pytest.mark.parametrize(("remote", "fetched"), [
    ("https://example.org/o/plug.git", "https://example.org/o/plug.git"),
    ("ssh://git@example.org/o/plug.git", "ssh://git@example.org/o/plug.git"),
    ("git@example.org:o/plug.git", "ssh://git@example.org/o/plug.git"),
    ("git@example.org:/srv/git/plug.git", "ssh://git@example.org/srv/git/plug.git"),
])
def test_a_local_checkout_installs_as_its_remote_at_its_commit(site: Path, tmp_path: Path, remote: str,
                                                               fetched: str) -> None:
    source = _checkout(site, tmp_path, remote)
    commit = _git(source, "rev-parse", "HEAD")
    assert install_source.installed("xharness-plug") == InstallLine(
        f"xharness-plug @ git+{fetched}@{commit}", "vcs",
        note=f"CI installs commit {commit[:12]} of {fetched} (push it)")
    (source / "README").write_text("changed\n")
    assert install_source.installed("xharness-plug").note == (
        f"the checkout at {source} has changes not committed at {commit[:12]}: CI installs the commit (push it)")


@pytest.mark.parametrize(("remote", "commit"), [
    (None, True),  # nowhere to fetch it from
    ("/srv/git/plug.git", True),  # a path on this machine again
    ("git@example.org", True),  # no path: nothing pip can fetch
    ("https://example.org/o/plug.git", False),  # nothing committed yet
])
def test_a_checkout_a_runner_cannot_fetch_stays_a_local_path(site: Path, tmp_path: Path, remote: str | None,
                                                             commit: bool) -> None:
    source = _checkout(site, tmp_path, remote, commit)
    found = install_source.installed("xharness-plug")
    assert (found.requirement, found.source, found.note) == (f"xharness-plug @ {source.as_uri()}", "directory", "")
    assert found.local_only.startswith(f"{source} is a path on the machine xharness was installed on")


# ------------------------------------------------------------------------------ a line the user gives
@pytest.mark.parametrize(("text", "source"), [
    ("xharness==1.2", "index"),
    ("xharness>=1.2,<2", "index"),
    ("xharness @ git+https://example.org/o/x.git@ab12", "vcs"),
    ("xharness @ git+ssh://git@example.org:2222/o/x.git@v1.2", "vcs"),
    ("xharness @ https://example.org/x-1.2-py3-none-any.whl", "archive"),
    ("xharness @ https://example.org:8443/builds/x-1.2.tar.gz", "archive"),
])
def test_a_given_line_is_kept_as_written_with_its_source(text: str, source: str) -> None:
    assert install_source.given(text, "xharness") == InstallLine(text, source)


def test_a_given_line_may_spell_the_name_with_underscores_or_dashes() -> None:
    assert install_source.given("xharness_plug==1.0", "xharness-plug").source == "index"
    assert install_source.given("Xharness-Plug==1.0", "xharness_plug").source == "index"
    with pytest.raises(ValueError) as caught:
        install_source.given("xharness-plugs==1.0", "xharness-plug")
    assert str(caught.value) == "it installs 'xharness-plugs', not 'xharness-plug'"


@pytest.mark.parametrize("url", [
    "file:///srv/builds/2024-01-01T10:00/xharness-1.2-py3-none-any.whl",
    "git+file:///srv/git/xharness.git@ab12",
    "/srv/builds/xharness-1.2-py3-none-any.whl",
])
def test_a_given_line_naming_a_path_here_is_refused(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        install_source.given(f"xharness @ {url}", "xharness")
    assert str(caught.value) == f"{url} is a path on this machine; a CI runner has no such path"
