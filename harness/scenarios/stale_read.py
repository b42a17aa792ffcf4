"""stale-on-timeout: a read whose wait times out hands back the last value read, not an error.

A bounded wait is how a runtime keeps a slow device, or a peer cut off in the middle of a gather,
from hanging its caller. What it does when the bound passes decides whether an outage is loud or
silent. Measured here with JAX 0.10.2 over gloo (docs/reference/network-faults.md): a cut of the
collectives alone leaves both ranks blocked in the gather with no error, so a runtime that wants
a bound must add its own, and the shortcut at hand is to answer with what it read last ("best
effort"). That answer has the right shape and dtype and passes every check that does not know the
value: a training loop reads its loss, logs it and steps on.

Found in-house, with no upstream report: the reference runtime's ``stale-on-timeout`` switch keeps
the last value read in each layout and returns it when a read's wait passes ``wait_timeout``. Its
variants take a tensor through a few in-place steps, each read back, then run one step on a
device slower than the wait's bound (the runtime's ``execution_delay``) and read at once: the
fixed runtime raises ``ExecutionTimeoutError``, the injected one returns the previous step's
value. The ``timed-out-reads`` invariant draws the same case, and the network checks' ``silent``
judges it across processes, with a gather cut off by the nemesis (``suites/network``).
"""

from __future__ import annotations

import time

import numpy as np

from harness.lazy import lazy
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature

# the runtime (and JAX) is imported when a variant runs, not when the catalog is listed
xr = lazy("harness.runtime")

#: the wait's bound and the slow device's delay, seconds: the delay well past the bound, both short
BOUND, DELAY = 0.02, 0.15
STEPS = 3


class StaleRead(InvariantViolation):
    """A read whose wait timed out returned a value, and not the tensor's."""


def _slow_last_step(x: object, shape: tuple[int, ...], what: str) -> None:
    """``STEPS`` fast in-place steps on ``x``, each read back, then one on a slow device read at
    once: the read must raise ``ExecutionTimeoutError``; any value it returns is not the step's."""
    for k in range(1, STEPS + 1):
        x.add_(1.0)  # type: ignore[attr-defined]
        xr.mark_step()
        got = x.numpy()  # type: ignore[attr-defined]
        if not np.array_equal(got, np.full(shape, float(k), np.float32)):
            raise AssertionError(f"{what}: step {k} read {got.ravel()[:4].tolist()}, not {float(k)}")
    previous = xr.configure(wait_timeout=BOUND, execution_delay=DELAY)
    try:
        x.add_(1.0)  # type: ignore[attr-defined]
        xr.mark_step()
        try:
            got = x.numpy()  # type: ignore[attr-defined]
        except xr.ExecutionTimeoutError:
            return  # the value is not known, and the caller is told so
    finally:
        xr.configure(wait_timeout=previous.wait_timeout, execution_delay=previous.execution_delay)
        time.sleep(DELAY)  # the given-up execution ends before anything else runs
        xr.wait_device_ops()
    raise StaleRead(
        f"{what}: a read whose wait timed out returned {got.ravel()[:4].tolist()}, the value of "
        f"step {int(got.ravel()[0])}, not step {STEPS + 1}'s {float(STEPS + 1)}: a stale value "
        "passed for the tensor's"
    )


def slow_device(ctx: Context) -> None:
    """One tensor on one device, its last step slower than the wait's bound."""
    shape = (2, 3)
    _slow_last_step(xr.tensor(np.zeros(shape, np.float32)), shape, "a tensor on one device")


def sharded_slow_device(ctx: Context) -> None:
    """The same over a tensor split across every device of the process, as a gather reads it."""
    n = ctx.devices
    shape = (n, 2)
    x = xr.tensor(np.zeros(shape, np.float32))
    xr.mark_sharding(x, xr.Mesh(list(range(n)), (n,), ("data",)), ("data", None))
    _slow_last_step(x, shape, f"a tensor split over {n} devices")


SCENARIO = Scenario(
    id="stale-on-timeout",
    title="A host read whose wait times out hands back the last value read in that layout, as if "
    "it were the tensor's",
    upstream=(),
    component="host transfer: the bounded wait of a read (wait_timeout)",
    trigger="in-place steps each read back, then one step on a device slower than the wait's bound, read at once",
    fault="stale-on-timeout",  # faults.STALE_ON_TIMEOUT
    signatures=(
        Signature("stale-value", StaleRead, r"a read whose wait timed out returned .* a stale value"),
    ),
    variants={"slow-device": slow_device, "sharded-slow-device": sharded_slow_device},
    needs=Needs(max_processes=1, why="the slow device and the wait's bound are this process' options"),
    variant_needs={
        "sharded-slow-device": Needs(devices=2, max_processes=1, why="a value split over two or more devices"),
    },
    story=__doc__ or "",
)
