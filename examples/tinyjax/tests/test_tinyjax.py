"""tinyjax's own suite: run by `xharness run` in every cell of [tool.xharness], against the
runtime the cell tests (the `adapter` fixture)."""

from __future__ import annotations

import numpy as np
import pytest
from xharness_tinyjax.invariants import SPEC_ROUND_TRIP


def test_values_round_trip(adapter):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(adapter.to_host(adapter.tensor(host)), host)


def test_replicated_tensor_reads_no_spec(adapter, devices):
    mesh = adapter.mesh(range(len(devices)), (len(devices),), ("x",))
    t = adapter.mark_sharding(adapter.tensor(np.ones((2, 2), np.float32)), mesh, (None, None))
    assert adapter.sharding_spec(t) is None


@pytest.mark.devices(2)
def test_rows_split_over_devices(adapter, devices):
    n = len(devices)
    mesh = adapter.mesh(range(n), (n,), ("x",))
    host = np.arange(4 * n, dtype=np.float32).reshape(2 * n, 2)
    t = adapter.mark_sharding(adapter.tensor(host), mesh, ("x", None))
    shards = adapter.device_shards(t)
    assert len(shards) == n
    for index, data in shards.values():
        np.testing.assert_array_equal(data, host[index])
        assert data.shape == (2, 2)


# the plugin's invariant, as a hypothesis test of this suite
test_spec_round_trip = SPEC_ROUND_TRIP.hypothesis_test()
