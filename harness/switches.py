"""The fault switches of the reference runtime: each one's name (the catalog scenario that
re-creates the bug carries the same id) and the upstream fix it undoes. One table, below every
room: the runtime's switches (``harness.runtime.faults``) and the settings' check of
``HARNESS_FAULTS`` both read it, and neither imports the other.
"""

from __future__ import annotations

__all__ = [
    "ALIASED_SAVE",
    "DELETED_SHARD",
    "DOUBLE_DISCOVERY",
    "EXPANDED_GRAD_ACCUMULATION",
    "HOST_ALIASING",
    "LOST_SHARDING",
    "PARTIAL_SYNC_DONATION",
    "RACE_ON_HANDLES",
    "SHARDED_READ_COMPILES",
    "STALE_ON_TIMEOUT",
    "SWITCHES",
    "UNHASHABLE_SPEC",
    "WAIT_GAP",
]

RACE_ON_HANDLES = "race-on-handles"
DOUBLE_DISCOVERY = "double-discovery"
UNHASHABLE_SPEC = "unhashable-spec"
LOST_SHARDING = "lost-sharding"
ALIASED_SAVE = "aliased-save"
WAIT_GAP = "wait-gap"
PARTIAL_SYNC_DONATION = "partial-sync-donation"
HOST_ALIASING = "host-aliasing"
DELETED_SHARD = "deleted-shard"
SHARDED_READ_COMPILES = "sharded-read-compiles"
EXPANDED_GRAD_ACCUMULATION = "expanded-grad-accumulation"
STALE_ON_TIMEOUT = "stale-on-timeout"

#: every switch, with the upstream fix it undoes
SWITCHES: dict[str, str] = {
    RACE_ON_HANDLES: "wait for pending device ops before collecting device-data handles",
    DOUBLE_DISCOVERY: "the skip-discovery guard restores the previous value (re-entrant)",
    UNHASHABLE_SPEC: "partition specs are normalized to tuples, including for 0-d tensors",
    LOST_SHARDING: "shardings survive .to(device) and sit on the custom-sharding node",
    ALIASED_SAVE: "save syncs functional aliases first and never donates buffers",
    WAIT_GAP: "executions are registered for wait_device_ops before launch, not by a later closure",
    PARTIAL_SYNC_DONATION: "a sync of chosen tensors donates nothing: only a full step sees every reader",
    HOST_ALIASING: "a tensor made from a host array copies it before the device sees it",
    DELETED_SHARD: "every per-device buffer of an input is checked before dispatch, not only the global array's flag",
    EXPANDED_GRAD_ACCUMULATION: "a gradient that is an expanded view (x.sum()'s) is materialized when "
    "it becomes .grad, so a later in-place accumulation does not write through the view",
    SHARDED_READ_COMPILES: "a host read of a split value gathers its pieces without building and compiling a program each time",
    STALE_ON_TIMEOUT: "a host read whose wait times out (a slow device, a peer cut off) raises; it never "
    "hands back the last value read in that layout",
}
