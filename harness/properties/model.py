"""The numpy reference the sync and aliasing state machine is checked against.

It knows nothing of IR, versions or devices: a base is a numpy array, and an alias is the array
of *flat positions* of the base it shows, in its own shape. Reading an alias gathers those
positions; writing scatters into them. Views of views, reshapes of transposes and strided slices
all compose by applying the view to the position array, so the model's notion of "the same
memory" is exact and independent of how the runtime under test implements aliasing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: base values stay small integers in float32, so every op the machine applies (+-1, x2, x-1,
#: x0.5, the sum of two values) is exact and any XLA fusion computes the very same bits; a 3-d
#: base has permutations that are not their own inverse (a cyclic one), which 2-d ones never are
BASE_SHAPES: tuple[tuple[int, ...], ...] = ((4, 6), (2, 3, 4))

#: permutations, some written with negative dimensions as users do (``permute(-1, 0)``)
PERMUTATIONS: dict[int, tuple[tuple[int, ...], ...]] = {
    2: ((1, 0), (-1, 0)),
    3: ((1, 2, 0), (2, 0, 1), (0, -1, -2), (-1, 0, 1)),
}


def view_kinds(shape: tuple[int, ...]) -> tuple[str, ...]:
    """The aliasing views that apply to a value of ``shape``."""
    ndim = len(shape)
    perms = tuple(f"permute:{','.join(map(str, p))}" for p in PERMUTATIONS.get(ndim, ()))
    if ndim == 3:
        return ("detach", "flatten", "rows", *perms)
    if ndim == 2:
        return ("detach", "reshape", "flatten", "transpose", "rows", "strided", *perms)
    if ndim == 1:
        kinds = ["detach", "strided"]
        if shape[0] % 2 == 0:
            kinds.append("reshape")
        if shape[0] >= 3:
            kinds.append("rows")
        return tuple(kinds)
    return ("detach",)


def permutation(kind: str) -> tuple[int, ...]:
    """The dimensions of a ``permute:...`` view kind, as the user wrote them."""
    return tuple(int(d) for d in kind.split(":", 1)[1].split(","))


def view_index(kind: str, shape: tuple[int, ...]) -> tuple:
    """The basic index a slicing view applies (the runtime and the model use the same one)."""
    if kind == "rows":
        return (slice(1, min(3, shape[0] - 1)),) if shape[0] > 2 else (slice(0, 1),)
    if kind == "strided":
        return (slice(None), slice(None, None, 2)) if len(shape) == 2 else (slice(None, None, 2),)
    raise ValueError(kind)


def view_shape(kind: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The new shape of a reshaping view."""
    if kind == "reshape":
        return (shape[1], shape[0]) if len(shape) == 2 else (2, shape[0] // 2)
    if kind == "flatten":
        return (int(np.prod(shape)),)
    raise ValueError(kind)


def apply_view(kind: str, positions: np.ndarray) -> np.ndarray:
    if kind == "detach":
        return positions
    if kind in ("reshape", "flatten"):
        return positions.reshape(view_shape(kind, positions.shape))
    if kind == "transpose":
        return positions.T
    if kind.startswith("permute:"):
        return positions.transpose(permutation(kind))
    return positions[view_index(kind, positions.shape)]


@dataclass
class AliasModel:
    """Bases and the aliases over them (see the module docstring)."""

    bases: list[np.ndarray] = field(default_factory=list)
    tensors: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (base, positions)

    def create(self, values: np.ndarray) -> int:
        self.bases.append(np.array(values, dtype=np.float32).reshape(-1))
        self.tensors.append((len(self.bases) - 1, np.arange(values.size).reshape(values.shape)))
        return len(self.tensors) - 1

    def alias(self, src: int, kind: str) -> int:
        base, positions = self.tensors[src]
        self.tensors.append((base, apply_view(kind, positions)))
        return len(self.tensors) - 1

    def read(self, t: int) -> np.ndarray:
        base, positions = self.tensors[t]
        return self.bases[base][positions]

    def write(self, t: int, value: np.ndarray) -> None:
        base, positions = self.tensors[t]
        self.bases[base][positions] = np.broadcast_to(np.asarray(value, dtype=np.float32), positions.shape)

    def shape(self, t: int) -> tuple[int, ...]:
        return tuple(self.tensors[t][1].shape)
