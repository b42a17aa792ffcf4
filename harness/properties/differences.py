"""Where PyTorch/XLA deliberately differs from eager PyTorch: declared once, with its source.

The semantics oracle runs every program twice, in the runtime under test and in eager PyTorch on
the CPU, and every read must agree. Where a lazy XLA runtime means something else on purpose, the
difference is a row here, and the oracle applies it in one of two ways:

* **spelling**: the eager program spells the statement the way that means what the lazy runtime
  means (a host copy is ``.cpu()``'s copy, never ``.numpy()``'s shared buffer; a step boundary
  is nothing at all), so the values still have to agree;
* **eager error**: eager PyTorch refuses a statement the lazy runtime accepts (``message``
  matches eager's error): the runtime may go on, and the comparison ends at that statement.

A difference that is not a row is a failure of the runtime under test, whatever its size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.adapters.base import TrainingDialect


@dataclass(frozen=True)
class Difference:
    """One deliberate difference: what it is, where upstream says so, and how it is applied
    (``spelling``: dialect entries the eager program spells so; ``message``: a pattern of the
    eager error the lazy runtime need not raise)."""

    id: str
    what: str
    sources: tuple[str, ...]
    spelling: tuple[tuple[str, str], ...] = ()
    message: str = ""

    def excuses(self, error_type: str, message: str) -> bool:
        return bool(self.message) and re.search(self.message, f"{error_type}: {message}") is not None


DIFFERENCES: tuple[Difference, ...] = (
    Difference(
        "host-copy",
        "a host copy of an XLA tensor is a copy: .numpy() needs .cpu() first, which copies the "
        "device buffer to a new CPU tensor; eager .numpy() hands out the tensor's own memory, so "
        "a later in-place update would show through it. The eager program copies as .cpu() does.",
        (
            "https://pytorch.org/docs/stable/generated/torch.Tensor.numpy.html (the ndarray and "
            "the tensor share storage)",
            "https://pytorch.org/docs/stable/generated/torch.Tensor.cpu.html (a copy unless the "
            "tensor already is in CPU memory)",
            "https://github.com/pytorch/xla/blob/master/docs/source/learn/troubleshoot.md "
            "(.cpu() transfers an XLA tensor to the host)",
        ),
        spelling=(("read", "{t}.detach().cpu().clone().numpy()"),),
    ),
    Difference(
        "step-boundaries",
        "XLA tensors are lazy: mark_step and a sync of chosen tensors run what is pending and "
        "change no value. Eager tensors are computed as each statement runs: the boundary is "
        "nothing there.",
        ("https://github.com/pytorch/xla/blob/master/docs/source/learn/pytorch-on-xla-devices.md"
         "#xla-tensors-are-lazy",),
        spelling=(("mark_step", "pass"), ("sync", "pass")),
    ),
    Difference(
        "shardings",
        "a partition spec lays a tensor out over devices and changes no value; eager PyTorch on "
        "one CPU has no mesh. The eager program leaves the annotations out.",
        ("https://github.com/pytorch/xla/blob/master/docs/source/perf/spmd_basic.md",),
        spelling=(("mesh", "None"), ("mark_sharding", "pass")),
    ),
    Difference(
        "compile-count",
        "how many programs XLA compiled is a metric of the XLA runtime (torch_xla.debug.metrics' "
        "CompileTime); eager PyTorch compiles nothing.",
        ("https://github.com/pytorch/xla/blob/master/docs/source/learn/troubleshoot.md",),
        spelling=(("compile_count", "0"),),
    ),
    Difference(
        "no-strides",
        "XLA tensors have no strides: every view is a view, so view() of a transposed or "
        "strided value is one more alias; eager PyTorch refuses view() where the strides do not "
        "allow it (and its reshape() copies there).",
        ("https://github.com/pytorch/xla/blob/master/docs/source/learn/pytorch-on-xla-devices.md"
         " (XLA tensors and their views, no memory layout of their own)",
         "https://pytorch.org/docs/stable/generated/torch.Tensor.view.html (view needs "
         "compatible strides; else contiguous() first)"),
        message=r"view size is not compatible with input tensor's size and stride",
    ),
)

#: eager PyTorch's own spelling of the statements a dialect names, before the differences apply
_EAGER = dict(
    prelude="import numpy as np\nimport torch\n",
    options="",
    tensor="torch.tensor({array})",
    parameter="torch.tensor({array}, requires_grad=True)",
    mesh="None",
    mark_sharding="pass",
    sgd="torch.optim.SGD({params}, lr={lr}, momentum={momentum}, weight_decay={weight_decay})",
    adam="torch.optim.Adam({params}, lr={lr}, eps={eps})",
    set_lr="for group in {opt}.param_groups:\n    group['lr'] = {lr}",
    mark_step="pass",
    sync="pass",
    read="{t}.detach().numpy()",
    compile_count="0",
)


def eager_dialect() -> TrainingDialect:
    """Eager PyTorch's dialect with every declared difference's spelling applied."""
    entries = dict(_EAGER)
    for difference in DIFFERENCES:
        entries.update(dict(difference.spelling))
    return TrainingDialect(**entries)


def excused(error_type: str, message: str) -> Difference | None:
    """The declared difference that lets the lazy runtime accept what eager PyTorch refused."""
    return next((d for d in DIFFERENCES if d.excuses(error_type, message)), None)


EAGER_DIALECT = eager_dialect()
