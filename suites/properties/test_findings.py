"""What the invariants found in the reference runtime, pinned as plain regression tests.

Each test is the shrunk counterexample an invariant reported, written out so the bug stays fixed
even if the search is changed; the invariant named in each docstring found it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import kernels, topology

NDEV = len(jax.devices())


@pytest.mark.skipif(NDEV < 2, reason="a device order needs two devices to be permuted")
@pytest.mark.parametrize("spec", [(), ("fsdp",)], ids=["replicated", "sharded"])
def test_a_mesh_over_permuted_devices_compiles(spec: tuple) -> None:
    """round-trip: a value laid out over ``Mesh([.., 7, 6])`` and written in place failed to
    compile ("Received incompatible devices for jitted computation")."""
    ids = list(range(NDEV))
    ids[-2:] = ids[-1], ids[-2]
    mesh = xr.Mesh(ids, (NDEV,), ("fsdp",))
    value = np.arange(NDEV, dtype=np.float32) if spec else np.float32(3)
    t = xr.tensor(np.zeros_like(value))
    xr.mark_sharding(t, mesh, spec)
    t.copy_(xr.tensor(value))
    t.add_(1.0)
    assert np.array_equal(t.numpy(), value + 1)
    assert xr.sharding_spec(t) == (spec or None)


def test_a_numpy_scalar_keeps_its_dtype_through_a_checkpoint(tmp_path: Path) -> None:
    """round-trip: ``np.float32`` in a checkpoint came back as a Python float."""
    xr.save({"step": np.int16(7), "scale": np.float32(0.5)}, tmp_path / "c.xh")
    loaded = xr.load(tmp_path / "c.xh")
    assert type(loaded["step"]) is np.int16 and loaded["step"] == 7
    assert type(loaded["scale"]) is np.float32 and loaded["scale"] == np.float32(0.5)


def _aligned_zeros(count: int, align: int = 64) -> np.ndarray:
    """A float32 array on a 64-byte boundary: the buffers XLA on CPU adopts without copying."""
    raw = np.zeros(count * 4 + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start : start + count * 4].view(np.float32)


@pytest.mark.parametrize("count", [16, 4096])
def test_writing_the_host_array_after_tensor_leaves_the_tensor_alone(count: int) -> None:
    """round-trip: the device buffer aliased the caller's (aligned) numpy array."""
    host = _aligned_zeros(count)
    t = xr.tensor(host)
    host += 1
    assert not t.numpy().any()


def test_one_threads_guard_exit_keeps_the_flag_under_anothers_open_guard() -> None:
    """discovery-idempotence: with a per-call save/restore, thread A's exit restored "unset" while
    thread B was still inside its guard, so B's kernel backend discovered again."""
    a_inside, b_inside, a_left, b_may_leave = (threading.Event() for _ in range(4))
    seen: list[str | None] = []

    def a() -> None:
        with kernels.jax_env_context():
            a_inside.set()
            b_inside.wait(10)
        a_left.set()

    def b() -> None:
        a_inside.wait(10)
        with kernels.jax_env_context():
            b_inside.set()
            a_left.wait(10)
            seen.append(os.environ.get(topology.SKIP_DISCOVERY_FLAG))  # A has left, B has not
            b_may_leave.wait(10)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    a_left.wait(10)
    b_may_leave.set()
    for t in threads:
        t.join(10)
    assert seen == ["true"]
    assert topology.SKIP_DISCOVERY_FLAG not in os.environ


def test_normalize_spec_refuses_what_cannot_mean_anything() -> None:
    """spec-normalization: a bare string became one axis per letter; a nested group stayed a list."""
    with pytest.raises(TypeError, match="'data'"):
        xr.normalize_spec("data")
    with pytest.raises(TypeError, match=r"\[\['a', \['b'\]\]\]"):
        xr.normalize_spec([["a", ["b"]]])
    with pytest.raises(ValueError, match="more than once"):
        xr.normalize_spec(["a", "a"])
    assert xr.normalize_spec(["a", ["b", "c"]], ndim=3) == ("a", ("b", "c"), None)


@pytest.mark.skipif(NDEV < 2, reason="a device order needs two devices to be permuted")
def test_marking_a_view_over_a_permuted_mesh_compiles() -> None:
    """view-sharding: a view marked over ``Mesh([.., 7, 6])`` put a sharding constraint over that
    device order inside a program whose inputs were in the default order, and the step failed to
    compile ("sharding_constraint inside jit with device ids [..., 7, 6]")."""
    ids = list(range(NDEV))
    ids[-2:] = ids[-1], ids[-2]
    mesh = xr.Mesh(ids, (NDEV,), ("fsdp",))
    values = np.arange(NDEV * 2, dtype=np.float32).reshape(2, NDEV)
    t = xr.tensor(values)
    view = t.T
    xr.mark_sharding(view, mesh, (None, None))
    xr.mark_step()
    assert np.array_equal(view.numpy(), values.T)
    xr.mark_sharding(view, mesh, ("fsdp", None))
    xr.mark_step()
    assert xr.sharding_spec(t) == (None, "fsdp")
