"""Forward results, gradients and optimizer steps against numpy, over meshes of several shapes.

The in-process device count is fixed when JAX starts (8 here), and an SPMD mesh covers every
device once, so 1-, 2-, 4- and 8-way data parallelism are meshes ``(dp, devices // dp)`` with the
batch on ``data`` and the weights optionally split on ``model``. Runs on 1, 3 and 4 devices in their
own processes are in ``test_rt_device_counts.py``.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime.testing import tolerance

NDEV = len(jax.devices())
DP = [d for d in (1, 2, 4, 8) if NDEV % d == 0] or [1]


def _mesh(dp: int) -> xr.Mesh:
    return xr.Mesh(np.arange(NDEV), (dp, NDEV // dp), ("data", "model"))


def _linear_ref(x: np.ndarray, y: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """MSE of ``x @ w.T + b`` against ``y`` and its analytic gradients (float64)."""
    x, y, w, b = (a.astype(np.float64) for a in (x, y, w, b))
    out = x @ w.T + b
    diff = out - y
    loss = float((diff**2).mean())
    dout = 2 * diff / diff.size
    return loss, dout.T @ x, dout.sum(0)


def _data(batch: int, fin: int, fout: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, fin)).astype(np.float32)
    y = rng.standard_normal((batch, fout)).astype(np.float32)
    return x, y


@pytest.mark.parametrize("shard_weights", [False, True], ids=["replicated-w", "model-sharded-w"])
@pytest.mark.parametrize("dp", DP, ids=[f"dp{d}" for d in DP])
def test_linear_forward_and_gradients(dp: int, shard_weights: bool) -> None:
    mesh = _mesh(dp)
    xr.manual_seed(dp)
    model = xr.nn.Linear(6, 24)
    w0, b0 = model.weight.numpy(), model.bias.numpy()
    if shard_weights:
        xr.mark_sharding(model.weight, mesh, ("model", None))
        # the requested layout is reported even over an axis of size 1 (the annotation is kept)
        assert xr.sharding_spec(model.weight) == ("model", None)
    x_np, y_np = _data(16, 6, 24, seed=dp)
    x, y = xr.tensor(x_np), xr.tensor(y_np)
    xr.mark_sharding(x, mesh, ("data", None))
    xr.mark_sharding(y, mesh, ("data", None))
    out = model(x)
    loss = xr.nn.mse_loss(out, y)
    loss.backward()
    xr.mark_step()
    ref_loss, ref_gw, ref_gb = _linear_ref(x_np, y_np, w0, b0)
    np.testing.assert_allclose(out.numpy(), x_np @ w0.T + b0, **tolerance(np.float32))
    np.testing.assert_allclose(loss.numpy(), ref_loss, **tolerance(np.float32))
    assert model.weight.grad is not None and model.bias.grad is not None
    np.testing.assert_allclose(model.weight.grad.numpy(), ref_gw, **tolerance(np.float32))
    np.testing.assert_allclose(model.bias.grad.numpy(), ref_gb, **tolerance(np.float32))
    assert model.weight.grad.shape == (24, 6)


def test_gradients_accumulate_over_backward_calls() -> None:
    w_np = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    w = xr.tensor(w_np, requires_grad=True)
    x = xr.tensor(np.array([[1.0, 2.0]], np.float32))
    (x @ w).sum().backward()
    (w * w).sum().backward()
    # d/dw sum(x @ w) = x.T @ ones ; d/dw sum(w*w) = 2w
    expected = np.array([[1.0, 1.0], [2.0, 2.0]]) + 2 * w_np
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), expected, **tolerance(np.float32))


def test_backward_errors() -> None:
    w = xr.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(ValueError, match="scalar"):
        (w * 2).backward()
    with pytest.raises(RuntimeError, match="requires_grad"):
        xr.tensor(np.ones(3, np.float32)).sum().backward()
    assert w.is_leaf and not (w * 2).is_leaf


def _nonlinear_loss_np(params: dict[str, np.ndarray], x: np.ndarray, onehot: np.ndarray) -> float:
    h = x @ params["w1"].T + params["b1"]
    mu = h.mean(-1, keepdims=True)
    var = ((h - mu) ** 2).mean(-1, keepdims=True)
    h = (h - mu) / np.sqrt(var + 1e-5) * params["g"] + params["beta"]
    h = np.tanh(h) * (1 / (1 + np.exp(-h)))
    logits = h @ params["w2"].T
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return float(-(logp * onehot).sum(-1).mean())


@pytest.mark.parametrize("dp", DP[-1:], ids=lambda d: f"dp{d}")
def test_nonlinear_gradients_match_finite_differences(dp: int) -> None:
    rng = np.random.default_rng(7)
    params_np = {
        "w1": rng.standard_normal((6, 5)) * 0.5,
        "b1": rng.standard_normal(6) * 0.1,
        "g": 1 + 0.1 * rng.standard_normal(6),
        "beta": 0.1 * rng.standard_normal(6),
        "w2": rng.standard_normal((4, 6)) * 0.5,
    }
    params_np = {k: v.astype(np.float32) for k, v in params_np.items()}
    x_np = rng.standard_normal((8, 5)).astype(np.float32)
    onehot_np = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 8)]
    params = {k: xr.tensor(v, requires_grad=True) for k, v in params_np.items()}
    x, onehot = xr.tensor(x_np), xr.tensor(onehot_np)
    xr.mark_sharding(x, _mesh(dp), ("data", None))
    ln = xr.nn.LayerNorm(6)
    ln.weight, ln.bias = params["g"], params["beta"]
    h = ln(x @ params["w1"].T + params["b1"])
    h = h.tanh() * h.sigmoid()
    loss = xr.nn.cross_entropy(h @ params["w2"].T, onehot)
    loss.backward()
    xr.mark_step()
    as64 = {k: v.astype(np.float64) for k, v in params_np.items()}
    x64, oh64 = x_np.astype(np.float64), onehot_np.astype(np.float64)
    np.testing.assert_allclose(loss.numpy(), _nonlinear_loss_np(as64, x64, oh64), **tolerance(np.float32))
    eps = 1e-6
    # the finite differences themselves are good to about 1e-3 relative: never tighter than that
    fd_tol = tolerance(np.float32, minimum={"rtol": 2e-3, "atol": 2e-5})
    for name, value in as64.items():
        numeric = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            plus = {**as64, name: value.copy()}
            minus = {**as64, name: value.copy()}
            plus[name][idx] += eps
            minus[name][idx] -= eps
            numeric[idx] = (_nonlinear_loss_np(plus, x64, oh64) - _nonlinear_loss_np(minus, x64, oh64)) / (2 * eps)
        grad = params[name].grad
        assert grad is not None, name
        np.testing.assert_allclose(grad.numpy(), numeric, **fd_tol, err_msg=name)


# --------------------------------------------------------------------------- optimizers


def _ref_sgd(w: np.ndarray, b: np.ndarray, batches: list, lr: float, momentum: float, wd: float) -> tuple:
    w, b = w.astype(np.float64), b.astype(np.float64)
    bw, bb = np.zeros_like(w), np.zeros_like(b)
    losses = []
    for x, y in batches:
        loss, gw, gb = _linear_ref(x, y, w, b)
        losses.append(loss)
        gw, gb = gw + wd * w, gb + wd * b
        if momentum:
            bw, bb = momentum * bw + gw, momentum * bb + gb
            gw, gb = bw, bb
        w, b = w - lr * gw, b - lr * gb
    return w, b, losses


def _ref_adam(w: np.ndarray, b: np.ndarray, batches: list, lr: float, b1: float, b2: float, eps: float) -> tuple:
    params = [w.astype(np.float64), b.astype(np.float64)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    losses = []
    for t, (x, y) in enumerate(batches, start=1):
        loss, gw, gb = _linear_ref(x, y, *params)
        losses.append(loss)
        for i, g in enumerate((gw, gb)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            params[i] = params[i] - lr * (m[i] / (1 - b1**t)) / (np.sqrt(v[i] / (1 - b2**t)) + eps)
    return params[0], params[1], losses


OPTIMIZERS = {
    "sgd": (lambda ps: xr.optim.SGD(ps, lr=0.1), lambda w, b, bs: _ref_sgd(w, b, bs, 0.1, 0.0, 0.0)),
    "momentum": (
        lambda ps: xr.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
        lambda w, b, bs: _ref_sgd(w, b, bs, 0.05, 0.9, 0.01),
    ),
    "adam": (
        lambda ps: xr.optim.Adam(ps, lr=0.01, betas=(0.8, 0.95), eps=1e-6),
        lambda w, b, bs: _ref_adam(w, b, bs, 0.01, 0.8, 0.95, 1e-6),
    ),
}


@pytest.mark.parametrize("dp", [DP[0], DP[-1]], ids=lambda d: f"dp{d}")
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_steps_match_numpy(name: str, dp: int) -> None:
    make_opt, reference = OPTIMIZERS[name]
    mesh = _mesh(dp)
    xr.manual_seed(11)
    model = xr.models.LinearModel(6, 4)
    w0, b0 = model.fc.weight.numpy(), model.fc.bias.numpy()
    opt = make_opt(model.parameters())
    batches = [_data(8, 6, 4, seed=100 + i) for i in range(5)]
    losses, compiles = [], []
    for x_np, y_np in batches:
        x, y = xr.tensor(x_np), xr.tensor(y_np)
        xr.mark_sharding(x, mesh, ("data", None))
        xr.mark_sharding(y, mesh, ("data", None))
        opt.zero_grad()
        loss = xr.nn.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        xr.mark_step()
        losses.append(float(loss.numpy()))
        compiles.append(xr.compile_count())
    ref_w, ref_b, ref_losses = reference(w0, b0, batches)
    np.testing.assert_allclose(losses, ref_losses, **tolerance(np.float32))
    np.testing.assert_allclose(model.fc.weight.numpy(), ref_w, **tolerance(np.float32))
    np.testing.assert_allclose(model.fc.bias.numpy(), ref_b, **tolerance(np.float32))
    assert compiles[-1] == compiles[0], f"steady steps compiled again: {compiles}"


def test_optimizer_argument_checks() -> None:
    with pytest.raises(ValueError, match="empty"):
        xr.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="positive"):
        xr.optim.SGD([xr.tensor(np.ones(2), requires_grad=True)], lr=0.0)


def test_zero_grad_keep_buffers() -> None:
    w = xr.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = xr.optim.SGD([w], lr=0.5)
    (w * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(3))
    opt.step()
    np.testing.assert_array_equal(w.numpy(), np.ones(3))
    assert math.isclose(float(w.sum().numpy()), 3.0)
