"""How a Python scalar enters a program: its dtype next to a tensor, and as a program input.

Asked for every scalar operand of every op, so the answers are cheap and remembered; kept apart
from the tensor handle so that its typing rules (JAX's weak types) are read in one place.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from harness.runtime import ir

FLOAT32 = np.dtype(np.float32)


@functools.lru_cache(maxsize=64)
def is_floating(dtype: np.dtype) -> bool:
    """``np.issubdtype(dtype, np.floating)``, remembered: it is asked for every scalar operand."""
    return bool(np.issubdtype(dtype, np.floating))


def scalar_dtype(tensor_dtype: np.dtype, value: Any) -> np.dtype:
    """The dtype a Python scalar takes next to a tensor: the tensor's own unless the scalar's kind
    is wider (a float next to ints or bools is float32, an int next to bools is int32), the way
    JAX treats weakly typed scalars."""
    if isinstance(value, bool | np.bool_):
        return tensor_dtype
    if isinstance(value, complex | np.complexfloating):
        return tensor_dtype if np.issubdtype(tensor_dtype, np.complexfloating) else np.dtype(np.complex64)
    if isinstance(value, float | np.floating):
        return tensor_dtype if is_floating(tensor_dtype) else FLOAT32
    return np.dtype(np.int32) if tensor_dtype == np.bool_ else tensor_dtype


def scalar(value: Any, dtype: np.dtype) -> ir.Node:
    """A Python scalar as an operand: a program input, not a constant (``ir.Scalar``), so that a
    value changing every step does not change the program. Every value is an input, 0 and 1
    included (PyTorch/XLA keeps those two as constants, so a schedule passing through 1.0 compiles
    again there); only an op that fixes its own constant (``zero_``) records one."""
    if type(value) is not float:  # a value the dtype cannot hold fails here, not at the step
        np.asarray(value, dtype=dtype)
    return ir.Scalar(value, dtype)
