"""The catalog's scenarios against JAX, written in JAX's own API.

The same machinery as ``upstream_torch_xla`` (each variant in a fresh process, judged by its
signatures, the outcome held against ``expected.toml``); the runtime under test is the JAX of the
interpreter that runs the variant (``xharness repro SCENARIO --runtime jax``).
"""

from __future__ import annotations

import signal

from harness.scenarios.base import InvariantViolation, Signature
from harness.scenarios.reproducer import CrashSignature, Reproducer


class HostAliased(InvariantViolation):
    """A device array changed when the host array it was made from was written."""


def _device_put_then_write(**options: object) -> None:
    import jax
    import numpy as np

    from harness.runtime.testing import aligned_empty

    host = aligned_empty((100,))
    host[:] = np.arange(100, dtype=np.float32)
    out = jax.device_put(host, jax.devices("cpu")[0], **options)  # type: ignore[arg-type]
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
        from harness.scenarios.upstream_torch_xla import MachineLacks

        raise MachineLacks(f"needs {SHARD_DEVICES} devices, JAX sees {len(jax.devices())}")
    devices = jax.devices()[:SHARD_DEVICES]
    sharding = NamedSharding(Mesh(np.array(devices), ("d",)), PartitionSpec("d"))
    host = np.arange(SHARD_DEVICES * 4, dtype=np.float32).reshape(SHARD_DEVICES, 4)
    x = jax.device_put(host, sharding)
    if lose_one == "delete":
        x.addressable_shards[1].data.delete()
    else:  # donate the piece to another jitted call, then assemble the global array again
        pieces = [shard.data for shard in x.addressable_shards]
        jax.jit(lambda a: a + 1, donate_argnums=0)(pieces[1]).block_until_ready()
        x = jax.make_array_from_single_device_arrays(x.shape, sharding, pieces)
    out = jax.jit(lambda a: a * 2 + 1)(x)
    out.block_until_ready()
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


#: what JAX 0.11 raises (at the execution, or already at the assembly); 0.10 logs the first line
#: and then dies
_INVALID = Signature(
    "invalid-buffer", Exception,
    r"Invalid buffer passed to Execute\(\)|called on deleted or donated buffer|has been deleted",
)
#: 0.10.1 and 0.10.2 log XLA's "Invalid buffer passed to Execute()" first, 0.10.0 dies without a word
_SEGV = CrashSignature("sigsegv", int(signal.SIGSEGV))
_EIGHT_CPUS = {"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(SHARD_DEVICES)}

REPRODUCERS: tuple[Reproducer, ...] = (
    Reproducer("host-aliasing", "device-put", device_put_default, "jax-ml/jax#37830",
               signatures=(_ALIASED,), runtime="jax"),
    Reproducer("host-aliasing", "device-put-may-alias-false", device_put_may_alias_false,
               "jax-ml/jax#38086", signatures=(_ALIASED,), runtime="jax"),
    Reproducer("deleted-shard", "delete-one-shard", delete_one_shard,
               "field report: a per-device buffer deleted behind the global array (no upstream issue)",
               env=_EIGHT_CPUS, signatures=(_INVALID,), crashes=(_SEGV,), runtime="jax"),
    Reproducer("deleted-shard", "donate-one-shard-and-reassemble", donate_one_shard_and_reassemble,
               "field report; cousin of openxla/xla#22604",
               env=_EIGHT_CPUS, signatures=(_INVALID,), crashes=(_SEGV,), runtime="jax"),
)
