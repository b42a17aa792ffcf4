"""The PyTorch/XLA adapter against the release in this interpreter (skipped where there is none;
``bash ci/releases.sh`` runs this module inside a release's environment). Everything asserted here
was read back from the runtime: shard indices and data, its own sharding text, host copies."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch_xla") is None,
    reason="torch_xla is not installed in this interpreter (bash ci/releases.sh runs these tests "
    "inside a release's environment)",
)


@pytest.fixture(scope="module")
def rt():
    from harness import adapters

    return adapters.get("torch_xla")


@pytest.fixture(scope="module")
def release(rt):
    from packaging.version import Version

    return Version(Version(rt.version()).public)


def test_it_declares_only_what_it_can_observe(rt) -> None:
    from harness.adapters import base

    assert {base.TENSORS, base.MESHES, base.SHARDING, base.SHARDING_READBACK, base.STEP,
            base.ALIASING, base.SAVE} <= rt.capabilities
    for lacking in (base.DISCOVERY_COUNT, base.FAULT_SWITCHES, base.DONATION, base.TRAINING):
        assert lacking not in rt.capabilities
    with pytest.raises(base.Unsupported, match=rf"runtime torch_xla {rt.version()} lacks discovery-count"):
        base.require(rt, base.DISCOVERY_COUNT)
    with pytest.raises(base.Unsupported, match="lacks discovery-count"):
        rt.discovery_count()


def test_values_survive_the_round_trip_bit_for_bit(rt) -> None:
    import ml_dtypes

    for values in (np.array([1.5, -0.0, np.inf], np.float32), np.arange(6, dtype=np.int32).reshape(2, 3),
                   np.array(-0.0, np.float32),  # 0-d stays 0-d
                   np.array([1.5, -0.0], ml_dtypes.bfloat16), np.array([True, False])):
        host = values.copy()
        t = rt.tensor(host)
        host[...] = 0  # the tensor holds a copy
        back = rt.to_host(t)
        assert back.dtype == values.dtype and back.shape == values.shape
        assert back.tobytes() == values.tobytes()


@pytest.mark.parametrize("spec", [("b", None), (("a", "b"), None), (None, "a"), ("a", "b"), (None, None),
                                  (("b", "a"), None)])
def test_shards_and_spec_are_read_back_from_the_runtime(rt, spec) -> None:
    n = rt.device_count()
    if n < 4 or n % 2:
        pytest.skip(f"needs an even device count of at least 4, the runtime has {n}")
    ids = list(np.random.default_rng(0).permutation(n))
    mesh = rt.mesh(ids, (2, n // 2), ("a", "b"))
    host = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
    t = rt.mark_sharding(rt.tensor(host), mesh, spec)
    assert rt.sharding_spec(t) == (None if spec == (None, None) else spec)
    shards = rt.device_shards(t)
    assert sorted(shards) == list(range(n))
    for index, data in shards.values():
        np.testing.assert_array_equal(data, host[index])


def test_writes_through_an_alias_are_seen_after_a_step(rt) -> None:
    t = rt.tensor(np.arange(4, dtype=np.float32))
    d = rt.alias(t, "detach")
    rt.inplace(d, "add", 1)
    rt.step()
    np.testing.assert_array_equal(rt.to_host(t), np.arange(4, dtype=np.float32) + 1)
    v = rt.alias(t, "reshape", (2, 2))
    rt.inplace(v, "mul", 2)
    np.testing.assert_array_equal(rt.to_host(t), (np.arange(4, dtype=np.float32) + 1) * 2)


def test_save_writes_what_load_reads(rt, tmp_path) -> None:
    t = rt.derive(rt.tensor(np.arange(3, dtype=np.float32)))
    rt.save({"w": t}, str(tmp_path / "w.pt"))
    np.testing.assert_array_equal(rt.load(str(tmp_path / "w.pt"))["w"], np.arange(3, dtype=np.float32) * 2 + 1)


def test_fsdp_spec_of_a_scalar_is_what_the_release_returns(rt, release) -> None:
    """Measured: 2.5.1 returns the list of #8522, releases with PR #8613 a tuple."""
    from packaging.version import Version

    mesh = rt.mesh(list(range(rt.device_count())), (rt.device_count(),), ("fsdp",))
    spec = rt.prepare_fsdp_spec((), mesh)
    if release < Version("2.6"):
        assert spec == [] and isinstance(spec, list)
        with pytest.raises(TypeError, match="unhashable type: 'list'"):
            rt.op_sharding(mesh, spec)
    else:
        assert spec == ()
        rt.op_sharding(mesh, spec)
