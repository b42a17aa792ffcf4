"""``xr.last_compile_reason()``: each compile says what differs from the closest earlier program."""

from __future__ import annotations

import logging

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import layouts, plan_cache

N = len(jax.devices())


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    plan_cache.clear_cache()


def _run(fn) -> str | None:  # noqa: ANN001
    before = xr.compile_count()
    kept = fn()  # a value nothing holds is not computed at all
    xr.mark_step(wait=True)
    del kept
    assert xr.compile_count() == before + 1, "the step was expected to compile"
    return xr.last_compile_reason()


def test_nothing_to_say_before_the_first_compile() -> None:
    assert xr.last_compile_reason() is None


def test_a_first_program_is_new() -> None:
    reason = _run(lambda: xr.tensor(np.ones(3, np.float32)) + 1.0)
    assert reason is not None and reason.startswith("a new program"), reason


def test_an_input_of_another_shape_is_named_with_both_shapes() -> None:
    _run(lambda: xr.tensor(np.ones(3, np.float32)) * xr.tensor(np.ones(3, np.float32)))
    reason = _run(lambda: xr.tensor(np.ones(4, np.float32)) * xr.tensor(np.ones(4, np.float32)))
    assert reason is not None
    assert "input 0 is float32[4], was float32[3]" in reason, reason


def test_another_op_is_named_with_its_operands() -> None:
    a, b = xr.tensor(np.ones(3, np.float32)), xr.tensor(np.ones(3, np.float32))
    keep = []
    _run(lambda: keep.append(a + b))
    reason = _run(lambda: keep.append(a * b))
    assert reason is not None
    assert "is mul of nodes [0, 1], was add of nodes [0, 1]" in reason, reason


def test_replication_over_the_users_mesh_is_the_default_layouts_program() -> None:
    """A value replicated on the user's mesh and one on the default layout, over the devices in
    the same order, are one layout: the program compiles once (``harness.runtime.layouts``)."""
    mesh = xr.Mesh(np.arange(N), (N,), ("fsdp",))
    keep = []
    _run(lambda: keep.append(xr.tensor(np.arange(6, dtype=np.float32)) * 2.0))
    before = xr.compile_count()
    keep.append(xr.mark_sharding(xr.tensor(np.arange(6, dtype=np.float32)), mesh, (None,)) * 2.0)
    xr.mark_step(wait=True)
    assert xr.compile_count() == before


@pytest.mark.skipif(N < 2, reason="one device has one device order")
def test_replication_over_another_device_order_is_named_with_both_meshes() -> None:
    """What does compile again: a value replicated over the devices in another order than the
    default layout's (another device assignment to XLA), named with both meshes. The layouts met
    are forgotten first: a layout is named by the first sharding met with it, which an earlier
    test in this process may have spelled on a mesh of its own."""
    layouts.forget()
    mesh = xr.Mesh(np.arange(N)[::-1], (N,), ("fsdp",))
    keep = []

    def step(on_mesh: bool) -> None:
        t = xr.tensor(np.arange(6, dtype=np.float32))
        if on_mesh:
            xr.mark_sharding(t, mesh, (None,))
        keep.append(t * 2.0)

    _run(lambda: step(False))
    reason = _run(lambda: step(True))
    assert reason is not None
    assert "input 0 (float32[6]) is laid out replicated on mesh ('fsdp': " in reason, reason
    assert "was replicated on mesh ('devices': " in reason, reason


def test_a_compile_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="harness.runtime.recompiles"):
        reason = _run(lambda: xr.tensor(np.ones(2, np.float32)) - 1.0)
    assert reason in caplog.messages


def test_many_differences_are_counted_not_listed() -> None:
    def chain(n: int) -> xr.Tensor:
        return xr.tensor(np.ones(n, np.float32)) + xr.tensor(np.ones(n, np.float32)) + xr.tensor(np.ones(n, np.float32)) + xr.tensor(np.ones(n, np.float32))

    _run(lambda: chain(2))
    reason = _run(lambda: chain(5))
    assert reason is not None and reason.endswith("; and 1 more"), reason
