"""Sharding annotations, FSDPv2 arguments and optimizer state layouts: the edge cases."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import faults, plan_cache

NDEV = len(jax.devices())
pytestmark = pytest.mark.skipif(NDEV < 8, reason="needs 8 devices")


@pytest.fixture
def fsdp_mesh() -> xr.Mesh:
    return xr.Mesh(np.arange(8), (8,), ("fsdp",))


def _ones(*shape: int) -> xr.Tensor:
    return xr.tensor(np.ones(shape, np.float32))


# ---------------------------------------------------------------- mark_sharding: spec types


def test_string_spec_is_a_type_error(fsdp_mesh: xr.Mesh) -> None:
    with pytest.raises(TypeError, match=r"partition spec must be a tuple.*got str 'fsdp'"):
        xr.mark_sharding(_ones(8, 2), fsdp_mesh, "fsdp")


@pytest.mark.parametrize("spec", [(1, None), ("fsdp", ["x"]), (("fsdp", 2), None), (None, 3.0)])
def test_bad_spec_entry_is_a_type_error(fsdp_mesh: xr.Mesh, spec: tuple) -> None:
    with pytest.raises(TypeError, match=r"partition spec entry .* must be None, an axis name or a tuple of axis names"):
        xr.mark_sharding(_ones(8, 2), fsdp_mesh, spec)


def test_list_spec_still_reaches_the_cache(fsdp_mesh: xr.Mesh) -> None:
    """Upstream passed the spec straight to the cached lookup; the unhashable-spec scenario relies on it."""
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        xr.mark_sharding(_ones(8, 2), fsdp_mesh, ["fsdp", None])


def test_unhashable_spec_scenario_signature_unchanged(fsdp_mesh: xr.Mesh) -> None:
    with faults.inject(faults.UNHASHABLE_SPEC), pytest.raises(TypeError, match="unhashable type: 'list'"):
        xr.fsdp.FSDPv2(xr.models.ScaledMLP(32, 16, 8), fsdp_mesh)


# ---------------------------------------------------------------- sharding_spec of aliases


def test_detached_alias_reports_the_storage_spec(fsdp_mesh: xr.Mesh) -> None:
    t = xr.mark_sharding(_ones(8, 2), fsdp_mesh, ("fsdp", None))
    assert xr.sharding_spec(t.detach()) == ("fsdp", None)
    assert xr.sharding_spec(t.detach().detach()) == ("fsdp", None)
    assert xr.sharding_spec(t.view(16)) is None, "a real view still reports nothing"


def test_state_dict_reports_fsdp_specs(fsdp_mesh: xr.Mesh) -> None:
    model = xr.fsdp.FSDPv2(xr.models.ScaledMLP(32, 16, 8), fsdp_mesh)
    specs = {name: xr.sharding_spec(p) for name, p in model.state_dict().items()}
    assert any(s is not None for s in specs.values()), specs
    for name, p in model.named_parameters():
        assert specs[name] == xr.sharding_spec(p), name


def test_detached_alias_of_pending_sharded_tensor(fsdp_mesh: xr.Mesh) -> None:
    t = _ones(8, 2) * 2
    xr.mark_sharding(t, fsdp_mesh, ("fsdp", None))
    assert xr.sharding_spec(t.detach()) == ("fsdp", None)


# ---------------------------------------------------------------- clear_sharding of pending values


def test_clear_sharding_of_pending_custom_sharding(fsdp_mesh: xr.Mesh) -> None:
    t = _ones(8, 2) * 2
    xr.mark_sharding(t, fsdp_mesh, ("fsdp", None))
    assert t._storage.node.op == "custom_sharding"
    xr.sharding.clear_sharding(t)
    xr.mark_step()
    assert xr.sharding_spec(t) is None
    assert t._storage.node.data.sharding.is_fully_replicated
    np.testing.assert_array_equal(t.numpy(), np.full((8, 2), 2, np.float32))


def test_clear_sharding_of_pending_value_derived_from_sharded(fsdp_mesh: xr.Mesh) -> None:
    a = xr.mark_sharding(_ones(8, 2), fsdp_mesh, ("fsdp", None))
    t = a * 3
    xr.sharding.clear_sharding(t)
    xr.mark_step()
    assert t._storage.node.data.sharding.is_fully_replicated
    np.testing.assert_array_equal(t.numpy(), np.full((8, 2), 3, np.float32))


# ---------------------------------------------------------------- FSDPv2 arguments


def test_fsdp_unknown_extra_data_axis(fsdp_mesh: xr.Mesh) -> None:
    with pytest.raises(ValueError, match=r"extra_data_axis 'data'.*not an axis of the mesh.*\('fsdp',\)"):
        xr.fsdp.FSDPv2(xr.models.LinearModel(8, 8), fsdp_mesh, extra_data_axis="data")


def test_prepare_partition_spec_unknown_extra_data_axis(fsdp_mesh: xr.Mesh) -> None:
    with pytest.raises(ValueError, match="'data'"):
        xr.fsdp.prepare_partition_spec(_ones(8, 8), fsdp_mesh, extra_data_axis="data")


def test_fsdp_known_extra_data_axis() -> None:
    mesh = xr.Mesh(np.arange(8), (2, 4), ("data", "fsdp"))
    model = xr.fsdp.FSDPv2(xr.models.LinearModel(8, 8), mesh, extra_data_axis="data")
    assert any(xr.sharding_spec(p) == (("data", "fsdp"), None) for p in model.parameters())


# ---------------------------------------------------------------- optimizer state layouts


def _train(opt_factory, mesh: xr.Mesh, steps: int = 4, features: int = 8) -> list[int]:  # noqa: ANN001
    model = xr.fsdp.FSDPv2(xr.models.LinearModel(16, features), mesh)
    opt = opt_factory(model.parameters())
    rng = np.random.default_rng(0)
    counts = []
    for _ in range(steps):
        x = xr.tensor(rng.standard_normal((16, 16)).astype(np.float32))
        loss = xr.nn.mse_loss(model(x), xr.tensor(np.zeros((16, features), np.float32)))
        loss.backward()
        opt.step()
        opt.zero_grad()
        xr.mark_step()
        xr.wait_device_ops()
        counts.append(xr.compile_count())
    return counts


@pytest.mark.parametrize(
    "factory",
    [lambda ps: xr.optim.Adam(ps, lr=1e-3), lambda ps: xr.optim.SGD(ps, lr=0.1, momentum=0.9)],
    ids=["adam", "sgd-momentum"],
)
@pytest.mark.parametrize("features", [8, 10], ids=["every-param-split", "bias-replicated-on-the-mesh"])
def test_optimizer_state_keeps_fsdp_layout(fsdp_mesh: xr.Mesh, factory, features: int) -> None:  # noqa: ANN001
    # with 10 features the bias cannot be split over 8 devices: FSDPv2 lays it out replicated on
    # the fsdp mesh, and its state must start there too, not on the default replicated layout
    # (equal values, another mesh: a second program at step 2)
    counts = _train(factory, fsdp_mesh, features=features)
    assert counts[1:] == [counts[0]] * (len(counts) - 1), f"compile counts per step {counts}"


def test_adam_state_is_laid_out_like_its_parameter(fsdp_mesh: xr.Mesh) -> None:
    model = xr.fsdp.FSDPv2(xr.models.LinearModel(16, 8), fsdp_mesh)
    opt = xr.optim.Adam(model.parameters())
    for p, m, v in zip(opt.params, opt._m, opt._v, strict=True):
        assert xr.sharding_spec(m) == xr.sharding_spec(p) == xr.sharding_spec(v)
        assert m._storage.sharding is p._storage.sharding


def test_optimizer_state_of_replicated_params_stays_replicated() -> None:
    model = xr.models.LinearModel(4, 2)
    opt = xr.optim.Adam(model.parameters())
    assert all(xr.sharding_spec(m) is None and m._storage.sharding is None for m in opt._m)
    assert plan_cache.compile_count() >= 0
