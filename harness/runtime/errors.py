"""Exceptions the runtime raises, one per failure signature the catalog looks for.

Each mirrors the message an upstream runtime printed for the same fault, so that a scenario's
expected signature (exception type plus message pattern) reads like the original bug report.
"""

from __future__ import annotations


class RuntimeFault(RuntimeError):
    """Base class of every runtime failure signature."""


class PlaceholderAccessError(RuntimeFault):
    """A placeholder device datum was read before its execution filled it (upstream: SIG11 in
    ``PjRtShardedData::GetHandle()``)."""


class DuplicateDiscoveryError(RuntimeFault):
    """Slice topology discovery ran a second time in one process (upstream: MegaScale discovery
    re-run by JAX's backend during Pallas lowering on multi-slice)."""


class ShardingLostError(RuntimeFault):
    """A sharding annotation did not reach the node that needs it (upstream: "Check failed:
    has_sharding()", "Sharding instruction must have a sharding attribute")."""


class DonatedBufferError(RuntimeFault):
    """A donated (deleted) buffer was read again (upstream: "buffer with shape ... is deleted")."""


class CheckpointError(RuntimeFault):
    """A checkpoint file is missing, truncated, corrupt or not a checkpoint."""
