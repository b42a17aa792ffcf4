"""Reproducers of the known findings that no catalog scenario re-creates, in PyTorch/XLA's API.

A finding of an invariant (``harness.scenarios.known_findings.KNOWN_FINDINGS``) whose mechanism is the
runtime's own (a backend's arithmetic, a canonicalization) needs no fault switch in the reference
runtime to be worth filing: the invariant that found it is its teeth. What it needs is the shrunk
program, written in the runtime's API, so that the release job can watch it (its rows in
``expected.toml`` carry the finding's ``id``, and a release that stops showing it is
``unexpectedly-fixed``) and ``xharness report upstream ID`` can file it. These run exactly as the
catalog's triggers do (``upstream_torch_xla``, which lists them with its own); this module imports
neither that one nor the expected-outcomes table, which reads the names from here.
"""

from __future__ import annotations

from typing import Any

from harness.scenarios.base import InvariantViolation, Signature
from harness.scenarios.reproducer import MachineLacks, Reproducer, torch_xla_sharding_api


class BitsChanged(InvariantViolation):
    """A value read back from the device differs, bit for bit, from the one written."""


#: bfloat16 bit patterns: a quiet NaN with a payload, a signalling NaN, a negative quiet NaN with
#: a payload, and 1.0 (which must survive anyway)
BF16_NAN_PAYLOADS = (0x7FC1, 0x7F81, 0xFFC3, 0x3F80)


def _vector_mesh() -> tuple[Any, int]:
    """SPMD on, and a one-axis mesh over every device."""
    import numpy as np
    import torch_xla.runtime as xr

    xs = torch_xla_sharding_api()
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    if n < 2:
        raise MachineLacks(f"needs 2 or more devices to split a value over, this process has {n}")
    return xs.Mesh(np.arange(n), (n,), ("x",)), n


def _bits16(t: Any) -> list[int]:
    """A bfloat16 tensor's bit patterns (through torch alone: some releases' torch cannot hand
    arrays to the numpy installed beside them)."""
    import torch

    return [b & 0xFFFF for b in t.detach().cpu().view(torch.int16).tolist()]


def bfloat16_nan_payloads_resharded() -> None:
    """The round-trip invariant's shrunk example: bfloat16 data on the device, given a sharding
    with ``mark_sharding``, read back bit for bit."""
    import torch
    import torch_xla.core.xla_model as xm

    mesh, n = _vector_mesh()
    bits = [BF16_NAN_PAYLOADS[i % len(BF16_NAN_PAYLOADS)] for i in range(2 * n)]
    signed = [b - 0x10000 if b & 0x8000 else b for b in bits]
    t = torch.tensor(signed, dtype=torch.int16).view(torch.bfloat16).to(xm.xla_device())
    if _bits16(t) != bits:
        raise AssertionError("the transfer to the device already changed the bits")
    torch_xla_sharding_api().mark_sharding(t, mesh, ("x",))
    got = _bits16(t)
    if got != bits:
        numbers_kept = all(g == b for g, b in zip(got, bits, strict=True) if b & 0x7F80 != 0x7F80)
        which = "only NaN payloads differ" if numbers_kept else "numbers differ"
        raise BitsChanged(
            f"mark_sharding of bfloat16 data on the device changed its bits ({which}): wrote "
            f"{[hex(b) for b in bits[:4]]}, read {[hex(b) for b in got[:4]]}"
        )


def subnormals_through_a_sharded_view() -> None:
    """The round-trip invariant's shrunk example: float32 subnormals in a value split over the
    devices, one element each, read through a strided view."""
    import torch
    import torch_xla.core.xla_model as xm

    mesh, n = _vector_mesh()
    tiny = torch.finfo(torch.float32).tiny
    values = [(1e-45, 1.0, 2e-45, 3.0)[i % 4] for i in range(n)]
    t = torch.tensor(values, dtype=torch.float32).to(xm.xla_device())
    torch_xla_sharding_api().mark_sharding(t, mesh, ("x",))
    got = t[::2].cpu()
    want = torch.tensor(values[::2], dtype=torch.float32)
    if not torch.equal(got.view(torch.int32), want.view(torch.int32)):
        flushed = torch.where((want != 0) & (want.abs() < tiny), torch.zeros_like(want), want)
        which = "only subnormal numbers differ: flushed to zero" if torch.equal(got, flushed) else "numbers differ"
        raise BitsChanged(
            f"x[::2] of a float32 value split over {n} devices ({which}): wrote {want[:2].tolist()}, "
            f"read {got[:2].tolist()}"
        )


_NAN_PAYLOADS_REWRITTEN = Signature("nan-payloads-rewritten", BitsChanged, r"only NaN payloads differ")
_SUBNORMALS_FLUSHED = Signature("subnormals-flushed", BitsChanged, r"only subnormal numbers differ")


#: the reproducers of known findings that no catalog scenario re-creates, each named by the
#: finding's ``id`` (its rows in the expected-outcomes table use the same name)
FINDING_REPRODUCERS: tuple[Reproducer, ...] = (
    Reproducer(
        "nan-payload-resharding", "bfloat16-mark-sharding", bfloat16_nan_payloads_resharded,
        "the shrunk counterexample of the round-trip invariant", signatures=(_NAN_PAYLOADS_REWRITTEN,),
    ),
    Reproducer(
        "subnormal-flush-sharded-view", "strided-read-of-split-value", subnormals_through_a_sharded_view,
        "the shrunk counterexample of the round-trip invariant", signatures=(_SUBNORMALS_FLUSHED,),
    ),
)


def finding_names(runtime: str | None = None) -> list[str]:
    """The known findings (no catalog scenario's) with reproducers here, for ``runtime`` or any."""
    return list(dict.fromkeys(r.scenario for r in FINDING_REPRODUCERS if runtime in (None, r.runtime)))
