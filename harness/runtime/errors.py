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


class InvalidBufferError(RuntimeFault):
    """An execution was handed a per-device buffer that is gone (upstream: XLA's "Invalid buffer
    passed to Execute() ... Buffer has been deleted or donated", then SIGSEGV on JAX 0.10)."""


class ExecutionTimeoutError(RuntimeFault):
    """A wait on an execution passed its deadline (``wait_timeout``): the execution never
    completed. Names the program, the step and where the executor thread was stuck."""


class CheckpointError(RuntimeFault):
    """A checkpoint file is missing, truncated, corrupt or not a checkpoint."""
