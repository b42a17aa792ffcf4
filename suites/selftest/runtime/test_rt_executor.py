"""Graph cache, asynchronous execution with placeholders, donation and device data."""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
import pytest

import harness.runtime as xr
import harness.sched as sched
from harness.runtime.testing import tolerance

NDEV = len(jax.devices())
X = np.arange(24, dtype=np.float32).reshape(4, 6) / 10


def _step(w: xr.Tensor, x: xr.Tensor) -> xr.Tensor:
    loss = ((x @ w.T).tanh() ** 2).mean()
    w.sub_(w * 0.01 + loss)
    return loss


def test_steady_loop_compiles_once() -> None:
    w = xr.tensor(np.ones((3, 6), np.float32))
    counts, hits = [], []
    expected = np.ones((3, 6))
    for i in range(6):
        x_np = X + i
        loss = _step(w, xr.tensor(x_np))
        ref_loss = (np.tanh(x_np @ expected.T) ** 2).mean()
        expected = expected - (expected * 0.01 + ref_loss)
        xr.mark_step()
        counts.append(xr.compile_count())
        hits.append(xr.metrics.cache_hits)
        np.testing.assert_allclose(loss.numpy(), ref_loss, **tolerance(np.float32))
    assert counts[-1] == counts[1], f"compile count moved after warm-up: {counts}"
    assert hits[-1] - hits[1] == 4, f"every steady step must hit the cache: {hits}"
    np.testing.assert_allclose(w.numpy(), expected, **tolerance(np.float32))


def test_a_new_graph_structure_or_shape_compiles_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # an empty process-wide cache, so the counts do not depend on what earlier tests compiled
    monkeypatch.setattr("harness.runtime.plan_cache._cache", {})
    n = xr.compile_count()
    a = xr.tensor(X)
    (a * 2).numpy()
    assert xr.compile_count() == n + 1, "a first graph: a new executable"
    n += 1
    (xr.tensor(X + 1) * 2).numpy()
    assert xr.compile_count() == n, "same structure, new values: cached"
    (a * 2 + 1).numpy()
    assert xr.compile_count() == n + 1, "a new op: a new executable"
    (xr.tensor(X[:2]) * 2).numpy()
    assert xr.compile_count() == n + 2, "a new input shape: a new executable"


def test_graphs_that_differ_only_in_sharing_arity_or_layout_have_their_own_plans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The step's cache key is a flat run of ints: an input's description and index, or a kind
    then its operand positions. Graphs alike in ops and shapes but not in which values they
    share, in how many operands an op takes, or in a constraint's layout must not meet in it,
    else one would run with the other's executable and compute the wrong value."""
    from harness.runtime.graphs import Walk
    from harness.runtime.tensor import cat

    monkeypatch.setattr("harness.runtime.plan_cache._cache", {})
    a, b = xr.tensor(X), xr.tensor(X + 1)
    rows = np.arange(NDEV * 6, dtype=np.float32).reshape(NDEV * 2, 3)
    c = xr.tensor(rows)
    mesh = xr.Mesh(list(range(NDEV)), (NDEV,), ("x",))

    def constrained(spec: tuple) -> xr.Tensor:
        out = c * 1.0
        xr.mark_sharding(out, mesh, spec)
        return out

    graphs = {
        "a + a": (lambda: a + a, X + X),
        "a + b": (lambda: a + b, X + X + 1),
        "cat(a, b, a)": (lambda: cat([a, b, a]), np.concatenate([X, X + 1, X])),
        "cat(cat(a, b), a)": (lambda: cat([cat([a, b]), a]), np.concatenate([X, X + 1, X])),
        "cat(a, cat(b, a))": (lambda: cat([a, cat([b, a])]), np.concatenate([X, X + 1, X])),
        "c * 1 replicated": (lambda: constrained((None, None)), rows),
        "c * 1 split": (lambda: constrained(("x", None)), rows),
    }
    keys = {}
    for name, (build, expected) in graphs.items():
        keys[name] = Walk([build()._storage.node]).key
        np.testing.assert_allclose(build().numpy(), expected, rtol=1e-6, err_msg=name)
    if NDEV == 1:  # split over a one-device axis is replication: one layout, one plan (spelling-compiles)
        assert keys.pop("c * 1 split") == keys["c * 1 replicated"], keys
    assert len(set(keys.values())) == len(keys), keys
    # the same structure over other values, or its inputs met in another order, is the same key:
    # the steady step's cache hit
    assert Walk([(b + b)._storage.node]).key == keys["a + a"]
    assert Walk([(b + a)._storage.node]).key == keys["a + b"]
    np.testing.assert_allclose((b + a).numpy(), X + X + 1, rtol=1e-6)


def _device_lags(body: Callable[[], None]) -> None:
    """Run ``body`` with the executor thread running only while the caller waits: the
    interleaving a slow device produces, made certain by the scheduler instead of a sleep (the
    caller is never preempted, so there is exactly one such schedule)."""
    result = sched.check_dfs(body, max_preemptions=0)
    assert result.schedules == 1 and result.exhausted


def test_mark_step_returns_before_the_execution_and_reads_wait() -> None:
    def body() -> None:
        a = xr.tensor(X)
        c = a * 5
        xr.mark_step()
        data = c._storage.node.data
        assert data.is_placeholder, "right after mark_step the output is a placeholder"
        np.testing.assert_allclose(c.numpy(), X * 5, rtol=1e-6)  # the read waits for the execution
        assert not data.is_placeholder

    _device_lags(body)


def test_wait_device_ops_waits_for_everything() -> None:
    def body() -> None:
        a = xr.tensor(X)
        outs = []
        for k in range(3):
            outs.append(a * k)
            xr.mark_step()
        datas = [o._storage.node.data for o in outs]
        assert all(d.is_placeholder for d in datas)
        xr.wait_device_ops()
        assert not any(d.is_placeholder for d in datas)
        for k, o in enumerate(outs):
            np.testing.assert_allclose(o.numpy(), X * k)

    _device_lags(body)


def test_sync_without_wait_leaves_placeholders() -> None:
    def body() -> None:
        a = xr.tensor(X)
        b = a - 1
        xr.sync([b], wait=False)
        assert b._storage.node.data.is_placeholder
        with pytest.raises(xr.PlaceholderAccessError, match="GetHandle"):
            b._storage.node.data.handle()
        xr.wait_device_ops()
        assert isinstance(b._storage.node.data.handle(), int)
        np.testing.assert_allclose(b.numpy(), X - 1)

    _device_lags(body)


@pytest.mark.parametrize("aliasing", [True, False], ids=["param-aliasing", "no-param-aliasing"])
def test_donation_of_updated_parameters(aliasing: bool) -> None:
    xr.configure(param_aliasing=aliasing)
    w = xr.tensor(X)
    (old,) = xr.device_data([w])
    w.add_(1.0)
    xr.mark_step()
    xr.wait_device_ops()
    np.testing.assert_allclose(w.numpy(), X + 1)
    if aliasing:
        with pytest.raises(xr.DonatedBufferError, match=r"float32\[4,6\] is deleted"):
            old.array()
        with pytest.raises(xr.DonatedBufferError):
            old.handle()
    else:
        np.testing.assert_array_equal(np.asarray(old.array()), X)


def test_partial_sync_never_donates() -> None:
    w = xr.tensor(X)
    (old,) = xr.device_data([w])
    w.mul_(2.0)
    np.testing.assert_allclose(w.numpy(), X * 2)  # a read is a partial sync
    np.testing.assert_array_equal(np.asarray(old.array()), X)


def test_device_data_dedups_leaves() -> None:
    a, b = xr.tensor(X), xr.tensor(X + 1)
    found = xr.device_data([a + b, a * 2, b.detach()])
    assert len(found) == 2
    assert {id(d) for d in found} == {id(a._storage.node.data), id(b._storage.node.data)}


def test_forget_pending_drops_values_from_the_next_step() -> None:
    a = xr.tensor(X)
    kept = a + 1
    xr.mark_step()
    orphan = a * 7
    assert xr.forget_pending() >= 1
    xr.mark_step()
    assert orphan._storage.pending, "a forgotten value is not run by mark_step"
    np.testing.assert_allclose(orphan.numpy(), X * 7)  # ...but a read still syncs it
    np.testing.assert_allclose(kept.numpy(), X + 1)


@pytest.mark.skipif(NDEV < 8, reason="needs 8 devices")
def test_replicated_and_mesh_sharded_inputs_mix_in_any_order() -> None:
    """Regression: JAX named an output's layout on the replicated data's 1-d mesh and failed."""
    mesh = xr.Mesh(np.arange(8), (2, 4), ("data", "model"))
    w = xr.tensor(np.ones((6, 3), np.float32))
    x = xr.tensor(np.tile(X, (2, 1)))
    xr.mark_sharding(x, mesh, ("data", None))
    z1 = w.sum() + x.sum(1)  # the replicated input is met first
    z2 = x @ w
    xr.mark_step()
    np.testing.assert_allclose(z1.numpy(), 18 + np.tile(X, (2, 1)).sum(1), rtol=1e-5)
    np.testing.assert_allclose(z2.numpy(), np.tile(X, (2, 1)) @ np.ones((6, 3)), **tolerance(np.float32))
    assert xr.sharding_spec(z2) == ("data", None)


def test_transfer_counter() -> None:
    before = xr.metrics.transfers_to_device
    xr.tensor(X)
    xr.zeros(3)
    assert xr.metrics.transfers_to_device == before + 2
