"""A launched rank dies the way its pytest died, so that the launcher reports the same cause.

``python -m harness.matrix.launched`` is the process ``srun`` or ``mpirun`` starts; its child is
the rank's pytest. When the child dies of a signal, the parent records the end (an ``exit``
event) and then dies of the same signal: ``srun`` then says "Killed" or "Segmentation fault" of
the task, as it would of the rank itself. A SIGKILL accepts no handler, and the parent once
failed with a traceback there, ending with code 1, or later on a stray signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TEST = """
import os

def test_dies():
    os.kill(os.getpid(), int(os.environ["DIE_BY"]))
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM], ids=lambda s: s.name)
def test_a_rank_killed_by_a_signal_dies_of_it_after_its_exit_event(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "test_die.py").write_text(TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "HARNESS_", "OMPI_"))}
    env.update(DIE_BY=str(int(sig)), SLURM_PROCID="1", SLURM_NNODES="1", SLURM_JOB_ID="77",
               HARNESS_RANK_EVENTS=str(tmp_path / "rank{rank}.events.jsonl"),
               HARNESS_RANK_LOG=str(tmp_path / "rank{rank}.log"))
    done = subprocess.run(
        [sys.executable, "-m", "harness.matrix.launched", "slurm", "test_die.py", "-q",
         "-p", "no:cacheprovider", "-p", "no:xharness"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == -sig, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    events = [json.loads(line) for line in (tmp_path / "rank1.events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["rank", "exit"], events
    assert events[0]["rank"] == 1 and events[0]["job"] == "77", events[0]
    assert events[1]["returncode"] == -sig, events[1]
    assert "rank 1" in (tmp_path / "rank1.log").read_text()
