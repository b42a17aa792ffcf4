"""The ``expanded-grad-accumulation`` switch re-creates PyTorch/XLA's mechanism, not its numbers:
every figure below was measured on torch_xla 2.9.0 (CPU) with the same program, and the switch
off gives eager PyTorch's."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import faults
from harness.runtime.storage import Storage
from harness.runtime.tensor import Tensor

#: one device's tensors, no sharding, the runtime's defaults: the same in every cell
pytestmark = pytest.mark.cell_independent
SHAPE = (4, 6)


def _param(value: float = 0.0) -> xr.Tensor:
    return xr.nn.Parameter(np.full(SHAPE, value, np.float32))


def _grads(program, inject: bool) -> np.ndarray:  # type: ignore[no-untyped-def]
    w = _param()
    if inject:
        with faults.inject(faults.EXPANDED_GRAD_ACCUMULATION):
            program(w)
    else:
        program(w)
    return np.unique(w.grad.numpy())


def _twice(w: xr.Tensor) -> None:
    w.sum().backward()
    w.sum().backward()


def _micro_batches(w: xr.Tensor) -> None:
    for i in range(4):
        (xr.tensor(np.full(SHAPE, float(i), np.float32)) + w).sum().backward()


def _three_times(w: xr.Tensor) -> None:
    for _ in range(3):
        w.sum().backward()


def _sum_of_a_sum(w: xr.Tensor) -> None:
    for _ in range(2):
        w.sum(0).sum().backward()


def _sum_then_product(w: xr.Tensor) -> None:
    w.sum().backward()
    (w * 2.0).sum().backward()


def _product_then_sum(w: xr.Tensor) -> None:
    (w * 2.0).sum().backward()
    w.sum().backward()


def _mean_twice(w: xr.Tensor) -> None:
    w.mean().backward()
    w.mean().backward()


def _subtracted_twice(w: xr.Tensor) -> None:
    for _ in range(3):  # the negation materializes: -3 on 2.9.0, as in eager
        (xr.tensor(np.ones(SHAPE, np.float32)) - w).sum().backward()


def _two_paths(w: xr.Tensor) -> None:
    for _ in range(2):  # w reaches the sum twice: torch adds the two gradients, a new tensor
        (w + w).sum().backward()


@pytest.mark.parametrize(
    ("program", "torch_xla", "eager"),
    [
        (_twice, 25.0, 2.0),
        (_micro_batches, 73.0, 4.0),
        (_three_times, 49.0, 3.0),
        (_sum_of_a_sum, 25.0, 2.0),
        (_sum_then_product, 49.0, 3.0),
        (_product_then_sum, 3.0, 3.0),
        (_subtracted_twice, -3.0, -3.0),
        (_two_paths, 4.0, 4.0),
    ],
)
def test_the_switch_gives_torch_xla_s_gradients_and_off_eager_s(program, torch_xla: float, eager: float) -> None:  # type: ignore[no-untyped-def]
    assert _grads(program, inject=True).tolist() == [torch_xla]
    assert _grads(program, inject=False).tolist() == [eager]


def test_mean_accumulates_right_with_the_switch() -> None:
    got = _grads(_mean_twice, inject=True)
    np.testing.assert_allclose(got, [2 / 24], rtol=1e-6)


def test_zero_grad_in_place_writes_through_the_expand() -> None:
    """``zero_grad(set_to_none=False)`` after a sum's backward: -23 on 2.9.0, 0 in eager."""
    for inject, want in ((True, -23.0), (False, 0.0)):
        w = _param()
        opt = xr.optim.SGD([w], lr=0.125)
        with faults.inject(faults.EXPANDED_GRAD_ACCUMULATION) if inject else nullcontext():
            w.sum().backward()
            opt.zero_grad(set_to_none=False)
        assert np.unique(w.grad.numpy()).tolist() == [want]


def test_the_step_reads_the_wrong_gradient_too() -> None:
    """Across a step boundary, then an SGD step: the parameter moves by 2.5, not by 0.2."""
    w = _param()
    opt = xr.optim.SGD([w], lr=0.1)
    with faults.inject(faults.EXPANDED_GRAD_ACCUMULATION):
        w.sum().backward()
        xr.mark_step()
        w.sum().backward()
        opt.step()
        xr.mark_step()
    np.testing.assert_allclose(np.unique(w.detach().numpy()), [-2.5], rtol=1e-6)


@pytest.mark.parametrize(("op", "base", "want"), [("add_", 2.0, 26.0), ("mul_", 2.0, 98.0)])
def test_a_write_through_an_expand_view_is_upstream_s_inverse(op: str, base: float, want: float) -> None:
    """``b = full((), base); b.expand(4, 6).OP(...)`` on 2.9.0: base + sum(view - base) (eager
    torch refuses the write: its elements share one memory location)."""
    b = Tensor(Storage(xr.tensor(np.float32(base)).rt_node), ())
    view = Tensor(b.rt_storage, (("expand", (SHAPE,)),))
    getattr(view, op)(1.0 if op == "add_" else 3.0)
    assert np.unique(view.numpy()).tolist() == [want]
    assert b.numpy().tolist() == want



def test_without_functionalization_the_switch_changes_nothing() -> None:
    """``XLA_DISABLE_FUNCTIONALIZATION=1`` on 2.9.0: 2, as eager (nothing writes a view back)."""
    previous = xr.configure(functionalization=False)
    try:
        assert _grads(_twice, inject=True).tolist() == [2.0]
    finally:
        xr.configure(**vars(previous))
