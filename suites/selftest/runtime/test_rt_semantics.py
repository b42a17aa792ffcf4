"""Semantics a training script relies on: reading before backward, restoring a checkpoint into a
sharded model, partial syncs, concurrent steps, scalar promotion, failed executions."""

from __future__ import annotations

import gc
import threading

import jax
import numpy as np
import pytest

import harness.runtime as xr


def test_reading_the_loss_before_backward_keeps_the_gradient() -> None:
    w = xr.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    assert loss.item() == 5.0
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


def test_an_executed_intermediate_still_carries_its_gradient() -> None:
    w = xr.tensor([1.0, 2.0], requires_grad=True)
    h = w * 2
    h.numpy()
    (h * w).sum().backward()  # d/dw (2w * w) = 4w
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 8.0])


def test_a_step_between_forward_and_backward_keeps_the_gradient() -> None:
    w = xr.tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    xr.mark_step()
    loss.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])


def test_backward_with_no_reachable_parameter_says_so() -> None:
    w = xr.tensor([1.0], requires_grad=True)
    loss = (w * 2).sum()
    del w  # the parameter is gone: nothing is left to receive a gradient
    gc.collect()
    with pytest.raises(RuntimeError, match="no parameter is reachable"):
        loss.backward()


def test_restoring_a_checkpoint_keeps_layouts_and_gradients(tmp_path) -> None:
    n = len(jax.devices())
    mesh = xr.Mesh(range(n), (n,), ("fsdp",))
    model = xr.fsdp.FSDPv2(xr.models.LinearModel(n, n), mesh)
    before = [xr.sharding_spec(p) for p in model.parameters()]
    xr.save(model.state_dict(), tmp_path / "m.ckpt")
    model.load_state_dict(xr.load(tmp_path / "m.ckpt"))
    xr.mark_step()
    assert [xr.sharding_spec(p) for p in model.parameters()] == before
    model(xr.tensor(np.ones((n, n)))).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_copy_into_a_parameter_keeps_it_a_leaf() -> None:
    a = xr.tensor([1.0, 1.0], requires_grad=True)
    b = xr.tensor([0.0, 0.0], requires_grad=True)
    b.detach().copy_(a * 1)
    (b * 3).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), [3.0, 3.0])
    assert a.grad is None


def test_a_partial_sync_donates_nothing() -> None:
    t0, t1 = xr.tensor(1.0), xr.tensor(2.0)
    t2 = t0 + t1
    t1.add_(1)
    xr.sync([t1])
    xr.mark_step()
    assert t2.item() == 3.0


def test_in_place_accumulation_of_a_differentiable_value() -> None:
    w = xr.tensor([1.0, 2.0, 3.0], requires_grad=True)
    acc = xr.zeros(3)
    acc.add_(w * 2)
    assert acc.requires_grad
    acc.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0, 2.0])


def test_steps_from_several_threads_do_not_corrupt_each_other() -> None:
    results: list[float] = []

    def worker() -> None:
        p = xr.tensor(np.zeros(3, np.float32))
        for _ in range(50):
            p.add_(1)
            xr.mark_step()
        results.append(float(p.numpy()[0]))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [50.0] * 4


def test_scalars_promote_like_jax_weak_types() -> None:
    mask = xr.tensor(np.array([True, False]))
    np.testing.assert_array_equal(xr.where(mask, 2, 3).numpy(), [2, 3])
    np.testing.assert_array_equal(xr.where(mask, 2.5, -1).numpy(), [2.5, -1.0])
    np.testing.assert_array_equal((mask + 1).numpy(), [2, 1])
    np.testing.assert_array_equal((1 - mask).numpy(), [0, 1])
    assert (xr.tensor(np.array([1, 2], np.int32)) * 0.5).dtype == np.float32


def test_signed_zero_constants_are_different_programs() -> None:
    x = xr.tensor([1.0])
    assert (1 / (x * 0.0)).numpy()[0] == np.inf
    assert (1 / (x * -0.0)).numpy()[0] == -np.inf


def test_a_failed_execution_is_reported_by_wait_and_by_handles() -> None:
    t0, t1 = xr.tensor(1.0), xr.tensor(2.0)
    t2 = t0 + t1
    t1.add_(1)
    with xr.faults.inject("aliased-save"):
        xr.sync([t1], donate=True)  # the upstream bug: a partial sync donating a live buffer
    xr.mark_step()
    with pytest.raises(xr.DonatedBufferError):
        xr.wait_device_ops()
    xr.wait_device_ops()  # reported once
    with pytest.raises(xr.DonatedBufferError):  # not "placeholder not completed"
        xr.device_data([t2])


def test_module_attribute_set_to_none_then_to_a_parameter() -> None:
    layer = xr.nn.Linear(4, 2, bias=False)
    layer.bias = xr.nn.Parameter(np.zeros(2, np.float32))
    assert layer.bias is not None and "bias" in dict(layer.named_parameters())
