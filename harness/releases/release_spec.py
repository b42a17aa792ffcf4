"""What a command line names a release of a runtime under test by, parsed once for every command.

``releases``, ``run --release``, ``repro --release`` and the ends of ``bisect`` all take a
release, and a maintainer's question is often about a build that is on no index yet, so a release
is one of:

``2.9.0``          a release on the package index, in its own cached environment;
``path/x.whl``     a wheel file (a torch_xla wheel gets the torch of its minor from the index, as
                   an index release does, since torch_xla declares no torch requirement);
``path/dir/``      a directory of wheels, installed together (torch_xla with its torch);
``installed``      the runtime this interpreter imports: no environment is built.

The environment of a wheel is keyed by the sha256 of the file(s), so a rebuilt wheel (same name,
new bytes) gets a fresh environment instead of the stale one. Every spec has a version that orders
it among the index's releases (the wheel's own, or the installed distribution's).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from harness.adapters.runtimes import RUNTIMES, torch_for
from harness.errors import UsageError
from harness.releases import envs

INDEX, WHEEL, WHEELS_DIR, INSTALLED = "index", "wheel", "wheels-dir", "installed"
KINDS = (INDEX, WHEEL, WHEELS_DIR, INSTALLED)
#: the word that names the interpreter's own runtime
INSTALLED_WORD = "installed"
#: hex digits of a wheel's sha256 in its environment's name
DIGEST_CHARS = 12
_CHUNK = 1 << 20


class ReleaseSpecError(ValueError):
    """A release that names nothing usable: a missing file, a wheel of another project..."""


@dataclass(frozen=True)
class ReleaseSpec:
    """One release of ``runtime`` as a command line named it (see the module doc)."""

    runtime: str
    kind: str
    text: str  # what names it again on a command line: the version, an absolute path, "installed"
    version: Version  # what orders it among releases
    digest: str = ""  # sha256 of the wheel file(s), short; "" for the others
    files: tuple[Path, ...] = ()  # the wheels, the runtime's first

    @property
    def key(self) -> str:
        """The release part of its environment's name (``envs.env_name``): the version for an
        index release (the names environments always had), ``wheel-<digest>`` for wheels."""
        if self.kind == INDEX:
            return self.text
        if self.kind == INSTALLED:
            return INSTALLED_WORD
        return f"wheel-{self.digest}"

    @property
    def env_name(self) -> str | None:
        """``torch_xla-2.9.0-py311``, ``torch_xla-wheel-1a2b3c4d5e6f-py311``; None when no
        environment is built (``installed``)."""
        return None if self.kind == INSTALLED else envs.env_name(self.runtime, self.key)

    @property
    def label(self) -> str:
        """How tables and messages show it: ``2.9.0``, ``2.9.0 wheel 1a2b3c4d5e6f``,
        ``2.9.0 installed``."""
        if self.kind == INDEX:
            return self.text
        if self.kind == INSTALLED:
            return f"{self.version} installed"
        what = "wheel" if self.kind == WHEEL else "wheels"
        return f"{self.version} {what} {self.digest}"

    def requirements(self) -> list[str]:
        """What ``pip install`` gets for its environment (none for ``installed``)."""
        if self.kind == INDEX:
            return envs.requirements_for(self.runtime, self.text)
        if self.kind == INSTALLED:
            return []
        wanted = [str(f) for f in self.files]
        names = {canonicalize_name(parse_wheel_filename(f.name)[0]) for f in self.files}
        if self.runtime == "torch_xla" and "torch" not in names:
            wanted.append(torch_for(str(self.version)))
        return wanted


def parse_argument(runtime: str, text: str, flag: str = "") -> ReleaseSpec:
    """A release as a command line names it: :func:`parse`, with a usage error (naming ``flag``
    when given) where it names nothing usable. Every command parses its releases through this."""
    try:
        return parse(runtime, text)
    except ReleaseSpecError as exc:
        raise UsageError(f"{flag}: {exc}" if flag else str(exc)) from None


def parse(runtime: str, text: str) -> ReleaseSpec:
    """The spec ``text`` names for ``runtime``; raises :class:`ReleaseSpecError` saying why not."""
    text = text.strip()
    if text == INSTALLED_WORD:
        return _installed(runtime)
    try:  # a version is a version (a directory named like one is ./2.9.0)
        return ReleaseSpec(runtime, INDEX, text, Version(text))
    except InvalidVersion:
        pass
    path = Path(text).expanduser()
    if path.is_dir():
        wheels = sorted(p.resolve() for p in path.glob("*.whl") if p.is_file())
        if not wheels:
            raise ReleaseSpecError(f"no wheel (*.whl) in the directory {text}")
        return _wheels(runtime, WHEELS_DIR, path.resolve(), wheels)
    if path.is_file():
        return _wheels(runtime, WHEEL, path.resolve(), [path.resolve()])
    if text.endswith(".whl") or "/" in text:
        raise ReleaseSpecError(f"no such wheel file or directory: {text}")
    raise ReleaseSpecError(
        f"not a release version: {text!r} (like {RUNTIMES[runtime].example if runtime in RUNTIMES else '1.0'}), nor a wheel file, a "
        f"directory of wheels or {INSTALLED_WORD!r}"
    )


def distribution(runtime: str) -> str:
    """The distribution that is ``runtime`` on the package index (its own name when it has none)."""
    facts = RUNTIMES.get(runtime)
    return facts.distribution if facts is not None and facts.distribution else runtime


def _installed(runtime: str) -> ReleaseSpec:
    dist = distribution(runtime)
    try:
        version = Version(importlib.metadata.version(dist))
    except (importlib.metadata.PackageNotFoundError, InvalidVersion):
        raise ReleaseSpecError(
            f"{INSTALLED_WORD!r} names the {runtime} of {sys.executable}, and it has none "
            f"({dist} is not installed there)"
        ) from None
    return ReleaseSpec(runtime, INSTALLED, INSTALLED_WORD, version)


def _wheels(runtime: str, kind: str, where: Path, wheels: list[Path]) -> ReleaseSpec:
    """A wheel or a directory of them: the runtime's wheel gives the version, the bytes of all
    of them the digest."""
    dist = canonicalize_name(distribution(runtime))
    own: list[tuple[Path, Version]] = []
    for wheel in wheels:
        try:
            name, version, _, _ = parse_wheel_filename(wheel.name)
        except InvalidWheelFilename as exc:
            raise ReleaseSpecError(f"not a wheel file name: {wheel} ({exc})") from None
        if name == dist:
            own.append((wheel, version))
    if len(own) != 1:
        found = "no" if not own else f"{len(own)}"
        raise ReleaseSpecError(f"{where} holds {found} {dist} wheel(s); a release of {runtime} "
                               "is exactly one of them (with the wheels it needs)")
    runtime_wheel, version = own[0]
    ordered = (runtime_wheel, *(w for w in wheels if w != runtime_wheel))
    return ReleaseSpec(runtime, kind, str(where), version, wheels_digest(ordered), ordered)


def wheels_digest(wheels: tuple[Path, ...] | list[Path]) -> str:
    """sha256 over the wheels' names and bytes, short: the same files give the same key, any
    rebuilt one a new key."""
    total = hashlib.sha256()
    for wheel in sorted(wheels, key=lambda p: p.name):
        digest = hashlib.sha256()
        with open(wheel, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
        total.update(f"{wheel.name}\0{digest.hexdigest()}\n".encode())
    return total.hexdigest()[:DIGEST_CHARS]


def ensure(spec: ReleaseSpec, progress: Callable[[str], None] | None = None,
           root: Path | None = None) -> envs.ReleaseEnv:
    """The environment that runs ``spec``: built or reused (``envs.ensure_env``), or for
    ``installed`` this interpreter (which must import the runtime). Raises
    :class:`envs.ReleaseInstallError`."""
    if spec.kind == INSTALLED:
        import importlib.util

        if importlib.util.find_spec(spec.runtime) is None:
            raise envs.ReleaseInstallError(spec.runtime, spec.label,
                                           f"{spec.runtime} is not importable by {sys.executable}")
        return envs.ReleaseEnv(spec.runtime, spec.label, Path(sys.prefix), False, 0.0,
                               interpreter=Path(sys.executable))
    return envs.ensure_env(spec.runtime, spec.key, root=root, requirements=spec.requirements(),
                           progress=progress)
