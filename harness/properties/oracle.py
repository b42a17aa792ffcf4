"""The semantics oracle: the runtime under test must agree with eager PyTorch.

The reference runtime re-creates PyTorch/XLA's semantics (views, in-place updates through them,
``detach`` aliases, autograd through in-place updates, optimizer steps, host copies), and those
semantics have one authoritative implementation that runs anywhere: eager PyTorch on the CPU.
Each program (``semantics``' straight-line programs, and ``training``'s whole training programs)
is written twice, in the runtime's own dialect and in eager PyTorch's (``differences``: the
declared differences applied), run here and in the eager worker (``eager``), and judged:

* every read agrees within ``tolerance()``: values, gradients (or both absent), parameters after
  optimizer steps (which carry the optimizer's state), host copies; whether two names alias
  shows in the values read after a write through one of them;
* a program eager PyTorch accepts must not raise in the runtime; one it refuses, the runtime must
  refuse at the same statement, unless a declared difference excuses the refusal (then the
  comparison ends there).

A failure prints the program in the runtime's dialect and in eager PyTorch's: each runs alone.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness import adapters
from harness.adapters import base
from harness.properties import differences, eager, semantics, training
from harness.properties.base import Invariant
from harness.properties.eager import Answer, EagerUnavailable
from harness.runtime import faults
from harness.runtime.testing import tolerance

MARKER = "the program, as runtime code:"
EAGER_MARKER = "the same program in eager PyTorch:"
#: float32 on both sides, in different orders (XLA fuses; Adam's square root): a little room
MINIMUM = {"rtol": 1e-4, "atol": 1e-5}
#: a training program: random normal data through several layers and optimizer steps
TRAINING_MINIMUM = {"rtol": 1e-3, "atol": 1e-4}


def eager_python() -> str:
    """The interpreter that answers for eager PyTorch. A runtime that brings torch itself (a
    torch_xla release environment) is asked in its own interpreter: same torch, same machine."""
    if adapters.current().name == "torch_xla":
        return sys.executable
    return eager.find_python()


def missing_eager() -> str | None:
    try:
        eager_python()
    except EagerUnavailable as exc:
        return str(exc)
    return None


def _label_stage(label: str) -> int:
    head = label.split(":", 1)[0]
    return int(head) if head.isdigit() else -1


def judge(mine: Answer, theirs: Answer, minimum: dict[str, float] = MINIMUM, staged: bool = True) -> list[str]:
    """What differs between the runtime's answer and eager PyTorch's (empty: they agree)."""
    problems: list[str] = []
    stop: int | None = None
    if theirs.error is not None:
        stop = theirs.error.stage
        excuse = differences.excused(theirs.error.type, theirs.error.message)
        if mine.error is None and excuse is None:
            problems.append(f"eager PyTorch refused it ({theirs.error.line()}); the runtime accepted it")
        elif mine.error is not None and staged and mine.error.stage < theirs.error.stage:
            problems.append(f"the runtime raised {mine.error.line()}; eager PyTorch went on to statement "
                            f"{theirs.error.stage} ({theirs.error.type}: {theirs.error.message})")
            stop = mine.error.stage
        elif mine.error is not None and staged and mine.error.stage > theirs.error.stage and excuse is None:
            problems.append(f"eager PyTorch refused statement {theirs.error.stage} ({theirs.error.type}: "
                            f"{theirs.error.message}); the runtime went on, and raised later: {mine.error.line()}")
    elif mine.error is not None:
        problems.append(f"the runtime raised {mine.error.line()}; eager PyTorch accepted the program")
        stop = mine.error.stage
    for label, want in theirs.seen.items():
        if stop is not None and staged and _label_stage(label) >= stop:
            continue
        if label not in mine.seen:
            if mine.error is None:
                problems.append(f"{label}: the runtime never read it")
            continue
        got = mine.seen[label]
        if (got is None) != (want is None):
            problems.append(f"{label}: the runtime has {'none' if got is None else 'a value'}, eager PyTorch "
                            f"{'none' if want is None else 'a value'}")
            continue
        if got is None or want is None:
            continue
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            problems.append(f"{label}: shape {got.shape} here, {want.shape} in eager PyTorch")
            continue
        tol = tolerance(want.dtype, minimum=minimum)
        if not np.allclose(got, want, equal_nan=True, **tol):
            problems.append(f"{label}: the runtime read {got.tolist()}, eager PyTorch {want.tolist()}")
    return problems


def _fail(problems: list[str], mine: str, theirs: str) -> None:
    raise AssertionError(
        "the runtime disagrees with eager PyTorch:\n  " + "\n  ".join(problems[:8])
        + (f"\n  (and {len(problems) - 8} more)" if len(problems) > 8 else "")
        + f"\n{MARKER}\n{mine}\n{EAGER_MARKER}\n{theirs}"
    )


def run_both(mine_code: str, eager_code: str) -> tuple[Answer, Answer]:
    theirs = eager.worker(eager_python()).run(eager_code)
    mine = eager.run_here(mine_code)
    return mine, theirs


def check_semantics(program: semantics.Program) -> None:
    """``program`` (and a read of everything it made) agrees with eager PyTorch."""
    full = semantics.with_final_reads(program)
    rt = adapters.current()
    mine_code = semantics.code(full, rt.training_dialect(), rt.device_count())
    eager_code = semantics.code(full, differences.EAGER_DIALECT)
    mine, theirs = run_both(mine_code, eager_code)
    problems = judge(mine, theirs)
    if problems:
        _fail(problems, mine_code, eager_code)


def check_training_eager(program: training.Program) -> None:
    """A whole training program reads what the same program reads in eager PyTorch."""
    mine_code = training.code(program, adapters.current().training_dialect()).text()
    eager_code = training.code(program, differences.EAGER_DIALECT).text()
    mine, theirs = run_both(mine_code, eager_code)
    problems = judge(mine, theirs, TRAINING_MINIMUM, staged=False)
    if problems:
        _fail(problems, mine_code, eager_code)


def _size(example: dict[str, Any]) -> int:
    return len(example["program"])


SEMANTICS_ORACLE = Invariant(
    id="semantics-oracle",
    title="a program of parameters, optimizer steps, views of detached aliases, in-place updates, "
    "binary operations on executed and pending values, backward and host copies reads what eager "
    "PyTorch reads, and raises where eager PyTorch raises (declared differences apart)",
    check=check_semantics,
    examples=lambda: st.fixed_dictionaries({"program": semantics.programs()}),
    size=_size,
    max_size=8,
    max_examples=200,  # a program runs in milliseconds on each side: CI's share is wide (about 30 s)
    search_examples=1000,
    needs=(base.TENSORS, base.STEP, base.TRAINING_PROGRAMS),
    resources=missing_eager,
    # found on PyTorch/XLA against eager torch: x.sum().backward() twice (the scenario of that name)
    catches=(faults.EXPANDED_GRAD_ACCUMULATION,),
    mutants=(
        "29-repeated-root-takes-the-last-slot",
        "30-weight-decay-added-into-the-gradient",
        "31-views-of-a-detached-alias-attached-again",
        "32-version-bumped-only-for-device-data",
        "33-compiled-arguments-reordered-by-the-order-itself",
        "34-where-puts-the-tensor-operand-first",
        "35-origin-unfolded-one-level-deep",
        "36-folded-mark-from-the-first-operand-only",
        "37-add-marks-its-lifted-operand-as-the-source",
        "38-numpy-reads-an-executed-alias-as-cached",
        "39-numpy-hands-out-a-reused-host-buffer",
        "40-host-reads-cached-by-object-id",
    ),
)

TRAINING_ORACLE = Invariant(
    id="training-oracle",
    title="a whole training program reads in the runtime what it reads in eager PyTorch",
    check=check_training_eager,
    examples=lambda: st.fixed_dictionaries({"program": training.programs()}),
    size=lambda example: len(example["program"].steps) + len(example["program"].layers),
    max_size=8,
    max_examples=4,
    search_examples=150,
    needs=(base.TENSORS, base.STEP, base.TRAINING_PROGRAMS),
    resources=missing_eager,
)
