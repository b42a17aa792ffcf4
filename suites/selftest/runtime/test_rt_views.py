"""Views, aliases and in-place ops, in both functionalization modes.

numpy views are aliases too, so every sequence of in-place writes through ``detach``/``view``/
``transpose``/slices is replayed on numpy views of a host array and the results must agree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness.runtime as xr

BASE = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.0


@pytest.fixture(params=[True, False], ids=["functionalization", "no-functionalization"])
def functionalization(request: pytest.FixtureRequest) -> Iterator[bool]:
    prev = xr.configure(functionalization=request.param)
    try:
        yield request.param
    finally:
        xr.config.restore(prev)


def test_detach_is_an_alias(functionalization: bool) -> None:
    t1 = xr.tensor(BASE)
    t2 = t1.detach()
    t2.add_(t2)
    np.testing.assert_array_equal(t1.numpy(), 2 * BASE)
    np.testing.assert_array_equal(t2.numpy(), 2 * BASE)
    t1.sub_(1.0)
    np.testing.assert_array_equal(t2.numpy(), 2 * BASE - 1)


def test_writes_through_views_reach_the_base_and_every_alias(functionalization: bool) -> None:
    t = xr.tensor(BASE)
    flat = t.view(-1)
    tt = t.T
    row = t[1]
    cols = t[:, 1:3]
    flat.mul_(2.0)  # whole-base write through a reshape
    expected = BASE * 2
    np.testing.assert_array_equal(t.numpy(), expected)
    tt[0].copy_(xr.tensor(np.array([100.0, 200.0, 300.0], np.float32)))  # column 0 via transpose
    expected[:, 0] = [100.0, 200.0, 300.0]
    np.testing.assert_array_equal(row.numpy(), expected[1])
    cols.zero_()
    expected[:, 1:3] = 0
    np.testing.assert_array_equal(t.numpy(), expected)
    np.testing.assert_array_equal(flat.numpy(), expected.reshape(-1))
    np.testing.assert_array_equal(tt.numpy(), expected.T)
    row.add_(xr.tensor(np.ones(4, np.float32)), alpha=0.5)
    expected[1] += 0.5
    t[2, ::2] = 7.0  # __setitem__ is copy_ into a slice
    expected[2, ::2] = 7.0
    t.reshape(2, 6)[1].sub_(1.0, alpha=2.0)
    expected.reshape(2, 6)[1] -= 2.0
    xr.mark_step()
    assert not t._storage.pending
    for alias, ref in ((t, expected), (flat, expected.reshape(-1)), (tt, expected.T), (row, expected[1]), (cols, expected[:, 1:3])):
        np.testing.assert_array_equal(alias.numpy(), ref)


def test_in_place_ops_return_self_and_chain(functionalization: bool) -> None:
    t = xr.tensor(BASE)
    assert t.mul_(2.0).add_(1.0).div_(4.0) is t
    np.testing.assert_allclose(t.numpy(), (BASE * 2 + 1) / 4)
    t.fill_(3.0)
    np.testing.assert_array_equal(t.numpy(), np.full((3, 4), 3.0))
    t.copy_(BASE[0])  # broadcast into the whole tensor
    np.testing.assert_array_equal(t.numpy(), np.broadcast_to(BASE[0], (3, 4)))
    i = xr.tensor(np.arange(4, dtype=np.int32))
    i.copy_(xr.tensor(np.array([1.7, 2.2, 3.9, 4.0], np.float32)))
    assert i.dtype == np.int32
    np.testing.assert_array_equal(i.numpy(), np.array([1, 2, 3, 4]))


def test_out_of_place_results_do_not_alias(functionalization: bool) -> None:
    t = xr.tensor(BASE)
    u = t * 1
    u.add_(5.0)
    np.testing.assert_array_equal(t.numpy(), BASE)
    c = t.view(12) + 0
    c.zero_()
    np.testing.assert_array_equal(t.numpy(), BASE)


def test_detached_alias_cuts_autograd(functionalization: bool) -> None:
    w = xr.tensor(BASE, requires_grad=True)
    d = w.detach()
    assert not d.requires_grad
    loss = (w * d).sum()  # d is a constant: d(loss)/dw = d
    loss.backward()
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), BASE)


# --------------------------------------------------------------------------- random programs

VIEWS: list[tuple[str, Callable[[Any], Any]]] = [
    ("self", lambda a: a),
    ("detach", lambda a: a.detach() if isinstance(a, xr.Tensor) else a),
    ("flat", lambda a: a.reshape(12) if isinstance(a, xr.Tensor) else a.reshape(12)),
    ("T", lambda a: a.T),
    ("row1", lambda a: a[1]),
    ("cols", lambda a: a[:, 1:3]),
    ("T-rows", lambda a: a.T[::2]),
    ("view-slice", lambda a: a.reshape(2, 6)[:, 3:] if isinstance(a, xr.Tensor) else a.reshape(2, 6)[:, 3:]),
]

OPS = ["add", "sub", "mul", "copy", "zero", "self-add"]


def _apply(op: str, view: Any, scalar: float, is_tensor: bool) -> None:
    if op == "add":
        view.add_(scalar) if is_tensor else view.__iadd__(scalar)
    elif op == "sub":
        view.sub_(scalar) if is_tensor else view.__isub__(scalar)
    elif op == "mul":
        view.mul_(scalar) if is_tensor else view.__imul__(scalar)
    elif op == "copy":
        view.copy_(scalar) if is_tensor else view.fill(scalar)
    elif op == "zero":
        view.zero_() if is_tensor else view.fill(0)
    elif op == "self-add":
        view.add_(view) if is_tensor else view.__iadd__(view.copy())


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    program=st.lists(
        st.tuples(st.integers(0, len(VIEWS) - 1), st.sampled_from(OPS), st.integers(-3, 3), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    functionalization=st.booleans(),
)
def test_random_alias_programs_match_numpy_views(program: list[tuple[int, str, int, bool]], functionalization: bool) -> None:
    prev = xr.configure(functionalization=functionalization)
    try:
        host = BASE.copy()
        t = xr.tensor(BASE)
        views = [(f(t), f(host)) for _, f in VIEWS]
        for k, op, scalar, step in program:
            dev_view, host_view = views[k]
            _apply(op, dev_view, float(scalar), True)
            _apply(op, host_view, float(scalar), False)
            if step:
                xr.mark_step()
        for (name, _), (dev_view, host_view) in zip(VIEWS, views, strict=True):
            np.testing.assert_array_equal(dev_view.numpy(), host_view, err_msg=f"alias {name}")
    finally:
        xr.config.restore(prev)
