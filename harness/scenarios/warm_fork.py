"""Fresh processes for PyTorch/XLA's triggers, forked from a server that has imported torch.

A trigger runs in a process of its own: PyTorch/XLA reads its flags and the CPU device count once,
at import; SPMD mode cannot be left once entered; and a crash must be one run's, never the next
one's. A release's catalog starts about forty such processes (a trigger that may crash or race
runs three times), and each used to import torch and torch_xla anew: about 4.5 s of CPU, most of
what a run costs. torch reads none of the flags a trigger sets (they are PyTorch/XLA's), so here
each run is forked from a small server (``python -m harness.scenarios.warm_fork``) that imported
torch once. The run then imports torch_xla itself, in the trigger's own environment, and is a
fresh process in every way the trigger can tell: its own pid and session, its own stdin, stdout and
stderr, its own death. Forking a process that has imported torch is what torch's own DataLoader
workers do on Linux.

The server is the harness's own rather than ``multiprocessing``'s fork server, whose children
import the parent's ``__main__`` again (a script without a ``__main__`` guard would run twice).

``run`` is the one entry point. It returns None where no server can serve (not POSIX, or the server
died): the caller then starts the process itself, as before.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

#: what the server imports once for every run it forks: torch reads none of the flags a trigger
#: sets, so a run forked from it is the run it would be in a fresh interpreter
PRELOAD = ("torch",)
#: how long the server may take to fork a run and say its pid
_START_LIMIT = 60.0


@dataclass(frozen=True)
class Finished:
    """What a forked run left: its exit code (negative: the signal that killed it; None: it was
    still running at the time limit and was killed), and what it wrote."""

    returncode: int | None
    stdout: str
    stderr: str


class _Server:
    """One server process of one interpreter, and the lines it answers with."""

    def __init__(self, python: str) -> None:
        self.process = subprocess.Popen(
            [python, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
        self._pending = b""

    def alive(self) -> bool:
        return self.process.poll() is None

    def ask(self, request: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()

    def line(self, limit: float | None) -> str | None:
        """The server's next line, or None when none came within ``limit`` seconds; raises
        ``EOFError`` when the server is gone."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = None if limit is None else time.monotonic() + limit
        while b"\n" not in self._pending:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise EOFError("the fork server is gone")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        _kill_group(self.process.pid)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:  # a request it never read
                    pass


_SERVER: _Server | None = None
_LOCK = threading.Lock()


def run(entry: str, argv: list[str], env: dict[str, str], timeout: float) -> Finished | None:
    """Call ``entry`` (``module:function``, given ``argv``) in a process forked from this
    interpreter's server, with exactly ``env`` as its environment, in a session of its own; at
    most ``timeout`` seconds, then its whole process group is killed. None when no server could
    run it (the caller starts the process itself)."""
    if os.name != "posix":
        return None
    global _SERVER
    with _LOCK, tempfile.TemporaryDirectory(prefix="xharness-fork-") as scratch:
        out, err = Path(scratch) / "stdout", Path(scratch) / "stderr"
        if _SERVER is None or not _SERVER.alive():
            _gone()
            _SERVER = _Server(sys.executable)
        server = _SERVER
        try:
            server.ask({"entry": entry, "argv": argv, "env": env, "out": str(out), "err": str(err)})
            pid_line = server.line(_START_LIMIT)
        except (OSError, EOFError):
            pid_line = None
        if pid_line is None:  # it cannot fork: the caller starts the run itself
            _gone()
            return None
        pid = int(pid_line)
        try:
            status = server.line(timeout)
        except EOFError:  # the server died under the run: its verdict is not the run's to make
            _kill_group(pid)
            _gone()
            return None
        _kill_group(pid)  # what it started goes with it, as a subprocess's group does
        if status is None:  # hung: killed above; the server reaps it and says so
            try:
                reaped = server.line(_START_LIMIT)
            except EOFError:
                reaped = None
            if reaped is None:
                _gone()
        code = None if status is None else int(status)
        return Finished(code, _read(out), _read(err))


def stop() -> None:
    """Stop this interpreter's fork server, if one runs; the next ``run`` starts a new one
    (under the environment of that moment)."""
    with _LOCK:
        _gone()


atexit.register(stop)  # a server outlives no harness


def _gone() -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.close()
        _SERVER = None


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:  # killed before it opened its files
        return ""


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ------------------------------------------------------------------------------ the server side
def serve() -> None:
    """Import ``PRELOAD``, then for each request on stdin fork a run, and answer two lines on
    stdout: its pid, then its exit code once it ended. EOF on stdin (the harness is gone) ends it."""
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - the runs import it again and say what is wrong
            pass
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            replies.close()  # the run answers nothing on the server's line
            _child(**request)
        print(pid, file=replies)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), file=replies)


def _child(entry: str, argv: list[str], env: dict[str, str], out: str, err: str) -> None:
    """The forked run: its own session, no stdin, its output in the harness's files, the
    trigger's environment and nothing else, then ``entry``; never returns."""
    code = 1
    try:
        os.setsid()
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        os.close(nothing)
        for fd, path in ((1, out), (2, err)):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        # line by line, as the unbuffered interpreter of a subprocess run wrote: a run that dies
        # keeps every line it finished
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the run's own, for its life
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(env)
        module, _, name = entry.partition(":")
        result = getattr(__import__(module, fromlist=[name]), name)(argv)
        code = result if isinstance(result, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported as an interpreter would, then exit 1
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    serve()
