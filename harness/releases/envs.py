"""One cached virtual environment per release of a runtime under test.

Two releases of PyTorch/XLA cannot share an interpreter (each pins its own ``torch``), nor can
two releases of JAX (the reference runtime rides on the one it imports), and the process that runs
a release's checks must import that release, so each (runtime, release) gets its own venv holding
the release and this project (an editable install, so the harness, its plugin and the suites run
inside it from the working tree). The project goes in with the release's pins in one pip command:
the project declares a JAX range of its own, and a resolver that sees both either keeps the pinned
release or says which pin the project excludes, where installing the project alone could quietly
replace the release with one of its own range. A build downloads gigabytes and takes
minutes, so it is done once and reused: the directory is complete only when its stamp file (the
pip freeze and what was asked for) exists, and a build runs under a lock so two processes never
build one environment at once.

The build happens in place rather than in a temporary directory renamed at the end: a venv is not
relocatable (pip writes the absolute interpreter path into every script it installs), so a renamed
one would carry broken ``bin/`` scripts. The stamp, written atomically and last, is the commit
point instead: a directory without it is the leftover of an interrupted build and is rebuilt.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness import settings
from harness.adapters.runtimes import RUNTIMES, UnknownRelease
from harness.releases import interpreters
from harness.releases.interpreters import Interpreter, InterpreterError
from harness.report.files import write_atomic

ENV_DIR_VARIABLE = "XHARNESS_ENV_DIR"
#: extra ``pip install`` arguments for every release environment (an index mirror, a proxy...)
PIP_ARGS_VARIABLE = "XHARNESS_PIP_ARGS"
STAMP = "xharness-env.json"
#: the harness goes in with the extra its suites need (hypothesis, pytest-xdist...)
EXTRA = "test"
PIP_TAIL_LINES = 25



class ReleaseInstallError(Exception):
    """A release could not be installed; names the release and shows the tail of pip's output."""

    def __init__(self, runtime: str, release: str, reason: str, output: str = "") -> None:
        self.runtime, self.release, self.reason, self.output = runtime, release, reason, output
        tail = "\n".join(output.strip().splitlines()[-PIP_TAIL_LINES:])
        message = f"cannot install {runtime} {release}: {reason}"
        super().__init__(f"{message}\n{tail}" if tail else message)


@dataclass(frozen=True)
class ReleaseEnv:
    runtime: str
    release: str
    path: Path
    built: bool  # False when an existing environment was reused
    seconds: float  # spent building (or checking, when reused)
    #: the interpreter, where it is not the venv's ``bin/python`` (the one running the harness)
    interpreter: Path | None = None

    @property
    def tag(self) -> str:
        """The interpreter that built it, as its name ends (``py313``)."""
        return self.path.name.rpartition("-")[2]

    @property
    def python(self) -> Path:
        return self.interpreter or self.path / "bin" / "python"

    def stamp(self) -> dict[str, object]:
        return json.loads((self.path / STAMP).read_text(encoding="utf-8"))


def env_root() -> Path:
    """``$XHARNESS_ENV_DIR``, else ``~/.cache/xharness/envs``."""
    configured = settings.raw(ENV_DIR_VARIABLE).strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache/xharness/envs"


def env_name(runtime: str, release: str, tag: str | None = None) -> str:
    """``torch_xla-2.9.0-py311``: the interpreter is part of the key (wheels are per Python);
    ``tag`` is the interpreter that built it (``py313``), by default the running one."""
    return f"{runtime}-{release}-{tag or interpreters.running().tag}"


def env_paths(runtime: str, release: str, root: Path | None = None) -> list[Path]:
    """Every environment directory of ``runtime`` ``release``, whatever interpreter built it,
    the running interpreter's first."""
    base = root or env_root()
    own = base / env_name(runtime, release)
    prefix = f"{runtime}-{release}-py"
    others = sorted(p for p in base.glob(f"{prefix}*")
                    if p.is_dir() and p.name[len(prefix):].isdigit() and p != own)
    return [own, *others] if own.is_dir() else others


def project_root() -> Path:
    """The checkout this package was imported from (installed editable, as the harness needs)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise ReleaseInstallError(
            "xharness", "(this checkout)", f"no pyproject.toml at {root}: release environments "
            "install the harness from its source tree, so install it editable (pip install -e .)"
        )
    return root


def project_fingerprint(root: Path) -> str:
    """What the release environment's copy of the project depends on: the checkout and its
    declared dependencies. The code itself is an editable install and needs no refresh."""
    try:
        meta = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        meta = {}
    key = json.dumps(
        [str(root), meta.get("dependencies", []), meta.get("optional-dependencies", {}).get(EXTRA),
         meta.get("entry-points", {})],
        sort_keys=True,
    )
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def requirements_for(runtime: str, release: str) -> list[str]:
    facts = RUNTIMES.get(runtime)
    if facts is None or facts.requirements is None:
        known = ", ".join(name for name, f in RUNTIMES.items() if f.requirements is not None)
        raise ReleaseInstallError(
            runtime, release, f"runtime {runtime!r} has no release environments (known: {known})"
        )
    try:
        return facts.requirements(release)
    except UnknownRelease:
        raise ReleaseInstallError(runtime, release, "not a release version") from None


def extra_pip_args() -> list[str]:
    return settings.raw(PIP_ARGS_VARIABLE).split()


def pip_environment() -> dict[str, str]:
    """The environment every pip run gets: never a prompt (a build or a listing must not hang)."""
    return {**os.environ, "PIP_NO_INPUT": "1"}


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``: released by the kernel if the holder dies."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], runtime: str, release: str, what: str, log: Path) -> str:
    """Run one build step; its whole output goes to ``log``, a failure raises naming the release."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, env=pip_environment()
        )
    except OSError as exc:
        raise ReleaseInstallError(runtime, release, f"{what}: {exc}") from None
    output = proc.stdout + proc.stderr
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(f"$ {' '.join(cmd)}\n{output}\n[exit {proc.returncode}]\n")
    if proc.returncode != 0:
        raise ReleaseInstallError(
            runtime, release, f"{what} exited with {proc.returncode} (full log: {log})", output
        )
    return output


def _complete(path: Path) -> dict[str, object] | None:
    stamp = path / STAMP
    if not stamp.is_file() or not (path / "bin" / "python").exists():
        return None
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def satisfies(stamp: dict[str, object], wanted: Sequence[str]) -> bool:
    """Whether a complete environment holds what ``wanted`` asks for: the same requirements, or
    every one a version requirement that its pip freeze meets (an environment built when the
    release's pins were spelled otherwise, ``torch==2.5.1`` for ``torch>=2.5,<=2.5.1``, holds
    the same release and is reused, not rebuilt). A file requirement (a wheel) is met only by
    itself: its environment is keyed by the file's hash anyway."""
    if stamp.get("requirements") == list(wanted):
        return True
    freeze = stamp.get("freeze")
    if not isinstance(freeze, list):
        return False
    held: dict[str, str] = {}
    for line in freeze:
        name, sep, version = str(line).partition("==")
        if sep:
            held[canonicalize_name(name)] = version.strip()
    for text in wanted:
        try:
            requirement = Requirement(text)
            version = Version(held[canonicalize_name(requirement.name)])
        except (InvalidRequirement, InvalidVersion, KeyError):
            return False
        if requirement.url or not requirement.specifier.contains(version, prereleases=True):
            return False
    return True


def remove_env(runtime: str, release: str, root: Path | None = None, tag: str | None = None) -> bool:
    """Delete the environment of ``runtime`` ``release`` built by the interpreter ``tag`` (by
    default the running one) under its lock (never half of one that another process is
    building); False when there was none."""
    base = root or env_root()
    name = env_name(runtime, release, tag)
    path = base / name
    if not path.exists():
        return False
    with _locked(base / f"{name}.lock"):
        if not path.exists():
            return False
        shutil.rmtree(path)
    return True


def _pool(pythons: Sequence[str] | None, runtime: str, release: str) -> list[Interpreter]:
    try:
        return interpreters.candidates(pythons)
    except InterpreterError as exc:
        raise ReleaseInstallError(runtime, release, str(exc)) from None


def ensure_env(
    runtime: str,
    release: str,
    *,
    root: Path | None = None,
    requirements: Sequence[str] | None = None,
    pip_args: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    pythons: Sequence[str] | None = None,
) -> ReleaseEnv:
    """The environment of ``runtime`` ``release``: reused when complete, else built with the
    first interpreter that the release fits (``harness.releases.interpreters``).

    ``requirements`` replaces the release's own pins (tests use it to make pip fail fast),
    ``pip_args`` defaults to ``$XHARNESS_PIP_ARGS``, and ``pythons`` (``--python``) names the
    interpreters to prefer, by default ``$XHARNESS_PYTHONS``. An existing environment is reused
    whichever interpreter built it, unless interpreters were named: then one of theirs, or the
    running one's, is. Raises :class:`ReleaseInstallError` (also when no interpreter fits)."""
    started = time.monotonic()
    say = progress or (lambda message: None)
    wanted = list(requirements) if requirements is not None else requirements_for(runtime, release)
    extra = list(pip_args) if pip_args is not None else extra_pip_args()
    base = root or env_root()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReleaseInstallError(runtime, release, f"cannot create {base}: {exc}") from None
    project = project_root()
    fingerprint = project_fingerprint(project)
    pool = _pool(pythons, runtime, release)
    existing = [base / env_name(runtime, release, i.tag) for i in pool]
    if not interpreters.configured(pythons):
        existing += [p for p in env_paths(runtime, release, base) if p not in existing]
    for path in existing:
        reused = _reuse(path, runtime, release, wanted, extra, project, fingerprint, say)
        if reused is not None:
            return dataclasses.replace(reused, seconds=time.monotonic() - started)
    try:
        interpreter = interpreters.choose(wanted, pool, f"{runtime} {release}", extra,
                                          env=pip_environment())
    except (InterpreterError, interpreters.PipTooOld) as exc:
        raise ReleaseInstallError(runtime, release, str(exc)) from None
    name = env_name(runtime, release, interpreter.tag)
    path = base / name
    with _locked(base / f"{name}.lock"):
        reused = _reuse_held(path, runtime, release, wanted, extra, project, fingerprint, say)
        if reused is not None:  # another process built it while this one chose
            return dataclasses.replace(reused, seconds=time.monotonic() - started)
        if path.exists():
            say(f"{runtime} {release}: removing the incomplete environment {path}")
            shutil.rmtree(path)
        say(f"{runtime} {release}: building {path} with {interpreter} "
            f"(pip install {' '.join(wanted)})")
        log = base / f"{name}.build.log"
        log.write_text("", encoding="utf-8")
        try:
            _run([str(interpreter.path), "-m", "venv", str(path)], runtime, release,
                 "python -m venv", log)
            python = str(path / "bin" / "python")
            # the pip a venv brings is the interpreter's bundled one (23.2.1 with Python
            # 3.11.7), older than the index listings and reports the harness reads: upgraded
            _run([python, "-m", "pip", "install", "-q", *extra, "--upgrade", "pip"], runtime,
                 release, "pip upgrade (the venv's bundled pip is older than the harness needs)",
                 log)
            # the release alone first, so that a release pip cannot find is named as such
            # (with the project in the same command, pip prepares the project before it looks
            # for the pins); then both together, so that one resolver sees them (module doc)
            _run([python, "-m", "pip", "install", *extra, *wanted], runtime, release,
                 f"pip install {' '.join(wanted)}", log)
            _install(python, wanted, project, extra, runtime, release, log)
            write_stamp(path, runtime, release, wanted, fingerprint, project, log)
        except ReleaseInstallError:
            shutil.rmtree(path, ignore_errors=True)  # gigabytes of a release that will not work
            raise
        shutil.copyfile(log, path / "xharness-build.log")
        log.unlink()
    seconds = time.monotonic() - started
    say(f"{runtime} {release}: built in {seconds:.0f} s")
    return ReleaseEnv(runtime, release, path, True, seconds)


def _reuse(path: Path, runtime: str, release: str, wanted: list[str], extra: list[str],
           project: Path, fingerprint: str, say: Callable[[str], None]) -> ReleaseEnv | None:
    """The complete environment at ``path`` if it holds ``wanted`` (the harness refreshed in it
    when the checkout or its dependencies changed), else None. Under the environment's lock."""
    if not path.is_dir():
        return None
    with _locked(path.parent / f"{path.name}.lock"):
        return _reuse_held(path, runtime, release, wanted, extra, project, fingerprint, say)


def _reuse_held(path: Path, runtime: str, release: str, wanted: list[str], extra: list[str],
                project: Path, fingerprint: str, say: Callable[[str], None]) -> ReleaseEnv | None:
    """:func:`_reuse` with the environment's lock already held by the caller."""
    stamp = _complete(path)
    if stamp is None or not satisfies(stamp, wanted):
        return None
    if stamp.get("project") != fingerprint:  # another checkout or new dependencies
        say(f"{runtime} {release}: refreshing the harness in {path}")
        log = path / "xharness-build.log"
        _install(str(path / "bin/python"), wanted, project, extra, runtime, release, log)
        write_stamp(path, runtime, release, wanted, fingerprint, project, log)
    return ReleaseEnv(runtime, release, path, False, 0.0)


def install_command(
    python: str, wanted: Sequence[str], project: Path, extra: Sequence[str] = ()
) -> list[str]:
    """One ``pip install`` of the release's pins and the harness together (see the module doc):
    a refresh repeats the pins too, so a changed project range cannot move the release."""
    return [python, "-m", "pip", "install", *extra, *wanted, "-e", f"{project}[{EXTRA}]"]


def _install(
    python: str,
    wanted: Sequence[str],
    project: Path,
    extra: Sequence[str],
    runtime: str,
    release: str,
    log: Path,
) -> None:
    """Run :func:`install_command`; a failure names the pins (pip's tail says which one)."""
    _run(install_command(python, wanted, project, extra), runtime, release,
         f"pip install {' '.join(wanted)} with the harness", log)


def write_stamp(
    path: Path,
    runtime: str,
    release: str,
    wanted: list[str],
    fingerprint: str,
    project: Path,
    log: Path,
) -> None:
    """Commit ``path`` as complete: the stamp (pip freeze and what was asked for), written
    atomically, last. A process killed while writing it leaves the previous stamp or none."""
    freeze = _run([str(path / "bin/python"), "-m", "pip", "freeze", "--all"], runtime, release,
                  "pip freeze", log)
    stamp = {
        "runtime": runtime,
        "release": release,
        "requirements": wanted,
        "project": fingerprint,
        "project_root": str(project),
        "python": _python_version(path),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "freeze": freeze.splitlines(),
    }
    write_atomic(path / STAMP, (json.dumps(stamp, indent=2) + "\n").encode())


def _python_version(path: Path) -> str:
    """The version of the interpreter a venv was made with (its ``pyvenv.cfg``)."""
    try:
        for line in (path / "pyvenv.cfg").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version_info", "version"):
                return value.strip()
    except OSError:
        pass
    return ""


def find_env(runtime: str, release: str, root: Path | None = None) -> ReleaseEnv | None:
    """The complete environment of ``runtime`` ``release`` if one exists, without building:
    the running interpreter's, else one another interpreter built."""
    for path in env_paths(runtime, release, root):
        if _complete(path) is not None:
            return ReleaseEnv(runtime, release, path, False, 0.0)
    return None
