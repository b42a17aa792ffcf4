"""Modules, state dicts and the models' forward passes against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime.testing import tolerance


def test_module_parameters_and_state_dict() -> None:
    xr.manual_seed(0)
    model = xr.models.ScaledMLP(4, 6, 2)
    names = [n for n, _ in model.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [p.shape for p in model.parameters()] == [(), (6, 4), (6,), (2, 6), (2,)]
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())
    state = model.state_dict()
    assert list(state) == names and not any(v.requires_grad for v in state.values())
    new = {k: np.full(v.shape, 0.5, np.float32) for k, v in state.items()}
    model.load_state_dict(new)
    for n, p in model.named_parameters():
        np.testing.assert_array_equal(p.numpy(), new[n], err_msg=n)
    with pytest.raises(KeyError, match="missing"):
        model.load_state_dict({"scale": np.float32(1)})
    with pytest.raises(ValueError, match="shape"):
        model.load_state_dict({**new, "fc1.bias": np.zeros(3, np.float32)})
    assert model.to(xr.device()) is model
    model.eval()
    assert not model.fc1.training
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_manual_seed_makes_initialization_repeatable() -> None:
    xr.manual_seed(5)
    a = xr.nn.Linear(3, 2).weight.numpy()
    xr.manual_seed(5)
    b = xr.nn.Linear(3, 2).weight.numpy()
    np.testing.assert_array_equal(a, b)
    assert np.abs(a).max() <= 1 / np.sqrt(3)


def test_layernorm_and_sequential_match_numpy() -> None:
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    xr.manual_seed(2)
    seq = xr.nn.Sequential(xr.nn.Linear(6, 6), xr.nn.GELU(), xr.nn.LayerNorm(6), xr.nn.ReLU())
    w, b = seq._modules["0"].weight.numpy(), seq._modules["0"].bias.numpy()
    h = x @ w.T + b
    from math import erf, sqrt

    h = 0.5 * h * (1 + np.vectorize(erf)(h / sqrt(2)))
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(seq(xr.tensor(x)).numpy(), np.maximum(h, 0), **tolerance(np.float32))


def test_tiny_vit_kernel_and_plain_attention_agree() -> None:
    x = xr.tensor(np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32))
    xr.manual_seed(4)
    a = xr.models.TinyViT(use_kernel=True)
    xr.manual_seed(4)
    b = xr.models.TinyViT(use_kernel=False)
    out_a, out_b = a(x).numpy(), b(x).numpy()
    assert out_a.shape == (2, 10)
    np.testing.assert_allclose(out_a, out_b, **tolerance(np.float32))


def test_patch_embedding_matches_numpy() -> None:
    xr.manual_seed(6)
    pe = xr.models.PatchEmbed(image=8, patch=4, channels=3, dim=5)
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    w, b = pe.weight.numpy(), pe.bias.numpy()
    patches = np.stack(
        [x[:, :, i * 4 : (i + 1) * 4, j * 4 : (j + 1) * 4].reshape(2, -1) for i in range(2) for j in range(2)], axis=1
    )
    expected = patches @ w.T + b[:, 0]
    np.testing.assert_allclose(pe(xr.tensor(x)).numpy(), expected, **tolerance(np.float32))
    with pytest.raises(ValueError, match="multiple"):
        xr.models.PatchEmbed(image=9, patch=4, channels=3, dim=5)
