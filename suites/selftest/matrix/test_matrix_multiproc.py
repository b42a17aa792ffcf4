"""Multi-process cells: real ``jax.distributed`` ranks, and a rank that dies or hangs.

The throwaway suite runs in a 2-process x 2-device cell. A collective must see both ranks; a rank
killed mid-test and a rank stuck past the time limit must each fail only their test, name the
rank and the reason, stop the peer quickly, and leave no process behind (not even a child a test
spawned).
"""

from __future__ import annotations

import signal
from pathlib import Path

from matrix_helpers import alive, run_matrix, write_matrix, write_suite

from harness.report.records import ERROR, KIND_RANK, PASSED

SUITE = {
    "tests/test_ranks.py": '''
        import os, signal, subprocess, time
        from pathlib import Path

        import jax
        import numpy as np
        from jax.experimental import multihost_utils
        from jax.sharding import NamedSharding, PartitionSpec as P

        PIDS = Path(os.environ["PID_DIR"])

        def note_pid(pid):
            (PIDS / str(pid)).write_text("")

        def test_collective_sum():
            note_pid(os.getpid())
            rank = jax.process_index()
            assert jax.process_count() == 2 and jax.device_count() == 4
            gathered = multihost_utils.process_allgather(np.array([rank + 1.0]))
            assert float(gathered.sum()) == 3.0
            mesh = jax.make_mesh((4,), ("data",))
            local = np.arange(2, dtype=np.float32) + 2 * rank
            array = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), local)
            total = jax.jit(lambda a: a.sum(), out_shardings=NamedSharding(mesh, P()))(array)
            assert float(total) == 0 + 1 + 2 + 3

        def test_rank_killed():
            note_pid(os.getpid())
            if jax.process_index() == 0:  # a grandchild that must not outlive the cell
                note_pid(subprocess.Popen(["sleep", "300"]).pid)
            if jax.process_index() == 1:
                os.kill(os.getpid(), signal.SIGKILL)

        def test_rank_hangs():
            note_pid(os.getpid())
            if jax.process_index() == 1:
                time.sleep(300)

        def test_rank_fails_before_a_collective():
            if jax.process_index() == 0:
                raise AssertionError("rank 0 broke before the collective")
            multihost_utils.process_allgather(np.array([1.0]))  # waits for rank 0 forever

        def test_after():
            note_pid(os.getpid())
            assert jax.process_count() == 2
    ''',
}

MATRIX = """
    [cells.mp]
    backend = "cpu"
    devices = 2
    processes = 2
    paths = ["tests"]
    timeout = 6
    env = {{ PID_DIR = "{pids}" }}
"""


def test_two_process_cell_collectives_and_failing_ranks(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, MATRIX.format(pids=pids))
    result = run_matrix(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    records = {n.rsplit("::", 1)[1]: r for n, r in result.records("mp").items()}

    assert records["test_collective_sum"].final.outcome == PASSED, records["test_collective_sum"].final.message
    assert records["test_after"].final.outcome == PASSED, records["test_after"].final.message

    killed = records["test_rank_killed"].final
    assert (killed.outcome, killed.kind) == (ERROR, KIND_RANK), killed
    # the JUnit file keeps a rank failure's signal in the message
    assert "rank 1 died on SIGKILL" in killed.message and "rank(s) 0 stopped" in killed.message
    assert f"died on {signal.Signals.SIGKILL.name}" in killed.message

    hung = records["test_rank_hangs"].final
    assert (hung.outcome, hung.kind) == (ERROR, KIND_RANK), hung
    assert "rank 1 ran past its 6s time limit" in hung.message
    assert "Timeout (0:00:06)" in hung.details  # rank 1's stacks
    assert "time.sleep(300)" in hung.details or "test_rank_hangs" in hung.details

    # the rank left alone in a collective hangs; the record names it and keeps rank 0's failure
    lonely = records["test_rank_fails_before_a_collective"].final
    assert (lonely.outcome, lonely.kind) == (ERROR, KIND_RANK), lonely
    assert "rank 1 ran past its 6s time limit" in lonely.message
    assert "rank 0 had failed in call: AssertionError: rank 0 broke before the collective" in lonely.message

    # bounded: 4 launches (start + one restart per failing rank), each a few seconds
    assert result.seconds < 120, result.seconds
    assert (result.out / "logs" / "mp" / "rank0.log").exists() and (result.out / "logs" / "mp" / "rank1.log").exists()
    recorded = [int(p.name) for p in pids.iterdir()]
    assert len(recorded) >= 7  # both ranks of four tests, minus the hung rank-1 run, plus the sleep
    assert [pid for pid in recorded if alive(pid)] == []
