"""JAX's persistent compilation cache, shared by the cells and processes of a run and across runs.

Every cell process (and every ``xharness repro`` child) compiles the same small XLA programs again:
the suites are derandomized, so a run compiles exactly the programs the previous run compiled.
With the cache on, a process loads those executables from disk instead of compiling them.

Where: ``--compile-cache DIR`` (``xharness run`` and ``xharness repro``), else
``$XHARNESS_COMPILE_CACHE``, else ``$XDG_CACHE_HOME/xharness/jax`` (``~/.cache/xharness/jax``).
``off`` (or ``0``, ``none``, ``false``) turns it off. A directory given explicitly that cannot be
used is a usage error; the default directory that cannot be used is reported once and the run goes
on without a cache (nothing is lost but time).

Safety with concurrent writers: JAX's own file cache, without a size limit, writes an entry in
place, so a process reading it at the same moment (another cell, another rank, a killed writer's
leftover) can see a truncated executable. :func:`install` makes every write go to a private
temporary file first and renames it into place (``os.replace`` is atomic on one file system), so
a reader sees a whole entry or none. An entry that still cannot be read (a corrupt file) is
JAX's documented case: it warns and compiles, and the result of the test is the same. JAX writes
from process 0 only, while each rank's key names its own devices; :func:`install` has every rank
write, or the second rank of a two-process cell would compile every program in every run.

Bytecode: a cell starts a fresh Python that imports the harness, JAX and every test module; under
``PYTHONDONTWRITEBYTECODE`` (set by many containers to keep ``__pycache__`` out of source trees)
each of those processes compiles every module from source again, and pytest rewrites every test
module's asserts again: 3 to 4 s per process on this kind of machine. With the cache on, the
harness' child processes write bytecode under ``~/.cache/xharness/pycache``
(``PYTHONPYCACHEPREFIX``) instead: the source tree stays clean, as that variable asks, and the
next process reads what the first compiled. A ``PYTHONPYCACHEPREFIX`` of the user's own is kept.

This module does not import JAX; :func:`install` does, in the process that uses the cache.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import settings
from harness.errors import UsageError

ENV = "XHARNESS_COMPILE_CACHE"
#: trim the cache to this many megabytes at the end of a run (oldest entries first)
MAX_MB_ENV = "XHARNESS_COMPILE_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512
OFF = ("off", "0", "none", "false", "no")
#: the JAX options a process using the cache gets (every compile is worth keeping: the programs
#: here are small and compile in milliseconds, under JAX's default one-second threshold)
JAX_ENV = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
           "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")
_ENTRY_SUFFIX = "-cache"
_TMP_PREFIX = ".xharness-tmp-"


@dataclass(frozen=True)
class CacheChoice:
    """The cache a run uses: a directory, or None (off); ``note`` says why it is off or where."""

    path: Path | None
    note: str

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` with the cache's variables set (or removed, when the cache is off)."""
        env = {k: v for k, v in base.items() if k not in JAX_ENV}
        if self.path is None:
            env[ENV] = "off"
            return env
        env[ENV] = str(self.path)
        env["JAX_COMPILATION_CACHE_DIR"] = str(self.path)
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
        return _with_bytecode_cache(env)


def pycache_dir() -> Path:
    return default_dir().parent / "pycache"


def _with_bytecode_cache(env: dict[str, str]) -> dict[str, str]:
    """``env`` with bytecode written under :func:`pycache_dir` when it says not to write it into
    the source tree (``PYTHONDONTWRITEBYTECODE``) and names no prefix of its own."""
    if not env.get("PYTHONDONTWRITEBYTECODE") or env.get("PYTHONPYCACHEPREFIX"):
        return env
    where = pycache_dir()
    if _unusable(where):
        return env  # bytecode is only ever an optimisation: compile from source as asked
    env = dict(env)
    del env["PYTHONDONTWRITEBYTECODE"]
    env["PYTHONPYCACHEPREFIX"] = str(where)
    return env


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "xharness" / "jax"


def choose(option: str | None = None, environ: dict[str, str] | os._Environ[str] = os.environ) -> CacheChoice:
    """The cache for this run: ``option`` (``--compile-cache``), else ``$XHARNESS_COMPILE_CACHE``,
    else the default directory. Raises :class:`UsageError` for an explicit directory that cannot
    be used; an unusable default directory turns the cache off with a note."""
    raw, source = option, "--compile-cache"
    if raw is None:
        raw, source = settings.raw(ENV, environ) or None, ENV
    if raw is not None and raw.strip().lower() in OFF:
        return CacheChoice(None, f"compile cache off ({source}={raw})")
    if raw is not None and raw.strip():
        path = Path(raw).expanduser()
        problem = _unusable(path)
        if problem:
            raise UsageError(f"{source}: compile cache directory {path} cannot be used: {problem} "
                             f"(give another directory, or 'off')")
        return CacheChoice(path.resolve(), f"compile cache {path.resolve()}")
    path = default_dir()
    problem = _unusable(path)
    if problem:
        return CacheChoice(None, f"compile cache off: {path} cannot be used: {problem} "
                                 f"(set {ENV}=DIR to use another directory)")
    return CacheChoice(path, f"compile cache {path}")


def _unusable(path: Path) -> str:
    """Why ``path`` cannot hold the cache ("" when it can): created if missing, then written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return "it exists and is not a directory"
    except OSError as exc:
        return exc.strerror or str(exc)
    if not path.is_dir():
        return "it is not a directory"
    try:
        fd, probe = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"not writable ({exc.strerror or exc})"
    return ""


def trim(path: Path, max_mb: float | None = None) -> int:
    """Keep the cache under ``max_mb`` (``$XHARNESS_COMPILE_CACHE_MAX_MB``, default 512),
    removing the oldest entries first, and drop temporary files a killed writer left behind.
    Returns the number of files removed. Never raises: the cache is only ever an optimisation."""
    if max_mb is None:
        try:
            max_mb = float(settings.read(MAX_MB_ENV) or DEFAULT_MAX_MB)
        except ValueError:
            max_mb = DEFAULT_MAX_MB
    removed = 0
    entries = []
    now = time.time()
    try:
        listing = list(os.scandir(path))
    except OSError:
        return 0
    for entry in listing:
        try:
            stat = entry.stat()
        except OSError:
            continue
        if entry.name.startswith(_TMP_PREFIX):
            if now - stat.st_mtime > 3600:
                removed += _remove(entry.path)
        elif entry.name.endswith(_ENTRY_SUFFIX):
            entries.append((stat.st_mtime, stat.st_size, entry.path))
    total = sum(size for _, size, _ in entries)
    limit = max_mb * 1024 * 1024
    for _, size, name in sorted(entries):
        if total <= limit:
            break
        removed += _remove(name)
        total -= size
    return removed


def _remove(name: str) -> int:
    try:
        os.unlink(name)
        return 1
    except OSError:
        return 0


_installed = False


def install() -> bool:
    """In a process that compiles: make JAX's file cache write entries atomically. Returns whether
    the atomic writer is in place (False leaves JAX's own writer, e.g. with a size limit set, which
    takes a file lock, or on a JAX whose cache internals differ)."""
    global _installed
    if _installed:
        return True
    try:
        from jax._src import compilation_cache as cc
        from jax._src import lru_cache
    except ImportError:
        return False
    original = getattr(cc, "get_file_cache", None)
    base = getattr(lru_cache, "LRUCache", None)
    if original is None or base is None:
        return False

    class AtomicFileCache(base):  # type: ignore[misc, valid-type]
        """JAX's file cache with write-to-temporary-then-rename puts."""

        def put(self, key: str, value: bytes) -> None:
            if not key:
                raise ValueError("key cannot be empty")
            final = Path(str(self.path)) / f"{key}{_ENTRY_SUFFIX}"
            if final.exists():
                return
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=final.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(value)
                os.replace(tmp, final)
            except BaseException:
                _remove(tmp)
                raise

    def get_file_cache(path: str):  # type: ignore[no-untyped-def]
        found = original(path)
        if found is None:
            return None
        cache, where = found
        # only the plain local cache without eviction writes in place; leave any other as it is
        if type(cache) is base and not cache.eviction_enabled and "://" not in str(path):
            atomic = AtomicFileCache.__new__(AtomicFileCache)
            atomic.__dict__.update(cache.__dict__)
            return atomic, where
        return found

    cc.get_file_cache = get_file_cache
    _write_from_every_rank()
    _installed = True
    return True


#: the parameters of the JAX writers :func:`_write_from_every_rank` knows: JAX 0.10 passes the
#: program's host callbacks (a program with any is never cached), JAX 0.11 and later do not
_KNOWN_WRITERS = (
    ["cache_key", "compile_time_secs", "module_name", "backend", "executable", "host_callbacks"],
    ["cache_key", "compile_time_secs", "module_name", "backend", "executable"],
)


def _write_from_every_rank() -> None:
    """Let every process of a multi-process run write its compiled programs, not only process 0.

    JAX writes cache entries from process 0 alone (against write contention on shared file
    systems; the atomic writer above makes concurrent writers safe on a local one). But the key of
    a program includes the compiling process's own devices, so the entry process 0 writes never
    serves the other ranks: without this, every rank but the first compiles every program of
    every run, and the first waits for it at the next collective. Left alone on a JAX whose
    writer differs from the one this replaces."""
    import inspect
    import warnings

    from jax._src import compilation_cache as cc
    from jax._src import compiler, config, distributed

    original = getattr(compiler, "_cache_write", None)
    put = getattr(cc, "put_executable_and_time", None)
    if original is None or put is None or getattr(original, "_xharness", False):
        return
    signature = inspect.signature(original)
    if list(signature.parameters) not in _KNOWN_WRITERS:
        return

    def cache_write(*args, **kwargs):  # type: ignore[no-untyped-def]
        call = signature.bind(*args, **kwargs).arguments
        if (distributed.global_state.process_id == 0 or call.get("host_callbacks")
                or call["compile_time_secs"] < config.persistent_cache_min_compile_time_secs.value):
            return original(*args, **kwargs)
        module_name = call["module_name"]
        try:
            put(call["cache_key"], module_name, call["executable"], call["backend"],
                int(call["compile_time_secs"]))
        except Exception as exc:  # noqa: BLE001 - the cache is only ever an optimisation
            warnings.warn(f"Error writing persistent compilation cache entry for '{module_name}': "
                          f"{type(exc).__name__}: {exc}", stacklevel=2)

    cache_write._xharness = True  # type: ignore[attr-defined]
    compiler._cache_write = cache_write
