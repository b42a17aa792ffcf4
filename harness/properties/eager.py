"""Eager PyTorch on the CPU, the semantics oracle's authority, in a process of its own.

torch does not live in the harness' environment: it lives in a torch environment the harness
builds the way it builds release environments (``xharness eager``: ``torch-2.13.0-py311`` under
``$XHARNESS_ENV_DIR``), or in an interpreter ``$XHARNESS_EAGER_PYTHON`` names (a torch_xla
release environment's python will do: it holds torch). Programs cross over as code, answers come
back as data (``eager_worker``'s JSON lines); one worker serves every program of a process.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import re
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness import settings

WORKER = Path(__file__).with_name("eager_worker.py")
#: seconds one program may take in the worker before it counts as hung (they take milliseconds)
PROGRAM_TIMEOUT = 120.0


class EagerUnavailable(Exception):
    """No interpreter with torch: the oracle's tests skip with this reason."""


@dataclass(frozen=True)
class Raised:
    """An exception a program raised, and at which statement (``stage``)."""

    type: str
    message: str
    stage: int
    trace: str = ""

    def line(self) -> str:
        return f"{self.type} at statement {self.stage}: {self.message}"


@dataclass
class Answer:
    """What a program read (``seen``: label to array, None for an absent value such as a
    gradient never computed), and the exception that stopped it, if any."""

    seen: dict[str, np.ndarray | None] = field(default_factory=dict)
    error: Raised | None = None


def _env_dir() -> Path:
    configured = settings.raw("XHARNESS_ENV_DIR").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache/xharness/envs"


def _release_key(path: Path) -> tuple[int, ...]:
    match = re.match(r"torch-(\d+(?:\.\d+)*)", path.name)
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


def find_python() -> str:
    """The interpreter the oracle asks: ``$XHARNESS_EAGER_PYTHON``, else the newest complete torch
    environment (``torch-*``) in the environment directory. Raises :class:`EagerUnavailable`."""
    named = settings.raw("XHARNESS_EAGER_PYTHON").strip()
    if named:
        if not Path(named).exists():
            raise EagerUnavailable(f"XHARNESS_EAGER_PYTHON={named!r}: no such interpreter")
        return named
    root = _env_dir()
    candidates = sorted(
        (p for p in root.glob("torch-*") if (p / "xharness-env.json").exists() and (p / "bin" / "python").exists()),
        key=_release_key, reverse=True,
    ) if root.is_dir() else []
    if not candidates:
        raise EagerUnavailable(
            f"no eager torch environment in {root} and XHARNESS_EAGER_PYTHON is unset: build one with "
            f"`xharness eager`"
        )
    return str(candidates[0] / "bin" / "python")


def decode(value: Any) -> np.ndarray | None:
    if value is None:
        return None
    raw = base64.b64decode(value["data"])
    return np.frombuffer(raw, dtype=np.dtype(value["dtype"])).reshape(value["shape"]).copy()


class Worker:
    """One ``eager_worker`` process: ``run(code)`` sends a program and waits for its answer."""

    def __init__(self, python: str) -> None:
        self.python = python
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTHONPATH", None)  # the worker needs torch and numpy, nothing of this tree
        # and reads the bytecode its own environment was installed with: under a cell's bytecode
        # prefix (harness.compile_cache) it read none and compiled torch from source at every start,
        # 4.4 s of CPU against 2.1 s for `import torch, numpy`
        env.pop("PYTHONPYCACHEPREFIX", None)
        self.process = subprocess.Popen(
            [python, "-u", str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env,
        )
        hello = self._line(PROGRAM_TIMEOUT)
        if not hello.get("ready"):
            raise EagerUnavailable(f"{python}: the eager worker did not start: {hello}")
        self.lock = threading.Lock()

    def _line(self, timeout: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not result or not result[0]:
            self.close()
            stderr = self.process.stderr.read()[-2000:] if self.process.stderr else ""
            raise EagerUnavailable(f"{self.python}: the eager worker stopped answering{': ' + stderr if stderr else ''}")
        return json.loads(result[0])

    def alive(self) -> bool:
        return self.process.poll() is None

    def run(self, code: str) -> Answer:
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps({"code": code}) + "\n")
            self.process.stdin.flush()
            reply = self._line(PROGRAM_TIMEOUT)
        error = reply.get("error")
        return Answer(
            {k: decode(v) for k, v in reply["seen"].items()},
            Raised(error["type"], error["message"], int(error["stage"]), error.get("trace", "")) if error else None,
        )

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def release(self) -> None:
        """Stop the worker and close its pipes: nothing of it outlives the process that started it."""
        self.close()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


_WORKERS: dict[str, Worker] = {}


@atexit.register
def release_all() -> None:
    """Every worker this process started, stopped and its pipes closed (at exit: a worker left
    running would outlive a test run, and Python warns of the process and of each pipe)."""
    while _WORKERS:
        _WORKERS.popitem()[1].release()


def worker(python: str | None = None) -> Worker:
    """The process' worker for ``python`` (default :func:`find_python`), started on first use
    and started again if it died."""
    python = python or find_python()
    current = _WORKERS.get(python)
    if current is None or not current.alive():
        current = _WORKERS[python] = Worker(python)
    return current


def run_here(code: str) -> Answer:
    """``code`` run in this process (the runtime under test's side), answered like the worker."""
    namespace: dict[str, Any] = {"seen": {}, "stage": -1}
    error = None
    try:
        exec(compile(code, "<program>", "exec"), namespace)  # noqa: S102 - the harness' own programs
    except Exception as exc:
        import traceback

        text = str(exc).splitlines()[0][:500] if str(exc) else ""
        error = Raised(type(exc).__name__, text, int(namespace.get("stage", -1)), traceback.format_exc()[-2000:])
    seen = {str(k): (None if v is None else np.array(v)) for k, v in namespace.get("seen", {}).items()}
    namespace.clear()
    return Answer(seen, error)
