"""Invariant 7: topology discovery runs once per process, however it is reached.

Upstream #8812: kernel lowering ran inside nested skip-discovery guards; the inner exit popped the
flag, so the outer lowering started a backend that discovered the slices a second time. Discovery
is reached from many places (mesh construction, every helper that asks for devices, the kernel
path) and from several threads (data loaders, an executor), so the check drives it through any
number of calls, any number of threads and any nesting of the guard, and counts.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness import adapters
from harness.adapters import base
from harness.properties.base import Invariant
from harness.properties.strategies import choice, device_count, ints
from harness.runtime import config, faults, kernels, topology
from harness.runtime.tensor import tensor


@kernels.requires_kernel_backend
def _convert(depth: int) -> None:
    """A guarded helper (upstream: shape and dtype conversions), nesting ``depth`` more."""
    if depth > 0:
        _convert(depth - 1)


@kernels.requires_kernel_backend
def _lower(nesting: int) -> None:
    """A guarded kernel lowering: its helpers (``nesting`` guards deep) run and return first,
    then the kernel backend starts, as upstream's tracing did."""
    if nesting > 0:
        _convert(nesting - 1)
    topology.start_secondary_backend()


def check_discovery(slices: int, threads: int, calls: int, nesting: int, schedule: Any = None) -> None:
    """``calls`` discoveries and one guarded lowering ``nesting`` levels deep, in each of
    ``threads`` threads at once, discover exactly once. Under ``schedule`` (a ``harness.sched``
    policy) the threads interleave at every discovery and guard point as it decides; without one
    they start together and run free."""
    config.configure(num_slices=slices)
    topology.reset()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(calls):
                topology.discover()
            if nesting % 2:  # the runtime's own kernel path, first: its guard, its backend start
                q = tensor(np.ones((1, 1, 2, 2), np.float32))
                kernels.flash_attention(q, q, q)
            _lower(nesting)
            topology.discover()
        except BaseException as exc:  # noqa: BLE001 - reported below, with the others
            errors.append(exc)

    if schedule is None:
        start = threading.Barrier(threads)

        def free() -> None:
            start.wait(timeout=30)
            work()

        workers = [threading.Thread(target=free, name=f"discover-{i}") for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=60)
    else:
        from harness import sched

        def body() -> None:
            spawned = [sched.Thread(target=work, name=f"discover-{i}") for i in range(threads)]
            for w in spawned:
                w.start()
            for w in spawned:
                w.join()

        sched.check(body, schedule)
    if errors:
        raise errors[0]
    count = topology.discovery_count()
    assert count == 1, (
        f"discovery ran {count} times ({slices} slice(s), {threads} thread(s), {calls} call(s) each, "
        f"guard nesting {nesting})"
    )


@st.composite
def _discovery_examples(draw: st.DrawFn) -> dict[str, Any]:
    n = device_count()
    slices = draw(choice(tuple(s for s in (1, 2) if n % s == 0)))
    return {
        "slices": slices,
        "threads": draw(ints(1, 4)),
        "calls": draw(ints(0, 3)),
        "nesting": draw(ints(0, 3)),
        **({"schedule": draw(_schedules())} if base.FAULT_SWITCHES in adapters.current().capabilities else {}),
    }


def _schedules() -> st.SearchStrategy[Any]:
    from harness import sched

    return sched.hypothesis_schedules()


def _work(example: dict[str, Any]) -> int:
    return example["threads"] - 1 + example["calls"] + example["nesting"] + example["slices"] - 1


DISCOVERY_IDEMPOTENCE = Invariant(
    id="discovery-idempotence",
    title="discover() from any threads in any interleaving, through any nesting of the kernel guard, runs once",
    check=check_discovery,
    examples=_discovery_examples,
    catches=(faults.DOUBLE_DISCOVERY,),
    size=_work,
    max_size=2,
    max_examples=60,
    needs=(base.DISCOVERY_COUNT,),
)
