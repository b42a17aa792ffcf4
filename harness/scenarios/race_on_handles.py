"""race-on-handles: SIGSEGV reading a placeholder's handle during gradient accumulation.

PyTorch/XLA PR #9078 refined the gradient-accumulation API: the helper syncs its loop inputs
asynchronously, then collects the graph's device-data nodes, deduplicated by
``backend_data->GetHandle()``. Outputs of the still-running execution are placeholders, and
``PjRtShardedData::GetHandle()`` read ``shards[0]`` without checking it was filled. Only the T4 GPU
runner was slow enough to lose the race (issue #9128: SIG11 in
``test_train_spmd_linear_model.py``). The fix waits for pending device ops before collecting.

Here the loop trains the linear model on a sharded mesh, step after step, under schedule control
(``harness.sched``, PCT by default): the caller and the executor thread take turns at the
runtime's schedule points, and the strategy decides whether the executor fills the step's
outputs before the helper reads their handles. No device is slowed down and no timing is
involved: the injected run finds the losing interleaving within a few schedules and prints it,
the fixed run survives every schedule it explores, and either replays exactly from its seed or
schedule. With ``HARNESS_CRASH_MODE=signal`` the placeholder read is a real null dereference
(SIGSEGV).
"""

from __future__ import annotations

import signal

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")
testing = lazy("harness.runtime.testing")

STEPS, MICRO, FEATURES, OUT = 3, 4, 16, 8


def _reference(
    w: np.ndarray, b: np.ndarray, batches: list[tuple[np.ndarray, np.ndarray]], lr: float
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient accumulation of per-micro-batch MSE losses, in numpy."""
    for xs, ys in batches:
        gw, gb = np.zeros_like(w), np.zeros_like(b)
        for x, y in zip(xs, ys, strict=True):
            err = x @ w.T + b - y
            scale = 2.0 / err.size
            gw += scale * err.T @ x
            gb += scale * err.sum(0)
        w, b = w - lr * gw, b - lr * gb
    return w, b


def accumulate(ctx: Context) -> None:
    n = ctx.devices
    mesh = xr.Mesh(range(n), (n,), ("data",))
    xr.manual_seed(ctx.seed)
    model = xr.models.LinearModel(FEATURES, OUT)
    w0, b0 = model.fc.weight.numpy(), model.fc.bias.numpy()
    lr = 0.05
    opt = xr.optim.SGD(model.parameters(), lr=lr)
    batch = 2 * n
    batches = [
        (ctx.normal(MICRO, batch, FEATURES), ctx.normal(MICRO, batch, OUT)) for _ in range(STEPS)
    ]
    for xs_host, ys_host in batches:
        xs = xr.tensor(xs_host)
        xr.mark_sharding(xs, mesh, (None, "data", None))
        xs = (
            xs * 1.0
        )  # on-device preprocessing: the loop input is pending IR, synced asynchronously
        ys = xr.tensor(ys_host)

        def micro_step(x: xr.Tensor, y: xr.Tensor) -> xr.Tensor:
            return xr.nn.mse_loss(model(x), y)

        xr.gradient_accumulation(micro_step, [xs, ys], model)
        opt.step()
        opt.zero_grad()
        xr.mark_step()
    w_ref, b_ref = _reference(w0, b0, batches, lr)
    for name, got, want in (
        ("weight", model.fc.weight.numpy(), w_ref),
        ("bias", model.fc.bias.numpy(), b_ref),
    ):
        if not np.allclose(got, want, **testing.tolerance(np.float32, minimum={"rtol": 1e-4, "atol": 1e-5})):
            raise InvariantViolation(
                f"accumulated {name} differs from the numpy reference by {np.abs(got - want).max():.3g}"
            )


SCENARIO = Scenario(
    id="race-on-handles",
    title="Placeholder handle read during gradient accumulation (SIG11 on T4 only)",
    upstream=("pytorch/xla#9078", "pytorch/xla#9128", "pytorch/xla#9143"),
    component="executor: async sync and device-data handle collection",
    trigger="gradient accumulation syncs inputs with wait=False, then reads every device-data handle",
    fault="race-on-handles",  # faults.RACE_ON_HANDLES
    signatures=(
        Signature("placeholder-access", "harness.runtime.errors:PlaceholderAccessError", r"GetHandle\(\) on placeholder"),
        Signature("sigsegv", signal=signal.SIGSEGV, crash_mode="signal"),
    ),
    variants={"accumulate": accumulate},
    needs=Needs(devices=1),
    story=__doc__ or "",
    explore="pct",
)
