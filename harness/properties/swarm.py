"""Swarm testing: each test case draws which features it may use, so rare combinations stop being rare.

A program drawn from the whole vocabulary at once spends its few operations on every kind alike:
a sequence that needs four aliases in a row, or a write on a value an earlier operation left
pending, lines up in a tiny share of programs. Swarm testing (Groce et al., "Swarm testing",
ISSTA 2012) draws, per test case, a subset of the features first and then the test case from that
subset alone: with half the vocabulary switched off, the rest comes up twice as often, and every
pair of features is switched on together in a quarter of the cases with nothing else diluting it.

``swarm(features)`` is the building block: a hypothesis strategy for the ``frozenset`` of enabled
features, drawn before the program that uses it. It never returns the empty set.

Which way it shrinks, and why: towards the *full* set. The enabled set is not part of what a
counterexample means (the program is), so once a failure is found the shrinker should be free to
replace an operation by a simpler one the swarm had switched off; shrinking towards fewer features
would narrow the program further, and each feature dropped would reinterpret the choices the
program was drawn from (an index into a smaller set names another operation), which a shrinker
mostly cannot make fail again. Towards the full set the shrunk counterexample also reads as a
plain program, replayable without the swarm. Concretely: the first choice is how much to switch
off (0, the shrink target, keeps everything), then one feature that is always kept (so the set is
never empty, and any single feature can be the only one), then a coin per other feature whose
shrink target, 0, keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")

#: the share of features a test case switches off is drawn first, in steps of one ``LEVELS``th,
#: from none (the whole vocabulary, as programs were drawn before swarming) to all but one: with
#: a fixed half (the paper's choice) a vocabulary of a dozen kinds almost never narrows to the
#: two or three whose long runs (four aliases in a row) a bug needs
LEVELS = 8


@st.composite
def _swarm(draw: st.DrawFn, features: tuple[Any, ...]) -> frozenset[Any]:
    dropped = draw(st.integers(0, LEVELS - 1))  # out of LEVELS; 0, the shrink target, keeps all
    if dropped == 0:
        return frozenset(features)
    anchor = draw(st.integers(0, len(features) - 1))
    # a coin per feature, off with probability dropped / LEVELS; its shrink target, 0, keeps it
    return frozenset(
        f for i, f in enumerate(features) if i == anchor or draw(st.integers(0, LEVELS - 1)) < LEVELS - dropped
    )


def swarm(features: Sequence[T]) -> st.SearchStrategy[frozenset[T]]:
    """The features one test case may use: a share of them switched off (drawn per case: none, one
    eighth, ... seven eighths), one always kept; never none. Shrinks towards all of them (see the
    module docstring)."""
    return _swarm_of(tuple(features))


@lru_cache(maxsize=256)
def _swarm_of(features: tuple[Any, ...]) -> st.SearchStrategy[frozenset[Any]]:
    if not features or len(set(features)) != len(features):
        raise ValueError(f"swarm({features!r}): needs at least one feature, each named once")
    return _swarm(features)


def enabled_in_order(features: Sequence[T], enabled: frozenset[T]) -> tuple[T, ...]:
    """The enabled features in the vocabulary's own order: a draw indexes into this tuple, so an
    index that shrinks towards 0 shrinks towards the vocabulary's first (most common) feature."""
    return tuple(f for f in features if f in enabled)
