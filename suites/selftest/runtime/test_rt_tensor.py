"""Lazy tensors: op results against numpy, and that nothing runs before a step or a read."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime.testing import tolerance

RNG = np.random.default_rng(1234)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
M = RNG.standard_normal((4, 5)).astype(np.float32)
P = (np.abs(A) + 0.5).astype(np.float32)
# another tensor, equal to A in its last row only, above it in the first and below it in the
# second: == gives a mask that no other comparison (and no constant) gives
PARTLY_A = A + np.array([[1], [-1], [0]], dtype=np.float32)


def _erf_gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


Case = tuple[str, Callable[..., Any], Callable[..., Any]]

UNARY: list[Case] = [
    ("neg", lambda t: -t, lambda a: -a),
    ("exp", lambda t: t.exp(), np.exp),
    ("tanh", lambda t: t.tanh(), np.tanh),
    ("abs", lambda t: t.abs(), np.abs),
    ("sigmoid", lambda t: t.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    ("relu", lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    ("gelu", lambda t: t.gelu(), _erf_gelu),
    ("softmax", lambda t: t.softmax(-1), lambda a: _softmax(a, -1)),
    ("softmax0", lambda t: t.softmax(0), lambda a: _softmax(a, 0)),
    ("log_softmax", lambda t: t.log_softmax(-1), lambda a: np.log(_softmax(a, -1))),
    ("sum", lambda t: t.sum(), lambda a: a.sum()),
    ("sum1", lambda t: t.sum(1), lambda a: a.sum(1)),
    ("sum_keep", lambda t: t.sum(0, keepdim=True), lambda a: a.sum(0, keepdims=True)),
    ("mean", lambda t: t.mean(), lambda a: a.mean()),
    ("mean_dims", lambda t: t.mean((0, 1)), lambda a: a.mean((0, 1))),
    ("max", lambda t: t.max(1), lambda a: a.max(1)),
    ("min", lambda t: t.min(0, keepdim=True), lambda a: a.min(0, keepdims=True)),
    ("argmax", lambda t: t.argmax(1), lambda a: a.argmax(1)),
    ("reshape", lambda t: t.reshape(2, 6), lambda a: a.reshape(2, 6)),
    ("view-1", lambda t: t.view(-1, 2), lambda a: a.reshape(-1, 2)),
    ("transpose", lambda t: t.transpose(0, 1), lambda a: a.T),
    ("T", lambda t: t.T, lambda a: a.T),
    ("flatten", lambda t: t.flatten(), lambda a: a.reshape(-1)),
    ("unsqueeze", lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    ("slice", lambda t: t[1:, ::2], lambda a: a[1:, ::2]),
    ("int-index", lambda t: t[2], lambda a: a[2]),
    ("neg-index", lambda t: t[..., -1], lambda a: a[..., -1]),
    ("none-index", lambda t: t[None, 0], lambda a: a[None, 0]),
    ("expand", lambda t: t[None].expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4))),
    ("scalar-radd", lambda t: 1.5 + t, lambda a: 1.5 + a),
    ("scalar-rsub", lambda t: 2 - t, lambda a: 2 - a),
    ("scalar-rdiv", lambda t: 1 / (t.abs() + 1), lambda a: 1 / (np.abs(a) + 1)),
    ("pow", lambda t: t**2, lambda a: a**2),
    ("gt", lambda t: t > 0, lambda a: a > 0),
    ("eq", lambda t: t == xr.tensor(PARTLY_A), lambda a: a == PARTLY_A),
    ("astype", lambda t: t.astype(np.int32), lambda a: a.astype(np.int32)),
]


@pytest.mark.parametrize("case", UNARY, ids=[c[0] for c in UNARY])
def test_unary_ops_match_numpy(case: Case) -> None:
    _, op, ref = case
    out = op(xr.tensor(A)).numpy()
    expected = np.asarray(ref(A))
    assert out.shape == expected.shape
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(out, expected)
    else:
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_positive_only_ops() -> None:
    t = xr.tensor(P)
    np.testing.assert_allclose(t.log().numpy(), np.log(P), rtol=1e-5)
    np.testing.assert_allclose(t.sqrt().numpy(), np.sqrt(P), rtol=1e-5)
    np.testing.assert_allclose(t.rsqrt().numpy(), 1 / np.sqrt(P), rtol=1e-5)


BINARY: list[Case] = [
    ("add", lambda a, b: a + b, lambda a, b: a + b),
    ("sub", lambda a, b: a - b, lambda a, b: a - b),
    ("mul", lambda a, b: a * b, lambda a, b: a * b),
    ("div", lambda a, b: a / (b.abs() + 1), lambda a, b: a / (np.abs(b) + 1)),
    ("maximum", lambda a, b: a.maximum(b), np.maximum),
    ("minimum", lambda a, b: a.minimum(b), np.minimum),
    ("lt", lambda a, b: a < b, lambda a, b: a < b),
    ("le", lambda a, b: a <= b, lambda a, b: a <= b),
    ("ge", lambda a, b: a >= b, lambda a, b: a >= b),
    ("ne", lambda a, b: a != b, lambda a, b: a != b),
    ("where", lambda a, b: xr.where(a > b, a, b * 2), lambda a, b: np.where(a > b, a, b * 2)),
    ("where-scalar", lambda a, b: xr.where(a > 0, a, 0.0), lambda a, b: np.where(a > 0, a, 0.0)),
    ("cat0", lambda a, b: xr.cat([a, b]), lambda a, b: np.concatenate([a, b])),
    ("cat1", lambda a, b: xr.cat([a, b, a], dim=1), lambda a, b: np.concatenate([a, b, a], 1)),
    ("broadcast", lambda a, b: a + b[0], lambda a, b: a + b[0]),
    ("host-operand", lambda a, b: a * np.asarray(B), lambda a, b: a * b),
]


@pytest.mark.parametrize("case", BINARY, ids=[c[0] for c in BINARY])
def test_binary_ops_match_numpy(case: Case) -> None:
    _, op, ref = case
    out = op(xr.tensor(A), xr.tensor(B)).numpy()
    expected = np.asarray(ref(A, B))
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_matmul_and_batched_matmul() -> None:
    np.testing.assert_allclose((xr.tensor(A) @ xr.tensor(M)).numpy(), A @ M, **tolerance(np.float32))
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    y = RNG.standard_normal((2, 4, 2)).astype(np.float32)
    np.testing.assert_allclose((xr.tensor(x) @ xr.tensor(y)).numpy(), x @ y, **tolerance(np.float32))
    np.testing.assert_allclose((A @ xr.tensor(M)).numpy(), A @ M, **tolerance(np.float32))


def test_tensor_construction_and_dtypes() -> None:
    assert xr.tensor(np.zeros(3)).dtype == np.float32, "float64 host data becomes float32"
    assert xr.tensor(np.arange(3)).dtype == np.int32, "int64 host data becomes int32"
    assert xr.tensor([1.0, 2.0], dtype=np.float16).dtype == np.float16
    assert xr.tensor(np.float32(3.0)).shape == ()
    assert xr.zeros(2, 3).numpy().sum() == 0 and xr.ones((2, 3)).numpy().sum() == 6
    t = xr.tensor(A)
    assert t.shape == (3, 4) and t.ndim == 2 and t.numel() == 12 and len(t) == 3 and t.size(1) == 4
    assert float(xr.tensor(2.5)) == 2.5 and xr.tensor([1, 2]).tolist() == [1, 2]
    assert np.asarray(t).shape == (3, 4)
    i = xr.tensor(np.arange(4, dtype=np.int32))
    assert (i + 1).dtype == np.int32 and (i * 0.5).dtype == np.float32
    np.testing.assert_allclose((i * 0.5).numpy(), np.arange(4) * 0.5)
    with pytest.raises(TypeError, match="basic indexing"):
        t[[0, 1]]
    with pytest.raises(ValueError, match="cannot view"):
        t.view(5, 2)


def test_nothing_executes_until_a_step_or_a_read() -> None:
    xr.wait_device_ops()
    before = xr.metrics.executions
    a = xr.tensor(A)
    b = (a * 2 + 1).relu().sum(0)
    c = a @ xr.tensor(M)
    assert xr.metrics.executions == before, "recording ops must not execute anything"
    assert b._storage.pending and c._storage.pending
    xr.mark_step()
    assert xr.metrics.executions == before + 1, "mark_step runs every pending value as one graph"
    assert not b._storage.pending and not c._storage.pending
    np.testing.assert_allclose(b.numpy(), np.maximum(A * 2 + 1, 0).sum(0), rtol=1e-5)
    np.testing.assert_allclose(c.numpy(), A @ M, **tolerance(np.float32))
    assert xr.metrics.executions == before + 1, "reading synced values must not execute again"
    d = b * 3
    assert xr.metrics.executions == before + 1
    np.testing.assert_allclose(d.numpy(), 3 * np.maximum(A * 2 + 1, 0).sum(0), rtol=1e-5)
    assert xr.metrics.executions == before + 2, "a read syncs the pending tensor"
    xr.mark_step()
    assert xr.metrics.executions == before + 2, "an empty step executes nothing"


def test_read_syncs_only_the_tensor_read() -> None:
    a = xr.tensor(A)
    x, y = a + 1, a + 2
    x.numpy()
    assert not x._storage.pending and y._storage.pending
    np.testing.assert_allclose(y.numpy(), A + 2)


def test_numpy_left_operands_stay_lazy() -> None:
    t = xr.tensor(M)
    for out, expected in ((A @ t, A @ M), (M * t, M * M), (M - t, M - M), (2.0 * t, 2.0 * M)):
        assert isinstance(out, xr.Tensor)
        np.testing.assert_allclose(out.numpy(), expected, **tolerance(np.float32))
