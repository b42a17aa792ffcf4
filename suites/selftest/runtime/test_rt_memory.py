"""Donation really frees memory: after a training step the runtime holds its parameters once.

A training loop keeps its last loss, and the loss keeps the IR that computed it (so that a
``backward`` after a read still works), which reads the parameters' values from before the
update. With param aliasing on those buffers were donated to the step and are gone; a runtime
that stops donating keeps a second copy of every parameter alive. The tests compare byte counts
(``jax.live_arrays()``), never times.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import models, nn
from harness.runtime.transfers import device_bytes, live_device_bytes

X = np.linspace(-1, 1, 4 * 256, dtype=np.float32).reshape(4, 256)
Y = np.linspace(0, 1, 4 * 128, dtype=np.float32).reshape(4, 128)
LOSS_PIECE = np.dtype(np.float32).itemsize  # one float32 scalar on one device


def _held_bytes(momentum: float, steps: int = 4, read_loss: bool = False) -> tuple[int, int]:
    """(live device bytes the training state holds, its parameter + optimizer-state bytes).
    ``read_loss``: the loop logs its loss before the step boundary, so the loss is a value an
    earlier read computed when the step runs (its kept IR reads the parameters it superseded)."""
    xr.manual_seed(0)
    model = models.LinearModel(256, 128)  # parameters far larger than the data
    opt = xr.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)
    x, y = xr.tensor(X), xr.tensor(Y)
    loss = None
    for _ in range(steps):
        loss = nn.mse_loss(model(x), y)
        loss.backward()
        if read_loss:
            loss.item()
        opt.step()
        opt.zero_grad()
        xr.mark_step()
    xr.wait_device_ops()
    state = [p._storage.node.data.array() for p in model.parameters()]
    state += [b._storage.node.data.array() for b in opt._buffers.values()]
    param_opt = sum(device_bytes(a) for a in state)
    data = sum(device_bytes(t._storage.node.data.array()) for t in (x, y, loss))
    del state
    gc.collect()
    with_state = live_device_bytes()
    del model, opt, x, y, loss
    gc.collect()
    return with_state - live_device_bytes() - data, param_opt


@pytest.mark.parametrize("read_loss", [False, True], ids=["", "loss-read-before-the-step"])
@pytest.mark.parametrize("momentum", [0.0, 0.9], ids=["sgd", "sgd-momentum"])
def test_with_param_aliasing_the_parameters_are_held_once(momentum: float, read_loss: bool) -> None:
    held, param_opt = _held_bytes(momentum, read_loss=read_loss)
    # a read leaves JAX one device's piece of the 4-byte loss as an array of its own (``reshard``'s
    # docstring): a copy of the loss, never of a parameter (the weight alone is 128 KiB a device)
    slack = LOSS_PIECE if read_loss else 0
    assert param_opt <= held <= param_opt + slack, (
        f"live bytes beyond data and loss: {held}, parameters + optimizer state: {param_opt}"
    )


def test_without_donation_the_old_parameters_stay_alive() -> None:
    """The measure has teeth: with donation off, the old values held by the loss show up."""
    xr.configure(param_aliasing=False)
    held, param_opt = _held_bytes(0.0)
    assert held >= 2 * param_opt - 1024, (held, param_opt)
