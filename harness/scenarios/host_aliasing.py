"""host-aliasing: a tensor made from a host array shares the array's memory.

XLA's CPU client may adopt a host buffer as device memory instead of copying it when the buffer
is suitably aligned (64 bytes). ``jax.device_put`` hands numpy arrays to it that way, so writing
the numpy array afterwards changes the "immutable" ``jax.Array`` (jax-ml/jax#37830, open; PR
#38086 proposes copying at least when ``may_alias=False`` asks for it, which 0.10.2 ignores). The
harness's ``host-copy`` invariant found it on JAX 0.10.2, and the reference runtime, built on JAX,
had to copy in ``xr.tensor`` to stay clear of it.

The shape it takes in a training loop: a data loader that fills one reused (aligned, often
pinned) buffer per batch and makes a tensor of it each time; every batch then reads the last
batch's values. The ``host-aliasing`` switch makes ``xr.tensor`` pass the caller's array on
without the copy.
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")
testing = lazy("harness.runtime.testing")


def loader_buffer_reuse(ctx: Context) -> None:
    buffer = testing.aligned_empty((8, 16))
    batches = [ctx.normal(8, 16).astype(np.float32) for _ in range(3)]
    tensors = []
    for batch in batches:
        buffer[...] = batch
        tensors.append(xr.tensor(buffer))
    xr.mark_step()
    for index, (t, batch) in enumerate(zip(tensors, batches, strict=True)):
        if not np.array_equal(t.numpy(), batch):
            raise InvariantViolation(
                f"batch {index} does not hold its own values: the tensor aliases the loader's buffer"
            )


def write_after_tensor(ctx: Context) -> None:
    host = testing.aligned_empty((100,))
    host[:] = np.arange(100, dtype=np.float32)
    t = xr.tensor(host)
    host[0] = -1.0
    if float(t.numpy()[0]) != 0.0:
        raise InvariantViolation(
            "writing the host array after xr.tensor changed the tensor: the tensor aliases the host buffer"
        )


SCENARIO = Scenario(
    id="host-aliasing",
    title="A tensor made from an aligned host array shares its memory (jax.device_put on CPU)",
    upstream=("jax-ml/jax#37830", "jax-ml/jax#38086"),
    component="host-to-device transfer",
    trigger="fill an aligned numpy buffer, make a tensor of it, write the buffer again",
    fault="host-aliasing",  # faults.HOST_ALIASING
    signatures=(Signature("aliased-host-buffer", InvariantViolation, r"aliases the (loader's|host) buffer"),),
    variants={
        "loader-buffer-reuse": loader_buffer_reuse,
        "write-after-tensor": write_after_tensor,
    },
    needs=Needs(devices=1),
    story=__doc__ or "",
    expected={
        "loader-buffer-reuse": ("aliased-host-buffer",),
        "write-after-tensor": ("aliased-host-buffer",),
    },
)
