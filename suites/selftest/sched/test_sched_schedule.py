"""The schedule text format: printed with every failure, pasted back into ``replay``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.sched import Schedule


def test_run_length_encoding() -> None:
    schedule = Schedule.from_choices([0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1])
    assert str(schedule) == "s1:0x3.1.0x2.1x5"
    assert len(schedule) == 11 and schedule.switches == 3 and schedule.threads == 2
    assert list(Schedule.parse("s1:0x3.1.0x2.1x5")) == [0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1]
    assert str(Schedule()) == "s1:" and list(Schedule.parse("s1:")) == []


def test_parse_accepts_non_canonical_runs_and_prints_them_canonically() -> None:
    assert str(Schedule.parse(" s1:0x1.0.2x2.2 ")) == "s1:0x2.2x3"
    assert Schedule.parse("s1:0.0") == Schedule.parse("s1:0x2")


@given(st.lists(st.integers(0, 12), max_size=60))
def test_choices_round_trip_through_text(choices: list[int]) -> None:
    schedule = Schedule.from_choices(choices)
    text = str(schedule)
    assert text.startswith("s1:") and " " not in text
    parsed = Schedule.parse(text)
    assert parsed == schedule and list(parsed) == choices and str(parsed) == text


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 10**6)), max_size=20))
def test_runs_round_trip_without_expanding(runs: list[tuple[int, int]]) -> None:
    schedule = Schedule(tuple(runs))
    assert Schedule.parse(str(schedule)) == schedule
    assert len(schedule) == sum(count for _, count in runs)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "no version prefix"),
        ("0x3.1", "no version prefix"),
        ("s2:0x3", "version 's2'"),
        ("S1:0", "version 'S1'"),
        ("s1:0..1", "run 2 is empty"),
        ("s1:0.", "run 2 is empty"),
        ("s1:a", "run 1 'a' is not"),
        ("s1:-1", "run 1 '-1' is not"),
        ("s1:0x", "run 1 '0x' is not"),
        ("s1:0x3x2", "run 1 '0x3x2' is not"),
        ("s1:0 .1", "run 1 '0 ' is not"),
        ("s1:0x0", "repeats zero times"),
        ("s1:\u0661", "is not"),  # a non-ASCII digit
    ],
)
def test_malformed_text_says_what_is_wrong(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match="schedule") as info:
        Schedule.parse(text)
    assert complaint in str(info.value)


def test_parse_rejects_what_is_not_text() -> None:
    with pytest.raises(ValueError, match="not bytes"):
        Schedule.parse(b"s1:0")  # type: ignore[arg-type]


def test_runs_are_validated() -> None:
    with pytest.raises(ValueError, match="counts >= 1"):
        Schedule(((0, 0),))
    with pytest.raises(ValueError, match="ids are >= 0"):
        Schedule(((-1, 2),))
