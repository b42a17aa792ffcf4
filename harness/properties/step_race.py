"""Invariant: a step's bookkeeping loses nothing another thread does while it runs.

``mark_step`` prunes the live set (dead storages out), collects the pending values, launches them
and hands each its result; a data loader, a logging thread or a second training loop creates,
writes and drops tensors meanwhile. Every tensor that is registered must be executed, by that step
or a later one (or by its own sync), with the value the thread gave it: a prune that writes back
the list it read drops a registration made while it ran, and a step that hands a value its result
after another thread wrote it puts the old value back. Neither shows in one thread, and both only
in the few interleavings where the other thread runs at the step's own schedule points.

An example is a few pending values before the step, the other thread's operations (create a
tensor, derive a pending value, write one in place, drop one) and a hypothesis-drawn schedule
(``harness.sched``) that decides, at every schedule point, who runs: the step's locks, its
prune, its submission to the executor thread. After both threads are done, one more step must
leave no surviving tensor pending, and each reads what a numpy model of the other thread says.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness.adapters import base
from harness.properties.base import Invariant
from harness.properties.strategies import ints
from harness.runtime import config, step
from harness.runtime.lazy_tensor import Tensor
from harness.runtime.tensor import tensor

#: what the other thread does, each naming a live tensor by position (taken modulo the count)
OPS: tuple[str, ...] = ("create", "derive", "write", "drop")
SHAPE = (2, 2)


def check_step_bookkeeping(
    pending: int, ops: list[tuple[str, int]], steps: int, param_aliasing: bool, schedule: Any = None
) -> None:
    """``pending`` in-place-updated values, then ``steps`` steps on this thread while another runs
    ``ops``; under ``schedule`` (a ``harness.sched`` policy) they interleave as it decides. One
    more step after both: nothing left pending, every value as the numpy model says."""
    config.configure(param_aliasing=param_aliasing)
    from harness import sched

    def body() -> None:
        pool: list[tuple[Tensor, np.ndarray]] = []
        for k in range(pending):
            t = tensor(np.full(SHAPE, float(k), np.float32))
            t.add_(1.0)  # pending, over a buffer the step may donate
            pool.append((t, np.full(SHAPE, k + 1.0, np.float32)))

        def other() -> None:
            for n, (op, at) in enumerate(ops):
                if op == "create" or not pool:
                    pool.append((tensor(np.full(SHAPE, 10.0 + n, np.float32)), np.full(SHAPE, 10.0 + n, np.float32)))
                    continue
                t, want = pool[at % len(pool)]
                if op == "derive":
                    pool.append((t * 2.0 + 1.0, want * 2 + 1))
                elif op == "write":
                    t.add_(float(n + 1))
                    pool[at % len(pool)] = (t, want + (n + 1))
                else:
                    del pool[at % len(pool)]

        thread = sched.Thread(target=other, name="tensors")
        thread.start()
        for _ in range(steps):
            step.mark_step()
        thread.join()
        step.mark_step()
        step.wait_device_ops()
        for k, (t, want) in enumerate(pool):
            assert not t.rt_storage.pending, (
                f"tensor {k} of {len(pool)} is still pending after a step with no other thread: "
                "the live set lost it"
            )
            got = t.numpy()
            assert np.array_equal(got, want), (
                f"tensor {k} reads {got.ravel().tolist()}, the other thread made it {want.ravel().tolist()}"
            )

    if schedule is None:
        body()
    else:
        sched.check(body, schedule)


@st.composite
def _examples(draw: st.DrawFn) -> dict[str, Any]:
    from harness import sched

    ops = draw(st.lists(st.tuples(st.sampled_from(OPS), ints(0, 3)), min_size=1, max_size=4))
    return {
        "pending": draw(ints(0, 2)),
        "ops": ops,
        "steps": draw(ints(1, 2)),
        "param_aliasing": draw(st.booleans()),
        "schedule": draw(sched.hypothesis_schedules()),
    }


def _size(example: dict[str, Any]) -> int:
    return len(example["ops"]) - 1 + example["pending"] + example["steps"] - 1


STEP_BOOKKEEPING = Invariant(
    id="step-bookkeeping",
    title="a step loses nothing another thread creates, writes or drops while it prunes, collects "
    "and hands out results, in any interleaving",
    check=check_step_bookkeeping,
    examples=_examples,
    size=_size,
    max_size=3,
    max_examples=40,
    search_examples=150,
    needs=(base.FAULT_SWITCHES,),  # the reference runtime's own threads and schedule points
    mutants=("42-prune-writes-back-the-list-it-read",),
)
