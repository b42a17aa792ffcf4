"""The training-program fuzzer: its ready tests, its reach, and its teeth on a broken runtime.

The two invariants (``training-differential``, ``step-boundary``) run here under the plugin's
profile, few programs under the CI profile (each compiles a handful of XLA programs), many under
``--hypothesis-profile xharness-explore``. The other tests hold the fuzzer itself to account: the
generator reaches every feature the bugs it is for need, a failure prints code that runs alone
and shows the failure, and the oracles fail, with a small shrunk program, on a runtime broken by
hand (a wrong gradient, a scalar baked into a reused plan, a gradient path cut at a boundary).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, given, settings

from harness.adapters import current
from harness.properties import training
from harness.properties.differential import (
    TRAINING_DIFFERENTIAL,
    check_step_boundaries,
    check_training,
    code_in,
    differences,
    expected,
    run_code,
)
from harness.runtime import autograd, device_data, graphs, ir, plan_cache
from harness.runtime.testing import isolated

OPTIONS_INDEPENDENT = pytest.mark.options_independent
#: the searches on a broken runtime shrink whole programs (tens of seconds): like the teeth of the
#: other invariants (test_teeth.py) they run in cpu-8 only; their outcome depends on no cell
TEETH = pytest.mark.cell_independent

# the ready tests of TRAINING_DIFFERENTIAL and STEP_BOUNDARY run with the other invariants
# (test_invariants.py), where a release's invariant cells find them too

#: what the generator must reach, by ``Program.features_used`` name: what the bugs it is for need
FEATURES = (
    "steps-without-boundary",
    "shared-inputs",
    "target:same",
    "target:copy",
    "reused-input-buffer",
    "in-place",
    "touch:input",
    "touch:param",
    "layer:scale_",
    "optimizer:sgd",
    "optimizer:momentum",
    "optimizer:adam",
    "lr-schedule",
    "loss-scale-schedule",
    "load:mark_step",
    "fresh-and-reused-inputs",
    "cut:mark_step",
    "cut:sync",
    "cut:read",
    "read-loss",
    "after-backward:mark_step",
    "accumulate",
    "layer:layernorm",
    "layer:shuffle",
)
DRAWS = 300


@pytest.mark.options_independent  # generation only: what it draws depends on the devices, not the options
def test_the_generator_reaches_every_feature_in_a_bounded_number_of_draws() -> None:
    seen: set[str] = set()

    @settings(max_examples=DRAWS, derandomize=True, database=None, deadline=None, phases=[Phase.generate])
    @given(training.programs())
    def draw(program: training.Program) -> None:
        seen.update(program.features_used())

    draw()
    wanted = set(FEATURES) | ({"sharding"} if current().device_count() > 1 else set())
    assert not wanted - seen, f"not reached in {DRAWS} programs: {sorted(wanted - seen)}"


def test_programs_are_values() -> None:
    """Frozen, hashable and equal by value: what shrinking and printing rely on."""
    program = training.Program(
        batch=2, features=3, layers=(training.Layer("linear", 3, True),), loss="mse", optimizer="sgd",
        weight_decay=0.0, target="own", reuse_inputs=False, steps=(training.Step(), training.Step(lr=0.05)),
    )
    again = training.Program(**{f: getattr(program, f) for f in program.__dataclass_fields__})
    assert program == again and hash(program) == hash(again)
    with pytest.raises(AttributeError):
        program.batch = 3  # type: ignore[misc]
    assert "lr-schedule" in program.features_used() and program.size() == 1


# ---------------------------------------------------------------- a runtime broken by hand


def _doubled_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every gradient ``backward`` hands out is twice what it should be."""
    real = autograd.gradients

    def doubled(loss: ir.Node, retain_graph: bool = False) -> list[tuple[Any, ir.Node]]:
        return [(s, ir.Node("mul", (g, ir.const(2.0, g.dtype)))) for s, g in real(loss, retain_graph)]

    monkeypatch.setattr(autograd, "gradients", doubled)


def _stale_scalars(monkeypatch: pytest.MonkeyPatch) -> None:
    """The packed Python scalars of a graph are cached by how many there are, not by their
    values: the first learning rate is reused for every later one, as if baked into the plan."""
    real = graphs.scalar_input
    packs: dict[tuple[Any, int], device_data.DeviceData] = {}

    def stale(dtype: np.dtype, values: list[Any]) -> device_data.DeviceData:
        key = (np.dtype(dtype), len(values))
        if key not in packs:
            packs[key] = real(dtype, values)
        return packs[key]

    monkeypatch.setattr(graphs, "scalar_input", stale)


def _shallow_unfold(monkeypatch: pytest.MonkeyPatch) -> None:
    """``backward`` takes back the recorded IR of a synced loss, but not of a synced activation:
    a boundary inside the forward pass cuts the gradient of every parameter before it."""
    real = autograd._unfold
    monkeypatch.setattr(autograd, "_unfold", lambda root: root if root.data is None else real(root))


_searched: dict[str, Any] = {}


def _wrong_gradient_search() -> Any:
    """The shrunk counterexample of the doubled-gradient runtime, searched once per process (two
    tests read it; the derandomized search would find the same one again)."""
    if "wrong-gradient" not in _searched:
        with pytest.MonkeyPatch.context() as patch:
            _doubled_gradients(patch)
            plan_cache.clear_cache()  # no plan compiled before the breakage may serve it
            try:
                _searched["wrong-gradient"] = TRAINING_DIFFERENTIAL.search()
            finally:
                plan_cache.clear_cache()
    return _searched["wrong-gradient"]


@TEETH
def test_the_differential_oracle_shrinks_a_wrong_gradient_to_a_small_program() -> None:
    found = _wrong_gradient_search()
    assert found is not None, "no training program showed a doubled gradient"
    assert found.size <= TRAINING_DIFFERENTIAL.max_size, f"shrunk only to size {found.size}:\n{found.example}"
    assert "disagree" in found.error and "import harness.runtime as xr" in found.error


#: one linear layer, two SGD steps whose learning rates differ (a Python scalar schedule)
SCHEDULE_PROGRAM = training.Program(
    batch=4, features=3, layers=(training.Layer("linear", width=2),),
    loss="mse", optimizer="sgd", weight_decay=0.0, target="own", reuse_inputs=False,
    steps=(training.Step(lr=0.1), training.Step(lr=0.02)),
)


@TEETH
def test_the_differential_oracle_fails_on_a_baked_scalar(monkeypatch: pytest.MonkeyPatch) -> None:
    """A learning rate served from the first step's scalars trains the second step wrong; the
    same program agrees with the oracle on the real runtime."""
    check_training(SCHEDULE_PROGRAM)
    _stale_scalars(monkeypatch)
    plan_cache.clear_cache()
    try:
        with pytest.raises(AssertionError, match="disagree") as failed:
            check_training(SCHEDULE_PROGRAM)
    finally:
        plan_cache.clear_cache()
    assert "import harness.runtime as xr" in str(failed.value)


#: two linear layers, one SGD step, no boundary inside the forward pass; moved: a step boundary
#: after the first layer. A search finds such a pair too, but its shrinking took minutes of cpu-8
CUT_PROGRAM = training.Program(
    batch=4, features=3, layers=(training.Layer("linear", width=3), training.Layer("linear", width=2)),
    loss="mse", optimizer="sgd", weight_decay=0.0, target="own", reuse_inputs=False,
    steps=(training.Step(),),
)
CUT_AFTER_FIRST_LAYER = ((1, "mark_step", "none", "mark_step"),)


@TEETH
def test_the_step_boundary_oracle_fails_when_a_boundary_cuts_the_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut at a boundary, a gradient goes missing silently (the first layer stops training): the
    values then change with where the boundary fell. The same pair passes on the real runtime."""
    check_step_boundaries(CUT_PROGRAM, CUT_AFTER_FIRST_LAYER)
    _shallow_unfold(monkeypatch)
    plan_cache.clear_cache()
    try:
        with pytest.raises(AssertionError, match="step boundaries changed") as failed:
            check_step_boundaries(CUT_PROGRAM, CUT_AFTER_FIRST_LAYER)
    finally:
        plan_cache.clear_cache()
    assert "import harness.runtime as xr" in str(failed.value)


@TEETH
def test_the_printed_program_runs_alone_and_reproduces_the_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The code in a failure is the whole program: run on the broken runtime it reads the
    values the failure reports, run on the real one it reads the oracle's."""
    found = _wrong_gradient_search()
    assert found is not None
    _doubled_gradients(monkeypatch)
    text = code_in(found.error)
    assert text.startswith("import numpy as np\n\nimport harness.runtime as xr")
    with isolated():
        broken = run_code(text)
    monkeypatch.undo()
    with isolated():
        fixed = run_code(text)
    tol = {"rtol": 1e-3, "atol": 1e-4}
    wrong = differences(fixed, broken, tol)
    assert wrong, "the printed program reads the same values on the broken and the real runtime"
    reported = {line.split(":", 1)[0].strip() for line in found.error.splitlines() if "got " in line}
    assert reported <= {line.split(":", 1)[0] for line in wrong}, (reported, wrong)


@pytest.mark.cell_independent  # the oracle's own derivatives: one cell checks them
def test_the_oracle_agrees_with_the_runtime_on_a_hand_written_loop() -> None:
    """The float64 oracle's derivatives are written by hand: on a two-step loop with every layer
    kind it agrees with the runtime (whose derivatives are ``jax.vjp``'s) value for value."""
    program = training.Program(
        batch=4, features=4,
        layers=(
            training.Layer("linear", 4, True), training.Layer("layernorm"), training.Layer("linear", 4, False),
            training.Layer("shuffle"), training.Layer("linear", 4, True), training.Layer("tanh"),
            training.Layer("linear", 3, True), training.Layer("sigmoid"),
        ),
        loss="xent", optimizer="adam", weight_decay=0.0, target="own", reuse_inputs=True,
        steps=(training.Step(after_backward="read", read_loss=True), training.Step(lr=0.05, end="read")),
    )
    with isolated():
        got = run_code(training.code(program, current().training_dialect()).text())
    want = expected(program)
    assert set(want) == set(got) and len(want) > 20
    assert not differences(want, got, {"rtol": 1e-4, "atol": 1e-5})


def test_inputs_that_share_a_buffer_in_one_step_and_not_in_the_next() -> None:
    """The program the generator draws to tell one buffer read twice from two buffers: the
    target copied from a pending input (``y.copy_(x)`` after ``x.copy_(batch)``) shares its buffer
    after the step boundary, a fresh input's copy does not; the two graphs after the boundary are
    the same but for that, and each must compute with its own inputs."""
    step = training.Step(load="mark_step")
    program = training.Program(
        batch=2, features=3, layers=(training.Layer("linear", 3, True),), loss="mse", optimizer="sgd",
        weight_decay=0.0, target="copy", reuse_inputs=True,
        steps=(step, training.Step(load="mark_step", fresh=True, touch="input"), step),
    )
    with isolated():
        check_training(program)
