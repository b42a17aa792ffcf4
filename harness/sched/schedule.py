"""Recorded schedules and their one-line text form.

A schedule is the thread chosen at every step of a controlled run, thread ids being given in spawn
order (the test body is 0, the first thread it starts is 1, ...). That sequence is all it takes to
replay a run, so it is what a failure prints and what ``replay`` accepts.

Text form, version 1::

    s1:0x3.1.0x2.1x5

``s1:`` then dot-separated runs, each a thread id optionally followed by ``x`` and how many
consecutive steps it was chosen (``1x5`` is five steps of thread 1; a bare id is one step). The
empty schedule is ``s1:``. Parsing accepts adjacent runs of the same thread and ``x1`` counts
(merged and dropped when printed again), nothing else. The version prefix exists so that a string
pasted from an old CI log fails loudly, not silently differently, once the format evolves.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

VERSION = "s1"
_RUN = re.compile(r"([0-9]+)(?:x([0-9]+))?")


@dataclass(frozen=True)
class Schedule:
    """Run-length encoded choices: ``runs[i] = (thread id, consecutive steps)``, canonical.

    Kept run-length encoded so that a hostile ``0x999999999`` costs nothing until replayed.
    """

    runs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        merged: list[tuple[int, int]] = []
        for tid, count in self.runs:
            if tid < 0 or count < 1:
                raise ValueError(f"schedule run ({tid}, {count}): ids are >= 0, counts >= 1")
            if merged and merged[-1][0] == tid:
                merged[-1] = (tid, merged[-1][1] + count)
            else:
                merged.append((tid, count))
        object.__setattr__(self, "runs", tuple(merged))

    @classmethod
    def from_choices(cls, choices: Iterable[int]) -> Schedule:
        runs: list[tuple[int, int]] = []
        for tid in choices:
            if runs and runs[-1][0] == tid:
                runs[-1] = (tid, runs[-1][1] + 1)
            else:
                runs.append((tid, 1))
        return cls(tuple(runs))

    @classmethod
    def parse(cls, text: str) -> Schedule:
        if not isinstance(text, str):
            raise ValueError(f"a schedule is text like 's1:0x3.1', not {type(text).__name__}")
        body = text.strip()
        prefix, sep, rest = body.partition(":")
        if not sep:
            raise ValueError(f"schedule {text!r} has no version prefix: expected '{VERSION}:...'")
        if prefix != VERSION:
            raise ValueError(
                f"schedule {text!r} has version {prefix!r}; this harness reads only '{VERSION}'"
            )
        if not rest:
            return cls()
        runs: list[tuple[int, int]] = []
        for position, token in enumerate(rest.split("."), start=1):
            match = _RUN.fullmatch(token)
            if match is None:
                what = (
                    "is empty"
                    if not token
                    else f"{token!r} is not '<thread>' or '<thread>x<count>'"
                )
                raise ValueError(f"schedule {text!r}: run {position} {what}")
            count = int(match.group(2)) if match.group(2) is not None else 1
            if count < 1:
                raise ValueError(f"schedule {text!r}: run {position} {token!r} repeats zero times")
            runs.append((int(match.group(1)), count))
        return cls(tuple(runs))

    def __str__(self) -> str:
        return f"{VERSION}:" + ".".join(f"{t}x{c}" if c > 1 else str(t) for t, c in self.runs)

    def __repr__(self) -> str:
        return f"Schedule.parse({str(self)!r})"

    def __iter__(self) -> Iterator[int]:
        for tid, count in self.runs:
            for _ in range(count):
                yield tid

    def __len__(self) -> int:
        return sum(count for _, count in self.runs)

    @property
    def switches(self) -> int:
        """Context switches (preemptive or not): one fewer than the runs."""
        return max(len(self.runs) - 1, 0)

    @property
    def threads(self) -> int:
        """Threads the schedule names (ids are dense, so the largest id plus one)."""
        return max((t for t, _ in self.runs), default=-1) + 1


def as_schedule(value: Schedule | str) -> Schedule:
    return value if isinstance(value, Schedule) else Schedule.parse(value)
