"""The matmul precision: declared by the runtime, carried by every product a step emits, part of the
compile-cache key, and what the suites' tolerances follow.

A CPU computes float32 products in float32 under any precision, so the setting cannot show in a
number here: these checks read it from the programs instead. The lowered program (StableHLO, the
same on every backend) names it on every product (``precision = [HIGHEST, HIGHEST]``); the
executable the executor compiled names it too, in its backend's spelling (on a CPU
``operand_precision={highest,highest}``, nothing at ``default``). On a GPU these programs are
what keeps an exact-float32 step from running as TF32.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import jax
import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import config, plan_cache
from harness.runtime.testing import (
    compiled_texts,
    isolated,
    lowered_text,
    product_format,
    tolerance,
)

_LOWERED = re.compile(r"precision = \[(\w+), (\w+)\]")
_COMPILED = re.compile(r"operand_precision=\{(\w+),(\w+)\}")


def _lowered_precisions(text: str) -> list[str]:
    """The precision every matrix product of a StableHLO text asks for, in order."""
    found = []
    for line in text.splitlines():
        if "stablehlo.dot_general" in line or "stablehlo.convolution" in line:
            match = _LOWERED.search(line)
            found.append(match.group(1).lower() if match else "unstated")
    return found


def _cpu_dot_precisions(text: str) -> list[str]:
    """The precision of every ``dot`` of a CPU executable's HLO text (``default`` where none is
    named)."""
    found = []
    for line in text.splitlines():
        if " dot(" in line:
            match = _COMPILED.search(line)
            found.append(match.group(1) if match else "default")
    return found


def _model() -> tuple[xr.nn.Linear, xr.optim.SGD, xr.Tensor, xr.Tensor]:
    xr.manual_seed(0)
    model = xr.nn.Linear(16, 8)
    opt = xr.optim.SGD(model.parameters(), lr=0.1)
    x = xr.tensor(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32))
    return model, opt, x, xr.tensor(np.zeros((8, 8), np.float32))


def _step() -> np.ndarray:
    """A forward pass, its gradient and an SGD update: one program with products in all three."""
    model, opt, x, y = _model()
    xr.nn.mse_loss(model(x), y).backward()
    opt.step()
    xr.mark_step()
    return model.weight.numpy()


def _new_programs(run: Callable[[], object]) -> list[str]:
    """The HLO texts of the programs ``run()`` compiled (the cache keeps them in compile order)."""
    before = len(plan_cache._cache)
    run()
    return compiled_texts()[before:]


# --------------------------------------------------------------------------- the option


@pytest.mark.parametrize(
    ("name", "canonical"),
    [("default", "default"), ("bfloat16", "default"), ("high", "high"), ("tensorfloat32", "high"),
     ("bfloat16_3x", "high"), ("highest", "highest"), ("float32", "highest"), (" Highest ", "highest")],
)
def test_configure_takes_jax_names_and_keeps_the_canonical_one(name: str, canonical: str) -> None:
    start = config.options.matmul_precision  # the cell's (HARNESS_MATMUL_PRECISION), else "highest"
    previous = xr.configure(matmul_precision=name)
    assert previous.matmul_precision == start
    assert config.options.matmul_precision == canonical


@pytest.mark.parametrize("bad", ["tf32", "fp32", "", None, 3])
def test_configure_refuses_other_names_and_changes_nothing(bad: object) -> None:
    xr.configure(matmul_precision="highest")
    with pytest.raises(ValueError) as caught:
        xr.configure(functionalization=False, matmul_precision=bad)
    assert f"unknown matmul precision {bad!r}" in str(caught.value)
    assert "default, bfloat16, high, tensorfloat32, bfloat16_3x, highest, float32" in str(caught.value)
    assert config.options.matmul_precision == "highest" and config.options.functionalization


def test_the_environment_sets_it_and_a_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_MATMUL_PRECISION", raising=False)
    assert config._from_env().matmul_precision == "highest"  # the default: exact float32
    monkeypatch.setenv("HARNESS_MATMUL_PRECISION", "tensorfloat32")
    assert config._from_env().matmul_precision == "high"
    monkeypatch.setenv("HARNESS_MATMUL_PRECISION", "tf32")
    with pytest.raises(ValueError, match="HARNESS_MATMUL_PRECISION='tf32' .*: not one of the names; accepted: .*tensorfloat32"):
        config._from_env()


def test_isolated_restores_it() -> None:
    xr.configure(matmul_precision="highest")
    with isolated():
        xr.configure(matmul_precision="default")
    assert config.options.matmul_precision == "highest"


def test_a_replay_line_carries_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.scenarios import runner

    for name in runner.RUNTIME_ENV:  # a cell's own runtime options would be carried too
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HARNESS_MATMUL_PRECISION", "tensorfloat32")
    assert runner.repro_command("race-on-handles", False, 0).startswith("HARNESS_MATMUL_PRECISION=tensorfloat32 ")
    assert "HARNESS_MATMUL_PRECISION" not in runner.repro_command("race-on-handles", False, 0, cell="cpu-8")


# --------------------------------------------------------------------------- the programs


@pytest.mark.parametrize(
    ("name", "expected"),
    [("highest", "highest"), ("float32", "highest"), ("tensorfloat32", "high"), ("high", "high"), ("default", "default")],
)
def test_every_product_of_a_step_asks_for_the_configured_precision(name: str, expected: str) -> None:
    """Forward, gradient (``jax.vjp``'s products, the transposed ones included) and update: every
    product of the step's program states the precision, ``default`` too (then XLA's own choice is
    what the runtime declared, not what JAX's process-wide default happens to be)."""
    xr.configure(matmul_precision=name)
    model, opt, x, y = _model()
    loss = xr.nn.mse_loss(model(x), y)
    loss.backward()
    assert model.weight.grad is not None
    precisions = _lowered_precisions(lowered_text(loss, model.weight.grad))
    assert len(precisions) >= 2, precisions  # the forward product and the weight gradient's
    assert set(precisions) == {expected}, precisions


def test_the_executable_the_executor_compiled_carries_it() -> None:
    plan_cache.clear_cache()  # an earlier test's identical program must not hide these compiles
    texts = {}
    for name in ("highest", "tensorfloat32", "default"):
        xr.configure(matmul_precision=name)
        (texts[name],) = _new_programs(_step)
    assert texts["highest"] != texts["tensorfloat32"]  # exact float32 and TF32: two executables
    if jax.default_backend() == "cpu":  # a CPU keeps each product a dot naming its precision
        for name, expected in (("highest", "highest"), ("tensorfloat32", "high"), ("default", "default")):
            precisions = _cpu_dot_precisions(texts[name])
            assert len(precisions) >= 2 and set(precisions) == {expected}, (name, precisions)


def test_products_of_a_traced_kernel_carry_it() -> None:
    """A kernel is the user's JAX function (einsums that name no precision): it is traced inside
    the step's lowering, so its products ask for the runtime's precision too."""
    q = xr.tensor(np.random.default_rng(1).standard_normal((1, 2, 4, 8)).astype(np.float32))
    out = xr.kernels.flash_attention(q, q, q)
    for name, expected in (("tensorfloat32", "high"), ("highest", "highest"), ("bfloat16", "default")):
        xr.configure(matmul_precision=name)
        assert _lowered_precisions(lowered_text(out)) == [expected, expected]


def test_a_change_of_precision_compiles_a_new_program_and_only_then() -> None:
    xr.configure(matmul_precision="highest")
    plan_cache.clear_cache()
    exact = _new_programs(_step)
    assert len(exact) == 1 and _new_programs(_step) == []  # the same step again: cached
    xr.configure(matmul_precision="tensorfloat32")
    tf32 = _new_programs(_step)
    assert len(tf32) == 1 and tf32 != exact
    xr.configure(matmul_precision="high")  # another name of the same precision: the same program
    assert _new_programs(_step) == []
    xr.configure(matmul_precision="highest")  # back: the first program, still cached
    assert _new_programs(_step) == []
    if jax.default_backend() == "cpu":  # float32 products are exact here under any precision
        xr.configure(matmul_precision="tensorfloat32")
        narrowed = _step()
        xr.configure(matmul_precision="highest")
        np.testing.assert_array_equal(narrowed, _step())


def test_jax_own_default_does_not_change_the_runtime() -> None:
    """``JAX_DEFAULT_MATMUL_PRECISION`` (JAX's process-wide default, here set as that variable
    would set it) does not reach the runtime's programs: its explicit setting wins."""
    def loss_and_gradient() -> tuple[xr.Tensor, xr.Tensor]:
        model, _, x, y = _model()
        loss = xr.nn.mse_loss(model(x), y)
        loss.backward()
        assert model.weight.grad is not None
        return loss, model.weight.grad

    xr.configure(matmul_precision="highest")
    loss, grad = loss_and_gradient()
    before = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", "bfloat16")
    try:
        text = lowered_text(loss, grad)
        xr.mark_step()  # compiled and run while JAX's default says bfloat16
    finally:
        jax.config.update("jax_default_matmul_precision", before)
    assert set(_lowered_precisions(text)) == {"highest"}
    plan_cache.clear_cache()  # the same step compiled afresh, with JAX's default untouched
    again, again_grad = loss_and_gradient()
    xr.mark_step()
    np.testing.assert_array_equal(again.numpy(), loss.numpy())
    np.testing.assert_array_equal(again_grad.numpy(), grad.numpy())


# --------------------------------------------------------------------------- the tolerances


def _accepts(tol: dict[str, float], got: np.ndarray, want: np.ndarray) -> bool:
    try:
        np.testing.assert_allclose(got, want, **tol)
    except AssertionError:
        return False
    return True


WANT = np.linspace(0.5, 4.0, 64)
F32 = np.float32
TF32_LEVEL = [("high", "gpu"), ("default", "gpu"), ("high", "tpu"), ("default", "tpu"), ("tensorfloat32", "cuda")]
EXACT_LEVEL = [("highest", "gpu"), ("highest", "tpu"), ("highest", "cpu"), ("default", "cpu"), ("high", "cpu")]


@pytest.mark.parametrize(("precision", "backend"), TF32_LEVEL + EXACT_LEVEL)
def test_an_error_of_5e_2_relative_passes_only_at_tf32_level(precision: str, backend: str) -> None:
    """The field's H100 missed numpy by up to 4.7e-2 relative under TF32: such an error is
    numerics where the products are narrowed, a bug where they are exact float32."""
    tol = tolerance(F32, precision, backend)
    assert _accepts(tol, WANT * (1 + 5e-2), WANT) is ((precision, backend) in TF32_LEVEL)
    assert _accepts(tol, WANT * (1 + 1e-6), WANT)  # float32 rounding passes everywhere
    # the field's worst element: 7e-4 absolute on a value near zero
    assert _accepts(tol, np.array([1e-2 + 7e-4]), np.array([1e-2])) is ((precision, backend) in TF32_LEVEL)
    # a real bug (a lost term, a wrong operand) fails at every level
    assert not _accepts(tol, WANT * 1.5, WANT)
    assert not _accepts(tolerance(F32, "default", "tpu"), WANT + 0.5, WANT)


def test_tolerances_grow_with_lower_precision_and_on_accelerators() -> None:
    def size(precision: str, backend: str) -> tuple[float, float]:
        tol = tolerance(F32, precision, backend)
        return tol["rtol"], tol["atol"]

    for backend in ("gpu", "tpu", "metal"):
        assert size("highest", backend) < size("high", backend) <= size("default", backend)
    assert size("high", "tpu") < size("default", "tpu")  # one bfloat16 pass: narrower than TF32
    assert size("default", "cpu") == size("high", "cpu") == size("highest", "cpu")  # a CPU is exact
    assert size("default", "cpu") < size("default", "gpu")
    assert [product_format(p, "gpu") for p in ("highest", "high", "default")] == ["float32", "tensorfloat32", "tensorfloat32"]
    assert [product_format(p, "tpu") for p in ("float32", "bfloat16_3x", "bfloat16")] == ["float32", "tensorfloat32", "bfloat16"]


def test_per_dtype_entries() -> None:
    def rtol(dtype: object, precision: str = "highest", backend: str = "gpu") -> float:
        return tolerance(dtype, precision, backend)["rtol"]

    assert rtol(np.float64) < rtol(np.float32) < rtol(np.float16) < rtol(jax.numpy.bfloat16)
    # the precision narrows float32 products only: wider ones stay exact, narrower ones already are
    for dtype in (np.float64, np.float16, jax.numpy.bfloat16, "bfloat16"):
        assert tolerance(dtype, "default", "tpu") == tolerance(dtype, "highest", "cpu")
    assert tolerance(np.complex64, "default", "gpu") == tolerance(np.float32, "default", "gpu")
    assert tolerance(np.int32, "default", "tpu") == tolerance(np.bool_) == {"rtol": 0.0, "atol": 0.0}
    assert tolerance(np.zeros(3, np.float32), "high", "gpu") == tolerance("float32", "high", "gpu")
    with pytest.raises(ValueError, match="unknown matmul precision 'tf32'"):
        tolerance(F32, "tf32", "gpu")


def test_it_follows_the_runtime_and_takes_a_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tolerance(F32) == tolerance(F32, config.options.matmul_precision, jax.default_backend())
    xr.configure(matmul_precision="tensorfloat32")
    assert tolerance(F32, backend="gpu") == tolerance(F32, "high", "gpu")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert tolerance(F32) == tolerance(F32, "high", "gpu")
    exact = tolerance(F32, "highest", "cpu")
    floored = tolerance(F32, "highest", "cpu", minimum={"rtol": 1e-4})
    assert floored == {"rtol": 1e-4, "atol": exact["atol"]}
    assert tolerance(F32, "high", "gpu", minimum={"rtol": 1e-4}) == tolerance(F32, "high", "gpu")
