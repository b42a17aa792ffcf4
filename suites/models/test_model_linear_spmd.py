"""SPMD training of the linear model on a (4, 2) mesh against a numpy reference."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime.testing import tolerance

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 devices")

STEPS, BATCH, FIN, FOUT, LR = 20, 32, 16, 8, 0.1


@pytest.mark.parametrize("functionalization", [True, False], ids=["func", "nofunc"])
def test_linear_model_trains_like_numpy(functionalization: bool) -> None:
    xr.configure(functionalization=functionalization)
    mesh = xr.Mesh(np.arange(8), (4, 2), ("data", "model"))
    xr.manual_seed(0)
    model = xr.models.LinearModel(FIN, FOUT)
    xr.mark_sharding(model.fc.weight, mesh, ("model", None))  # output features split on "model"
    xr.mark_sharding(model.fc.bias, mesh, ("model",))
    w, b = model.fc.weight.numpy().astype(np.float64), model.fc.bias.numpy().astype(np.float64)
    opt = xr.optim.SGD(model.parameters(), lr=LR)
    rng = np.random.default_rng(42)
    true_w = rng.standard_normal((FOUT, FIN))
    losses, ref_losses, compiles = [], [], []
    for _ in range(STEPS):
        x_np = rng.standard_normal((BATCH, FIN)).astype(np.float32)
        y_np = (x_np @ true_w.T).astype(np.float32)
        x, y = xr.tensor(x_np), xr.tensor(y_np)
        xr.mark_sharding(x, mesh, ("data", None))
        xr.mark_sharding(y, mesh, ("data", None))
        opt.zero_grad()
        loss = xr.nn.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        xr.mark_step()
        compiles.append(xr.compile_count())
        losses.append(loss)
        # numpy reference: the same step in float64
        diff = x_np @ w.T + b - y_np
        ref_losses.append((diff**2).mean())
        dout = 2 * diff / diff.size
        w, b = w - LR * (dout.T @ x_np), b - LR * dout.sum(0)
    values = np.array([float(v.numpy()) for v in losses])
    np.testing.assert_allclose(values, ref_losses, **tolerance(np.float32))
    assert values[-1] < 0.5 * values[0], f"loss did not decrease: {values[0]:.4f} -> {values[-1]:.4f}"
    np.testing.assert_allclose(model.fc.weight.numpy(), w, **tolerance(np.float32))
    np.testing.assert_allclose(model.fc.bias.numpy(), b, **tolerance(np.float32))
    assert compiles[-1] == compiles[0], f"the steady state compiled again: {compiles}"
    assert xr.sharding_spec(model.fc.weight) == ("model", None)
    assert xr.sharding_spec(model.fc.bias) == ("model",)
