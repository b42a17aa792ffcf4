"""The one-machine cluster with every node a host of its own (``bash ci/cluster.sh start --network
namespaces``): its srun and mpirun cells (``ci/cluster-network.toml``) agree with their loopback twins test
for test, and a link cut between two srun ranks is a record that names the cut, not a hang.

The module starts that cluster itself and, when it is done, brings back the cluster that was
running before it (the default one, whose nodes share this machine's network), so that the other
cluster suites find what they expect. Needs root, iproute2, nftables and SLURM; skipped otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_helpers import ROOT, queue_left, xharness_run

from harness.matrix.launchers import SLURM, forget_answers, unavailable
from harness.network import blame, fabric, firewall
from harness.network.held import read_plan
from harness.report.junit import read_records
from harness.report.records import ERROR, KIND_RANK

sys.path.insert(0, str(ROOT / "suites" / "selftest" / "matrix"))
from matrix_helpers import RunResult, run_matrix, write_matrix, write_suite  # noqa: E402

CLUSTER = ROOT / "ci" / "cluster.sh"
CLUSTER_DIR = Path(os.environ.get("XHARNESS_CLUSTER_DIR", "/tmp/xharness-cluster"))
TWINS = {"cpu-2x4-slurm-netns": "cpu-2x4", "cpu-2slice-slurm-netns": "cpu-2slice", "cpu-2x4-mpi-netns": "cpu-2x4"}
HEARTBEAT = 10  # seconds: how long the coordination service waits for a cut-off rank


def _cluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CLUSTER), *args], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def namespace_cluster() -> Iterator[None]:
    """The cluster in namespaces mode, its clients on this process's PATH; afterwards the cluster
    that ran before (if one did) runs again as it was."""
    if why := fabric.unavailable():
        pytest.skip(why)
    if why := unavailable(SLURM, {"PATH": os.environ["PATH"], "SLURM_CONF": "/nonexistent"}):
        if "not installed" in why:
            pytest.skip(why)
    # the cluster whose controller runs, answering or not: under the suites beside it a controller
    # can take longer than `status` waits, and it must still be started again afterwards
    running = _cluster("running")
    was = running.stdout.strip() if running.returncode == 0 else ""
    saved = {k: os.environ.get(k) for k in ("PATH", "SLURM_CONF")}
    _cluster("stop")
    started = _cluster("start", "--network", "namespaces")
    number = -1
    try:
        assert started.returncode == 0, started.stderr
        number = read_plan(CLUSTER_DIR / "fabric.json").number
        os.environ["SLURM_CONF"] = str(CLUSTER_DIR / "slurm.conf")
        os.environ["PATH"] = f"{CLUSTER_DIR / 'bin'}:{saved['PATH']}"
        forget_answers()
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        forget_answers()
        stopped = _cluster("stop")
        # the cluster's own fabric is gone (the network suites may hold fabrics of their own meanwhile)
        assert not [n for n in fabric.leftovers() if n.startswith(f"xh{number}-")], fabric.leftovers()
        if was:
            again = _cluster("start", "--network", was)
            assert again.returncode == 0, again.stderr
        assert stopped.returncode == 0, stopped.stderr


def _outcomes(junit: Path) -> dict[str, str]:
    return {r.nodeid: r.final.outcome for r in read_records(junit)}


def test_sinfo_and_srun_see_each_node_as_a_host_of_its_own(namespace_cluster: None) -> None:
    plan = read_plan(CLUSTER_DIR / "fabric.json")
    done = subprocess.run(["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "sh", "-c",
                           'echo "$SLURM_PROCID $(hostname) $(hostname -i)"'],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = sorted(done.stdout.split("\n")[:2])
    want = [f"{i} {h.hostname} {h.address}" for i, h in enumerate(plan.members[:2])]
    assert seen == want, (seen, want)
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %o"], capture_output=True, text=True, timeout=30)
    assert sorted(set(nodes.stdout.split("\n")) - {""}) == [f"{h.hostname} {h.address}" for h in plan.members[:2]]


def test_namespace_cluster_cells_agree_with_their_loopback_twins(tmp_path: Path, local_twins: Path,
                                                                  namespace_cluster: None) -> None:
    done = xharness_run(tmp_path / "hosts", "--matrix", "ci/cluster-network.toml")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for cell, twin in TWINS.items():
        records = {r.nodeid: r for r in read_records(tmp_path / "hosts" / "junit" / f"{cell}.xml")}
        mine = {nodeid: r.final.outcome for nodeid, r in records.items()}
        theirs = _outcomes(local_twins / "junit" / f"{twin}.xml")
        assert mine and mine == theirs, (cell, {n: (mine.get(n), theirs.get(n)) for n in {*mine, *theirs}
                                                if mine.get(n) != theirs.get(n)})
        host_test = "suites/selftest/matrix/test_matrix_cell.py::test_each_rank_is_the_host_the_cell_says"
        assert mine[host_test] == "passed"
        assert records[host_test].properties["rank-hosts"] == "0:xh-node1 1:xh-node2"
    assert queue_left() == ""


SUITE = {
    "tests/test_cut.py": '''
        import os, socket, time
        from pathlib import Path

        import jax
        import numpy as np
        from jax.experimental import multihost_utils

        CUT = Path(os.environ["CUT_DIR"])

        def test_gather_across_a_cut_link():
            first = multihost_utils.process_allgather(np.array([jax.process_index() + 1.0]))
            assert float(first.sum()) == 3.0  # the link works before the cut
            (CUT / f"ready{jax.process_index()}").write_text(socket.gethostname())
            while not (CUT / "cut").exists():
                time.sleep(0.05)
            multihost_utils.process_allgather(np.array([jax.process_index() + 1.0]))
            time.sleep(300)  # a rank the cut left standing waits: the record must not be its timeout
    ''',
}

CELL = """
    [cells.cut]
    backend = "cpu"
    devices = 1
    processes = 2
    launcher = "slurm"
    network = "namespaces"
    paths = ["tests/test_cut.py"]
    timeout = 240
    env = {{ CUT_DIR = "{cut}", HARNESS_HEARTBEAT_TIMEOUT = "{heartbeat}" }}
"""


def test_a_link_cut_between_two_srun_ranks_is_a_record_that_blames_it(tmp_path: Path,
                                                                      namespace_cluster: None) -> None:
    """Rank 1's node (xh-node2) loses its link to rank 0's (xh-node1), the coordinator's, by the
    nemesis' own firewall: both ways, all traffic, while the controller stays reachable. The
    run ends within the heartbeat timeout and a margin, not at the test's timeout, and its record
    is a rank's death, and the words of the rank that died (the coordination service's, on
    rank 0) blame rank 1, the rank behind the cut."""
    cut_dir = tmp_path / "cut"
    cut_dir.mkdir()
    write_suite(tmp_path, SUITE)
    write_matrix(tmp_path, CELL.format(cut=cut_dir, heartbeat=HEARTBEAT))
    plan = read_plan(CLUSTER_DIR / "fabric.json")
    node1, node2 = plan.members[0], plan.members[1]
    result: list[RunResult] = []
    runner = threading.Thread(target=lambda: result.append(run_matrix(tmp_path, timeout=400)))
    runner.start()
    table = firewall.table_name(1)
    try:
        deadline = time.monotonic() + 180
        while not all((cut_dir / f"ready{r}").exists() for r in (0, 1)):
            assert time.monotonic() < deadline and runner.is_alive(), "the ranks never reached the cut"
            time.sleep(0.1)
        rules = firewall.ruleset(1, [node1.address], "both", "all", 0)
        subprocess.run(["ip", "netns", "exec", node2.namespace, "nft", "-f", "-"], input=rules,
                       text=True, check=True, capture_output=True)
        cut_at = time.monotonic()
        (cut_dir / "cut").write_text(table)
        runner.join(timeout=380)
        ended_after = time.monotonic() - cut_at
    finally:
        subprocess.run(["ip", "netns", "exec", node2.namespace, "nft", "delete", "table", "inet", table],
                       capture_output=True)
        runner.join(timeout=60)
    assert result, "the run did not end"
    run = result[0]
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    assert ended_after < HEARTBEAT + 60, f"ended {ended_after:.0f} s after the cut: a hang, not a blame"
    record = next(iter(run.records("cut").values())).final
    assert (record.outcome, record.kind) == (ERROR, KIND_RANK), record
    # the first rank to die is the record's (under load either may go first: rank 0's service
    # aborts on the lost heartbeats, rank 1 on the lost coordinator); rank 0's words blame rank 1
    assert "rank 0 on xh-node1" in record.message or "rank 1 on xh-node2" in record.message, record.message
    said = blame.read((run.out / "logs" / "cut" / "rank0.log").read_text(errors="replace"),
                      {node1.address: 0, node2.address: 1})
    assert said is not None and said.ranks == {1}, said
    print(f"ended {ended_after:.1f} s after the cut: {record.message[:300]}; rank 0 blamed {said.describe()}")
