"""The fake SLURM commands the executor's tests poll: an answer is read whole or not at all.

A poll that read a half-written answer once saw a new output with the old exit code ("job 41
gone") and once an exit code with the old error's words missing: two of the executor's tests
failed in CI that way, on nothing the executor did."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from fake_slurm import FakeSlurm

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]

ANSWERS = {("41|RUNNING|n1|None\n", "", 0), ("", "slurm_load_jobs error: Unable to contact slurm controller\n", 1)}


def test_a_poll_while_the_answer_changes_reads_one_answer_whole(tmp_path: Path) -> None:
    fake = FakeSlurm(tmp_path / "bin", tools=("squeue",))
    fake.says("squeue", "41|RUNNING|n1|None\n")
    stop = threading.Event()

    def keep_changing() -> None:
        while not stop.is_set():
            for out, err, rc in sorted(ANSWERS):
                fake.says("squeue", out, rc=rc, err=err)

    writer = threading.Thread(target=keep_changing, daemon=True)
    writer.start()
    try:
        seen = set()
        for _ in range(150):
            done = subprocess.run([str(fake.root / "squeue")], capture_output=True, text=True, timeout=30)
            seen.add((done.stdout, done.stderr, done.returncode))
    finally:
        stop.set()
        writer.join(timeout=30)
    assert seen <= ANSWERS, seen - ANSWERS
    assert len(seen) == 2  # not vacuous: the poll saw both answers
