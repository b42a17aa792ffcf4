"""The kernel-lowering path: custom kernels traced by JAX inside a skip-discovery guard.

PyTorch/XLA lowers Pallas kernels (flash attention) by calling into JAX, which starts JAX's own
backend; on multi-slice that backend would run slice discovery a second time, so the lowering runs
inside ``jax_env_context``, which sets the skip flag. The helpers are decorated with
``requires_kernel_backend`` and nest (tracing converts shapes, which converts dtypes), so the guard
must restore the previous value on exit. Upstream's refactor popped the flag instead (PR #8654,
regression #8812, fixed by #8819): the inner exit removed it before the outer lowering started the
backend. The ``double-discovery`` switch re-creates that.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import jax
import numpy as np

from harness import sched
from harness.runtime import faults, ir, seams, topology
from harness.runtime.tensor import Tensor

F = TypeVar("F", bound=Callable[..., Any])


#: guards open right now in any thread, and the flag's value from before the first of them: the
#: flag is one process-wide variable, so a per-call save/restore is re-entrant within one thread
#: but not across threads (one thread's exit would restore "unset" under another's open guard)
_guard_lock = threading.Lock()
_open_guards = 0
_saved_flag: str | None = None
#: the ``double-discovery`` switch as the outermost open guard found it: the guards nested in it
#: behave as it does, without reading the process environment again at every one of them
_popping = False


class _SkipDiscoveryGuard:
    """The guard as a plain context manager: kernel tracing opens seven per kernel call, and a
    generator-based one cost more than the guard's own work. The outermost guard saves the flag
    and sets it; in the fixed runtime the nested ones find it set and leave it to the outermost,
    which restores it. With the ``double-discovery`` switch every exit pops the flag, as
    upstream's refactor did, and every entry sets it again."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _open_guards, _saved_flag, _popping
        flag = topology.SKIP_DISCOVERY_FLAG
        # the points sit outside the plain lock: another thread's guard may run between them
        sched.point("kernels.guard.enter")
        with _guard_lock:
            if _open_guards == 0:
                _saved_flag = current = os.environ.get(flag)
                _popping = faults.active(faults.DOUBLE_DISCOVERY)
            elif _popping:
                current = os.environ.get(flag)  # an inner exit popped it
            else:
                current = "true"  # the outermost guard set it, and no fixed exit clears it early
            _open_guards += 1
            if current != "true":
                os.environ[flag] = "true"

    def __exit__(self, *exc: object) -> None:
        global _open_guards
        flag = topology.SKIP_DISCOVERY_FLAG
        with _guard_lock:
            _open_guards -= 1
            if _popping:
                os.environ.pop(flag, None)  # upstream's refactor: pop on every exit, nested or not
            elif _open_guards == 0:
                if _saved_flag is None:
                    os.environ.pop(flag, None)
                else:
                    os.environ[flag] = _saved_flag
        sched.point("kernels.guard.exit")


_GUARD = _SkipDiscoveryGuard()


def jax_env_context() -> AbstractContextManager[None]:
    """Set the skip-discovery flag for the duration (re-entrant: see the module docstring)."""
    return _GUARD


def requires_kernel_backend(fn: F) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _GUARD:
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@requires_kernel_backend
def to_jax_dtype(dtype: np.dtype) -> Any:
    return jax.numpy.dtype(dtype)


#: one struct per (shape, dtype): a training loop converts the same few every step
_structs: dict[tuple, jax.ShapeDtypeStruct] = {}


@requires_kernel_backend
def to_jax_shape_dtype(t: Tensor) -> jax.ShapeDtypeStruct:
    key = (t.shape, to_jax_dtype(t.dtype))  # the dtype conversion, and its guard, on every call
    struct = _structs.get(key)
    if struct is None:
        struct = _structs[key] = jax.ShapeDtypeStruct(*key)
    return struct


#: lowerings already made, per (kernel, input structs): a training loop calls the same kernel with
#: the same shapes every step, and tracing plus lowering it again costs about a millisecond each
_lowered: dict[tuple, Any] = {}


@requires_kernel_backend
def trace_kernel(kernel: Callable[..., Any], *inputs: Tensor) -> Tensor:
    """Lower ``kernel`` with JAX for these inputs and record it as one IR node.

    The guard, the shape conversions and the backend start run on every call (they are where the
    ``double-discovery`` mechanism lives); only the lowering itself is memoized.
    """
    structs = tuple(to_jax_shape_dtype(t) for t in inputs)
    topology.start_secondary_backend()
    key = (kernel, structs)
    if key not in _lowered:
        seams.reach("kernel")
        _lowered[key] = jax.jit(kernel).trace(*structs).lower()  # the lowering the custom call would embed
    node = ir.Node("kernel", tuple(t.rt_operand() for t in inputs), (kernel,))
    return Tensor.from_node(node, any(t.requires_grad for t in inputs))


def attention_kernel(q: Any, k: Any, v: Any) -> Any:
    """Scaled dot-product attention over (batch, heads, seq, head_dim)."""
    scale = 1.0 / np.sqrt(q.shape[-1]).astype(np.float32)
    scores = jax.numpy.einsum("bhqd,bhkd->bhqk", q, k) * scale
    return jax.numpy.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)


def flash_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return trace_kernel(attention_kernel, q, k, v)


def _guards_open() -> int:
    with _guard_lock:
        return _open_guards


# what the failure-safety invariant reads of this module (``harness.runtime.seams``)
seams.register_lock("kernel guard lock", _guard_lock)
seams.register_state("guards", _guards_open)
seams.register_state("lowered", lambda: dict(_lowered))
seams.register_state("structs", lambda: dict(_structs))
