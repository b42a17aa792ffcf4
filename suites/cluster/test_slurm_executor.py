"""``xharness run --on slurm`` on the project's one-machine cluster: cells as jobs, and each way a
job can end badly a record that names the job, its node and the cause.

The cluster (``ci/cluster.sh``) has two nodes of 4 CPUs, a ``debug`` partition and an ``urgent``
one that preempts it, and kills a job over its ``--mem`` (``OverMemoryKill``). Cells are pinned to
a node (``--nodelist``) where a test takes that node away. Every sub-run is an ``xharness run``
over a throwaway suite; afterwards the queue holds no job of the run and no process it started
is alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from cluster_helpers import TWIN_CELLS, xharness_run

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "suites" / "selftest" / "matrix"))

from matrix_helpers import _SCRUB, RunResult, alive, run_matrix, write_matrix, write_suite  # noqa: E402

from harness.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK  # noqa: E402
from harness.matrix.launchers import SLURM  # noqa: E402
from harness.report.records import ERROR, KIND_EXIT, KIND_MEMORY, KIND_TIMEOUT, PASSED  # noqa: E402

CLUSTER = ROOT / "ci" / "cluster.sh"
CLUSTER_DIR = Path(os.environ.get("XHARNESS_CLUSTER_DIR", "/tmp/xharness-cluster"))
JOB_RECORD = "xharness::job"

SUITE = {
    "tests/test_quick.py": '''
        def test_one():
            assert 1 + 1 == 2

        def test_two():
            assert "a" * 2 == "aa"
    ''',
    "tests/test_slow.py": '''
        import os, time
        from pathlib import Path

        def note_pid():
            (Path(os.environ["PID_DIR"]) / str(os.getpid())).write_text("")

        def test_before():
            note_pid()

        def test_waits_on_the_first_attempt():
            note_pid()
            (Path(os.environ["PID_DIR"]) / f"{os.getpid()}.waiting").write_text("")
            if os.environ.get("SLURM_RESTART_COUNT", "0") == "0":
                time.sleep(float(os.environ.get("SLOW_SECONDS", "150")))

        def test_after():
            note_pid()
    ''',
    "tests/test_memory.py": '''
        import os, time
        from pathlib import Path

        def test_small():
            assert sum(range(10)) == 45

        def test_grows():
            (Path(os.environ["PID_DIR"]) / str(os.getpid())).write_text("")
            held = []
            for _ in range(60):
                held.append(bytearray(64 * 1024 * 1024))
                time.sleep(0.05)
    ''',
    "tests/test_node.py": '''
        import os, signal, time
        from pathlib import Path

        def test_node_goes_away():
            (Path(os.environ["PID_DIR"]) / str(os.getpid())).write_text("")
            os.kill(int(Path(os.environ["SLURMD_PID_FILE"]).read_text()), signal.SIGKILL)
            time.sleep(150)
    ''',
}


def _cell(name: str, paths: str, root: Path, cluster: str = "", timeout: int = 200) -> str:
    return f"""
    [cells.{name}]
    backend = "cpu"
    paths = [{paths}]
    timeout = {timeout}
    env = {{ PID_DIR = "{root / 'pids'}", SLURMD_PID_FILE = "{CLUSTER_DIR / 'slurmd-xh-node2.pid'}" }}
    {cluster}
    """


def _suite(root: Path, cells: str) -> None:
    (root / "pids").mkdir(exist_ok=True)
    write_suite(root, SUITE)
    write_matrix(root, cells)


def _slurm(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=True).stdout


def _jobs_named(prefix: str) -> dict[str, str]:
    """The queue's jobs whose name starts with ``prefix``: name -> "ID STATE"."""
    out = _slurm("squeue", "-h", "-o", "%j %i %T")
    return {f[0]: f"{f[1]} {f[2]}" for f in (line.split() for line in out.splitlines()) if f[0].startswith(prefix)}


def _wait_for(what: str, check, seconds: float = 90):  # noqa: ANN001, ANN202 - a test helper
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"waited {seconds:.0f} s for {what}; queue: {_slurm('squeue', '-h')}")


def _nothing_left(root: Path) -> None:
    recorded = sorted({int(p.name.split(".")[0]) for p in (root / "pids").iterdir()})
    for pid in recorded:  # a node taken away leaves its job's processes on this one machine
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    time.sleep(0.5)
    assert [pid for pid in recorded if alive(pid)] == []
    assert _jobs_named("xh-") == {}


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", "run", "--on", "slurm",
         "--matrix", str(root / "matrix.toml"), "--out", str(root / "out"), *args],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str], root: Path, started: float) -> RunResult:
    stdout, stderr = proc.communicate(timeout=300)
    return RunResult(proc.returncode, stdout, stderr, time.monotonic() - started, root / "out")



def _short(records: dict) -> dict:
    return {nodeid if nodeid.startswith("xharness::") else nodeid.rsplit("::", 1)[-1]: record
            for nodeid, record in records.items()}


def test_dead_jobs_are_records_naming_job_node_and_cause(tmp_path: Path, slurm: None) -> None:
    """A time limit, a memory limit and a node failure in one run, beside a cell that passes."""
    node1, node2 = '"--nodelist=xh-node1"', '"--nodelist=xh-node2"'
    _suite(tmp_path, "".join([
        _cell("fine", '"tests/test_quick.py"', tmp_path, f"cluster = {{ sbatch = [{node1}] }}"),
        _cell("late", '"tests/test_slow.py"', tmp_path, f'cluster = {{ time_limit = "1", sbatch = [{node1}] }}'),
        _cell("greedy", '"tests/test_memory.py"', tmp_path, f'cluster = {{ sbatch = [{node1}, "--mem=300M"] }}'),
        _cell("orphan", '"tests/test_node.py"', tmp_path, f'cluster = {{ sbatch = [{node2}, "--no-requeue"] }}'),
    ]))
    result = run_matrix(tmp_path, "--on", "slurm", timeout=400)
    assert result.returncode == EXIT_FAILED, result.stdout + result.stderr

    fine = _short(result.records("fine"))
    assert sorted(fine) == ["test_one", "test_two"] and all(r.final.outcome == PASSED for r in fine.values())
    assert fine["test_one"].properties["executor"] == SLURM
    assert fine["test_one"].properties["executor-job"].isdigit()
    assert fine["test_one"].properties["executor-nodes"] == "xh-node1"

    late = _short(result.records("late"))
    assert late["test_before"].final.outcome == PASSED  # what finished before the limit is kept
    job = late[JOB_RECORD].final
    assert (job.outcome, job.kind) == (ERROR, KIND_TIMEOUT), job
    assert "time limit" in job.message and "xh-node1" in job.message, job.message
    assert late[JOB_RECORD].properties["executor-state"] == "TIMEOUT"

    assert _short(result.records("greedy"))["test_small"].final.outcome == PASSED  # kept from the job's events
    greedy = _short(result.records("greedy"))[JOB_RECORD]
    assert (greedy.final.outcome, greedy.final.kind) == (ERROR, KIND_MEMORY), greedy.final
    assert "out of memory" in greedy.final.message and "memory limit" in greedy.final.message, greedy.final.message
    assert greedy.properties["executor-job"] in greedy.final.message

    orphan = _short(result.records("orphan"))[JOB_RECORD]
    assert (orphan.final.outcome, orphan.final.kind) == (ERROR, KIND_EXIT), orphan.final
    assert "node failure" in orphan.final.message and "xh-node2" in orphan.final.message, orphan.final.message
    assert orphan.properties["executor-state"] == "NODE_FAIL"

    progress = result.stderr
    for needed in ("submitted", "running on xh-node1", "completed on xh-node1", "jobs: "):
        assert needed in progress, progress
    _nothing_left(tmp_path)


def test_a_requeued_job_is_read_from_its_last_attempt_only(tmp_path: Path, slurm: None) -> None:
    _suite(tmp_path, _cell("c", '"tests/test_slow.py"', tmp_path))
    started = time.monotonic()
    proc = _start(tmp_path)
    job = _wait_for("the job to run", lambda: (_jobs_named("xh-c").get("xh-c", "").split() + [""])[:2]
                    if _jobs_named("xh-c").get("xh-c", "").endswith("RUNNING") else None)[0]
    _wait_for("the slow test", lambda: list((tmp_path / "pids").glob("*.waiting")))
    said: list[str] = []  # the run's words as it says them, and what it prints
    printed: list[str] = []
    readers = [threading.Thread(target=lambda: said.extend(iter(proc.stderr.readline, "")), daemon=True),
               threading.Thread(target=lambda: printed.extend(iter(proc.stdout.readline, "")), daemon=True)]
    for reader in readers:
        reader.start()
    _slurm("scontrol", "requeue", job)
    # the job is let go only once the run has seen it waiting again: a requeue that starts again
    # within one of its polls is not seen as one (its records still come from the last attempt)
    _wait_for("the run to see the job back in the queue", lambda: any("back in the queue" in line for line in said))
    _slurm("scontrol", "update", f"JobId={job}", "StartTime=now")  # requeued jobs wait two minutes first
    proc.wait(timeout=300)
    for reader in readers:
        reader.join(timeout=10)
    result = RunResult(proc.returncode, "".join(printed), "".join(said), time.monotonic() - started, tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr
    records = _short(result.records("c"))
    assert sorted(records) == ["test_after", "test_before", "test_waits_on_the_first_attempt"], sorted(records)
    assert all(r.final.outcome == PASSED and len(r.attempts) == 1 for r in records.values())
    assert {r.properties["executor-attempt"] for r in records.values()} == {"1"}
    assert "back in the queue" in result.stderr, result.stderr
    _nothing_left(tmp_path)


def test_a_preempted_job_is_a_record(tmp_path: Path, slurm: None) -> None:
    _suite(tmp_path, _cell("c", '"tests/test_slow.py"', tmp_path, 'cluster = { sbatch = ["--no-requeue"] }'))
    started = time.monotonic()
    proc = _start(tmp_path)
    _wait_for("the job to run", lambda: _jobs_named("xh-c").get("xh-c", "").endswith("RUNNING"))
    _slurm("sbatch", "--partition=urgent", "--job-name=blocker", "--nodes=2", "--ntasks=8", "--output=/dev/null",
           "--wrap=sleep 3")
    result = _finish(proc, tmp_path, started)
    assert result.returncode == EXIT_FAILED, result.stdout + result.stderr
    record = _short(result.records("c"))[JOB_RECORD]
    assert "preempted on xh-node" in record.final.message, record.final.message
    assert record.properties["executor-state"] == "PREEMPTED", record.properties
    _nothing_left(tmp_path)


def test_sigterm_cancels_exactly_the_runs_jobs_and_keeps_what_finished(tmp_path: Path, slurm: None) -> None:
    _suite(tmp_path, _cell("quick", '"tests/test_quick.py"', tmp_path) + _cell("slow", '"tests/test_slow.py"', tmp_path))
    other = _slurm("sbatch", "--parsable", "--job-name=blocker", "--ntasks=1", "--output=/dev/null",
                   "--wrap=sleep 120").strip()
    started = time.monotonic()
    proc = _start(tmp_path)
    _wait_for("the quick cell's result", lambda: (tmp_path / "out" / "junit" / "quick.xml").exists())
    _wait_for("the slow test", lambda: list((tmp_path / "pids").glob("*.waiting")))
    proc.send_signal(signal.SIGTERM)
    result = _finish(proc, tmp_path, started)
    assert result.returncode == EXIT_INTERRUPTED, result.stdout + result.stderr
    assert all(r.final.outcome == PASSED for r in result.records("quick").values())
    assert "cancelling job(s)" in result.stderr, result.stderr
    queue = _slurm("squeue", "-h", "-o", "%i %j %T")
    assert f"{other} blocker RUNNING" in queue, queue  # a job the run did not submit is left alone
    assert (tmp_path / "out" / "junit.xml").exists()  # the merge ran over what finished
    _nothing_left(tmp_path)


def test_a_job_waiting_past_the_deadline_is_cancelled_and_recorded(tmp_path: Path, slurm: None) -> None:
    _suite(tmp_path, _cell("c", '"tests/test_quick.py"', tmp_path))
    _slurm("sbatch", "--job-name=blocker", "--nodes=2", "--ntasks=8", "--output=/dev/null", "--wrap=sleep 120")
    _wait_for("the blocker to hold the cluster", lambda: _jobs_named("blocker").get("blocker", "").endswith("RUNNING"))
    result = run_matrix(tmp_path, "--on", "slurm", "--deadline", "4", timeout=120)
    assert result.returncode == EXIT_FAILED, result.stdout + result.stderr
    record = _short(result.records("c"))[JOB_RECORD]
    assert record.final.kind == KIND_TIMEOUT
    assert "deadline (4 s)" in record.final.message and "Resources" in record.final.message, record.final.message
    assert "pending" in result.stderr
    assert _jobs_named("xh-") == {}



def test_part_of_the_default_matrix_as_jobs_matches_the_local_run(tmp_path: Path, slurm: None,
                                                                   local_twins: Path) -> None:
    """The default matrix's multi-process cells as jobs: the merged report agrees with the local
    run's test for test (cell, node id and outcome), and every record names its job."""
    from harness.report.junit import read_records

    jobs = xharness_run(tmp_path / "slurm", "--on", "slurm", "--cells", ",".join(TWIN_CELLS))
    assert jobs.returncode == 0, jobs.stdout[-4000:] + jobs.stderr[-2000:]

    def outcomes(out: Path) -> dict[tuple[str, str], str]:
        return {(r.cell, r.nodeid): r.classification for r in read_records(out / "junit.xml")}

    here, there = outcomes(local_twins), outcomes(tmp_path / "slurm")
    assert len(here) > 40 and here == there
    assert all(r.properties.get("executor-job", "").isdigit() for r in read_records(tmp_path / "slurm" / "junit.xml"))
    assert _jobs_named("xh-") == {}


def test_a_releases_checks_run_as_jobs(tmp_path: Path, slurm: None) -> None:
    """``xharness releases --on slurm``: the release's environment is made here, its check runs as
    a job, and the verdicts are judged against the expected table as a local run judges them."""
    out = tmp_path / "releases"
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "releases", "jax", "installed", "--checks", "catalog", "--on", "slurm",
         "--out", str(out), "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    import json

    from harness.report.junit import read_records

    (entry,) = json.loads(done.stdout)["releases"]
    assert entry["installed"] and entry["rows"] and entry["checks"] == []
    records = read_records(Path(entry["junit"]))
    assert records and all(r.properties.get("executor-job", "").isdigit() for r in records)
    assert "job " in done.stderr and "completed on xh-node" in done.stderr, done.stderr[-3000:]
    assert _jobs_named("xh-") == {}


def test_an_accelerator_cell_is_asked_of_the_cluster_not_of_this_machine(tmp_path: Path, slurm: None) -> None:
    """This machine has no GPU, and a local run skips the cell; as a job its GPUs are the
    cluster's to give, and this cluster has none (sinfo says so): the cell is skipped with that
    reason, as locally, never sent to fail at sbatch."""
    _suite(tmp_path, _cell("g", '"tests/test_quick.py"', tmp_path).replace('backend = "cpu"', 'backend = "gpu"'))
    result = run_matrix(tmp_path, "--on", "slurm", timeout=120)
    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    (record,) = result.records("g").values()
    assert record.final.outcome == "skipped", record.final.message
    assert "--gres=gpu:1 per node" in record.final.message and "sinfo reports generic resources (null)" in record.final.message
    assert not (tmp_path / "out" / "jobs" / "xh-g").exists()  # nothing was submitted


def test_the_default_matrix_cells_this_cluster_cannot_serve_are_skips_as_locally(tmp_path: Path, slurm: None) -> None:
    """Every cell of the default matrix that is not one of the CPU cells the other tests compare
    (the GPU and TPU cells, and their -all templates) ends the same way as a job as locally: a
    skip with its reason, never red. The multi-process CPU cells are held to their local run by
    ``test_part_of_the_default_matrix_as_jobs_matches_the_local_run``."""
    from harness.matrix.config import load_matrix
    from harness.report.junit import read_records

    cells = [c.name for c in load_matrix(ROOT / "ci" / "matrix.toml").cells.values() if c.backend != "cpu"]
    assert {"gpu", "tpu"} <= set(cells), cells
    local = xharness_run(tmp_path / "local", "--cells", ",".join(cells))
    jobs = xharness_run(tmp_path / "slurm", "--on", "slurm", "--cells", ",".join(cells))
    assert local.returncode == 0 and jobs.returncode == 0, jobs.stdout[-4000:] + jobs.stderr[-2000:]

    def outcomes(out: Path) -> dict[tuple[str, str], str]:
        return {(r.cell, r.nodeid): r.final.outcome for r in read_records(out / "junit.xml")}

    here, there = outcomes(tmp_path / "local"), outcomes(tmp_path / "slurm")
    assert here and set(here.values()) == {"skipped"} and here == there, (here, there)
    assert _jobs_named("xh-") == {}
