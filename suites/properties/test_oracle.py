"""The semantics oracle: its ready tests, its judge, its declared differences and its reach.

The two invariants (``semantics-oracle``, ``training-oracle``) run every drawn program in the
runtime under test and in eager PyTorch (an environment ``xharness eager`` builds; they skip with
the reason where there is none). Their outcome depends on no cell (the programs set no option
and eager PyTorch ignores layouts), so they run in one. The other tests hold the oracle itself to
account: the judge fails on each kind of disagreement and on nothing else, every declared
difference cites its sources and is applied, and the generator reaches every composition the
classes of bugs it hunts are made of.
"""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest
from hypothesis import Phase, given, settings

from harness.properties import differences, semantics
from harness.properties.eager import Answer, Raised
from harness.properties.oracle import SEMANTICS_ORACLE, TRAINING_ORACLE, judge

ONE_CELL = pytest.mark.cell_independent

test_semantics_oracle = ONE_CELL(SEMANTICS_ORACLE.hypothesis_test())
test_training_oracle = ONE_CELL(TRAINING_ORACLE.hypothesis_test())


# ---------------------------------------------------------------------------- the judge


def _a(**seen: object) -> Answer:
    return Answer({k.replace("_", ": ", 1): (None if v is None else np.asarray(v, np.float32)) for k, v in seen.items()})


def test_the_judge_accepts_agreement_within_tolerance_and_both_absent_gradients() -> None:
    mine = _a(**{"3_t0": [1.0, 2.0], "4_t0.grad": None})
    theirs = _a(**{"3_t0": [1.0, 2.0000001], "4_t0.grad": None})
    assert judge(mine, theirs) == []


def test_the_judge_names_a_wrong_value_a_missing_gradient_and_a_shape() -> None:
    theirs = _a(**{"1_t0": [1.0, 2.0], "2_t0.grad": [1.0, 1.0], "3_t1": [1.0, 2.0]})
    mine = _a(**{"1_t0": [1.0, 2.5], "2_t0.grad": None, "3_t1": [[1.0, 2.0]]})
    problems = judge(mine, theirs)
    assert len(problems) == 3, problems
    assert "1: t0: the runtime read [1.0, 2.5], eager PyTorch [1.0, 2.0]" in problems[0]
    assert "has none, eager PyTorch a value" in problems[1]
    assert "shape (1, 2) here, (2,) in eager PyTorch" in problems[2]


def test_the_judge_holds_the_runtime_to_eager_errors_both_ways() -> None:
    refused = Raised("RuntimeError", "a leaf Variable that requires grad is being used in an in-place operation.", 2)
    accepted = judge(_a(**{"1_t0": [1.0]}), Answer(_a(**{"1_t0": [1.0]}).seen, refused))
    assert accepted and "the runtime accepted it" in accepted[0]
    raised = judge(Answer({}, Raised("DonatedBufferError", "buffer is deleted", 4)), _a(**{"5_t0": [1.0]}))
    assert raised and "eager PyTorch accepted the program" in raised[0]
    early = judge(Answer({}, Raised("RuntimeError", "x", 1)), Answer({}, refused))
    assert early and "went on to statement 2" in early[0]
    # both refuse the same statement: agreement, and the reads before it are still compared
    same = judge(Answer(_a(**{"1_t0": [1.0]}).seen, refused), Answer(_a(**{"1_t0": [1.0]}).seen, refused))
    assert same == []
    wrong_before = judge(Answer(_a(**{"1_t0": [3.0]}).seen, refused), Answer(_a(**{"1_t0": [1.0]}).seen, refused))
    assert wrong_before and "1: t0" in wrong_before[0]


def test_a_declared_difference_excuses_an_eager_refusal_and_ends_the_comparison_there() -> None:
    view = Raised("RuntimeError", "view size is not compatible with input tensor's size and stride (at least one "
                  "dimension spans across two contiguous subspaces). Use .reshape(...) instead.", 3)
    mine = _a(**{"1_t0": [1.0], "5_t2": [7.0]})
    assert judge(mine, Answer(_a(**{"1_t0": [1.0]}).seen, view)) == []
    assert differences.excused(view.type, view.message).id == "no-strides"
    assert differences.excused("RuntimeError", "a leaf Variable that requires grad") is None


# ---------------------------------------------------------------------------- the differences


def test_every_declared_difference_cites_a_source_and_is_applied_once() -> None:
    ids = [d.id for d in differences.DIFFERENCES]
    assert len(ids) == len(set(ids))
    dialect = differences.eager_dialect()
    for d in differences.DIFFERENCES:
        assert d.sources and all(re.match(r"https://", s) for s in d.sources), d.id
        assert bool(d.spelling) != bool(d.message), f"{d.id}: a spelling or an eager error, one of them"
        for entry, spelling in d.spelling:
            assert getattr(dialect, entry) == spelling, (d.id, entry)
    # the host copy is a copy (.cpu()'s), never the tensor's own memory
    assert "clone()" in dialect.read and ".cpu()" in dialect.read


# ---------------------------------------------------------------------------- reach

DRAWS = 400


@ONE_CELL  # generation only: semantics.programs() draws nothing from the devices or the options
def test_the_generator_reaches_every_composition_the_bugs_it_hunts_are_made_of() -> None:
    reached: collections.Counter[str] = collections.Counter()

    @settings(max_examples=DRAWS, derandomize=True, database=None, deadline=None, phases=[Phase.generate])
    @given(semantics.programs())
    def draw(program: semantics.Program) -> None:
        features = semantics.features(program)
        for name, pattern in semantics.COMPOSITIONS.items():
            if semantics.holds(features, pattern):
                reached[name] += 1

    draw()
    missing = [name for name in semantics.COMPOSITIONS if not reached[name]]
    assert not missing, f"never drawn in {DRAWS} programs: {missing}"


def test_a_program_prints_in_both_dialects_with_the_same_reads() -> None:
    program = semantics.Program(((1, 0),), "sgd", 0.5, (
        semantics.Make(2, 0), semantics.View(1, 0), semantics.View(2, 3), semantics.Scale(3, "add_", 2.0),
        semantics.Host(1), semantics.Binary(1, 0, "sub"), semantics.Backward(4), semantics.OptStep(True),
        semantics.MarkStep(), semantics.Read(1), semantics.HostWrite(0), semantics.HostRead(0),
    ))
    from harness.adapters import current

    mine = semantics.code(semantics.with_final_reads(program), current().training_dialect())
    theirs = semantics.code(semantics.with_final_reads(program), differences.EAGER_DIALECT)
    labels = re.compile(r"seen\['([^']+)'\]")
    assert labels.findall(mine) == labels.findall(theirs) and len(labels.findall(mine)) >= 8
    assert "t1.detach()" in mine and "t2.t()" in theirs and "h0 += 1.0" in theirs
    assert "torch" not in mine and "xr." not in theirs
