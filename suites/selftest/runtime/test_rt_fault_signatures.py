"""One quick check per fault switch: injected reproduces the signature, fixed does not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import jax
import numpy as np
import pytest

import harness.runtime as xr
import harness.sched as sched
from harness.runtime import faults
from harness.runtime.testing import tolerance

NDEV = len(jax.devices())
need8 = pytest.mark.skipif(NDEV < 8, reason="needs 8 devices")


@pytest.fixture(params=["fixed", "injected"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _maybe(name: str, mode: str) -> Iterator[None] | object:
    from contextlib import nullcontext

    return xr.faults.inject(name) if mode == "injected" else nullcontext()


@need8
def test_unhashable_spec(mode: str) -> None:
    mesh = xr.Mesh(np.arange(8), (8,), ("fsdp",))
    model = xr.models.ScaledMLP(8, 16, 4)
    with _maybe(faults.UNHASHABLE_SPEC, mode):
        if mode == "injected":
            assert xr.fsdp.prepare_partition_spec(model.scale, mesh) == []
            with pytest.raises(TypeError, match="unhashable type: 'list'"):
                xr.fsdp.FSDPv2(model, mesh)
        else:
            wrapped = xr.fsdp.FSDPv2(model, mesh)
            assert xr.sharding_spec(model.scale) is None
            assert xr.sharding_spec(model.fc1.weight) == ("fsdp", None)
            x = np.ones((8, 8), np.float32)
            out = wrapped(xr.tensor(x)).numpy()
            w1, b1, w2, b2 = (p.numpy() for p in (model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias))
            np.testing.assert_allclose(out, np.maximum(x @ w1.T + b1, 0) @ w2.T + b2, **tolerance(np.float32))


@need8
@pytest.mark.parametrize("functionalization", [True, False], ids=["func", "nofunc"])
def test_lost_sharding_to_device(mode: str, functionalization: bool) -> None:
    xr.configure(functionalization=functionalization)
    mesh = xr.Mesh(np.arange(8), (8,), ("fsdp",))
    model = xr.models.MLP(8, 16, 8)
    xr.fsdp.FSDPv2(model, mesh)
    with _maybe(faults.LOST_SHARDING, mode):
        model.to(xr.device())
    specs = {n: xr.sharding_spec(p) for n, p in model.named_parameters()}
    if mode == "injected" and not functionalization:
        assert all(s is None for s in specs.values()), f"parameters should be replicated: {specs}"
    else:
        assert specs["fc1.weight"] == ("fsdp", None) and specs["fc2.bias"] == ("fsdp",), specs


@need8
@pytest.mark.parametrize("functionalization", [True, False], ids=["func", "nofunc"])
def test_lost_sharding_on_a_view(mode: str, functionalization: bool) -> None:
    xr.configure(functionalization=functionalization)
    mesh = xr.Mesh(np.arange(8), (8,), ("fsdp",))
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    with _maybe(faults.LOST_SHARDING, mode):
        y = (xr.tensor(x) + 1).T  # a view of a pending value, as timm's patch embedding
        xr.mark_sharding(y, mesh, ("fsdp", None))
        if mode == "injected" and not functionalization:
            with pytest.raises(xr.ShardingLostError, match="must have a sharding"):
                xr.mark_step()
            return
        xr.mark_step()
        np.testing.assert_array_equal(y.numpy(), (x + 1).T)


@need8
def test_double_discovery(mode: str) -> None:
    xr.configure(num_slices=2)
    xr.topology.reset()
    assert xr.discover().num_slices == 2
    q = xr.tensor(np.random.default_rng(0).standard_normal((2, 2, 4, 8)).astype(np.float32))
    with _maybe(faults.DOUBLE_DISCOVERY, mode):
        if mode == "injected":
            with pytest.raises(xr.DuplicateDiscoveryError, match="ran 2 times"):
                xr.kernels.flash_attention(q, q, q)
            return
        out = xr.kernels.flash_attention(q, q, q)
    assert xr.discovery_count() == 1
    assert "HARNESS_SKIP_SLICE_DISCOVERY" not in __import__("os").environ
    qn = q.numpy()
    s = np.einsum("bhqd,bhkd->bhqk", qn, qn) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), np.einsum("bhqk,bhkd->bhqd", p, qn), **tolerance(np.float32))


def _accumulation_step() -> None:
    """One gradient-accumulation step checked against numpy; state built afresh for every run."""
    xr.manual_seed(1)
    model = xr.models.LinearModel(4, 2)
    opt = xr.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((3, 2, 4)).astype(np.float32)
    ys = rng.standard_normal((3, 2, 2)).astype(np.float32)
    w, b = model.fc.weight.numpy(), model.fc.bias.numpy()
    x_t, y_t = xr.tensor(xs) * 1, xr.tensor(ys) * 1  # pending: the helper syncs them asynchronously

    def train_step(x: xr.Tensor, y: xr.Tensor) -> xr.Tensor:
        return xr.nn.mse_loss(model(x), y)

    loss = xr.gradient_accumulation(train_step, [x_t, y_t], model)
    opt.step()
    xr.mark_step()
    gw, gb, losses = np.zeros_like(w), np.zeros_like(b), []
    for x, y in zip(xs, ys, strict=True):
        d = x @ w.T + b - y
        losses.append((d**2).mean())
        gw += (2 * d / d.size).T @ x
        gb += (2 * d / d.size).sum(0)
    np.testing.assert_allclose(loss.numpy(), np.mean(losses), **tolerance(np.float32))
    np.testing.assert_allclose(model.fc.weight.numpy(), w - 0.1 * gw, **tolerance(np.float32))
    np.testing.assert_allclose(model.fc.bias.numpy(), b - 0.1 * gb, **tolerance(np.float32))


def test_race_on_handles(mode: str) -> None:
    # no timing: the scheduler decides whether the executor fills the outputs before the helper
    # reads their handles, and DFS covers every interleaving with at most one preemption
    xr.discover()  # once, before: a discovery is a schedule point only where it really runs
    with _maybe(faults.RACE_ON_HANDLES, mode):
        result = sched.check_dfs(_accumulation_step, max_preemptions=1, raise_on_failure=False)
    if mode == "injected":
        assert result.failure is not None, "no interleaving lost the race"
        assert result.failure.kind == "PlaceholderAccessError", result.failure
        assert "GetHandle() on placeholder" in result.failure.message
        return
    assert result.failure is None, result.failure
    assert result.exhausted and result.schedules > 1


@pytest.mark.parametrize("aliasing", [True, False], ids=["param-aliasing", "no-param-aliasing"])
def test_aliased_save_stale_alias(mode: str, aliasing: bool, tmp_path: Path) -> None:
    xr.configure(param_aliasing=aliasing)
    t1 = xr.tensor(np.arange(4, dtype=np.float32))
    t2 = t1.detach()
    xr.mark_step()
    t2.add_(t2)
    xr.mark_step()
    with _maybe(faults.ALIASED_SAVE, mode):
        if mode == "injected" and aliasing:  # t1's unsynced IR still reads the donated buffer
            with pytest.raises(xr.DonatedBufferError, match="is deleted"):
                xr.save({"t1": t1, "t2": t2}, tmp_path / "c.xh")
            return
        xr.save({"t1": t1, "t2": t2}, tmp_path / "c.xh")
    saved = xr.load(tmp_path / "c.xh")
    stale = mode == "injected"
    np.testing.assert_array_equal(saved["t1"].numpy(), np.arange(4) * (1 if stale else 2))
    np.testing.assert_array_equal(saved["t2"].numpy(), np.arange(4) * 2)
    np.testing.assert_array_equal(t1.numpy(), np.arange(4) * 2)


def test_aliased_save_donates_a_live_buffer(mode: str, tmp_path: Path) -> None:
    w = xr.tensor(np.ones(4, np.float32))
    reader = w * 3  # a pending graph that still reads w's current buffer
    w.add_(1.0)
    with _maybe(faults.ALIASED_SAVE, mode):
        if mode == "injected":  # the save-side sync donated a buffer that is still read
            xr.save({"w": w}, tmp_path / "d.xh")  # the save itself succeeds, as upstream
            np.testing.assert_array_equal(xr.load(tmp_path / "d.xh")["w"].numpy(), np.full(4, 2.0))
            xr.mark_step()  # the next step runs the pending reader on the donated buffer...
            with pytest.raises(xr.DonatedBufferError, match="is deleted"):
                reader.numpy()  # ...and its result carries the failure
            return
        xr.save({"w": w}, tmp_path / "d.xh")
    np.testing.assert_array_equal(xr.load(tmp_path / "d.xh")["w"].numpy(), np.full(4, 2.0))
    xr.mark_step()
    np.testing.assert_array_equal(reader.numpy(), np.full(4, 3.0))
    np.testing.assert_array_equal(w.numpy(), np.full(4, 2.0))
