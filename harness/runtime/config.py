"""Process-wide runtime options, the equivalents of PyTorch/XLA's environment switches.

``functionalization`` mirrors ``XLA_DISABLE_FUNCTIONALIZATION`` (env
``HARNESS_DISABLE_FUNCTIONALIZATION=1``); ``param_aliasing`` mirrors ``XLA_ENABLE_PARAM_ALIASING``
(env ``HARNESS_PARAM_ALIASING=0``); ``execution_delay`` stretches every asynchronous execution by a
fixed number of seconds, as a slow or stuck accelerator would (env ``HARNESS_EXECUTION_DELAY``; a
hung-run test uses it). Races do not need it: under schedule control (``harness.sched``) the
scheduler decides when the executor runs, and the delay is skipped. ``num_slices`` simulates a
multi-slice topology on platforms without real slices (env ``HARNESS_NUM_SLICES``).
``wait_timeout`` bounds every wait on an execution (a value read, ``wait_device_ops``, a sync, a
save) in seconds: past it the wait raises ``ExecutionTimeoutError`` with the program, the step and
the executor thread's stack instead of hanging (env ``HARNESS_WAIT_TIMEOUT``; 0 or less: no bound).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields


def _env_flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return raw.strip().lower() not in ("0", "false", "no", "off")


@dataclass
class Options:
    functionalization: bool = True
    param_aliasing: bool = True
    execution_delay: float = 0.0
    num_slices: int = 1
    wait_timeout: float = 600.0


def _from_env() -> Options:
    return Options(
        functionalization=not _env_flag("HARNESS_DISABLE_FUNCTIONALIZATION", False),
        param_aliasing=_env_flag("HARNESS_PARAM_ALIASING", True),
        execution_delay=float(os.environ.get("HARNESS_EXECUTION_DELAY", "0") or 0),
        num_slices=int(os.environ.get("HARNESS_NUM_SLICES", "1") or 1),
        wait_timeout=float(os.environ.get("HARNESS_WAIT_TIMEOUT", "600") or 600),
    )


options = _from_env()


def configure(**changes: object) -> Options:
    """Change runtime options; returns the previous options so a caller can restore them."""
    known = {f.name for f in fields(Options)}
    unknown = set(changes) - known
    if unknown:
        raise TypeError(f"configure() got unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    previous = Options(**{f.name: getattr(options, f.name) for f in fields(Options)})
    for name, value in changes.items():
        setattr(options, name, value)
    return previous


def restore(previous: Options) -> None:
    for f in fields(Options):
        setattr(options, f.name, getattr(previous, f.name))
