"""No wait on an execution can hang, and no gone buffer reaches XLA.

An execution that never completes (a device that stopped answering, a JAX release whose
executions wait for ever on a partition that failed) used to leave the caller in an unbounded
wait: the executor thread in JAX's ``block_until_ready``, the caller waiting for the executor.
Every wait now has a deadline (``xr.configure(wait_timeout=...)``), after which it raises
``ExecutionTimeoutError`` naming the execution, its program and the executor thread's stack, and
the stuck work fails every value it owes. The executions here are made to never complete by
replacing a compiled program (or JAX's completion wait) with one that blocks on an event the
test sets only when it is over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import deadlines, executor, faults, plan_cache, transfers

NDEV = len(jax.devices())
DEADLINE = 0.2  # seconds: short, since every case waits it out once
#: a fake executable does not care how many devices the cell has: the matrix runs these in cpu-8
CELL_INDEPENDENT = pytest.mark.cell_independent


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown: whatever a test left blocked on it returns (and its thread ends)."""
    event = threading.Event()
    yield event
    event.set()


def _plan_of(t: xr.Tensor) -> plan_cache.Plan:
    """The plan of the newest compiled program (the one ``t``'s step just compiled). The cache is
    emptied first: a program an earlier test compiled would be a hit, not the newest entry."""
    plan_cache.clear_cache()
    t.numpy()
    plan = list(plan_cache._cache.values())[-1]
    assert isinstance(plan, plan_cache.Plan)
    return plan


def _stuck_in_dispatch(release: threading.Event) -> Callable[..., Any]:
    def compiled(*args: Any) -> Any:
        release.wait()
        raise RuntimeError("released at teardown")

    return compiled


def _compiled_step(release: threading.Event, stuck: str, monkeypatch: pytest.MonkeyPatch) -> xr.Tensor:
    """A tensor whose pending step will never complete: stuck in the launch (``dispatch``) or in
    the wait for the device (``completion``, where the field run's executor thread hung)."""
    x = xr.tensor(np.ones((4, 3), np.float32))
    plan = _plan_of(x * 3.0)  # compile the program once, for real
    if stuck == "dispatch":
        monkeypatch.setattr(plan.exe, "compiled", _stuck_in_dispatch(release))
    else:
        real = jax.block_until_ready

        def never_ready(value: Any) -> Any:
            if threading.current_thread().name == "harness-executor":
                release.wait()
            return real(value)

        monkeypatch.setattr(jax, "block_until_ready", never_ready)
    xr.configure(wait_timeout=DEADLINE)
    return x * 3.0


WAITS: dict[str, Callable[[xr.Tensor, Path], object]] = {
    "read": lambda t, _: t.numpy(),
    "wait_device_ops": lambda t, _: (xr.mark_step(), xr.wait_device_ops()),
    "waiting sync": lambda t, _: xr.sync([t], wait=True),
    "save": lambda t, tmp: xr.save({"t": t}, str(tmp / "ckpt")),
}


@CELL_INDEPENDENT
@pytest.mark.parametrize("stuck", ["dispatch", "completion"])
@pytest.mark.parametrize("wait", list(WAITS))
def test_a_never_completing_execution_ends_in_the_runtimes_error(
    wait: str, stuck: str, release: threading.Event, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    t = _compiled_step(release, stuck, monkeypatch)
    if wait == "read":
        xr.mark_step()
    with pytest.raises(xr.ExecutionTimeoutError) as caught:
        WAITS[wait](t, tmp_path)
    message = str(caught.value)
    assert f"has not completed within {DEADLINE:g} s" in message and "wait_timeout" in message, message
    assert "program" in message and "mul" in message, f"the program is not named: {message}"
    where = "_dispatch" if stuck == "dispatch" else "_complete"
    assert f"in {where}" in message, f"the executor thread's stack is not shown: {message}"


@CELL_INDEPENDENT
@pytest.mark.parametrize("stuck", ["dispatch", "completion"])
def test_after_a_given_up_execution_the_runtime_works_on(
    stuck: str, release: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _compiled_step(release, stuck, monkeypatch)
    xr.mark_step()
    with pytest.raises(xr.ExecutionTimeoutError):
        t.numpy()
    with pytest.raises(xr.ExecutionTimeoutError):  # its value keeps saying why it has none
        t.numpy()
    monkeypatch.undo()
    xr.configure(wait_timeout=600.0)  # real work from here on: a busy machine may be slow
    y = xr.tensor(np.full((2, 2), 2.0, np.float32)) + 1.0
    xr.mark_step()
    assert np.array_equal(y.numpy(), np.full((2, 2), 3.0))
    xr.wait_device_ops()  # the given-up execution no longer counts as running
    release.set()  # the stuck thread returns: its late failure is nobody's business
    xr.wait_device_ops()


@CELL_INDEPENDENT
def test_the_deadline_is_configurable_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.runtime import config

    monkeypatch.setenv("HARNESS_WAIT_TIMEOUT", "7.5")
    assert config._from_env().wait_timeout == 7.5
    monkeypatch.setenv("HARNESS_WAIT_TIMEOUT", "0")
    xr.configure(wait_timeout=0)
    assert deadlines.wait_timeout() is None  # 0: unbounded, as asked


@CELL_INDEPENDENT
def test_a_failed_execution_fails_every_value_it_owes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure found while waiting for the device (after the outputs were handed out) fails
    every output, not only those still placeholders: their buffers hold nothing valid."""
    x = xr.tensor(np.ones((4, 3), np.float32))
    _plan_of(x * 3.0 + x * 2.0)
    real = jax.block_until_ready

    def failing(value: Any) -> Any:
        if threading.current_thread().name == "harness-executor":
            raise RuntimeError("INTERNAL: the device reported a failure")
        return real(value)

    monkeypatch.setattr(jax, "block_until_ready", failing)
    a, b = x * 3.0, x * 2.0
    xr.mark_step()
    for t in (a, b):
        with pytest.raises(RuntimeError, match="the device reported a failure"):
            t.numpy()
    monkeypatch.undo()
    executor.wait_device_ops(raise_errors=False)


@pytest.mark.skipif(NDEV < 2, reason="a per-device buffer of a sharded value needs 2+ devices")
@pytest.mark.parametrize("assembled", [False, True], ids=["the-whole", "assembled"])
def test_an_input_missing_a_per_device_buffer_is_refused_before_dispatch(assembled: bool) -> None:
    mesh = xr.Mesh(range(NDEV), (NDEV,), ("d",))
    whole = xr.tensor(np.arange(NDEV * 6, dtype=np.float32).reshape(NDEV * 2, 3))
    xr.mark_sharding(whole, mesh, ("d", None))
    pieces = xr.local_shards(whole)
    assert [p.shape for p in pieces] == [(2, 3)] * NDEV
    target = xr.from_local_shards(pieces, mesh, ("d", None)) if assembled else whole
    np.testing.assert_array_equal(target.numpy(), whole.numpy())  # no copy, same values
    pieces[1].add_(1.0)
    xr.mark_step()  # param aliasing donates the piece's buffer, which the whole also holds
    with pytest.raises(xr.DonatedBufferError, match=r"float32\[.*\] is deleted: input 0 .* has no buffer on"):
        (target * 2.0).numpy()
    with faults.inject(faults.DELETED_SHARD):  # outside crash mode: XLA's complaint, not a crash
        with pytest.raises(xr.InvalidBufferError, match=r"Invalid buffer passed to Execute\(\)"):
            (target * 2.0).numpy()
    xr.forget_pending()  # the failed graphs stay pending, as upstream's do, until dropped
    y = xr.tensor(np.ones(3, np.float32)) * 2.0
    xr.mark_step()
    assert np.array_equal(y.numpy(), np.full(3, 2.0)), "the runtime did not recover"


@CELL_INDEPENDENT
def test_a_donation_jax_leaves_alive_is_deleted_by_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX reports a donation XLA declined with a warning and, on some releases, leaves the
    array alive; the runtime's promise is that a donated buffer is gone, on every release. A
    program that consumes copies of its arguments stands in for such a release."""
    xr.configure(param_aliasing=True)
    w = xr.tensor(np.ones(3, np.float32))
    w.add_(1.0)
    plan = _plan_of_step(w)
    real = plan.exe.compiled
    assert plan.exe.donated, "the in-place update's old buffer was not offered for donation"
    monkeypatch.setattr(plan.exe, "compiled", lambda *args: real(*[jax.numpy.copy(a) for a in args]))
    (held,) = xr.device_data([w])
    w.add_(1.0)
    xr.mark_step(wait=True)
    assert held.array is not None and held._array is not None and held._array.is_deleted(), (
        "the donated buffer is still alive"
    )
    with pytest.raises(xr.DonatedBufferError, match="is deleted"):
        transfers.to_host(held)
    assert np.array_equal(w.numpy(), np.full(3, 3.0))


def _plan_of_step(w: xr.Tensor) -> plan_cache.Plan:
    xr.mark_step(wait=True)
    plan = list(plan_cache._cache.values())[-1]
    assert isinstance(plan, plan_cache.Plan)
    return plan


@CELL_INDEPENDENT
def test_a_per_test_limit_puts_the_runtimes_deadline_inside_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import plugin
    from harness.runtime import config

    monkeypatch.delenv("HARNESS_WAIT_TIMEOUT", raising=False)
    monkeypatch.setattr(config.options, "wait_timeout", config.options.wait_timeout)
    plugin._bound_runtime_waits(40.0)
    assert config.options.wait_timeout == 20.0
    import os

    assert os.environ["HARNESS_WAIT_TIMEOUT"] == "20"
    monkeypatch.setenv("HARNESS_WAIT_TIMEOUT", "5")
    plugin._bound_runtime_waits(40.0)  # the user's own setting wins
    assert os.environ["HARNESS_WAIT_TIMEOUT"] == "5"
