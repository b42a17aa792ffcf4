"""Which Python builds a release's environment.

A release states the interpreters it supports: JAX from 0.11 says ``Requires-Python: >=3.12`` and
ships jaxlib wheels for CPython 3.12 and newer only, so an environment of JAX 0.12 cannot be built
with the Python 3.11 that runs the harness. Guessing from the version number would be wrong the
day a release changes its floor, so the release is asked: pip resolves the release's pins as if
for each interpreter's version (``--dry-run --python-version``, wheels only, through the same
index configuration every build uses) and reports the ``Requires-Python`` of what it would
install. An interpreter fits when pip finds wheels for it and its version is inside every
``Requires-Python``. This needs nothing of the candidate interpreter but that it runs and can make
a venv; pip's side needs ``--dry-run`` and ``--report`` (pip 22.2), checked up front.

Candidates, in the order they are preferred: those given explicitly (``--python PATH`` or
``$XHARNESS_PYTHONS``, paths separated by ``os.pathsep``), the interpreter running the harness, then
``python3.11`` ... ``python3.14`` on ``PATH``. Each is run once to learn its version (a pyenv shim
for a version that is not selected is on ``PATH`` but does not run, and is left out). The first
that fits builds the environment, whose name carries it (``jax-0.12.0.1-py313``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from harness.errors import UsageError

PYTHONS_VARIABLE = "XHARNESS_PYTHONS"
#: the minor versions looked for on PATH as ``python3.N``, and asked about when none fits
SEARCHED_MINORS = (11, 12, 13, 14)
#: the oldest pip whose ``install`` has ``--dry-run`` and ``--report``
PIP_FLOOR = Version("22.2")
PROBE_SECONDS = 20.0
PIP_SECONDS = 300.0
#: what a candidate must import to build a venv with pip in it (Debian splits ``ensurepip`` off
#: into python3.N-venv)
_PROBE = (
    "import json, sys, venv, ensurepip; "
    "print(json.dumps({'version': list(sys.version_info[:3]), 'executable': sys.executable, "
    "'implementation': sys.implementation.name}))"
)
#: how to get an interpreter where none fits, for every message that says so
HOW_TO_PROVIDE = (
    f"give one with --python PATH or ${PYTHONS_VARIABLE} (paths separated by '{os.pathsep}'), put "
    "python3.N on PATH, or make one with `bash ci/python.sh 3.N` (it prints the path)"
)


class InterpreterError(Exception):
    """No interpreter fits a release, or one named explicitly does not run: says which one is
    needed and how to provide it."""


class PipTooOld(Exception):
    """The pip that asks the index lacks what the harness uses; names the version needed."""


@dataclass(frozen=True)
class Interpreter:
    """One Python that can build environments, as found (``path`` is not resolved: a venv's
    ``bin/python`` stays that venv's)."""

    path: Path
    version: tuple[int, int, int]

    @property
    def tag(self) -> str:
        """``py313``: the part of an environment's name that says which interpreter built it."""
        return f"py{self.version[0]}{self.version[1]}"

    @property
    def minor(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def dotted(self) -> str:
        return ".".join(map(str, self.version))

    def __str__(self) -> str:
        return f"Python {self.dotted} ({self.path})"


def running() -> Interpreter:
    """The interpreter running the harness."""
    major, minor, micro = sys.version_info[:3]
    return Interpreter(Path(sys.executable), (major, minor, micro))


@functools.lru_cache(maxsize=64)
def probe(path: str) -> Interpreter | None:
    """Run ``path`` to learn its version; None when it does not run as a CPython that can make a
    venv with pip (a missing file, a pyenv shim of an unselected version, a Debian Python without
    its venv package)."""
    try:
        proc = subprocess.run([path, "-c", _PROBE], capture_output=True, text=True,
                              timeout=PROBE_SECONDS)
        data = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(data, dict) or data.get("implementation") != "cpython":
        return None
    version = data.get("version")
    if not (isinstance(version, list) and len(version) == 3):
        return None
    return Interpreter(Path(path), (int(version[0]), int(version[1]), int(version[2])))


#: the interpreters a command's ``--python`` named (:func:`prefer`), for every build it makes
_preferred: list[str] = []


def prefer(paths: Sequence[str]) -> list[Interpreter]:
    """Make ``paths`` (a command's ``--python`` values) the explicit interpreters of this
    process's builds, ahead of ``$XHARNESS_PYTHONS``; each is checked now, before anything runs
    (:class:`InterpreterError` naming the one that does not)."""
    checked = check_configured(paths)
    _preferred[:] = [str(p) for p in paths]
    return checked


def add_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--python`` option of every command that builds release environments."""
    parser.add_argument(
        "--python", action="append", default=None, metavar="PATH",
        help="an interpreter to build release environments with where the release fits it "
        f"(repeatable; default ${PYTHONS_VARIABLE}, then this one, then python3.N on PATH)",
    )


def apply_argument(values: Sequence[str] | None) -> None:
    """Before a command that builds release environments starts anything: check the
    interpreters it was given (``--python``, else ``$XHARNESS_PYTHONS``) and prefer them for its
    builds, and check that the harness's own pip can ask the index for them. A usage error names
    the interpreter that does not run, or the pip to upgrade."""
    try:
        if values:
            prefer(values)
        else:
            check_configured(configured())
        check_pip()
    except (InterpreterError, PipTooOld) as exc:
        raise UsageError(str(exc)) from None


def configured(explicit: Sequence[str] | None = None,
               environ: Mapping[str, str] | None = None) -> list[str]:
    """The interpreters named explicitly: ``explicit``, else ``--python`` values
    (:func:`prefer`), else ``$XHARNESS_PYTHONS``."""
    if explicit:
        return [str(p) for p in explicit]
    if _preferred:
        return list(_preferred)
    text = (environ if environ is not None else os.environ).get(PYTHONS_VARIABLE, "")
    return [part.strip() for part in text.split(os.pathsep) if part.strip()]


def check_configured(paths: Iterable[str]) -> list[Interpreter]:
    """Each explicitly named interpreter, probed; one that does not run is an error naming it
    (a typo in a path must not silently fall back to another Python)."""
    found = []
    for path in paths:
        interpreter = probe(str(Path(path).expanduser()))
        if interpreter is None:
            raise InterpreterError(
                f"{path} (from --python or ${PYTHONS_VARIABLE}) does not run as a CPython that can "
                "make a virtual environment: it must exist, run, and import venv and ensurepip "
                "(on Debian: apt-get install python3.N-venv)"
            )
        found.append(interpreter)
    return found


def on_path(minors: Iterable[int] = SEARCHED_MINORS) -> list[Interpreter]:
    """``python3.N`` on ``PATH`` for each searched minor, those that run."""
    found = []
    for minor in minors:
        where = shutil.which(f"python3.{minor}")
        interpreter = probe(where) if where else None
        if interpreter is not None and interpreter.version[:2] == (3, minor):
            found.append(interpreter)
    return found


def candidates(explicit: Sequence[str] | None = None) -> list[Interpreter]:
    """Every interpreter that could build an environment, most preferred first, one per minor
    version (the first found of a minor wins): explicit ones, the running one, then ``PATH``."""
    ordered = [*check_configured(configured(explicit)), running(), *on_path()]
    seen: set[tuple[int, int]] = set()
    chosen = []
    for interpreter in ordered:
        if interpreter.version[:2] not in seen:
            seen.add(interpreter.version[:2])
            chosen.append(interpreter)
    return chosen


# ------------------------------------------------------------------------------ pip's side
def pip_version(python: str) -> Version | None:
    try:
        proc = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True,
                              timeout=PROBE_SECONDS)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = proc.stdout.split()
    if proc.returncode != 0 or len(words) < 2:
        return None
    try:
        return Version(words[1])
    except ValueError:
        return None


def check_pip(python: str | None = None) -> Version:
    """The pip of ``python`` (default: this interpreter's) can resolve a release for another
    interpreter (``--dry-run --report``); raises :class:`PipTooOld` naming what to do."""
    python = python or sys.executable
    version = pip_version(python)
    if version is None:
        raise PipTooOld(f"{python} has no working pip (python -m pip --version failed): the "
                        "harness asks the package index through it")
    if version < PIP_FLOOR:
        raise PipTooOld(
            f"the pip of {python} is {version}; choosing an interpreter for a release needs pip "
            f">= {PIP_FLOOR} (install --dry-run --report): {python} -m pip install -U pip"
        )
    return version


@dataclass(frozen=True)
class Fit:
    """What pip said of a release for one interpreter version."""

    version: str  # the interpreter version asked about, ``3.13.0``
    resolved: bool  # pip found wheels of every pin for that version
    requires_python: tuple[tuple[str, str], ...] = ()  # (distribution, Requires-Python)
    reason: str = ""  # pip's last line when it did not resolve

    @property
    def ok(self) -> bool:
        return self.resolved and all(_inside(self.version, spec) for _, spec in self.requires_python)

    def floor(self) -> str:
        """The Requires-Python that the release states, joined over its distributions."""
        specs = sorted({spec for _, spec in self.requires_python if spec})
        return ",".join(specs)

    def why_not(self) -> str:
        if not self.resolved:
            return f"pip finds no wheels of it for Python {self.version}" + (
                f" ({self.reason})" if self.reason else "")
        outside = [f"{name} needs Python {spec}" for name, spec in self.requires_python
                   if not _inside(self.version, spec)]
        return "; ".join(outside)


def _inside(version: str, spec: str) -> bool:
    try:
        return SpecifierSet(spec or "").contains(version, prereleases=True)
    except InvalidSpecifier:
        return True  # pip installs such a release anyway; do not refuse what pip would take


def ask(requirements: Sequence[str], version: str, pip_args: Sequence[str] = (),
        python: str | None = None, env: Mapping[str, str] | None = None) -> Fit:
    """Resolve ``requirements`` (no dependencies, wheels only) as pip would for Python
    ``version`` on this platform, without installing anything, and read the ``Requires-Python``
    of each distribution it would take. ``--ignore-requires-python`` lets pip report a release
    whose floor excludes ``version``, so the floor itself is read from the index's metadata."""
    with tempfile.TemporaryDirectory(prefix="xharness-fit-") as scratch:
        report = Path(scratch) / "report.json"
        cmd = [python or sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
               "--no-deps", "--ignore-requires-python", "--only-binary=:all:",
               "--python-version", version, "--target", str(Path(scratch) / "target"),
               "--report", str(report), *pip_args, *requirements]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_SECONDS,
                                  env=dict(env) if env is not None else None)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Fit(version, False, (), f"{' '.join(cmd[:4])}...: {exc}")
        if proc.returncode != 0 or not report.is_file():
            lines = [line for line in (proc.stdout + proc.stderr).splitlines()
                     if line.strip() and "is ignored: it is neither" not in line]
            return Fit(version, False, (), lines[-1].strip() if lines else f"pip exited {proc.returncode}")
        try:
            installs = json.loads(report.read_text(encoding="utf-8")).get("install", [])
        except ValueError:
            return Fit(version, False, (), "pip wrote no readable report")
    floors = tuple(
        (str(item.get("metadata", {}).get("name", "?")),
         str(item.get("metadata", {}).get("requires_python") or ""))
        for item in installs
    )
    return Fit(version, True, floors)


def choose(requirements: Sequence[str], pool: Sequence[Interpreter], what: str,
           pip_args: Sequence[str] = (), env: Mapping[str, str] | None = None) -> Interpreter:
    """The first interpreter of ``pool`` that ``requirements`` fit. When none does but the
    release exists for some Python, :class:`InterpreterError` names the Python it needs (its
    ``Requires-Python`` and the versions pip finds wheels for) and how to provide one. When pip
    finds the release for no Python at all, the first of ``pool`` is returned: the build then
    fails with pip's own words about the missing release, not with a word about interpreters."""
    check_pip()
    tried: list[tuple[Interpreter, Fit]] = []
    for interpreter in pool:
        fit = ask(requirements, interpreter.dotted, pip_args, env=env)
        if fit.ok:
            return interpreter
        tried.append((interpreter, fit))
    held = {i.version[:2] for i in pool}
    others = [ask(requirements, f"3.{m}", pip_args, env=env)
              for m in SEARCHED_MINORS if (3, m) not in held]
    if not any(f.resolved for _, f in tried) and not any(f.resolved for f in others):
        return pool[0]
    fitting = [f.version for f in others if f.ok]
    floor = next((f.floor() for _, f in tried if f.floor()), "") or next(
        (f.floor() for f in others if f.floor()), "")
    lines = [f"no interpreter here fits {what}"
             + (f" (Requires-Python {floor} on the index)" if floor else "")]
    lines += [f"  {i}: {f.why_not()}" for i, f in tried]
    wanted = f"Python {', '.join(fitting)}" if fitting else "another Python"
    lines.append(f"  it needs {wanted}: {HOW_TO_PROVIDE}")
    raise InterpreterError("\n".join(lines))
