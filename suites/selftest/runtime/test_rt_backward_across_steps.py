"""A backward through a forward pass an earlier graph computed reads buffers a later step replaced.

``backward`` after a step boundary takes its gradient through the IR the forward pass' values
kept (``Storage.materialize``), and that IR reads the buffers the forward pass read. A step that
donates a buffer an in-place update or an optimizer step replaced must leave those alone: whether
the forward value is still pending at the step, was read to the host before it, or was computed by
a partial sync. The training-program search found each of these (``DonatedBufferError`` at the
``backward`` or at the next read); the values here are checked against numpy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import harness.runtime as xr

X = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], np.float32)
W = np.array([[0.5, -0.25], [1.0, 0.75]], np.float32)


def _materialize(how: str) -> Callable[[xr.Tensor], None]:
    return {"none": lambda t: None, "read": lambda t: t.numpy(), "sync": lambda t: xr.sync([t], wait=True)}[how]


@pytest.mark.parametrize("functionalization", [True, False], ids=["functional", "plain"])
@pytest.mark.parametrize("how", ["none", "read", "sync"])
@pytest.mark.parametrize("order", [
    ("inplace", "product", "materialize"),
    ("product", "inplace", "materialize"),
    ("product", "materialize", "inplace"),
], ids="-".join)
def test_a_backward_after_the_step_that_replaced_its_input(order: tuple[str, ...], how: str,
                                                           functionalization: bool) -> None:
    """``x.mul_(2); h = x @ w.T; <h computed or not>; mark_step(); h.sum().backward()``, in each
    order the composition takes: the gradient is that of the value ``h`` was computed from. Where
    the update comes after the product, which saved ``x`` for ``w``'s gradient, ``backward`` is
    refused as torch (and PyTorch/XLA 2.9.0, measured) refuses it, and nothing is lost."""
    xr.configure(functionalization=functionalization, param_aliasing=True)
    x = xr.tensor(X)
    w = xr.nn.Parameter(W)
    xr.mark_step()
    h = None
    scaled_first = order.index("inplace") < order.index("product")
    for event in order:
        if event == "inplace":
            x.mul_(2.0)
        elif event == "product":
            h = x @ w.T
        elif h is not None:
            _materialize(how)(h)
    xr.mark_step()
    assert h is not None
    if not scaled_first:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            h.sum().backward()
        assert w.grad is None
        np.testing.assert_allclose(x.numpy(), X * 2)
        return
    h.sum().backward()
    xr.mark_step()
    np.testing.assert_allclose(w.grad.numpy(), np.ones((3, 2), np.float32).T @ (X * 2), rtol=1e-6)
    np.testing.assert_allclose(x.numpy(), X * 2)


def test_a_forward_through_a_pending_optimizer_update_then_a_step_then_backward() -> None:
    """The step-boundary search's cousin. The first iteration steps between ``backward`` and the
    optimizer step (its loss keeps IR that reads ``w``'s first buffer); the second one's forward
    pass reads the optimizer's pending update of ``w``, a step computes it and replaces ``w``'s
    buffer, and ``backward`` goes through it: the next step must still find every buffer."""
    xr.configure(functionalization=False, param_aliasing=True)
    w = xr.nn.Parameter(W)
    opt = xr.optim.SGD([w], lr=0.1)
    y = np.zeros((3, 2), np.float32)
    want = W.astype(np.float64)
    for second in (False, True):
        x = xr.tensor(X)
        h = x @ w.T
        if second:
            xr.mark_step()  # inside the forward pass
        loss = ((h - xr.tensor(y)) ** 2).mean()
        loss.backward()
        if not second:
            xr.mark_step()  # between backward and the optimizer step
        opt.step()
        opt.zero_grad()
        want = want - 0.1 * (2 * ((X @ want.T) - y).T @ X / y.size)
    xr.mark_step()
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)
