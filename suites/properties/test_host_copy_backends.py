"""The host-copy invariant per backend: on the CPU a small aligned buffer shows aliasing every
time; elsewhere (a GPU, where the transfer races with the caller's next write) each example is
big enough and tried often enough that it always fails with the race present and always passes
without it, so hypothesis never sees one example both ways (flaky), and the failure says which
mechanism it was, never filing a GPU race under the CPU's aliasing.

The GPU path runs here on the CPU by replacing ``jax.default_backend()``: the injected bug
(aliasing, on this CPU) then hits every trial, and the runtime's copy keeps every trial clean.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from harness.adapters import current
from harness.properties import HOST_COPY, check_host_copy
from harness.properties.base import switched_on
from harness.runtime import faults
from harness.scenarios.host_aliasing import RACE_BYTES, RACE_TRIALS
from harness.scenarios.known_findings import known_finding

#: none of these depends on the cell's device count or options: the matrix runs them in cpu-8
pytestmark = pytest.mark.cell_independent

EXAMPLES = [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array(7, dtype=np.int32),  # 0-d
    np.array([True, False, True]),
    np.arange(64, dtype=np.int8).reshape(8, 8),
]
GPU_WORDING = "the transfer to the gpu read the caller's memory after the tensor was made"
CPU_WORDING = "the device buffer aliases the caller's memory"


@pytest.fixture
def on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")


@pytest.mark.parametrize("values", EXAMPLES, ids=lambda v: f"{v.dtype}{list(v.shape)}")
def test_with_the_copy_every_trial_holds(on_gpu: None, values: np.ndarray) -> None:
    check_host_copy(values)


@pytest.mark.parametrize("values", EXAMPLES, ids=lambda v: f"{v.dtype}{list(v.shape)}")
def test_without_the_copy_every_replay_of_an_example_fails_with_the_gpu_wording(
    on_gpu: None, values: np.ndarray
) -> None:
    with switched_on((faults.HOST_ALIASING,)):
        for _ in range(3):  # the same example, replayed as hypothesis replays it: same verdict
            with pytest.raises(AssertionError) as caught:
                check_host_copy(values)
            message = str(caught.value)
            assert GPU_WORDING in message and CPU_WORDING not in message
            assert f"of {RACE_TRIALS})" in message


def test_on_the_cpu_the_check_stays_small_and_says_aliasing() -> None:
    if jax.default_backend() != "cpu":
        pytest.skip("a CPU process")
    with switched_on((faults.HOST_ALIASING,)), pytest.raises(AssertionError, match=CPU_WORDING):
        check_host_copy(EXAMPLES[0])


def test_each_trial_moves_at_least_the_measured_size(on_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race was measured at 4 MiB; a tiny example is tiled up to it, never sent as it is."""
    rt = current()
    sizes: list[int] = []
    real = rt.tensor

    def tensor(host: np.ndarray) -> object:
        sizes.append(host.nbytes)
        return real(host)

    monkeypatch.setattr(rt, "tensor", tensor)
    check_host_copy(np.array([1.5], dtype=np.float32))
    assert len(sizes) == RACE_TRIALS and min(sizes) >= RACE_BYTES


def test_the_search_finds_it_without_flakiness(on_gpu: None) -> None:
    """Hypothesis replays a failing example while shrinking; a check that changed its mind there
    would end in ``FlakyFailure`` instead of a counterexample."""
    with switched_on((faults.HOST_ALIASING,)):
        found = HOST_COPY.search(max_examples=5)
    assert found is not None and faults.HOST_ALIASING in found.faults
    assert GPU_WORDING in found.error and "Flaky" not in found.error


def test_the_jax_gpu_race_is_not_filed_under_the_cpu_finding(
    on_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the JAX adapter the failure carries the transfer's wording, which the known CPU
    finding (jax-ml/jax#37830) does not explain: it is reported as what it is."""
    monkeypatch.setenv("HARNESS_RUNTIME", "jax")
    rt = current()
    assert rt.name == "jax"
    with pytest.raises(AssertionError) as caught:
        check_host_copy(EXAMPLES[0])  # JAX on this CPU aliases the buffer: every trial hits
    finding = known_finding("host-copy", "jax", rt.version())
    assert finding is not None and not finding.explains(caught.value)
