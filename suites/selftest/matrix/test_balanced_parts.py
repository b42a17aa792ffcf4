"""How a long cell is cut into parts and which cells are cut: parts of about equal seconds, each
in the order pytest would run its paths, none empty, none losing or repeating a path, with paths
of unknown seconds dealt in turn; and only cells long enough to pay a second start-up.
"""

from __future__ import annotations

import itertools

import pytest

from harness.matrix.config import Cell
from harness.matrix.schedule import balance, long_cells

pytestmark = pytest.mark.cell_independent


def _seconds(parts: list[tuple[str, ...]], times: dict[str, float]) -> list[float]:
    return [sum(times.get(p, 0.0) for p in part) for part in parts]


def test_parts_of_about_equal_seconds_keep_the_paths_order() -> None:
    paths = ("a", "b", "c", "d", "e")
    times = {"a": 1.0, "b": 9.0, "c": 4.0, "d": 4.0, "e": 1.0}
    parts = balance(paths, times)
    assert parts == [("b", "e"), ("a", "c", "d")]
    assert _seconds(parts, times) == [10.0, 9.0]
    three = balance(paths, times, count=3)
    assert sorted(itertools.chain.from_iterable(three)) == sorted(paths)
    assert max(_seconds(three, times)) == 9.0
    assert all(list(part) == sorted(part, key=paths.index) for part in three)


def test_a_path_of_unknown_seconds_counts_nothing_and_is_still_placed() -> None:
    paths = ("new", "old1", "old2")
    parts = balance(paths, {"old1": 5.0, "old2": 5.0})
    assert sorted(itertools.chain.from_iterable(parts)) == sorted(paths)
    assert _seconds(parts, {"old1": 5.0, "old2": 5.0}) == [5.0, 5.0]
    # paths the times do not know are placed after the known ones, on the lighter part
    assert balance(("x", "y", "z"), {"y": 3.0}) == [("y",), ("x", "z")]
    # ...and, counting nothing, they all go to the part that was lighter before them
    assert balance(("a", "b", "c", "d"), {"a": 0.5, "c": 0.6}) == [("c",), ("a", "b", "d")]


def test_without_seconds_the_paths_are_dealt_in_turn() -> None:
    assert balance(("a", "b", "c"), {}) == [("a", "c"), ("b",)]
    assert balance(("a", "b", "c"), {"a": 0.0, "b": 0.0}) == [("a", "c"), ("b",)]
    assert balance(("a",), {}, count=3) == [("a",)]  # no empty part
    assert balance(("z", "y", "x"), {}) == [("z", "x"), ("y",)]  # each part in the paths' order
    assert balance(("z", "y", "x"), {"z": 1.0, "y": 1.0, "x": 2.0}) == [("x",), ("z", "y")]


def test_ties_go_to_the_first_lighter_part_so_the_split_is_the_same_every_run() -> None:
    times = {"a": 2.0, "b": 2.0, "c": 2.0, "d": 2.0}
    assert balance(("a", "b", "c", "d"), times) == [("a", "c"), ("b", "d")]


def test_only_cells_over_half_a_slots_share_of_the_last_run_are_cut() -> None:
    cells = [Cell("a"), Cell("b"), Cell("c"), Cell("new")]
    # 100 s over 2 slots: a share of 50 s; a cell of more than 25 s is worth a second start-up
    assert long_cells(cells, 2, {"a": 60.0, "b": 25.0, "c": 15.0}) == {"a"}
    assert long_cells(cells, 2, {"a": 26.0, "b": 25.0, "c": 49.0}) == {"a", "c"}
    assert long_cells(cells, 1, {"a": 60.0}) == set()
    assert long_cells([], 2, {}) == set()


def test_with_no_last_run_the_largest_cells_by_their_shape_are_cut() -> None:
    cells = [Cell("one", devices=1, paths=("s",)), Cell("eight", devices=8, paths=("s",)),
             Cell("eight-too", devices=4, processes=1, paths=("s", "t")), Cell("two", devices=2, paths=("s",))]
    assert long_cells(cells, 2, {}) == {"eight", "eight-too"}
    assert long_cells(cells, 2, {"zzz": 5.0}) == {"eight", "eight-too"}
