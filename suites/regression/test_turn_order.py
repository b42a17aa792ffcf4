"""The ranks of a multi-process cell reach start-up, ``jax.distributed``, backend initialization
and their first discovery in an order drawn from ``HARNESS_TURN_SEED``, and say so in their
records: the parts of a multi-process run that the harness orders, not the OS."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness.matrix import multiproc
from harness.report.junit import read_records

ROOT = Path(__file__).resolve().parents[2]
_SCRUB = (
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_ADDOPTS",
)
# it starts a matrix run of its own, which does not depend on the cell it runs in
in_one_cell = pytest.mark.skipif(
    os.environ.get("HARNESS_CELL") not in (None, "", "cpu-8"),
    reason="starts its own matrix run; runs in cpu-8 or outside the matrix",
)


def test_the_order_depends_on_the_seed_alone() -> None:
    assert multiproc.turn_order(2, 2) == multiproc.turn_order(2, 2) == [1, 0]
    assert multiproc.turn_order(0, 2) == [0, 1]
    orders = {tuple(multiproc.turn_order(seed, 4)) for seed in range(50)}
    assert len(orders) > 10 and all(sorted(o) == [0, 1, 2, 3] for o in orders)


def test_ranks_enter_each_phase_in_turn_however_late_they_arrive(tmp_path: Path) -> None:
    order = multiproc.turn_order(7, 4)
    rng = random.Random(0)
    delays = {rank: [rng.uniform(0, 0.02) for _ in multiproc.TURN_PHASES] for rank in range(4)}

    def rank_body(rank: int) -> None:
        turns = multiproc.Turns(tmp_path, order, rank, timeout=30)
        for phase, delay in zip(multiproc.TURN_PHASES, delays[rank], strict=True):
            time.sleep(delay)
            turns.take(phase)

    threads = [threading.Thread(target=rank_body, args=(r,)) for r in reversed(range(4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    entries = multiproc.read_turns(tmp_path)
    for phase in multiproc.TURN_PHASES:
        assert [r for p, r in entries if p == phase] == order, entries
    described = multiproc.describe_turns(entries)
    assert described.startswith(f"start:{','.join(map(str, order))} ")


def test_a_rank_that_never_comes_is_named(tmp_path: Path) -> None:
    turns = multiproc.Turns(tmp_path, [1, 0], rank=0, timeout=0.1)
    with pytest.raises(
        multiproc.TurnTimeout, match=r"rank 0 waited 0.1 s for rank 1 to enter 'start'"
    ):
        turns.take("start")


def test_outside_a_launched_rank_taking_a_turn_does_nothing() -> None:
    assert multiproc._turns is None
    multiproc.take_turn("discovery")  # returns at once


@in_one_cell
@pytest.mark.parametrize("seed", [0, 2], ids=["rank0-first", "rank1-first"])
def test_a_two_process_cell_takes_its_turns_and_records_them(tmp_path: Path, seed: int) -> None:
    order = multiproc.turn_order(seed, 2)
    (tmp_path / "matrix.toml").write_text(
        textwrap.dedent(
            f"""
            root = "{ROOT}"
            [cells.two]
            backend = "cpu"
            devices = 2
            processes = 2
            paths = ["suites/regression/test_catalog.py"]
            pytest_args = ["-m", "multiprocess", "-k", "race-on-handles-injected"]
            timeout = 200
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env[multiproc.TURN_SEED_ENV] = str(seed)
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--matrix",
            str(tmp_path / "matrix.toml"),
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    entries = multiproc.read_turns(out / "logs" / "two" / "launch1.turns")
    assert [p for p, _ in entries[::2]] == list(multiproc.TURN_PHASES)
    for phase in multiproc.TURN_PHASES:
        assert [r for p, r in entries if p == phase] == order, entries
    records = read_records(out / "junit" / "two.xml")
    assert [r.nodeid for r in records] == ["suites/regression/test_catalog.py::test_scenario[race-on-handles-injected]"]
    for record in records:
        props = record.properties
        assert props["turn-seed"] == str(seed) and props["turn-order"] == ",".join(map(str, order))
        assert props["turns"] == multiproc.describe_turns(entries)
        assert props["repro"].startswith(
            f"HARNESS_TURN_SEED={seed} xharness run" if seed else "xharness run"
        )
        assert props["strategy"] == "pct"  # the race inside each rank is under schedule control too
