"""The catalog's scenarios against JAX, written in JAX's own API.

The same machinery as ``upstream_torch_xla`` (each variant in a fresh process, judged by its
signatures, the outcome held against ``expected.toml``); the runtime under test is the JAX of the
interpreter that runs the variant (``xharness repro SCENARIO --runtime jax``).

``host-aliasing`` has a trigger per backend, since its mechanism differs: on the CPU the
``jax.Array`` *is* the numpy buffer (aliasing, #37830), on a GPU the transfer reads the numpy
buffer after ``jax.device_put`` has returned (a race, seen in a field run on an H100). Each names
its own device and says so in its own signature; where the device is missing the variant is
skipped as this machine's lack (``MachineLacks``), never held against the release.
"""

from __future__ import annotations

import signal

from harness.scenarios.base import InvariantViolation, Signature
from harness.scenarios.reproducer import CrashSignature, MachineLacks, Reproducer
from harness.scenarios.upstream_findings import FINDING_REPRODUCERS


class HostAliased(InvariantViolation):
    """A device array changed when the host array it was made from was written."""


class TransferRace(InvariantViolation):
    """A host write made after ``jax.device_put`` returned reached the device array: the
    host-to-device transfer read the numpy buffer later than the call returned."""


def _device(platform: str, what: str) -> object:
    """JAX's first ``platform`` device, or ``MachineLacks`` saying this machine has none (JAX
    raises ``RuntimeError`` for a platform it has no backend of, or was told to leave out with
    ``JAX_PLATFORMS``)."""
    import jax

    try:
        return jax.devices(platform)[0]
    except RuntimeError as exc:
        raise _machine_lacks(f"needs {what}; JAX has none here ({exc})") from None


def _machine_lacks(message: str) -> Exception:
    """This machine lacks what the variant needs (a skip that is never held against a release)."""
    return MachineLacks(message)


def _device_put_then_write(**options: object) -> None:
    import jax
    import numpy as np

    from harness.runtime.testing import aligned_empty

    cpu = _device("cpu", "JAX's CPU backend (the aliasing is XLA's CPU client's)")
    host = aligned_empty((100,))
    host[:] = np.arange(100, dtype=np.float32)
    out = jax.device_put(host, cpu, **options)  # type: ignore[arg-type]
    host[0] = -1.0
    if float(out[0]) != 0.0:
        raise HostAliased(
            f"jax.device_put({', '.join(f'{k}={v}' for k, v in options.items()) or 'x'}) shares the "
            "numpy buffer: writing it changed the jax.Array"
        )


def device_put_default() -> None:
    """Issue #37830's reproducer: a 64-byte aligned float32[100], put on the CPU device, then
    written (the issue's own array is aligned by the allocator; here it is aligned on purpose)."""
    _device_put_then_write()


def device_put_may_alias_false() -> None:
    """The same with ``may_alias=False``, which is documented to copy (PR #38086)."""
    _device_put_then_write(may_alias=False)


_ALIASED = Signature("aliased-host-buffer", HostAliased, r"shares the numpy buffer")


def device_put_then_write_gpu() -> None:
    """The field run's program on a GPU: ``x = np.full((n,), 1.0, np.float32); y =
    jax.device_put(x, gpu); x[:] = 2.0; np.asarray(y)``, over ``RACE_TRIALS`` trials of
    ``RACE_ELEMENTS`` floats (1,048,576: 43 of 50 trials hit on an H100 with JAX 0.11.2); the
    first trial whose device array holds any 2.0 reproduces it. With 16 trials a race that is
    there goes unseen with probability 0.14 ** 16 = 2.2e-14 (``harness.scenarios.host_aliasing``
    states the computation), so the outcome does not depend on luck. A ``jax.device_put`` that
    waits for its transfer to read the buffer, or copies first, passes every trial."""
    import jax
    import numpy as np

    from harness.scenarios.host_aliasing import RACE_ELEMENTS, RACE_TRIALS

    gpu = _device("gpu", "a GPU (the race is the host-to-device transfer's)")
    for trial in range(RACE_TRIALS):
        x = np.full((RACE_ELEMENTS,), 1.0, np.float32)
        y = jax.device_put(x, gpu)  # type: ignore[arg-type]
        x[:] = 2.0
        seen = int(np.count_nonzero(np.asarray(y) != 1.0))
        if seen:
            raise TransferRace(
                f"jax.device_put(x, gpu) returned before the transfer read x: a write made after it "
                f"reached {seen} of {RACE_ELEMENTS} elements of the jax.Array (trial {trial + 1} of "
                f"{RACE_TRIALS})"
            )


_TRANSFER_RACE = Signature("transfer-race", TransferRace, r"returned before the transfer read")


class WrongValues(InvariantViolation):
    """An execution on an array with a deleted per-device buffer returned values."""


#: the devices of the deleted-shard reproducers: enough for the other partitions to run on
SHARD_DEVICES = 8


def _sharded_then(lose_one: str) -> None:
    """An (8, 4) float32 array over 8 CPU devices, ``P("d")``; one per-device buffer is lost
    behind the global array's back, then a jitted ``a * 2 + 1`` runs on it and is waited for."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if len(jax.devices()) < SHARD_DEVICES:
        raise _machine_lacks(f"needs {SHARD_DEVICES} devices, JAX sees {len(jax.devices())}")
    devices = jax.devices()[:SHARD_DEVICES]
    sharding = NamedSharding(Mesh(np.array(devices), ("d",)), PartitionSpec("d"))
    host = np.arange(SHARD_DEVICES * 4, dtype=np.float32).reshape(SHARD_DEVICES, 4)
    x = jax.device_put(host, sharding)
    if lose_one == "delete":
        x.addressable_shards[1].data.delete()
    else:  # donate the piece to another jitted call, then assemble the global array again
        pieces = [shard.data for shard in x.addressable_shards]
        jax.jit(lambda a: a + 1, donate_argnums=0)(pieces[1]).block_until_ready()
        try:
            x = jax.make_array_from_single_device_arrays(x.shape, sharding, pieces)
        except RuntimeError as exc:
            if "called on deleted or donated buffer" in str(exc):
                return  # refused at assembly (0.11 on): no execution is ever handed the piece
            raise
    known = x.is_deleted()  # 0.12.1 on: the whole array says so once any piece is gone
    try:
        out = jax.jit(lambda a: a * 2 + 1)(x)
        out.block_until_ready()
    except RuntimeError as exc:
        if known and "Array has been deleted" in str(exc):
            return  # refused before any execution: the bug is an execution handed the lost buffer
        raise
    got = np.asarray(out)
    raise WrongValues(
        "the execution ran on an array with a deleted per-device buffer and returned "
        + ("the right values" if np.array_equal(got, host * 2 + 1) else "wrong values")
        + f" (is_deleted() said {x.is_deleted()})"
    )


def delete_one_shard() -> None:
    """``x.addressable_shards[1].data.delete()``, then a jitted call on ``x``."""
    _sharded_then("delete")


def donate_one_shard_and_reassemble() -> None:
    """Piece 1 donated to another jitted call, ``make_array_from_single_device_arrays`` of the
    pieces, then a jitted call on it."""
    _sharded_then("donate")


#: what XLA says when an execution is handed the lost buffer: 0.11 and 0.12.0 raise it, 0.10 logs
#: it and then dies. A release that refuses the array first (at assembly from 0.11, before the
#: execution from 0.12.1) passes: that is the fix
_INVALID = Signature("invalid-buffer", Exception, r"Invalid buffer passed to Execute\(\)")
#: 0.10.1 and 0.10.2 log XLA's "Invalid buffer passed to Execute()" first, 0.10.0 dies without a word
_SEGV = CrashSignature("sigsegv", int(signal.SIGSEGV))
_EIGHT_CPUS = {"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(SHARD_DEVICES)}

REPRODUCERS: tuple[Reproducer, ...] = (
    Reproducer("host-aliasing", "device-put", device_put_default, "jax-ml/jax#37830",
               signatures=(_ALIASED,), runtime="jax"),
    Reproducer("host-aliasing", "device-put-may-alias-false", device_put_may_alias_false,
               "jax-ml/jax#38086", signatures=(_ALIASED,), runtime="jax"),
    Reproducer("host-aliasing", "device-put-gpu-transfer-race", device_put_then_write_gpu,
               "field report: a host write right after jax.device_put reaches the GPU array "
               "(no upstream issue)", signatures=(_TRANSFER_RACE,), runtime="jax"),
    Reproducer("deleted-shard", "delete-one-shard", delete_one_shard,
               "field report: a per-device buffer deleted behind the global array (no upstream issue)",
               env=_EIGHT_CPUS, signatures=(_INVALID,), crashes=(_SEGV,), runtime="jax"),
    Reproducer("deleted-shard", "donate-one-shard-and-reassemble", donate_one_shard_and_reassemble,
               "field report; cousin of openxla/xla#22604",
               env=_EIGHT_CPUS, signatures=(_INVALID,), crashes=(_SEGV,), runtime="jax"),
)

#: what ``xharness.upstream`` registers for JAX: the catalog's triggers and the known findings'
#: own reproducers in JAX's API (``upstream_findings``)
TRIGGERS: tuple[Reproducer, ...] = REPRODUCERS + tuple(r for r in FINDING_REPRODUCERS if r.runtime == "jax")
