"""wait-gap: ``wait_device_ops()`` returns while the step's execution is still running.

In PyTorch/XLA (pytorch/xla#5078) taking the per-device execution lock moved out of
``ExecuteComputation`` into a closure (``lockfn``) that an IO thread pool runs later, so that
tracing the next step is not held up by the device. ``wait_device_ops`` waited by taking those
device locks: an execution whose closure had not run yet held no lock, and the wait passed it by.
The window stayed through pytorch/xla#5284; pytorch/xla#5811 removed it by rebuilding
the device-ops wait on an operation tracker that registers each execution before launch. Until then
the gap showed as intermittent test failures. The kind of check that trips over it is
pytorch/xla#4626's, which reads the
``ExecuteTime`` metric right after ``mark_step(); wait_device_ops()``. Releases
2.1.x carry the gap; 2.2.0 has the fix.

Here the runtime's ``wait_device_ops`` has the same two steps, the executor thread's barrier and
the operation tracker, and the ``wait-gap`` switch puts the registration back into a closure
started after dispatch. The step runs under schedule control (``harness.sched``, PCT by default):
the scheduler decides whether the closure registers the execution before the caller's wait
reaches the tracker. No device is slowed down: the injected run finds the interleaving where the
wait returns with the execution still running within a few schedules, the fixed run survives
every schedule it explores, and either replays exactly from its seed or schedule.
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")

ROWS, COLS = 4, 8


def step_then_wait(ctx: Context) -> None:
    # the counters are process-wide (earlier runs, torn-down ones included, count too): only
    # this step's share of them is judged
    launched, completed = xr.metrics.executions, xr.metrics.completed
    x_host = ctx.normal(ROWS, COLS)
    x = xr.tensor(x_host)
    y = (x * 2.0 + 1.0).tanh()
    xr.mark_step()
    xr.wait_device_ops()
    launched = xr.metrics.executions - launched
    completed = xr.metrics.completed - completed
    if completed != launched:
        raise InvariantViolation(
            f"wait_device_ops() returned with {launched - completed} of {launched} executions "
            "still running"
        )
    data = y.node.data
    if data is None or data.is_placeholder:
        raise InvariantViolation("wait_device_ops() returned before the step's output was filled")
    if not np.allclose(y.numpy(), np.tanh(x_host * 2.0 + 1.0), rtol=1e-5, atol=1e-6):
        raise InvariantViolation("the step's output differs from the numpy reference")


SCENARIO = Scenario(
    id="wait-gap",
    title="wait_device_ops() returns before a late-registered execution completes (v2.1.x)",
    upstream=("pytorch/xla#5078", "pytorch/xla#5284", "pytorch/xla#5811", "pytorch/xla#4626"),
    component="executor: wait_device_ops and the operation tracker",
    trigger="mark_step, then wait_device_ops while the execution is registered by a later closure",
    fault="wait-gap",  # faults.WAIT_GAP
    signatures=(
        Signature(
            "early-return",
            InvariantViolation,
            r"wait_device_ops\(\) returned with \d+ of \d+ executions still running",
        ),
    ),
    variants={"step-then-wait": step_then_wait},
    needs=Needs(devices=1),
    story=__doc__ or "",
    explore="pct",
)
