"""deleted-shard: a sharded input one of whose per-device buffers is gone reaches the executor.

A sharded value is one buffer per device, and other arrays may share those buffers without
copying them: a single-device piece of it (JAX's ``addressable_shards``, PyTorch/XLA's local
shards), or the value assembled back from such pieces (``jax.make_array_from_single_device_arrays``,
a distributed checkpoint loader). Donate or delete one piece and the whole has lost one
per-device buffer, while its own ``is_deleted()`` still says False. JAX 0.10.2 hands such an
array to XLA, which logs "Invalid buffer passed to Execute() ... Buffer has been deleted or
donated" for that device while the others run, and then the process dies with SIGSEGV; JAX 0.11.2
raises instead, and refuses to assemble an array from a deleted piece; JAX 0.12.1 marks the whole
deleted with its piece (its ``is_deleted()`` looks at every buffer), and refuses it before any
execution: fixed there. No upstream report of the
crash was found; the closest is openxla/xla#22604 (a twice-donated buffer: "Invalid buffer passed
to Execute()" up to jax 0.4.28, SIGSEGV from 0.4.29 on CUDA). It is the JAX cousin of PyTorch/XLA's
SIG11 in ``PjRtShardedData::GetHandle()`` (``race-on-handles``): a handle to a buffer that is
gone reaches the executor.

The reference runtime checks every per-device buffer of an input that may share them before it
launches an execution, and raises its own ``DonatedBufferError`` naming the input. The
``deleted-shard`` switch makes it trust the global array's flag, as JAX 0.10 does: under
``HARNESS_CRASH_MODE=signal`` the buffer really goes to XLA (SIGSEGV on 0.10.2), otherwise the
runtime raises what XLA reports (``InvalidBufferError``) without handing it over. On a release
whose whole array knows it lost a piece the runtime's error still names the input, but no longer
the device.

The trigger, in the runtime's own API: lay a tensor out over 8 devices, take its local shards,
update one piece in place and step (parameter aliasing donates the piece's old buffer, which the
whole still holds), then compute with the whole, or with a tensor assembled from the pieces.
"""

from __future__ import annotations

import signal

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")

DEVICES = 8


def _donate_a_piece(ctx: Context, assembled: bool) -> None:
    xr.configure(param_aliasing=True)
    mesh = xr.Mesh(range(DEVICES), (DEVICES,), ("d",))
    values = ctx.normal(DEVICES * 2, 4)
    whole = xr.tensor(values)
    xr.mark_sharding(whole, mesh, ("d", None))
    xr.mark_step()
    pieces = xr.local_shards(whole)
    target = xr.from_local_shards(pieces, mesh, ("d", None)) if assembled else whole
    pieces[1].add_(1.0)
    xr.mark_step()  # donates piece 1's old buffer: device 1's buffer of the whole
    try:
        got = (target * 2.0 + 1.0).numpy()
    except xr.DonatedBufferError as exc:  # the runtime's own error: the fix
        if "has no buffer on" not in str(exc):
            raise InvariantViolation(f"the donated piece was reported without naming the input: {exc}") from exc
        return
    if not np.allclose(got, values * 2.0 + 1.0):
        raise InvariantViolation("the computation read a donated per-device buffer and returned garbage")


def local_shard_donated(ctx: Context) -> None:
    """The whole is used after one of its local shards was donated."""
    _donate_a_piece(ctx, assembled=False)


def assembled_from_donated_piece(ctx: Context) -> None:
    """A tensor assembled from local shards is used after one of the pieces was donated."""
    _donate_a_piece(ctx, assembled=True)


SCENARIO = Scenario(
    id="deleted-shard",
    title="A sharded input whose per-device buffer was donated through a shard reaches XLA (SIGSEGV on JAX 0.10)",
    upstream=("openxla/xla#22604",),
    component="executor: input checks before dispatch",
    trigger="take a sharded tensor's local shards, donate one, then compute with the whole",
    fault="deleted-shard",  # faults.DELETED_SHARD
    signatures=(
        Signature("invalid-buffer", "harness.runtime.errors:InvalidBufferError",
                  r"Invalid buffer passed to Execute\(\).*deleted or donated"),
        Signature("xla-invalid-buffer", Exception, r"Invalid buffer passed to Execute\(\)"),
        Signature("sigsegv", signal=signal.SIGSEGV, crash_mode="signal"),
    ),
    variants={
        "local-shard-donated": local_shard_donated,
        "assembled-from-donated-piece": assembled_from_donated_piece,
    },
    needs=Needs(
        devices=DEVICES,
        max_processes=1,
        why="a process' local shards are its own devices' pieces; the trigger is one process'",
    ),
    story=__doc__ or "",
)
