"""Tiny-ViT and the MLP train under FSDPv2 on an 8-device ``fsdp`` mesh."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime.testing import tolerance

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 devices")


def _expected_spec(shape: tuple[int, ...]) -> tuple | None:
    for dim, size in enumerate(shape):
        if size % 8 == 0:
            return tuple("fsdp" if d == dim else None for d in range(len(shape)))
    return None


def _train(model: xr.nn.Module, make_batch, steps: int, opt_factory) -> tuple[list[float], list[int]]:  # type: ignore[no-untyped-def]
    mesh = xr.Mesh(np.arange(8), (8,), ("fsdp",))
    wrapped = xr.fsdp.FSDPv2(model, mesh)
    opt = opt_factory(model.parameters())
    x_np, onehot_np = make_batch()
    losses, compiles = [], []
    for _ in range(steps):
        x, onehot = xr.tensor(x_np), xr.tensor(onehot_np)
        xr.mark_sharding(x, mesh, ("fsdp",) + (None,) * (x.ndim - 1))
        opt.zero_grad()
        loss = xr.nn.cross_entropy(wrapped(x), onehot)
        loss.backward()
        opt.step()
        xr.mark_step()
        losses.append(loss)
        compiles.append(xr.compile_count())
    for name, p in model.named_parameters():
        assert xr.sharding_spec(p) == _expected_spec(p.shape), f"{name} {p.shape} lost its layout"
    return [float(v.numpy()) for v in losses], compiles


@pytest.mark.parametrize(
    "functionalization, use_kernel",
    [(True, True), (False, False)],
    ids=["func-kernel", "nofunc-plain-attention"],
)
def test_tiny_vit_trains_under_fsdpv2(functionalization: bool, use_kernel: bool) -> None:
    xr.configure(functionalization=functionalization)
    xr.manual_seed(0)
    model = xr.models.TinyViT(use_kernel=use_kernel)
    rng = np.random.default_rng(0)

    def batch() -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((16, 3, 8, 8)).astype(np.float32)
        return x, np.eye(10, dtype=np.float32)[rng.integers(0, 10, 16)]

    losses, compiles = _train(model, batch, 5, lambda ps: xr.optim.Adam(ps, lr=3e-3))
    assert all(np.isfinite(losses))
    assert losses[-1] < losses[0], f"loss did not decrease: {losses}"
    assert compiles[-1] == compiles[0], f"a step after the first compiled again: {compiles}"


def test_mlp_trains_under_fsdpv2() -> None:
    xr.manual_seed(1)
    model = xr.models.MLP(16, 32, 8)
    rng = np.random.default_rng(1)

    def batch() -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((16, 16)).astype(np.float32)
        return x, np.eye(8, dtype=np.float32)[rng.integers(0, 8, 16)]

    w1, b1, w2, b2 = (p.numpy().astype(np.float64) for p in (model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias))
    losses, compiles = _train(model, batch, 8, lambda ps: xr.optim.SGD(ps, lr=0.5, momentum=0.5))
    assert losses[-1] < 0.7 * losses[0], f"loss did not decrease: {losses}"
    assert compiles[-1] == compiles[0], f"a step after the first compiled again: {compiles}"
    # the first loss against numpy (same initial parameters, same batch)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 16))
    onehot = np.eye(8)[rng.integers(0, 8, 16)]
    logits = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(losses[0], -(logp * onehot).sum(-1).mean(), **tolerance(np.float32))


@pytest.mark.parametrize("functionalization", [True, False], ids=["func", "nofunc"])
def test_fsdpv2_keeps_a_layout_set_before_wrapping(functionalization: bool) -> None:
    """A tensor-parallel layout the user gave a parameter before wrapping stays (FSDPv2 shards
    only what is not sharded yet), through the wrap and a training step; the rest get FSDPv2's."""
    xr.configure(functionalization=functionalization)
    xr.manual_seed(2)
    mesh = xr.Mesh(np.arange(8), (4, 2), ("fsdp", "model"))
    model = xr.models.MLP(8, 16, 8)
    xr.mark_sharding(model.fc1.weight, mesh, ("model", None))
    wrapped = xr.fsdp.FSDPv2(model, mesh)
    assert xr.sharding_spec(model.fc1.weight) == ("model", None)
    assert xr.sharding_spec(model.fc2.weight) == ("fsdp", None)
    x = xr.tensor(np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32))
    loss = (wrapped(x) * wrapped(x)).mean()
    loss.backward()
    xr.optim.SGD(model.parameters(), lr=0.1).step()
    xr.mark_step()
    assert xr.sharding_spec(model.fc1.weight) == ("model", None)
    assert xr.sharding_spec(model.fc2.weight) == ("fsdp", None)
