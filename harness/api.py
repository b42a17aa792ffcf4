"""What a plugin needs, and all it may rely on: the stable surface for plugin authors.

A distribution extends the harness through entry-point groups (docs/how-to/write-a-plugin.md):
``xharness.runtimes`` names an adapter class (``Adapter``, most easily a subclass of
``BaseAdapter``), ``xharness.scenarios`` a ``Scenario``, and ``xharness.invariants`` an
``Invariant``. Everything a plugin imports comes from this module; the names here keep their
meaning across releases of the harness, and every other module of the harness may change.

The capability names (``TENSORS``, ``MESHES``, ``SHARDING``... and ``CAPABILITIES``, every one)
are what an adapter declares in ``capabilities`` and what a check ``require``s or ``needs``.

The network faults (``Partition``, ``Flap``, ``Pause``, ``Kill``, ``Throttle``, ``Late``, started
``At`` a time or ``AtPoint`` a named point) are values a test passes to ``run_faulted`` (or to the
plugin's ``nemesis`` fixture) with a ``JobSpec``; docs/how-to/network-faults.md shows them.

A runtime's upstream triggers (``Reproducer``, judged by a ``Signature`` or a ``CrashSignature``;
``MachineLacks`` skips one this machine cannot host) are registered as a tuple in a fourth group,
``xharness.upstream``, named by the runtime: ``xharness report upstream ID --runtime NAME`` then
writes the ready-to-file report of the runtime's own bug. The bugs a check found in the runtime
(``KnownFinding``: the invariant, the upstream issue or the searches that found none, a summary,
the failure's pattern, and an ``id`` its trigger and its rows in the project's expected table carry)
are registered as a tuple in a fifth group, ``xharness.findings``, named by the runtime: the
invariant's ready test then expects the failure on the releases the rows say carry it, and the
dashboard and the summary list it with its report.
"""

from __future__ import annotations

from harness.adapters import current, get, require
from harness.adapters.base import (
    ALIASING,
    ASYNC_SYNC,
    BEHAVIOURS,
    CAPABILITIES,
    DISCOVERY_COUNT,
    DONATION,
    FAULT_SWITCHES,
    FSDP,
    HANDLES,
    LOCAL_SHARDS,
    MESHES,
    OP_SHARDING,
    PADS_UNEVEN,
    SAVE,
    SHARDING,
    SHARDING_READBACK,
    STEP,
    TENSORS,
    TRAINING,
    TRAINING_PROGRAMS,
    VIEW_BASE_LAYOUT,
    Adapter,
    AdapterUnavailable,
    BaseAdapter,
    Unsupported,
)
from harness.cell_shape import CellShape, cell_shape
from harness.network import (
    At,
    AtPoint,
    Flap,
    JobSpec,
    Kill,
    Late,
    Partition,
    Pause,
    Throttle,
    run_faulted,
)
from harness.network import Fault as NetworkFault
from harness.properties.base import Invariant
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario, Signature
from harness.scenarios.known_findings import KnownFinding
from harness.scenarios.reproducer import CrashSignature, MachineLacks, Reproducer

__all__ = [
    "At",
    "AtPoint",
    "Flap",
    "JobSpec",
    "Kill",
    "Late",
    "NetworkFault",
    "Partition",
    "Pause",
    "Throttle",
    "run_faulted",
    "ALIASING",
    "ASYNC_SYNC",
    "BEHAVIOURS",
    "CAPABILITIES",
    "DISCOVERY_COUNT",
    "DONATION",
    "FAULT_SWITCHES",
    "FSDP",
    "HANDLES",
    "LOCAL_SHARDS",
    "MESHES",
    "OP_SHARDING",
    "PADS_UNEVEN",
    "SAVE",
    "SHARDING",
    "SHARDING_READBACK",
    "STEP",
    "TENSORS",
    "TRAINING",
    "TRAINING_PROGRAMS",
    "VIEW_BASE_LAYOUT",
    "Adapter",
    "AdapterUnavailable",
    "BaseAdapter",
    "CellShape",
    "Context",
    "CrashSignature",
    "Invariant",
    "InvariantViolation",
    "KnownFinding",
    "MachineLacks",
    "Needs",
    "Reproducer",
    "Scenario",
    "Signature",
    "Unsupported",
    "cell_shape",
    "current",
    "get",
    "require",
]
