"""How a distribution was installed here, as the pip requirement that installs it again.

A workflow ``xharness init`` writes must install the same xharness the maintainer ran, and pip
records where each distribution came from in its ``direct_url.json`` (PEP 610): a version control
URL at a commit, a local directory (editable or not), or an archive (a wheel or an sdist, local or
remote). A distribution without the file came from an index, and its version pins it.

The reading is pure (``requirement``), the lookup of the installed file a thin shell
(``installed``), so that every form of the file is tested without installing anything.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from typing import Any
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class InstallLine:
    """A pip requirement (``xharness==1.2``, ``xharness @ git+https://...@<commit>``) and, when
    it names something only this machine has, why a CI runner cannot use it as it is."""

    requirement: str
    source: str  # "index", "vcs", "directory", "archive"
    local_only: str = ""  # "" when any machine can install it
    note: str = ""  # what to know about a line a runner can use (a checkout's uncommitted changes)


def requirement(name: str, version: str, direct_url: dict[str, Any] | None) -> InstallLine:
    """The requirement that reinstalls ``name`` ``version`` from where ``direct_url`` (the parsed
    ``direct_url.json``, None when there is none) says it came from."""
    if not direct_url or "url" not in direct_url:
        return InstallLine(f"{name}=={version}", "index")
    url = str(direct_url["url"])
    subdirectory = direct_url.get("subdirectory")
    fragment = f"#subdirectory={subdirectory}" if subdirectory else ""
    parsed = urlparse(url)
    local = parsed.scheme == "file"
    where = unquote(parsed.path) if local else url
    why = (f"{where} is a path on the machine xharness was installed on; a CI runner has no such "
           "path: publish the build or install from a git URL") if local else ""
    if "vcs_info" in direct_url:
        vcs = direct_url["vcs_info"]
        at = vcs.get("commit_id") or vcs.get("requested_revision") or ""
        return InstallLine(f"{name} @ {vcs.get('vcs', 'git')}+{url}{'@' + at if at else ''}{fragment}", "vcs", why)
    if "dir_info" in direct_url:
        return InstallLine(f"{name} @ {url}{fragment}", "directory", why)
    return InstallLine(f"{name} @ {url}{fragment}", "archive", why)


def installed(name: str) -> InstallLine:
    """The requirement for the installed distribution ``name`` (its ``direct_url.json``). A
    source checkout's own ``*.egg-info`` may sit on the path before the installed metadata (when
    the command runs from the checkout): the one pip recorded a source in is preferred."""
    found_all = list(metadata.distributions(name=name))
    if not found_all:
        raise metadata.PackageNotFoundError(name)
    dist = next((d for d in found_all if d.read_text("direct_url.json")), found_all[0])
    text = dist.read_text("direct_url.json")
    try:
        found = json.loads(text) if text else None
    except json.JSONDecodeError:
        found = None  # a file pip did not write: the version is all that is known
    line = requirement(dist.metadata["Name"] or name, dist.version, found if isinstance(found, dict) else None)
    if line.source == "directory" and line.local_only and isinstance(found, dict):
        return _checkout(line, unquote(urlparse(str(found["url"])).path))
    return line


def _checkout(line: InstallLine, path: str) -> InstallLine:
    """A local directory that is a git checkout with a remote: the remote at the checkout's
    commit, which a CI runner can install (when that commit is pushed)."""
    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", path, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    remote, commit = _fetchable(git("remote", "get-url", "origin")), git("rev-parse", "HEAD")
    if not remote or not commit or not remote.startswith(("https://", "ssh://")):
        return line
    name = line.requirement.split(" @ ")[0]
    dirty = git("status", "--porcelain")
    return InstallLine(f"{name} @ git+{remote}@{commit}", "vcs",
                       note=f"the checkout at {path} has changes not committed at {commit[:12]}: CI installs "
                       "the commit (push it)" if dirty else f"CI installs commit {commit[:12]} of {remote} (push it)")


def _fetchable(remote: str) -> str:
    """A remote as pip takes it after ``git+``: the scp form ``git@host:owner/repo`` (or
    ``git@host:/srv/repo``) is not a URL to pip, its ``ssh://git@host/owner/repo`` spelling is."""
    scp = re.fullmatch(r"([\w.-]+@[\w.-]+):/?(.+)", remote)
    return f"ssh://{scp.group(1)}/{scp.group(2)}" if scp else remote


def given(text: str, name: str) -> InstallLine:
    """The install line a user gives (``init --install``), checked as pip will read it: a
    requirement of ``name`` that a CI runner can fetch. Raises ``ValueError`` saying why not."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        parsed = Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"not a pip requirement: {exc}") from None
    if parsed.name.lower().replace("_", "-") != name.lower().replace("_", "-"):
        raise ValueError(f"it installs {parsed.name!r}, not {name!r}")
    url = parsed.url or ""
    scheme = url.split(":", 1)[0] if ":" in url else ""
    if url and (not scheme or scheme == "file" or scheme.endswith("+file")):
        raise ValueError(f"{url} is a path on this machine; a CI runner has no such path")
    return InstallLine(text, "vcs" if "+" in scheme else ("archive" if url else "index"))
