"""The training-program generator lines up the events a step-boundary bug needs, in one step.

Each event (an input updated in place, the forward product that reads it, a read of a forward
value, a step boundary, ``backward``) is in the generator's vocabulary on its own; a bug needs them
in one order inside one optimizer step, where the ``backward`` is of the forward pass the other
events surround. A generator that can express every event and never draws their composition
finds none of those bugs (``x.mul_(2); h = x @ w.T; h.numpy(); mark_step(); h.sum().backward()``
donated ``x``'s replaced buffer on the reference runtime, and no drawn program showed it). The
events are read off the code the program runs, in the reference runtime's dialect, as
``ci/training_stats.py`` counts them.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import Phase, given, settings

from harness.adapters.reference import REFERENCE_DIALECT
from harness.properties import training

pytestmark = pytest.mark.cell_independent  # generation only: no program runs, whatever the cell

DRAWS = 300
#: one line of reference-dialect code per event, in the order the composition needs them
INPLACE_PRODUCT_READ_STEP_BACKWARD = (
    re.compile(r"^(?:x|y)\.(?!copy_)\w+_\("),  # an input updated in place from its own value
    re.compile(r" @ "),
    re.compile(r"\.numpy\(\)"),
    re.compile("^" + re.escape(REFERENCE_DIALECT.mark_step) + "$"),
    re.compile(r"\.backward\(\)$"),
)


def _within_one_step(program: training.Program, pattern: tuple[re.Pattern[str], ...]) -> bool:
    """Whether one optimizer step's code holds a line for each of ``pattern`` in order."""
    body = training.code(program, REFERENCE_DIALECT).body
    for step in re.split(r"^# step \d+$", body, flags=re.MULTILINE):
        matched = 0
        for line in step.splitlines():
            if pattern[matched].search(line.strip()):
                matched += 1
                if matched == len(pattern):
                    return True
    return False


def test_an_input_updated_in_place_then_a_product_read_a_step_and_backward_in_one_step() -> None:
    """In a bounded number of draws, some program updates an input in place, computes the forward
    product from it, reads a forward value, crosses a step boundary and only then calls
    ``backward``, all in one optimizer step."""
    found: list[training.Program] = []

    @settings(max_examples=DRAWS, derandomize=True, database=None, deadline=None, phases=[Phase.generate])
    @given(training.programs())
    def draw(program: training.Program) -> None:
        if _within_one_step(program, INPLACE_PRODUCT_READ_STEP_BACKWARD):
            found.append(program)

    draw()
    assert found, f"no program of {DRAWS} drew inplace, product, read, step, backward within one step"


def test_the_composition_is_recognized_in_a_hand_written_program() -> None:
    """The plainest program of that composition: the input updated in place, one linear layer
    read, a step boundary before ``backward``."""
    program = training.Program(
        batch=3, features=2, layers=(training.Layer("linear", 2, False),), loss="squares", optimizer="sgd",
        weight_decay=0.0, target="own", reuse_inputs=False,
        steps=(training.Step(touch="input", cut=1, cut_kind="read", hold="mark_step"),),
    )
    assert _within_one_step(program, INPLACE_PRODUCT_READ_STEP_BACKWARD)
    plain = training.Program(**{**program.__dict__, "steps": (training.Step(touch="input", cut=1, cut_kind="read"),)})
    assert not _within_one_step(plain, INPLACE_PRODUCT_READ_STEP_BACKWARD)
