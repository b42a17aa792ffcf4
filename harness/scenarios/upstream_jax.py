"""The catalog's scenarios against JAX, written in JAX's own API.

The same machinery as ``upstream_torch_xla`` (each variant in a fresh process, judged by its
signatures, the outcome held against ``expected.toml``); the runtime under test is the JAX of the
interpreter that runs the variant (``xharness repro SCENARIO --runtime jax``).
"""

from __future__ import annotations

from harness.scenarios.base import InvariantViolation, Signature
from harness.scenarios.upstream_torch_xla import Reproducer


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

REPRODUCERS: tuple[Reproducer, ...] = (
    Reproducer("host-aliasing", "device-put", device_put_default, "jax-ml/jax#37830",
               signatures=(_ALIASED,), runtime="jax"),
    Reproducer("host-aliasing", "device-put-may-alias-false", device_put_may_alias_false,
               "jax-ml/jax#38086", signatures=(_ALIASED,), runtime="jax"),
)
