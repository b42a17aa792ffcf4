"""expanded-grad-accumulation: a second ``backward`` of ``x.sum()`` adds ``x.numel()`` per element.

On PyTorch/XLA with functionalization on (the default), ``x.sum().backward()`` twice leaves
``x.grad == 1 + x.numel()`` (25 for a 4x6 parameter), where eager PyTorch gives 2; a gradient
accumulation loop over micro-batches whose loss is ``(pred + w).sum()`` trains on
``1 + numel * (k - 1)`` instead of ``k``, and ``optimizer.zero_grad(set_to_none=False)`` after such
a backward leaves ``1 - numel`` (-23) instead of 0. ``mean()`` is right, and so is every parameter
whose gradient some other operation computes. Nothing raises: the training run is silently wrong.

The mechanism, in three steps, each measured on 2.9.0 (CPU):

1. ``SumBackward`` returns ``grad.expand(x.shape)``: a view of a 0-d tensor. Operations that hand
   a gradient on unchanged (an addition of equal shapes, a reshape, another sum) pass that view
   down to ``AccumulateGrad``.
2. ``AccumulateGrad`` steals an incoming gradient as ``.grad`` when it obeys the layout contract.
   Eager torch sees the expand's zero strides and clones it; an XLA tensor reports contiguous
   strides, so the view itself becomes ``.grad``.
3. The next accumulation is in place (``variable_grad += new_grad``, grad mode being off in
   ``backward``) and goes through that view. Functionalization writes a mutated expand view back
   with ``FunctionalInverses::expand_inverse``, ``base + sum_to(view - base)``: every element's
   increment is summed into the one shared element, so the base becomes ``1 + numel`` and the
   view regenerates as that value everywhere. ``b = torch.ones((), device=xla);
   b.expand(4, 6).add_(1.0)`` alone shows it (25), where eager torch refuses the write ("more than
   one element of the written-to tensor refers to a single memory location").

With ``XLA_DISABLE_FUNCTIONALIZATION=1`` the gradient is right. The semantics oracle found it
against eager PyTorch on 2.5.1 and 2.9.0 (a parameter's ``sum().backward()`` drawn twice).
``xharness bisect`` over every 2.x release found it at both ends: on 2.1.0 (torch 2.1, whose
expand inverse was ``sum_to(view)`` alone, before pytorch/pytorch#114538) the second backward
gives 48, twice the element count, and ``zero_grad(set_to_none=False)`` happens to come out right.
On 2.9.0 ``x.grad.stride()`` reads ``(6, 1)`` and ``x.grad._is_view()`` False: nothing a user can see
says that ``.grad`` shares one element.

Here ``Tensor.backward`` accumulates gradients out of place and never keeps a view; the
``expanded-grad-accumulation`` switch, with functionalization on, keeps the sum's expanded gradient
as an expand view of a 0-d storage and accumulates into it in place, and ``functional`` writes an
expand view back with upstream's inverse. The semantics oracle catches it.
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")

SHAPE = (4, 6)
MICRO_BATCHES = 4


class WrongGradient(InvariantViolation):
    """An accumulated gradient differs from the sum of the gradients accumulated."""


def _check_gradient(got: np.ndarray, want: float, what: str) -> None:
    if not np.array_equal(got, np.full(SHAPE, want, np.float32)):
        raise WrongGradient(
            f"{what}: the accumulated gradient reads {np.unique(got).tolist()}, expected {want} "
            f"everywhere (eager PyTorch)"
        )


def repeated_sum_backward(ctx: Context) -> None:
    """The finding as the oracle shrank it: ``x.sum().backward()`` twice into one ``.grad``."""
    xr.configure(functionalization=True)  # upstream's default; without it the gradient is right
    x = xr.nn.Parameter(np.ones(SHAPE, np.float32))
    x.sum().backward()
    x.sum().backward()
    _check_gradient(x.grad.numpy(), 2.0, "x.sum().backward() twice")


def accumulation_loop(ctx: Context) -> None:
    """Gradient accumulation over micro-batches, the loss a sum, then one optimizer step."""
    xr.configure(functionalization=True)  # upstream's default; without it the gradient is right
    w = xr.nn.Parameter(np.zeros(SHAPE, np.float32))
    opt = xr.optim.SGD([w], lr=0.125)
    batches = ctx.normal(MICRO_BATCHES, *SHAPE)
    for batch in batches:
        (xr.tensor(batch) + w).sum().backward()
    _check_gradient(w.grad.numpy(), float(MICRO_BATCHES), f"{MICRO_BATCHES} micro-batches of (x + w).sum()")
    opt.step()
    xr.mark_step()
    _check_gradient(w.detach().numpy(), -0.125 * MICRO_BATCHES, "the parameter after the step")


def zero_grad_kept(ctx: Context) -> None:
    """``zero_grad(set_to_none=False)`` zeroes ``.grad`` in place: through the view as well."""
    xr.configure(functionalization=True)  # upstream's default; without it the gradient is right
    w = xr.nn.Parameter(np.zeros(SHAPE, np.float32))
    opt = xr.optim.SGD([w], lr=0.125)
    w.sum().backward()
    opt.zero_grad(set_to_none=False)
    _check_gradient(w.grad.numpy(), 0.0, "zero_grad(set_to_none=False) after w.sum().backward()")


SCENARIO = Scenario(
    id="expanded-grad-accumulation",
    title="A second backward of x.sum() accumulates x.numel() per element into .grad: the sum's "
    "expanded gradient is kept as .grad and the next accumulation writes through the expand",
    # no report of this bug was found (the known finding's ``upstream`` says what was searched);
    # these are the nearest: writes through an expand under functionalization, other triggers
    upstream=("pytorch/xla#5839", "pytorch/pytorch#114302", "pytorch/pytorch#114538"),
    component="autograd's AccumulateGrad over functionalization (expand_inverse)",
    trigger="x = ones((4, 6), requires_grad=True) on the device; x.sum().backward() twice: x.grad "
    "is 25, not 2",
    fault="expanded-grad-accumulation",  # faults.EXPANDED_GRAD_ACCUMULATION
    signatures=(
        Signature("summed-into-expand", WrongGradient, r"the accumulated gradient reads"),
    ),
    variants={
        "repeated-sum-backward": repeated_sum_backward,
        "accumulation-loop": accumulation_loop,
        "zero-grad-kept": zero_grad_kept,
    },
    needs=Needs(devices=1, max_processes=1, why="autograd within one process: nothing crosses processes"),
    story=__doc__ or "",
    expected={
        "repeated-sum-backward": ("summed-into-expand",),
        "accumulation-loop": ("summed-into-expand",),
        "zero-grad-kept": ("summed-into-expand",),
    },
)
