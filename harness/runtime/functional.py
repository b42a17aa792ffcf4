"""Functionalization: views and aliases over one storage, kept in sync by versions.

A tensor is a *view chain* over a ``Storage`` (the base value's IR node). ``detach``, ``view``,
``reshape``, ``transpose`` and basic slicing add a step to the chain and share the storage; an
in-place op on any alias writes the new value back through the chain (``update_slice``,
inverse reshape/transpose) into the storage and bumps its version. ``expand`` is a view only
where autograd keeps an expanded gradient (the ``expanded-grad-accumulation`` switch): its inverse
is PyTorch's functionalization's, ``base + sum_to(view - base)``, which adds every element's
update into the one element they all share. Every alias regenerates its own
value when it sees a newer version: that regeneration is the *sync* whose omission was upstream
bug #8482 (a saved ``t1`` still showing its value from before ``t2 = t1.detach(); t2.add_(t2)``).
"""

from __future__ import annotations

import numpy as np

from harness.runtime import ir

ViewStep = tuple[str, tuple]  # (kind, attrs): alias | reshape | transpose | getitem | expand


def apply_view(node: ir.Node, step: ViewStep) -> ir.Node:
    kind, attrs = step
    if kind == "alias":
        return node
    if kind == "expand":
        return ir.Node("broadcast_to", (node,), attrs)
    return ir.Node(kind, (node,), attrs)


def write_back(base: ir.Node, step: ViewStep, value: ir.Node) -> ir.Node:
    """The new base after ``value`` was written into the view ``step`` of ``base``."""
    kind, attrs = step
    if kind == "alias":
        return value
    if kind == "reshape":
        return ir.Node("reshape", (value,), (base.shape,))
    if kind == "transpose":
        perm = attrs[0]
        inverse = tuple(sorted(range(len(perm)), key=perm.__getitem__))
        return ir.Node("transpose", (value,), (inverse,))
    if kind == "getitem":
        return ir.Node("update_slice", (base, value), attrs)
    if kind == "expand":
        return expand_inverse(base, value)
    raise ValueError(f"unknown view step {kind!r}")


def expand_inverse(base: ir.Node, value: ir.Node) -> ir.Node:
    """The new base after ``value`` was written into ``base.expand(shape)``: PyTorch's
    ``FunctionalInverses::expand_inverse``, ``base + sum_to(value - base, base.shape)``. Each of the
    view's elements is one memory location in eager torch, which refuses such a write; here every
    element's change lands in the shared element, summed."""
    change = ir.Node("sub", (value, ir.Node("broadcast_to", (base,), (value.shape,))))
    lead = len(value.shape) - len(base.shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(base.shape) if n == 1 and value.shape[lead + i] != 1
    )
    summed = ir.Node("sum", (change,), (axes, False)) if axes else change
    if summed.shape != base.shape:
        summed = ir.Node("reshape", (summed,), (base.shape,))
    return ir.Node("add", (base, summed))


def write_reads_back(chain: tuple[ViewStep, ...]) -> bool:
    """Whether a value written through ``chain`` is what the view reads afterwards: true for
    every view but an expand, whose elements share one."""
    return all(kind != "expand" for kind, _ in chain)


def read(base: ir.Node, chain: tuple[ViewStep, ...]) -> ir.Node:
    node = base
    for step in chain:
        node = apply_view(node, step)
    return node


def update(base: ir.Node, chain: tuple[ViewStep, ...], value: ir.Node) -> ir.Node:
    """Write ``value`` (the whole view's new value) through ``chain`` into ``base``."""
    if not chain:
        return value
    bases = [base]
    for step in chain[:-1]:
        bases.append(apply_view(bases[-1], step))
    new = value
    for step, b in zip(reversed(chain), reversed(bases), strict=True):
        new = write_back(b, step, new)
    return new


def host_view(array, chain: tuple[ViewStep, ...]):  # type: ignore[no-untyped-def]
    """Apply a view chain to a host (numpy) array, for reading an alias without a device op."""
    for kind, attrs in chain:
        if kind == "reshape":
            array = array.reshape(attrs[0])
        elif kind == "transpose":
            array = array.transpose(attrs[0])
        elif kind == "getitem":
            array = array[ir.decode_index(attrs)]
        elif kind == "expand":
            array = np.broadcast_to(array, attrs[0])
    return array
