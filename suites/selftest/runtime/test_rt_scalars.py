"""Python scalars are program inputs, not constants: a value that changes every step (a
learning-rate schedule, a loss scale, a step counter) compiles once, as in PyTorch/XLA."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import models, nn
from harness.runtime.testing import tolerance

STEPS = 100
X = np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)
Y = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)


def _compiles_per_step(step: Callable[[int], None], steps: int = STEPS) -> list[int]:
    """Compile count after each step, from the count before the first."""
    before = xr.compile_count()
    counts = []
    for i in range(steps):
        step(i)
        xr.mark_step()
        counts.append(xr.compile_count() - before)
    xr.wait_device_ops()
    return counts


def test_a_scalar_changing_every_step_compiles_once() -> None:
    xr.manual_seed(0)
    model = models.LinearModel(8, 4)
    opt = xr.optim.SGD(model.parameters(), lr=0.05)
    x, y = xr.tensor(X), xr.tensor(Y)
    losses: list[xr.Tensor] = []

    def step(i: int) -> None:
        s = 1.0 + 0.5 * np.sin(i)  # a new float every step
        loss = nn.mse_loss(model(x) * s, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss)

    counts = _compiles_per_step(step)
    assert counts[-1] == counts[0] <= 1, f"compiles after each step: {counts}"
    assert len({float(v.numpy()) for v in losses[:10]}) == 10, "the scalar's value reaches the device"


def _sgd_reference(lrs: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """The same linear model trained on the host (float64) with the same schedule."""
    xr.manual_seed(0)
    model = models.LinearModel(8, 4)
    w, b = (p.numpy().astype(np.float64) for p in model.parameters())
    for lr in lrs:
        diff = X @ w.T + b - Y
        grad_out = 2 * diff / diff.size
        w, b = w - lr * grad_out.T @ X, b - lr * grad_out.sum(0)
    return w, b


@pytest.mark.parametrize("momentum", [0.0, 0.9], ids=["sgd", "sgd-momentum"])
def test_a_learning_rate_schedule_compiles_once_and_is_applied(momentum: float) -> None:
    xr.manual_seed(0)
    model = models.LinearModel(8, 4)
    opt = xr.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    x, y = xr.tensor(X), xr.tensor(Y)
    lrs = [0.1 * 0.97**i for i in range(STEPS)]  # exponential decay: a new float every step

    def step(i: int) -> None:
        opt.lr = lrs[i]
        nn.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    counts = _compiles_per_step(step)
    assert counts[-1] == counts[0] <= 1, f"compiles after each step: {counts}"
    if not momentum:
        w, b = _sgd_reference(lrs)
        np.testing.assert_allclose(model.fc.weight.numpy(), w, **tolerance(np.float32))
        np.testing.assert_allclose(model.fc.bias.numpy(), b, **tolerance(np.float32))


def test_adam_with_a_schedule_and_a_loss_scale_compiles_once() -> None:
    xr.manual_seed(0)
    model = models.LinearModel(8, 4)
    opt = xr.optim.Adam(model.parameters(), lr=1e-2)
    x, y = xr.tensor(X), xr.tensor(Y)

    def step(i: int) -> None:
        opt.lr = 1e-2 / (1 + i)
        scale = 2.0 ** (i % 5)  # a dynamic loss scale, 1.0 among its values
        (nn.mse_loss(model(x), y) * scale).backward()
        for p in model.parameters():
            assert p.grad is not None
            p.grad = p.grad / scale
        opt.step()
        opt.zero_grad()

    counts = _compiles_per_step(step)
    assert counts[-1] == counts[0] <= 1, f"compiles after each step: {counts}"


def test_a_step_counter_is_an_input() -> None:
    t = xr.zeros(3, dtype=np.int32)
    acc = xr.zeros(3)

    def step(i: int) -> None:
        t.copy_(t + i)  # an int that changes every step
        acc.add_(float(i) * 0.5)

    counts = _compiles_per_step(step, 20)
    assert counts[-1] == counts[0] <= 1, f"compiles after each step: {counts}"
    np.testing.assert_array_equal(t.numpy(), np.full(3, sum(range(20)), np.int32))
    np.testing.assert_allclose(acc.numpy(), np.full(3, sum(range(20)) * 0.5), rtol=1e-6)


def test_equal_scalars_do_not_change_the_program() -> None:
    """Two scalars equal in one step and different in the next are still two inputs."""
    a = xr.tensor(X)
    counts = []
    before = xr.compile_count()
    for s, u in [(2.0, 3.0), (2.0, 2.0), (5.0, 5.0), (-1.0, 7.0)]:
        np.testing.assert_allclose((a * s + u).numpy(), X * s + u, rtol=1e-6)
        counts.append(xr.compile_count() - before)
    assert counts[-1] == counts[0] <= 1, counts


@pytest.mark.parametrize("value", [0.0, -0.0, 1.0, -2.5, float("inf"), float("nan"), 1e-30])
def test_special_values_travel_exactly(value: float) -> None:
    a = xr.tensor(np.ones(4, np.float32))
    got = (a * value).numpy()
    want = np.ones(4, np.float32) * np.float32(value)
    np.testing.assert_array_equal(got, want)  # NaN equals NaN here
    assert (np.signbit(got) == np.signbit(want)).all()


def test_a_steady_loop_transfers_no_scalars() -> None:
    """Equal scalar values share one device buffer: after the first step nothing is transferred."""
    xr.manual_seed(0)
    model = models.LinearModel(8, 4)
    opt = xr.optim.SGD(model.parameters(), lr=0.05)
    x, y = xr.tensor(X), xr.tensor(Y)
    transfers = []
    for _ in range(5):
        (nn.mse_loss(model(x), y) * 0.5).backward()
        opt.step()
        opt.zero_grad()
        xr.mark_step()
        transfers.append(xr.metrics.transfers_to_device)
    assert transfers[-1] == transfers[0], transfers


def test_scalars_are_not_device_data_of_tensors() -> None:
    """``device_data`` lists the tensors' buffers; the scalars' vector is the runtime's own."""
    a = xr.tensor(X)
    found = xr.device_data([a * 3.5 + 1.0])
    assert [id(d) for d in found] == [id(a._storage.node.data)]
