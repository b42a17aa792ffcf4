"""partial-sync-donation: a sync of some tensors donates buffers other pending values still read.

A buffer may be donated to an execution only when nothing else will read it again, and only a
step that syncs every live tensor can know that. PyTorch/XLA's ``_xla_sync_multi`` with
``sync_xla_data=True`` treats a sync of a chosen subset like a step marker and donates the old
buffers of the tensors it updates in place (issue #8422, whose mechanism PR #4575 had already
limited to forced syncs). PR #8484 fixed the one caller the issue named, ``xm.save``, by syncing
without ``sync_xla_data``; the other public caller, ``xm.unlazy``, kept the default. The
harness's sync-aliasing state machine found it there on 2.9.0 and 2.5.1 alike (param aliasing
on): ``t2 = t0 + t1; t1.add_(1); xm.unlazy([t1]); mark_step`` fails with "buffer with shape
s64[1] on device CPU:0 is deleted", and ``t.add_(1); u = t * 2 + 1; xm.unlazy([t]); u.cpu()``
alike. With param aliasing off both read the right values.

Here ``xr.sync(tensors)`` is the partial sync; the ``partial-sync-donation`` switch makes it
donate as a full step would.
"""

from __future__ import annotations

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")


def sync_after_inplace(ctx: Context) -> None:
    """The #8422 sequence with the save replaced by a partial sync."""
    xr.configure(param_aliasing=True)
    t0 = xr.tensor(np.float32(1.0))
    t1 = xr.tensor(np.float32(2.0))
    xr.mark_step()
    t2 = t0 + t1
    t1.add_(1)
    xr.sync([t1], wait=True)
    xr.mark_step()
    if float(t2.item()) != 3.0 or float(t1.item()) != 3.0:
        raise InvariantViolation(
            f"after sync([t1]): t2 = t0 + t1 is {t2.item()}, t1 is {t1.item()}; expected 3, 3"
        )


def derived_read(ctx: Context) -> None:
    """The shape the state machine shrank it to: a value derived from a tensor written in place,
    read after the written tensor alone was synced."""
    xr.configure(param_aliasing=True)
    host = ctx.normal(4, 6).astype(np.float32)
    t = xr.tensor(host)
    xr.mark_step()
    t.add_(1.0)
    u = t * 2.0 + 1.0
    xr.sync([t], wait=True)
    want = (host + np.float32(1.0)) * np.float32(2.0) + np.float32(1.0)
    if not np.allclose(u.numpy(), want, rtol=1e-6, atol=1e-6):
        raise InvariantViolation("u = 2 * t + 1 read the wrong values after sync([t])")


SCENARIO = Scenario(
    id="partial-sync-donation",
    title="A sync of some tensors donates buffers other pending values still read (xm.unlazy)",
    upstream=("pytorch/xla#8422", "pytorch/xla#8484", "pytorch/xla#4575"),
    component="sync of chosen tensors, buffer donation",
    trigger="t2 = t0 + t1; t1.add_(1); sync([t1]) (upstream: xm.unlazy([t1])); mark_step; read t2",
    fault="partial-sync-donation",  # faults.PARTIAL_SYNC_DONATION
    signatures=(
        Signature("deleted-buffer", "harness.runtime.errors:DonatedBufferError", r"buffer with shape .* is deleted"),
    ),
    variants={
        "sync-after-inplace": sync_after_inplace,
        "derived-read": derived_read,
    },
    needs=Needs(devices=1),
    story=__doc__ or "",
    expected={
        "sync-after-inplace": ("deleted-buffer",),
        "derived-read": ("deleted-buffer",),
    },
)
