"""Process-wide runtime options, the equivalents of PyTorch/XLA's environment switches.

``functionalization`` mirrors ``XLA_DISABLE_FUNCTIONALIZATION`` (env
``HARNESS_DISABLE_FUNCTIONALIZATION=1``); ``param_aliasing`` mirrors ``XLA_ENABLE_PARAM_ALIASING``
(env ``HARNESS_PARAM_ALIASING=0``); ``execution_delay`` stretches every asynchronous execution by a
fixed number of seconds, as a slow or stuck accelerator would (env ``HARNESS_EXECUTION_DELAY``; a
hung-run test uses it). Races do not need it: under schedule control (``harness.sched``) the
scheduler decides when the executor runs, and the delay is skipped. ``num_slices`` simulates a
multi-slice topology on platforms without real slices (env ``HARNESS_NUM_SLICES``).
``completion_delay`` imitates an accelerator, whose
dispatch returns before the device has finished: each execution completes that many seconds after
its outputs were handed out, under schedule control too, where only the schedule may decide what a
point observes (env ``HARNESS_COMPLETION_DELAY``).
``wait_timeout`` bounds every wait on an execution (a value read, ``wait_device_ops``, a sync, a
save) in seconds: past it the wait raises ``ExecutionTimeoutError`` with the program, the step and
the executor thread's stack instead of hanging (env ``HARNESS_WAIT_TIMEOUT``; 0 or less: no bound).
``matmul_precision`` is the precision every program asks XLA for in its matrix products
(``jax.lax.Precision``; env ``HARNESS_MATMUL_PRECISION``). It is declared rather than left to the
backend because a backend's own default differs: a GPU runs float32 products as TF32 and a TPU as
one bfloat16 pass under ``"default"``, so a result would depend on the card. The default,
``"highest"``, is exact float32, as PyTorch's default (TF32 off) is; ``JAX_DEFAULT_MATMUL_PRECISION``
does not change it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from harness import hooks, settings

#: the accepted names of a matmul precision, each with its canonical name (declared with the
#: settings, which the matrix reads without importing the runtime)
MATMUL_PRECISIONS = settings.MATMUL_PRECISIONS


def matmul_precision(value: object) -> str:
    """The canonical name (``default``, ``high`` or ``highest``) of an accepted precision name.

    Only canonical names are stored, so two spellings of one precision share compiled programs
    (the compile cache is keyed by the stored name); anything else is refused here, before a
    program could be compiled under a precision nobody asked for."""
    name = value.strip().lower() if isinstance(value, str) else None
    if name not in MATMUL_PRECISIONS:
        raise ValueError(
            f"unknown matmul precision {value!r} (expected one of {', '.join(MATMUL_PRECISIONS)})"
        )
    return MATMUL_PRECISIONS[name]




def _default(name: str) -> Any:
    return settings.OPTIONS_BY_NAME[name].default


@dataclass
class Options:
    """The runtime's options; each default is its variable's declared default
    (``harness.settings.RUNTIME_OPTIONS``)."""

    functionalization: bool = _default("functionalization")
    param_aliasing: bool = _default("param_aliasing")
    execution_delay: float = _default("execution_delay")
    completion_delay: float = _default("completion_delay")
    num_slices: int = _default("num_slices")
    wait_timeout: float = _default("wait_timeout")
    matmul_precision: str = _default("matmul_precision")

    def __post_init__(self) -> None:
        self.matmul_precision = matmul_precision(self.matmul_precision)


def _from_env() -> Options:
    # every value checked by its declaration (``harness.settings``): a bad one raises there,
    # naming the variable, and ``xharness`` refuses it before any process starts
    return Options(**{option.name: option.read() for option in settings.RUNTIME_OPTIONS})


options = _from_env()


def configure(**changes: object) -> Options:
    """Change runtime options; returns the previous options so a caller can restore them."""
    known = {f.name for f in fields(Options)}
    unknown = set(changes) - known
    if unknown:
        raise TypeError(f"configure() got unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    if "matmul_precision" in changes:  # checked before anything changes: a refused call changes nothing
        changes = {**changes, "matmul_precision": matmul_precision(changes["matmul_precision"])}
    previous = Options(**{f.name: getattr(options, f.name) for f in fields(Options)})
    for name, value in changes.items():
        setattr(options, name, value)
    return previous


def restore(previous: Options) -> None:
    for f in fields(Options):
        setattr(options, f.name, getattr(previous, f.name))


def _bound_waits(seconds: float) -> None:
    options.wait_timeout = seconds


# a per-test limit set after this module read the environment still bounds the waits
hooks.register("wait-timeout", _bound_waits)
