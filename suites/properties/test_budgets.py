"""The invariants' example budgets per kind of cell (``harness.properties.budgets``): a plain run
keeps the full budget and hypothesis' own seed, a cell runs its kind's share from a seed of its
own, and the cells of one kind of the shipped matrix add up to at least one full budget.

The environment is set here, whatever the cell: one cell (cpu-8) runs it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.matrix.config import load_matrix
from harness.properties import ROUND_TRIP, budgets

pytestmark = pytest.mark.cell_independent

MATRIX = Path(__file__).resolve().parents[2] / "ci" / "matrix.toml"


def _in_cell(monkeypatch: pytest.MonkeyPatch, name: str = "", devices: int = 8, processes: int = 1) -> None:
    for variable, value in (("HARNESS_CELL", name), ("HARNESS_DEVICES", str(devices)),
                            ("HARNESS_PROCESSES", str(processes))):
        monkeypatch.setenv(variable, value)


def test_a_plain_run_keeps_the_full_budget_and_hypothesis_own_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    _in_cell(monkeypatch)
    assert budgets.kind() == budgets.PLAIN and budgets.seed(ROUND_TRIP.id) is None
    assert ROUND_TRIP.scaled_examples() == ROUND_TRIP.max_examples


@pytest.mark.parametrize(("devices", "processes", "kind"), [(8, 1, budgets.BROAD), (1, 1, budgets.NARROW),
                                                            (3, 1, budgets.NARROW), (4, 2, budgets.RANKS)])
def test_a_cell_runs_its_kind_share(monkeypatch: pytest.MonkeyPatch, devices: int, processes: int, kind: str) -> None:
    _in_cell(monkeypatch, "some-cell", devices, processes)
    assert budgets.kind() == kind
    assert ROUND_TRIP.scaled_examples() == math.ceil(ROUND_TRIP.max_examples * budgets.SHARES[kind])
    assert budgets.examples(1) == 1  # never none


def test_every_cell_draws_from_a_seed_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = set()
    for name in ("cpu-1", "cpu-3", "cpu-4", "cpu-8", "cpu-8-nofunc", "cpu-2x4", "cpu-2slice"):
        _in_cell(monkeypatch, name)
        seeds.add(budgets.seed(ROUND_TRIP.id))
        assert budgets.seed(ROUND_TRIP.id) == budgets.seed(ROUND_TRIP.id)  # deterministic
    assert len(seeds) == 7


def test_the_shipped_matrix_cells_of_a_kind_add_up_to_a_full_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A share is only as good as the cells that run it: the narrow cells together, and the
    multi-process cells together, spend at least one full budget."""
    spent = dict.fromkeys(budgets.SHARES, 0.0)
    for cell in load_matrix(MATRIX).cells.values():
        if cell.backend != "cpu":
            continue
        _in_cell(monkeypatch, cell.name, int(cell.devices), cell.processes)
        spent[budgets.kind()] += budgets.SHARES[budgets.kind()]
    assert spent[budgets.NARROW] >= 1 - 1e-9 and spent[budgets.RANKS] >= 1 - 1e-9 and spent[budgets.BROAD] >= 1, spent
