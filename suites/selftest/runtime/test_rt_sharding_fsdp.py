"""mark_sharding / sharding_spec, and the layout of every parameter after FSDPv2."""

from __future__ import annotations

from collections.abc import Iterator

import jax
import numpy as np
import pytest

import harness.runtime as xr

NDEV = len(jax.devices())
pytestmark = pytest.mark.skipif(NDEV < 8, reason="needs 8 devices")
X = np.arange(64, dtype=np.float32).reshape(8, 8)


@pytest.fixture
def mesh() -> xr.Mesh:
    return xr.Mesh(np.arange(8), (4, 2), ("data", "model"))


@pytest.fixture
def fsdp_mesh() -> xr.Mesh:
    return xr.Mesh(np.arange(8), (8,), ("fsdp",))


@pytest.fixture(params=[True, False], ids=["functionalization", "no-functionalization"])
def functionalization(request: pytest.FixtureRequest) -> Iterator[bool]:
    prev = xr.configure(functionalization=request.param)
    try:
        yield request.param
    finally:
        xr.config.restore(prev)


def _shard_shape(t: xr.Tensor) -> tuple[int, ...]:
    """Shape of one device's piece of ``t``'s actual buffer."""
    array = t._storage.node.data.array()
    return tuple(array.addressable_shards[0].data.shape)


def test_mark_sharding_on_device_data(mesh: xr.Mesh) -> None:
    t = xr.tensor(X)
    assert xr.sharding_spec(t) is None and not xr.is_sharded(t)
    assert xr.mark_sharding(t, mesh, ("data", "model")) is t
    assert xr.sharding_spec(t) == ("data", "model")
    assert _shard_shape(t) == (2, 4)
    np.testing.assert_array_equal(t.numpy(), X)
    xr.mark_sharding(t, mesh, (None, ("data", "model")))
    assert xr.sharding_spec(t) == (None, ("data", "model")) and _shard_shape(t) == (8, 1)
    xr.clear_sharding(t)
    assert xr.sharding_spec(t) is None and _shard_shape(t) == (8, 8)
    np.testing.assert_array_equal(t.numpy(), X)


def test_mark_sharding_on_pending_tensor(mesh: xr.Mesh, functionalization: bool) -> None:
    a = xr.tensor(X)
    b = a * 2
    xr.mark_sharding(b, mesh, (None, "data"))
    assert b._storage.pending
    assert xr.sharding_spec(b) == (None, "data")
    xr.mark_step()
    assert xr.sharding_spec(b) == (None, "data") and _shard_shape(b) == (8, 2)
    np.testing.assert_array_equal(b.numpy(), X * 2)
    c = b + 1  # the layout flows on to values computed from b
    xr.mark_step()
    assert xr.sharding_spec(c) == (None, "data") and _shard_shape(c) == (8, 2)
    np.testing.assert_array_equal(c.numpy(), X * 2 + 1)


def test_mark_sharding_through_a_view(mesh: xr.Mesh, functionalization: bool) -> None:
    base = xr.tensor(X) + 0
    view = base.T
    xr.mark_sharding(view, mesh, ("data", None))
    assert xr.sharding_spec(view) is None, "a view reports no layout of its own"
    xr.mark_step()
    # the view's layout lands on its base, transposed: the base's columns split over "data"
    assert xr.sharding_spec(base) == (None, "data")
    assert _shard_shape(base) == (8, 2)
    np.testing.assert_array_equal(base.numpy(), X)
    np.testing.assert_array_equal(view.numpy(), X.T)


def test_mark_sharding_errors(mesh: xr.Mesh) -> None:
    t = xr.tensor(X)
    with pytest.raises(ValueError, match="2-d tensor"):
        xr.mark_sharding(t, mesh, ("data",))
    with pytest.raises(ValueError, match="cannot be split evenly"):
        xr.mark_sharding(xr.tensor(np.ones((6, 8))), mesh, ("data", None))
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        xr.mark_sharding(t, mesh, ["data", None])
    with pytest.raises(ValueError, match="not in mesh axes"):
        xr.mark_sharding(t, mesh, ("fsdp", None))


def _expected_spec(shape: tuple[int, ...], parts: int) -> tuple | None:
    """FSDPv2's rule: the first dimension divisible by the fsdp axis size, else replicated."""
    for dim, size in enumerate(shape):
        if size % parts == 0:
            return tuple("fsdp" if d == dim else None for d in range(len(shape)))
    return None


MODELS = {
    "mlp": lambda: xr.models.MLP(8, 16, 4),
    "scaled-mlp": lambda: xr.models.ScaledMLP(8, 16, 4),
    "tiny-vit": lambda: xr.models.TinyViT(use_kernel=False),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_fsdpv2_shards_every_parameter(name: str, fsdp_mesh: xr.Mesh, functionalization: bool) -> None:
    xr.manual_seed(3)
    model = MODELS[name]()
    before = {n: p.numpy() for n, p in model.named_parameters()}
    wrapped = xr.fsdp.FSDPv2(model, fsdp_mesh)
    params = dict(model.named_parameters())
    assert dict(wrapped.named_parameters()).keys() == {f"module.{n}" for n in params}
    sharded = 0
    for n, p in params.items():
        expected = _expected_spec(p.shape, 8)
        assert xr.sharding_spec(p) == expected, f"{n} {p.shape}"
        if expected is not None:
            sharded += 1
            dim = expected.index("fsdp")
            assert _shard_shape(p)[dim] == p.shape[dim] // 8, n
        np.testing.assert_array_equal(p.numpy(), before[n], err_msg=n)
    assert sharded >= 3
    # a training step keeps every layout
    x = xr.tensor(np.random.default_rng(0).standard_normal((8, 3, 8, 8) if name == "tiny-vit" else (8, 8)))
    opt = xr.optim.SGD(model.parameters(), lr=0.01)
    out = wrapped(x)
    assert xr.sharding_spec(out) == ("fsdp", None), "the output's batch dimension is sharded"
    (out * out).mean().backward()
    opt.step()
    xr.mark_step()
    for n, p in params.items():
        assert xr.sharding_spec(p) == _expected_spec(p.shape, 8), f"{n} lost its layout after a step"


def test_fsdpv2_spec_for_a_scalar_is_empty(fsdp_mesh: xr.Mesh) -> None:
    scalar = xr.tensor(np.float32(2.0), requires_grad=True)
    assert xr.fsdp.prepare_partition_spec(scalar, fsdp_mesh) == ()
    odd = xr.tensor(np.ones((3, 5)), requires_grad=True)
    assert xr.fsdp.prepare_partition_spec(odd, fsdp_mesh) == (None, None)
    assert xr.fsdp.prepare_partition_spec(xr.tensor(np.ones((3, 16))), fsdp_mesh) == (None, "fsdp")
    two = xr.Mesh(np.arange(8), (2, 4), ("data", "fsdp"))
    assert xr.fsdp.prepare_partition_spec(xr.tensor(np.ones((4, 8))), two, "data") == (None, ("data", "fsdp"))


def test_fsdpv2_needs_an_fsdp_axis(mesh: xr.Mesh) -> None:
    with pytest.raises(ValueError, match="'fsdp'"):
        xr.fsdp.FSDPv2(xr.models.MLP(8, 8, 8), mesh)


def test_fsdpv2_auto_wrap(fsdp_mesh: xr.Mesh) -> None:
    model = xr.models.MLP(8, 16, 8)
    xr.fsdp.FSDPv2(model, fsdp_mesh, auto_wrap_policy=lambda m: isinstance(m, xr.nn.Linear))
    assert isinstance(model.fc1, xr.fsdp.FSDPv2)
    for n, p in model.named_parameters():
        assert xr.sharding_spec(p) == _expected_spec(p.shape, 8), n
