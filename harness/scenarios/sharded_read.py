"""sharded-read-compiles: every host read of a split value compiles a program, every time.

PyTorch/XLA reads a value that SPMD split across devices by first making it whole:
``PjRtComputationClient::ReplicateShardedData`` builds an identity program whose output is
replicated, compiles it, runs it and copies one replica to the host. Nothing keeps that program,
so the next read of a value of the same shape and layout compiles it again. A training loop that
reads a sharded gradient or an updated parameter with ``.cpu()`` before its step boundary (to log
a norm, to check for NaNs) compiles once per iteration for as long as it runs: the step-boundary
invariant found it on 2.5.1 and 2.9.0, compiles per iteration ``[3, 1, 1, 1]`` where
``[k, 0, 0, 0]`` is expected; without the read, or with the input not sharded, none. A plain
``x.cpu()`` of a split tensor compiles on every call. The program came with host reads of
sharded data (#4508, before 2.0); #7943 ("Copy data from TPU to CPU increases CompileTime", closed)
reported the symptom on a TPU, and #9751 (open) asks why the program is not cached.

Here ``transfers.to_host`` gathers a split value's pieces without a program; the
``sharded-read-compiles`` switch makes it build and compile a replication program on every read,
as upstream does. The step-boundary invariant catches it (its loop fed its own outputs keeps
compiling).
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")

ITERATIONS = 4


class CompiledEveryRead(InvariantViolation):
    """A loop whose every iteration records the same programs kept compiling."""


def _split_mesh(ctx: Context) -> object:
    """A mesh whose second axis splits a dimension of two: a (4, 2) mesh over eight devices as
    the finding had it, (n/2, 2) elsewhere."""
    n = ctx.devices
    return xr.Mesh(list(range(n)), (n // 2, 2), ("model", "y"))


def _check(counts: list[int], what: str) -> None:
    if any(counts[1:]):
        raise CompiledEveryRead(
            f"{what}: compiled again on every iteration: compiles per iteration {counts}, "
            f"expected [k, 0, 0, 0] (each iteration records the same programs)"
        )


def gradient_read_in_loop(ctx: Context) -> None:
    """The shrunk program of the step-boundary invariant: a sharded input, a backward, a read of
    the gradient before the step boundary, a fresh model each iteration."""
    mesh = _split_mesh(ctx)
    counts: list[int] = []
    for _ in range(ITERATIONS):
        before = xr.compile_count()
        w = xr.nn.Parameter(np.full((2, 2), 0.5, np.float32))
        x = xr.tensor(np.ones((3, 2), np.float32))
        xr.mark_sharding(x, mesh, (None, "y"))
        ((x @ w.T) ** 2).mean().backward()
        w.grad.numpy()  # the read before the step boundary
        xr.mark_step()
        counts.append(xr.compile_count() - before)
    _check(counts, "a training loop reading its sharded gradient before each step boundary")


def repeated_read(ctx: Context) -> None:
    """The mechanism alone: the same split value read three times."""
    mesh = _split_mesh(ctx)
    x = xr.tensor(ctx.normal(4, 2).astype(np.float32))
    xr.mark_sharding(x, mesh, (None, "y"))
    xr.mark_step()
    counts = []
    for _ in range(3):
        before = xr.compile_count()
        x.numpy()
        counts.append(xr.compile_count() - before)
    _check(counts, "reading one split value three times")


SCENARIO = Scenario(
    id="sharded-read-compiles",
    title="A host read of a sharded value compiles a replication program every time: a loop that "
    "reads a sharded gradient before its step boundary never stops compiling",
    upstream=("pytorch/xla#9751", "pytorch/xla#7943", "pytorch/xla#4508"),
    component="host transfer of sharded data (ReplicateShardedData), compile cache",
    trigger="SPMD, x sharded on a mesh axis, loss.backward(); w.grad.cpu() before torch_xla.sync(), in a loop",
    fault="sharded-read-compiles",  # faults.SHARDED_READ_COMPILES
    signatures=(
        Signature("compiles-every-read", CompiledEveryRead, r"compiled again on every iteration"),
    ),
    variants={
        "gradient-read-in-loop": gradient_read_in_loop,
        "repeated-read": repeated_read,
    },
    needs=Needs(
        devices=4, device_multiple=2, max_processes=1,
        why="a dimension of two split over a mesh axis of two, beside another axis, on this process' devices",
    ),
    story=__doc__ or "",
    expected={
        "gradient-read-in-loop": ("compiles-every-read",),
        "repeated-read": ("compiles-every-read",),
    },
)
