"""host-aliasing: a tensor made from a host array sees the caller's later writes to that array.

On a CPU the mechanism is aliasing. XLA's CPU client may adopt a host buffer as device memory
instead of copying it when the buffer is suitably aligned (64 bytes). ``jax.device_put`` hands
numpy arrays to it that way, so writing the numpy array afterwards changes the "immutable"
``jax.Array`` (jax-ml/jax#37830, open; PR #38086 proposes copying at least when
``may_alias=False`` asks for it, which 0.10.2 ignores). The harness's ``host-copy`` invariant
found it on JAX 0.10.2, and the reference runtime, built on JAX, had to copy in ``xr.tensor`` to
stay clear of it.

On a GPU the mechanism is a race with the transfer. ``jax.device_put`` returns before the
host-to-device copy has read the numpy buffer, so a write made right after it can still reach the
device array. A field run on one H100 (JAX 0.11.2, ``field/2026-11-25-h100-jax-0.11.2.md``) saw it
in 0 of 50 trials at 1,024 float32, 19/50 at 65,536, 43/50 at 1,048,576 and 47/50 at 16,777,216
(26/50 at 1,048,576 with ``may_alias=False``). The runtime's copy in ``xr.tensor`` closes this too:
the transfer then reads a copy nobody writes.

The shape it takes in a training loop: a data loader that fills one reused (aligned, often
pinned) buffer per batch and makes a tensor of it each time; a batch then reads a later batch's
values. The ``host-aliasing`` switch makes ``xr.tensor`` pass the caller's array on without the
copy.

Variants, per backend:

``loader-buffer-reuse`` (every backend). On the CPU, three batches of float32[8, 16] through one
aligned buffer: aliasing shows in every batch, every time. Elsewhere the outcome of one loader
pass is luck, so the variant runs ``RACE_TRIALS`` passes of two batches, each pass over a fresh
buffer of ``RACE_ELEMENTS`` = 1,048,576 float32 (a fresh buffer filled, a tensor made of it, the
next batch written at once: the program the field run measured). With the measured hit rate
p = 43/50 = 0.86 per trial, k trials all miss a present bug with probability 0.14 ** k; the
trial count is the least k with 0.14 ** k < 1e-13 (``base.trials_for``): k = 16, which misses
with probability 0.14 ** 16 = 2.2e-14. Even at the 95% lower confidence bound of the measured
rate (p = 0.75 from 43 of 50), 16 trials miss with probability 2e-10. The field's one loader run
that reused a single buffer across eight batches saw one of seven batches hit, a rate nobody has
measured well, which is why each trial starts from a fresh buffer. A fixed run copies in
``xr.tensor`` before anything reaches ``device_put``, so no trial can see a later write: fixed
mode passes every time, not just very likely.

``write-after-tensor`` (CPU only). One float32[100], written once after the tensor was made: the
device array *is* the host buffer only on XLA's CPU client. On a GPU a single write of 100
floats loses the race to the transfer (0 of 50 at 1,024 floats), and making it big and repeated
would only duplicate ``loader-buffer-reuse``, so elsewhere it is skipped with that reason.
"""

from __future__ import annotations

import numpy as np

from harness.backends import Backend
from harness.lazy import lazy
from harness.scenarios.base import (
    Context,
    InvariantViolation,
    Needs,
    Scenario,
    Signature,
    trials_for,
)

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")
testing = lazy("harness.runtime.testing")

#: float32 elements per trial of the transfer race: the size the field run measured at 43 of 50
RACE_ELEMENTS = 1 << 20
#: the same in bytes, for a check whose arrays have another dtype (the transfer time is the bytes')
RACE_BYTES = RACE_ELEMENTS * 4
#: one trial's chance to see a write made right after ``device_put`` (H100, JAX 0.11.2)
RACE_HIT_RATE = 43 / 50
#: the chance a present bug may have of going unseen by all the trials
RACE_MISS = 1e-13
#: trials of the transfer race: 16, see the module docstring
RACE_TRIALS = trials_for(RACE_HIT_RATE, RACE_MISS)

CPU_ONLY = Needs(
    backends=(Backend.CPU,),
    why="the device array is the host buffer only on XLA's CPU client; on other backends the "
    "transfer race is loader-buffer-reuse's",
)


def loader_buffer_reuse(ctx: Context) -> None:
    if ctx.backend != Backend.CPU:
        _loader_transfer_race(ctx)
        return
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


def _loader_transfer_race(ctx: Context) -> None:
    """``RACE_TRIALS`` loaders, each filling a fresh buffer with one batch, making a tensor of
    it and writing the next batch at once; the first whose tensor holds any of the next batch's
    values is the bug. The batches are constants so that a torn read (part old, part new) shows
    as well as a whole one."""
    for trial in range(RACE_TRIALS):
        buffer = testing.aligned_empty((RACE_ELEMENTS,))
        first, second = np.float32(2 * trial + 1), np.float32(2 * trial + 2)
        buffer.fill(first)
        t = xr.tensor(buffer)
        buffer.fill(second)  # the loader's next batch, in the buffer the tensor was made of
        wrong = int(np.count_nonzero(t.numpy() != first))
        if wrong:
            raise InvariantViolation(
                f"loader {trial + 1} of {RACE_TRIALS}: batch 0 holds {wrong} of {RACE_ELEMENTS} values of "
                f"batch 1: the transfer to the {ctx.backend} read the loader's buffer after xr.tensor "
                "returned"
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


#: CPU: the device array is the host buffer
ALIASED = Signature("aliased-host-buffer", InvariantViolation, r"aliases the (loader's|host) buffer")
#: GPU (any backend whose transfer is asynchronous): the copy read the buffer after the tensor was made
TRANSFER_RACE = Signature(
    "transfer-race", InvariantViolation, r"the transfer to the \w+ read the (loader's|host) buffer after"
)

SCENARIO = Scenario(
    id="host-aliasing",
    title="A tensor made from a host array sees later writes to it (CPU: aliasing; GPU: the transfer reads late)",
    upstream=("jax-ml/jax#37830", "jax-ml/jax#38086"),
    component="host-to-device transfer",
    trigger="fill a numpy buffer, make a tensor of it, write the buffer again",
    fault="host-aliasing",  # faults.HOST_ALIASING
    signatures=(ALIASED, TRANSFER_RACE),
    variants={
        "loader-buffer-reuse": loader_buffer_reuse,
        "write-after-tensor": write_after_tensor,
    },
    needs=Needs(devices=1),
    variant_needs={"write-after-tensor": CPU_ONLY},
    story=__doc__ or "",
    expected={
        "loader-buffer-reuse": ("aliased-host-buffer", "transfer-race"),
        "write-after-tensor": ("aliased-host-buffer",),
    },
)
