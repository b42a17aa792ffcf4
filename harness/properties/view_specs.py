"""Invariant: the layout read through a chain of views is the one the runtime promises.

``sharding_spec`` of the tensor a user holds is often not of the tensor that was marked: a
parameter is read through ``.detach()``, a state dict hands out aliases, a model keeps a view of
a view. The runtime's contract (``xr.sharding_spec``): an alias that only renames its storage
(``detach``, any number of them) reports the storage's layout; any real view (a reshape, a
transpose, a slice) reports no layout of its own (None), as PyTorch/XLA's views carry none. One
view away is tested elsewhere; a check of the last step alone, or of the first, passes there and
is wrong two steps away (``view(16).detach()`` is a view, ``detach().detach()`` is not).

An example is a base of a drawn shape marked by a drawn spec over a drawn mesh, as device data or
pending (marked before or after a step, or written in place after marking), and a chain of two
or more views; the spec is read at every link, before and after a step. Where marking an alias
lays out its storage (``view-base-layout``), a detach-only chain is marked again with another
spec: the base and every link then report that one, pending and after the step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness import adapters
from harness.adapters import base
from harness.properties import strategies as pst
from harness.properties.base import Invariant
from harness.properties.layout import expected_read_back, same_layout, spelled
from harness.runtime.mesh import normalize_spec

#: how the base holds its value when the chain is read: ``data`` device data marked at once;
#: ``pending`` a computed value marked before any step; ``stepped`` that value after a step;
#: ``written`` device data marked, then written in place (pending again, its layout requested)
STATES: tuple[str, ...] = ("data", "pending", "stepped", "written")
#: how a chain is drawn: detaches only, any views, any views then a detach
CHAIN_FORMS: tuple[str, ...] = ("detaches", "any", "then-detach")


def _base(rt: Any, mesh: Any, spec: tuple[Any, ...], values: np.ndarray, state: str) -> Any:
    t = rt.tensor(values)
    if state in ("pending", "stepped"):
        t = rt.derive(t)
    t = rt.mark_sharding(t, mesh, spec)
    if state == "stepped":
        rt.step()
    elif state == "written":
        rt.inplace(t, "add", 1.0)
    return t


def _read(rt: Any, mesh: Any, t: Any, want: tuple[Any, ...] | None, ndim: int, what: str) -> None:
    got = rt.sharding_spec(t)
    if want is None:
        assert got is None, f"{what} reports {got!r}: a view reports no layout of its own"
        return
    assert spelled(got) == spelled(want) or same_layout(mesh, got, want, ndim), (
        f"{what} reports {got!r}, its storage is laid out {want!r}"
    )


def check_chain_spec(
    mesh: Any, spec: Any, shape: tuple[int, ...], state: str, chain: tuple[str, ...], respec: Any = None
) -> None:
    """Every link of ``chain`` (views of a base laid out by ``spec`` in ``state``) reports the
    base's layout while every view so far is a detach, and None from the first real view on;
    before a step and after it. ``respec``: the chain's end (detaches only) is marked again."""
    rt = adapters.current()
    ndim = len(shape)
    normal = normalize_spec(spec, ndim, mesh)
    values = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    t = _base(rt, mesh, normal, values, state)
    links = [t]
    for kind in chain:
        links.append(pst.runtime_view(rt, links[-1], kind, pst.chain_shape(shape, chain[: len(links) - 1])))
    laid = expected_read_back(normal)
    if respec is not None:
        laid = expected_read_back(normalize_spec(respec, ndim, mesh))
        rt.mark_sharding(links[-1], mesh, normalize_spec(respec, ndim, mesh))
    for when in ("before the step", "after the step"):
        _read(rt, mesh, t, laid, ndim, f"the base ({state}) {when}")
        for k in range(1, len(links)):
            seen = chain[:k]
            want = laid if all(kind == "detach" for kind in seen) else None
            _read(rt, mesh, links[k], want, len(pst.chain_shape(shape, seen)), f"the view {seen} {when}")
        rt.step()
    want_values = values + (1.0 if state == "written" else 0.0)
    if state in ("pending", "stepped"):
        want_values = values * 2 + 1
    got = rt.to_host(links[-1])
    assert np.array_equal(got, pst.numpy_chain(want_values, chain)), f"the view {chain} reads {got.tolist()}"


@st.composite
def _examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes())
    ndim = draw(pst.ints(1, 3))
    spec = draw(pst.partition_specs(mesh, ndim))
    shape = draw(pst.sharded_shapes(mesh, spec, max_multiple=2))
    # a third of the chains are detaches only (the ones that report a layout, and that can be
    # marked again), a third end in a detach after real views (a read that looks at the last
    # link alone takes them for aliases); drawn view by view, either is one chain in dozens
    form = draw(pst.choice(CHAIN_FORMS))
    if form == "detaches":
        chain = draw(pst.alias_chains(shape, min_length=2, max_length=4, families=("detach",)))
    else:
        chain = draw(pst.alias_chains(shape, min_length=1 if form == "then-detach" else 2, max_length=3))
        if form == "then-detach":
            chain += ("detach",)
    example: dict[str, Any] = {"mesh": mesh, "spec": spec, "shape": shape, "state": draw(pst.choice(STATES)), "chain": chain}
    if all(kind == "detach" for kind in chain) and base.VIEW_BASE_LAYOUT in adapters.current().capabilities:
        if draw(st.booleans()):
            respec = draw(pst.partition_specs(mesh, ndim, forms=("tuple",)))
            counts = pst.split_counts(mesh, respec)
            if all(d % c == 0 for d, c in zip(shape, counts, strict=True)):
                example["respec"] = respec
    return example


def _size(example: dict[str, Any]) -> int:
    return len(example["chain"]) - 2 + len(example["shape"]) - 1 + ("respec" in example)


VIEW_CHAIN_SPECS = Invariant(
    id="view-chain-specs",
    title="the spec read through a chain of two or more views is the storage's while every link is a "
    "detach, and None from the first real view on, before and after a step",
    check=check_chain_spec,
    examples=_examples,
    size=_size,
    max_size=2,
    max_examples=40,
    needs=(base.SHARDING, base.SHARDING_READBACK, base.ALIASING, base.STEP),
    mutants=("41-spec-read-through-the-last-view-only",),
)
