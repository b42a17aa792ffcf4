"""Every save survives a crash at every write (SQLite's power-loss tests, with SIGKILL).

Each writer of the project (checkpoints, a cell's JUnit file, the merged report, the history, a
release environment's stamp, and a whole ``xharness run`` with its dashboard, summary and timing
JSON) runs in a child that is killed just before and just after each of its file operations in
turn, counted at the operating-system level (``harness.crashpoints``). After every kill each file
must load, with the project's own loader, as its previous version or its new one (a first save:
no file or the new one); a file the loader refuses is a lost save. And every loader refuses a file
cut short (what an in-place writer leaves) rather than loading it as other data.

The children start without the cell's topology (``own_process``): the shipped matrix runs these
once, in cpu-1 (``crash_points``). ``python -m harness.crashpoints`` prints the same runs as a table.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.crashpoints.cases import CASES, HISTORY
from harness.crashpoints.explore import BAD, Case, Result, explore_case, tear
from harness.report.history import load_history

pytestmark = [pytest.mark.own_process, pytest.mark.crash_points,
              pytest.mark.xdist_group("crash-points")]  # under xdist, one process explores each case once
# a case whose writer and loader never touch JAX has the same outcome on every JAX release
PARAMS = [
    pytest.param(c, id=c.name.replace(" ", "-"), marks=() if c.on_jax else pytest.mark.jax_independent)
    for c in CASES
]
Explored = Callable[[Case], tuple[Path, list[Result]]]


@pytest.fixture(scope="module")
def explored(tmp_path_factory: pytest.TempPathFactory) -> Explored:
    """Each case explored once for the module: (its directory, its two variants' results)."""
    done: dict[str, tuple[Path, list[Result]]] = {}

    def get(case: Case) -> tuple[Path, list[Result]]:
        if case.name not in done:
            directory = tmp_path_factory.mktemp("crash")
            done[case.name] = (directory, explore_case(case, directory))
        return done[case.name]

    return get


def _lost(result: Result) -> str:
    assert result.final is not None
    return "\n".join(
        f"  kill point {p.kill} ({result.final.where(p.kill)}): {p.outcome}: {p.detail}"
        for p in result.failures()
    )


@pytest.mark.parametrize("case", PARAMS)
def test_every_kill_point_leaves_a_whole_version(case: Case, explored: Explored) -> None:
    over_previous, first_save = explored(case)[1]
    for result in (over_previous, first_save):
        # not vacuous: the save was killed somewhere, and the run past the last point completed
        assert result.final is not None and result.final.ending == "completed", result.variant
        assert result.points, f"{case.name}, {result.variant}: no kill point was reached"
        assert len(result.points) == result.final.events, (
            f"{case.name}, {result.variant}: {len(result.points)} kill points tried, "
            f"{result.final.events} in a full run"
        )
        assert not result.failures(), (
            f"{case.name}, {result.variant}: a kill lost the save at "
            f"{len(result.failures())} of {len(result.points)} kill points:\n{_lost(result)}"
        )
    # both ends seen: a kill before the first operation keeps the previous version (or nothing),
    # one after the last leaves the new version
    assert over_previous.points[0].outcome == "previous"
    assert over_previous.points[-1].outcome == "new"
    assert first_save.points[0].outcome == "absent"
    assert first_save.points[-1].outcome == "new"


@pytest.mark.parametrize("case", PARAMS)
def test_loaders_refuse_a_file_cut_short(case: Case, explored: Explored, tmp_path: Path) -> None:
    reference = tmp_path / "reference"  # a whole new save, written by the real writer
    shutil.copytree(explored(case)[0] / "first-save" / "reference", reference)
    points = tear(case, reference)
    assert points, f"{case.name}: no file was cut"
    damaged = [p for p in points if p.outcome in BAD and p.outcome != "refused"]
    assert not damaged, "\n".join(p.detail for p in damaged)
    assert any(p.outcome == "refused" for p in points)


@pytest.mark.jax_independent
def test_a_damaged_history_entry_is_named_and_left_out(
    explored: Explored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "history"
    shutil.copytree(explored(HISTORY)[0] / "over-previous" / "reference" / "history", history)
    (entry,) = sorted(history.glob("*.json"))
    whole = entry.read_text()
    good = load_history(history)
    assert len(good) == 1 and capsys.readouterr().err == ""
    damaged = history / "20240101T000000000000Z-cccccccccccccccc.json"
    damaged.write_text(whole[: len(whole) // 2])
    assert load_history(history) == good
    err = capsys.readouterr().err
    assert str(damaged) in err and "damaged history entry" in err
    damaged.write_text(json.dumps({"run_id": "x", "timestamp": "t", "counts": [], "duration": 1}))
    assert load_history(history) == good
    assert str(damaged) in capsys.readouterr().err
