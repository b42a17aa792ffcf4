"""A cluster's nodes as hosts of a fabric, without root: hosts named by the fabric's owner, the
plan a held fabric leaves for the commands that use it, a launcher cell that asks for hosts of
their own, and how the probe tells a cluster whose nodes have them from one whose nodes do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.matrix import launchers
from harness.matrix.config import load_matrix
from harness.matrix.launchers import (
    MPI,
    SLURM,
    ClusterOptions,
    launcher_command,
    no_hosts_of_their_own,
)
from harness.network import held
from harness.network.addresses import FabricPlan
from harness.network.fabric import FabricError, host_argv

ROOT = Path(__file__).resolve().parents[2]


def test_an_owner_names_its_hosts_and_their_hosts_file_follows() -> None:
    plan = FabricPlan(3, 3, ("xh-node1", "xh-node2", "xh-ctld"))
    assert [(h.hostname, h.namespace, h.address) for h in plan.members] == [
        ("xh-node1", "xh3-h0", "198.18.3.1"), ("xh-node2", "xh3-h1", "198.18.3.2"), ("xh-ctld", "xh3-h2", "198.18.3.3")]
    assert "198.18.3.2 xh-node2\n" in plan.hosts_file()
    assert FabricPlan(3, 2).members[1].hostname == "xh3-h1"  # unnamed: the namespace's name
    argv = host_argv(plan.members[1], ["slurmd", "-N", "xh-node2"])
    assert argv[:4] == ["ip", "netns", "exec", "xh3-h1"] and argv[-4:] == ["xh-node2", "slurmd", "-N", "xh-node2"]
    for names in (("a",), ("a", "a"), ("a", "b c")):
        with pytest.raises(ValueError):
            FabricPlan(3, 2, names)


def test_a_held_fabrics_plan_gives_every_address_from_the_one_plan(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fabric.json"
    path.write_text(json.dumps({"number": 7, "names": ["xh-node1", "xh-node2"], "pid": 1}))
    assert held.read_plan(path) == FabricPlan(7, 2, ("xh-node1", "xh-node2"))
    assert held.main(["hosts", "--plan", str(path)]) == 0
    assert capsys.readouterr().out == "xh-node1 xh7-h0 198.18.7.1\nxh-node2 xh7-h1 198.18.7.2\n"
    assert held.main(["exec", "--plan", str(path), "xh-node9", "--", "true"]) == 3
    with pytest.raises(FabricError, match="no held fabric"):
        held.read_plan(tmp_path / "absent.json")


def test_the_namespace_cluster_cells_ask_for_hosts_of_their_own() -> None:
    cells = load_matrix(ROOT / "ci" / "cluster-network.toml").cells
    assert {(c.launcher, c.network) for c in cells.values()} == {("slurm", "namespaces"), ("mpi", "namespaces")}


def _fake_sinfo(tmp_path: Path, lines: str) -> dict[str, str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for tool, body in (("srun", "exit 0"), ("sinfo", f"printf '{lines}'")):
        (fake / tool).write_text(f"#!/bin/sh\n{body}\n")
        (fake / tool).chmod(0o755)
    launchers.forget_answers()
    return {"PATH": str(fake), "SLURM_CONF": str(tmp_path / "slurm.conf")}


def test_a_cluster_on_loopback_is_no_cluster_of_hosts_and_mpi_never_is(tmp_path: Path) -> None:
    loopback = _fake_sinfo(tmp_path, "xh-node1 127.0.77.1\\nxh-node2 127.0.77.2\\n")
    why = no_hosts_of_their_own(SLURM, loopback)
    assert "xh-node1 on 127.0.77.1" in why and "ci/cluster.sh start --network namespaces" in why
    hosts = _fake_sinfo(tmp_path, "xh-node1 198.18.0.1\\nxh-node2 198.18.0.2\\nxh-node1 198.18.0.1\\n")
    assert no_hosts_of_their_own(SLURM, hosts) == ""
    # mpirun runs in an allocation: a cluster with no node up has none to give
    assert no_hosts_of_their_own(MPI, hosts).startswith("mpirun places the ranks on the nodes of a SLURM allocation")
    launchers.forget_answers()


def test_mpirun_on_hosts_runs_on_the_first_node_of_an_allocation_of_its_own() -> None:
    """JAX's Open MPI detection connects to mpirun's own host: mpirun runs in a step on the
    allocation's first node, with the allocation's nodes given back to it."""
    cmd = launcher_command(MPI, 2, ClusterOptions(partition="p"), "xharness-c-1-launch1", ["python", "-m", "x"],
                           on_nodes=True)
    assert cmd[:5] == ["salloc", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--job-name=xharness-c-1-launch1"]
    assert "--partition=p" in cmd and "--relative=0" in cmd and "--overlap" in cmd
    script = cmd.index("-c") + 1
    assert 'SLURM_NODELIST="$SLURM_JOB_NODELIST"' in cmd[script] and cmd[script + 1] == "1(x2)"
    mpirun = cmd[script + 2:]
    assert mpirun[:3] == ["mpirun", "-n", "2"] and "ppr:1:node" in mpirun and mpirun[-3:] == ["python", "-m", "x"]
    assert launcher_command(MPI, 2, ClusterOptions(), "j", ["python"])[0] == "mpirun"  # locally as before
