"""Gradient accumulation over micro-batches, after PyTorch/XLA's ``gradient_accumulation``
helper (PR #9078).

The helper first syncs the loop's inputs *asynchronously*, then collects the graph's device-data
leaves deduplicated by buffer handle. Outputs of an execution still running are placeholders
whose handle does not exist yet: upstream read it anyway and crashed with SIGSEGV, only on the
slower T4 GPU runner (issue #9128). The fix waits for pending device ops before the collection;
the ``race-on-handles`` switch skips that wait.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.runtime import faults, step
from harness.runtime.device_data import DeviceData
from harness.runtime.nn import Module
from harness.runtime.tensor import Tensor


def collect_loop_inputs(tensors: Sequence[Tensor]) -> list[DeviceData]:
    """Sync the loop's inputs asynchronously, then collect their device data deduplicated by
    handle: the helper's first step, where upstream read a placeholder's handle."""
    step.sync(tensors, wait=False, donate=False)
    if not faults.active(faults.RACE_ON_HANDLES):
        step.wait_device_ops()
    return step.device_data(tensors)


def gradient_accumulation(
    train_step: Callable[..., Tensor], iterable_tensors: Sequence[Tensor], model: Module
) -> Tensor:
    """Run ``train_step`` on each micro-batch (dimension 0 of every iterable tensor), calling
    ``backward`` on each loss so gradients accumulate; returns the mean loss (pending)."""
    if not iterable_tensors:
        raise ValueError("gradient_accumulation needs at least one iterable tensor")
    steps = iterable_tensors[0].shape[0]
    if any(t.shape[0] != steps for t in iterable_tensors):
        raise ValueError(f"iterable tensors disagree on the number of micro-batches: {[t.shape[0] for t in iterable_tensors]}")
    collect_loop_inputs([*iterable_tensors, *model.parameters()])
    total: Tensor | None = None
    for i in range(steps):
        loss = train_step(*(t[i] for t in iterable_tensors))
        loss.backward()
        total = loss.detach() if total is None else total + loss.detach()
    assert total is not None
    return total / steps
