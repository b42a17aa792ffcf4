"""Invariant: one program over one layout compiles once, however the layout is spelled.

A layout has many spellings: an axis as a name or a one-axis group (``'x'``, ``('x',)``), an axis
of size 1 named or left out (``('x', 'y')`` and ``('x', None)`` on an ``('x': 4, 'y': 1)`` mesh),
a value replicated over the user's mesh or left unmarked, and the spelling XLA gives a layout it
chose (``P('x',)`` for ``P('x', None)``). Every value is right whichever is used; only a compile
count sees a runtime that keys its programs on the spelling, and every step of a loop fed from
two places then compiles twice. PyTorch/XLA keys on the ``OpSharding`` XLA compiles, where they
are one.

An example is a drawn mesh and layout, a small elementwise program, and two or more spellings of
the layout, each used both for the program's input and for its requested output layout (an
unmarked input's output requested as written, since an unrequested one is XLA's to choose); one of
them may be the layout XLA chose for a value a step computed. From an empty program cache the
first spelling compiles, and no other compiles again; every run reads the numpy value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from harness.adapters import base
from harness.properties import strategies as pst
from harness.properties.base import Invariant
from harness.runtime import plan_cache, sharding, step
from harness.runtime.mesh import Mesh, normalize_spec
from harness.runtime.tensor import Tensor, tensor

#: how a spelling is made from the normal spec: as is, one-axis entries as groups, the mesh's
#: size-1 axes added to the first split entry, unmarked when the layout is replicated, or the
#: layout XLA reports for a value computed from the input
SPELLINGS: tuple[str, ...] = ("normal", "groups", "unit-axes", "unmarked", "computed")
#: the program's operations, elementwise so that the output has the input's layout
OPS: tuple[str, ...] = ("scale", "shift", "square", "relu")


def spell(mesh: Mesh, spec: tuple[Any, ...], how: str) -> tuple[Any, ...] | None:
    """``spec`` (normal) spelled ``how`` (``computed`` is spelled ``normal`` here: the layout is
    put on the value that computes the input), or None where that spelling does not apply."""
    units = tuple(a for a, n in zip(mesh.axis_names, mesh.mesh_shape, strict=True) if n == 1)
    used = {a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)}
    replicated = all(e is None or all(a in units for a in ((e,) if isinstance(e, str) else e)) for e in spec)
    # a replicated value an unmarked tensor or XLA's choice makes lies over the devices in their
    # own order: over a mesh of another order it is another device assignment to XLA
    in_order = mesh.device_ids == tuple(sorted(mesh.device_ids))
    if how == "normal" or how == "computed" and (in_order or not replicated):
        return spec
    if how == "groups":
        return tuple((e,) if isinstance(e, str) else e for e in spec)
    if how == "unit-axes":
        extra = tuple(a for a in units if a not in used)
        split = [i for i, e in enumerate(spec) if e is not None]
        if not extra or not split:
            return None
        out = list(spec)
        entry = out[split[0]]
        out[split[0]] = ((entry,) if isinstance(entry, str) else entry) + extra
        return tuple(out)
    if how == "unmarked" and replicated and in_order:
        return ()
    return None


def _marked(t: Tensor, mesh: Mesh, spelled: tuple[Any, ...]) -> Tensor:
    return t if spelled == () else sharding.mark_sharding(t, mesh, spelled)


def _program(x: Tensor, ops: tuple[str, ...]) -> Tensor:
    for op in ops:
        x = x * 3.0 if op == "scale" else x - 1.0 if op == "shift" else x * x if op == "square" else x.relu()
    return x


def _numpy(x: np.ndarray, ops: tuple[str, ...]) -> np.ndarray:
    for op in ops:
        x = x * 3.0 if op == "scale" else x - 1.0 if op == "shift" else x * x if op == "square" else np.maximum(x, 0)
    return x


def check_spellings(mesh: Mesh, spec: Any, shape: tuple[int, ...], ops: tuple[str, ...], spellings: tuple[str, ...]) -> None:
    """The program ``ops`` over an input laid out by each of ``spellings`` of ``spec``, its output
    requested in the same spelling: the first compiles, none of the others compiles again."""
    ndim = len(shape)
    normal = normalize_spec(spec, ndim, mesh)
    values = np.arange(math.prod(shape), dtype=np.float32).reshape(shape) - 3.0
    plan_cache.clear_cache()
    compiled: list[int] = []
    for how in spellings:
        spelled = spell(mesh, normal, how)
        assert spelled is not None, f"{how} does not spell {normal}"
        if how == "computed":  # a step computes the input; XLA chose its layout
            source = _marked(tensor(values - 1.0), mesh, spelled)
            x = source + 1.0
            step.mark_step()
        else:
            x = _marked(tensor(values), mesh, spelled)
        before = plan_cache.compile_count()
        # an output left unmarked is XLA's to lay out, another program: requested as written
        out = _marked(_program(x, ops), mesh, spelled or normal)
        step.mark_step()
        compiled.append(plan_cache.compile_count() - before)
        got = out.numpy()
        assert np.array_equal(got, _numpy(values, ops)), f"the program over {how} {spelled} reads {got.ravel()[:4].tolist()}..."
    again = [(how, n) for how, n in zip(spellings[1:], compiled[1:], strict=True) if n]
    assert not again, (
        f"{normal} over {mesh}: spelled {spellings[0]} the program compiled {compiled[0]} time(s); "
        + ", ".join(f"spelled {how} it compiled {n} more" for how, n in again)
    )


@st.composite
def _examples(draw: st.DrawFn) -> dict[str, Any]:
    mesh = draw(pst.meshes())
    ndim = draw(pst.ints(1, 3))
    spec = normalize_spec(draw(pst.partition_specs(mesh, ndim, forms=("tuple",))), ndim, mesh)
    shape = draw(pst.sharded_shapes(mesh, spec, max_multiple=2))
    usable = tuple(how for how in SPELLINGS if spell(mesh, spec, how) is not None)
    spellings = draw(st.lists(pst.choice(usable), min_size=2, max_size=4))
    ops = tuple(draw(st.lists(pst.choice(OPS), min_size=1, max_size=3)))
    return {"mesh": mesh, "spec": spec, "shape": shape, "ops": ops, "spellings": tuple(spellings)}


def _size(example: dict[str, Any]) -> int:
    return len(example["spellings"]) - 2 + len(example["ops"]) - 1 + len(example["shape"]) - 1


SPELLING_COMPILES = Invariant(
    id="spelling-compiles",
    title="a program over one layout compiles once, whichever spelling of the layout its input and "
    "requested output use (a one-axis group, a size-1 axis, unmarked replication, XLA's own)",
    check=check_spellings,
    examples=_examples,
    size=_size,
    max_size=2,
    max_examples=30,
    needs=(base.FAULT_SWITCHES,),  # the reference runtime's compile counter and plan cache
    mutants=("43-plan-key-takes-the-layout-as-spelled",),
)
