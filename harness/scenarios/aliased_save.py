"""aliased-save: saving reads stale aliases, or donates buffers other graphs still need.

Two upstream bugs in the host transfer behind ``xm.save``:
- issue #8482 / PR #8489: with functionalization, ``t2 = t1.detach(); mark_step; t2.add_(t2);
  mark_step`` and then reading ``t1`` on the host returned the old value (1, not 2): the alias was
  not synced to its latest version first. With param aliasing on, the same read hit the donated
  buffer and aborted the process.
- issue #8422 / PR #8484: the save-side sync behaved like a step marker and donated buffers,
  although pending graphs still read them: ``t2 = t0 + t1; t1.add_(1); save(t1); mark_step()``
  then failed with "buffer ... is deleted".
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")


def _detach_add(aliasing: bool) -> None:
    xr.configure(param_aliasing=aliasing, functionalization=True)
    t1 = xr.tensor(np.float32(1.0))
    t2 = t1.detach()
    xr.mark_step()
    t2.add_(t2)
    xr.mark_step()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "aliased.ckpt"
        xr.save({"t1": t1, "t2": t2}, path)
        loaded = xr.load(path)
    got = (float(loaded["t1"].item()), float(loaded["t2"].item()))
    live = (float(t1.item()), float(t2.item()))
    if got != (2.0, 2.0) or live != (2.0, 2.0):
        raise InvariantViolation(
            f"stale value in the checkpoint: saved (t1, t2) = {got}, live {live}, expected (2.0, 2.0)"
        )


def detach_add_aliasing_on(ctx: Context) -> None:
    _detach_add(aliasing=True)


def detach_add_aliasing_off(ctx: Context) -> None:
    _detach_add(aliasing=False)


def save_keeps_live_buffers(ctx: Context) -> None:
    xr.configure(param_aliasing=True)
    t0 = xr.tensor(np.float32(1.0))
    t1 = xr.tensor(np.float32(2.0))
    t2 = t0 + t1
    t1.add_(1)
    with tempfile.TemporaryDirectory() as tmp:
        xr.save(t1, Path(tmp) / "t1.ckpt")
    xr.mark_step()
    if float(t2.item()) != 3.0:
        raise InvariantViolation(f"t2 = t0 + t1 computed {t2.item()} after save, expected 3.0")


SCENARIO = Scenario(
    id="aliased-save",
    title="Checkpoint save reads stale functional aliases or donates live buffers",
    upstream=("pytorch/xla#8422", "pytorch/xla#8482", "pytorch/xla#8484", "pytorch/xla#8489"),
    component="checkpoint host transfer, functionalization sync, buffer donation",
    trigger="t2 = t1.detach(); t2.add_(t2); save; and t2 = t0 + t1; t1.add_(1); save(t1); mark_step",
    fault="aliased-save",  # faults.ALIASED_SAVE
    signatures=(
        Signature("stale-value", InvariantViolation, r"stale value in the checkpoint"),
        Signature("deleted-buffer", "harness.runtime.errors:DonatedBufferError", r"buffer with shape .* is deleted"),
    ),
    variants={
        "detach-add-aliasing-on": detach_add_aliasing_on,
        "detach-add-aliasing-off": detach_add_aliasing_off,
        "save-keeps-live-buffers": save_keeps_live_buffers,
    },
    needs=Needs(devices=1),
    story=__doc__ or "",
    expected={
        "detach-add-aliasing-on": ("deleted-buffer",),
        "detach-add-aliasing-off": ("stale-value",),
        "save-keeps-live-buffers": ("deleted-buffer",),
    },
)
