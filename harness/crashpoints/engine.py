"""Kill a writer at its Nth file operation, for N = 1, 2, ... until it completes without reaching N.

A save is crash consistent when a process killed at any moment of it leaves, under the final name,
the previous version or the new one (or, for a first save, no file or the new one), never half a
file. That is checked the way SQLite's test harness checks it: the writer runs in a child process
that is sent ``SIGKILL`` at each of its file operations in turn.

Kill points are counted by the operating-system calls the child makes, not by the writer's
cooperation, so a writer that stops going through :func:`harness.files.atomic_writer` (one that
opens the target itself and writes it in place) is still seen. In the child, ``os.open`` for
writing, ``os.write``, ``os.replace``, ``os.rename``, ``os.fsync``, ``os.unlink`` and their kin
are wrapped, and so are the file objects ``open``, ``io.open`` and ``os.fdopen`` return for writing
(``Path.write_text`` goes through ``io.open``): opening, ``write``, ``flush``, ``truncate`` and
``close`` each count. Every operation has two kill points, just before it and just after it: the
first finds a writer that damages the target before the data is complete, the second one that
leaves a window between two steps (a rename done before the data is flushed, an old file deleted
before the new one exists).

Starting Python and importing the writer's modules (JAX, for checkpoints) costs a second or two,
so each case gets one *server* process that imports once and forks a fresh child per kill point.
The server never runs the writer itself and touches no accelerator before forking; the child
counts, writes and dies, and the server reports how. Judging what was left is the parent's job
(:mod:`harness.crashpoints.cases` defines how each file is loaded).
"""

from __future__ import annotations

import builtins
import importlib
import io
import json
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Protocol

#: a kill point number that is never reached: the child runs the writer to completion
NEVER = 0

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: ``os`` functions that change files; each call is one operation (two kill points)
_OS_OPERATIONS = (
    "write", "pwrite", "writev", "replace", "rename", "renames", "link", "symlink", "unlink",
    "remove", "rmdir", "mkdir", "truncate", "ftruncate", "fsync", "fdatasync", "sendfile",
    "copy_file_range",
)


class Writer(Protocol):
    """What a server runs: ``warm`` imports the writer's modules once (before any fork), then in
    each child ``inputs`` prepares what the writer reads (not counted) and ``write`` is the save
    under test (counted), both for a ``version`` ("previous" or "new")."""

    def warm(self) -> None: ...

    def inputs(self, directory: Path, version: str) -> None: ...

    def write(self, directory: Path, version: str) -> None: ...


@dataclass(frozen=True)
class Run:
    """How one child ended: ``killed`` at kill point ``kill``, or ``completed`` after ``events``
    kill points (two per operation, named in ``operations``), or ``error`` (the writer raised;
    ``detail`` says what)."""

    kill: int
    ending: str
    events: int
    detail: str = ""
    operations: tuple[str, ...] = ()

    def where(self, kill: int) -> str:
        """Kill point ``kill`` in words (``before os.replace``), from a completed run."""
        index = (kill - 1) // 2
        name = self.operations[index] if index < len(self.operations) else "?"
        return f"{'before' if kill % 2 else 'after'} {name} (operation {index + 1})"


class _Counter:
    """Numbers the kill points of the child and sends ``SIGKILL`` at the chosen one."""

    def __init__(self, kill_at: int) -> None:
        self.kill_at = kill_at
        self.events = 0
        self.operations: list[str] = []
        self.kill = os.kill  # the real ones, saved before anything is wrapped
        self.getpid = os.getpid

    def event(self) -> None:
        self.events += 1
        if self.events == self.kill_at:
            self.kill(self.getpid(), signal.SIGKILL)

    def wrap(self, operation: Callable[..., Any], name: str) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.operations.append(name)
            self.event()
            try:
                return operation(*args, **kwargs)
            finally:
                self.event()

        return counted


class _CountedFile:
    """A file object opened for writing whose writes, flushes and close are operations."""

    def __init__(self, real: IO[Any], counter: _Counter, opened_by: str) -> None:
        self._real = real
        self.write = counter.wrap(real.write, f"{opened_by}().write")
        self.writelines = counter.wrap(real.writelines, f"{opened_by}().writelines")
        self.flush = counter.wrap(real.flush, f"{opened_by}().flush")
        self.truncate = counter.wrap(real.truncate, f"{opened_by}().truncate")
        self.close = counter.wrap(real.close, f"{opened_by}().close")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __iter__(self) -> Any:
        return iter(self._real)

    def __enter__(self) -> _CountedFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _writes(mode: str) -> bool:
    return any(c in mode for c in "wax+")


def _install(counter: _Counter) -> None:
    """Wrap every file-changing call of this (child) process; it never returns to normal."""
    for name in _OS_OPERATIONS:
        if hasattr(os, name):
            setattr(os, name, counter.wrap(getattr(os, name), f"os.{name}"))
    real_os_open = os.open

    def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & _WRITE_FLAGS:
            return int(counter.wrap(real_os_open, "os.open")(path, flags, *args, **kwargs))
        return real_os_open(path, flags, *args, **kwargs)

    os.open = os_open

    def opener(real: Callable[..., Any], name: str) -> Callable[..., Any]:
        def open_file(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            if not _writes(mode):
                return real(file, mode, *args, **kwargs)
            return _CountedFile(counter.wrap(real, name)(file, mode, *args, **kwargs), counter, name)

        return open_file

    real_open = io.open

    def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        """``os.fdopen`` without its call of ``io.open`` (which would count the open twice)."""
        if not isinstance(fd, int):
            raise TypeError(f"invalid fd type ({type(fd)}, expected integer)")
        return real_open(fd, mode, *args, **kwargs)

    builtins.open = io.open = opener(real_open, "open")  # type: ignore[assignment]
    os.fdopen = opener(fdopen, "os.fdopen")


def _child(writer: Writer, directory: Path, version: str, kill_at: int, report: int,
           log: Path) -> None:
    """The forked child: never returns (``os._exit``)."""
    code = 0
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(err, 2)
        writer.inputs(directory, version)
        counter = _Counter(kill_at)
        real_write = os.write
        _install(counter)
        writer.write(directory, version)
        real_write(report, json.dumps([counter.events, counter.operations]).encode())
    except BaseException:  # noqa: BLE001 - whatever the writer raised, the server must hear of it
        traceback.print_exc()
        code = 3
    finally:
        os._exit(code)


def _load(spec: str) -> Writer:
    module, _, attr = spec.partition(":")
    writer: Writer = getattr(importlib.import_module(module), attr)
    return writer


def serve(spec: str) -> None:
    """The server: import the writer ``module:attribute`` once, then one forked child per request
    (a JSON line ``{"directory", "version", "kill", "log"}`` on stdin, a :class:`Run` back)."""
    writer = _load(spec)
    writer.warm()
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _child(writer, Path(request["directory"]), request["version"], request["kill"],
                   write_end, Path(request["log"]))
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            reported = pipe.read()
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            ending, detail = "killed", ""
        elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and reported:
            ending, detail = "completed", ""
        else:
            ending = "error"
            detail = Path(request["log"]).read_text(errors="replace")[-4000:] or f"status {status}"
        events, operations = json.loads(reported) if reported else (0, [])
        out.write(json.dumps({"kill": request["kill"], "ending": ending, "events": events,
                              "detail": detail, "operations": operations}) + "\n")
        out.flush()


class Server:
    """A running server for one writer; :meth:`run` asks it for one child."""

    def __init__(self, spec: str, log: Path) -> None:
        from harness.releases.envs import project_root

        env = dict(os.environ)
        root = str(project_root())  # the server imports the same tree
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.setdefault("JAX_PLATFORMS", "cpu")
        self.log = log
        self._stderr = open(log.with_suffix(".server.log"), "wb")  # noqa: SIM115 - server's life
        self._proc = subprocess.Popen(
            [sys.executable, "-c", f"from harness.crashpoints.engine import serve; serve({spec!r})"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, cwd=root,
            text=True,
        )

    def run(self, directory: Path, version: str, kill: int = NEVER) -> Run:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        request = {"directory": str(directory), "version": version, "kill": kill, "log": str(self.log)}
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            self._proc.wait()
            raise RuntimeError(
                f"the crash-point server exited ({self._proc.returncode}): "
                + self._stderr.name + ": " + Path(self._stderr.name).read_text(errors="replace")[-2000:]
            )
        reply = json.loads(line)
        return Run(reply["kill"], reply["ending"], reply["events"], reply["detail"],
                   tuple(reply["operations"]))

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait()
        self._stderr.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
