"""A launcher cell whose ranks must be hosts of their own: it runs only on a cluster whose every
node sinfo lists at an address of the fabric's block, and says which nodes share the machine's
network otherwise; its ``mpirun`` runs on the first node of an allocation of its own, with the
allocation's nodes given back to it, never on the host that submits.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_slurm import launcher_tools

from harness.matrix.launchers import (
    MPI,
    SLURM,
    ClusterOptions,
    launcher_command,
    no_hosts_of_their_own,
    unavailable,
)

pytestmark = pytest.mark.cell_independent


_tools = launcher_tools


UP = {"srun": "exit 0", "mpirun": "echo 'mpirun (Open MPI) 4.1.4'"}


def _sinfo(nodes: str) -> str:
    return f'[ "$2" = -N ] && {{ printf "{nodes}"; exit 0; }}; echo "idle 2"'


def test_a_cluster_whose_every_node_is_on_the_fabric_has_hosts_of_their_own(tmp_path: Path) -> None:
    env = _tools(tmp_path, **UP, sinfo=_sinfo("xh-node1 198.18.0.1\\nxh-node2 198.18.0.2\\nxh-node1 198.18.0.1\\n"))
    assert no_hosts_of_their_own(SLURM, env) == ""
    assert no_hosts_of_their_own(MPI, env) == ""


def test_nodes_on_the_machines_network_are_named(tmp_path: Path) -> None:
    env = _tools(tmp_path, **UP, sinfo=_sinfo("xh-node2 127.0.0.3\\nxh-node1 198.18.0.1\\nxh-node3 host-c\\n"))
    assert no_hosts_of_their_own(SLURM, env) == (
        "the cluster's nodes share this machine's network (xh-node2 on 127.0.0.3, xh-node3 on host-c): "
        "start the cluster with bash ci/cluster.sh start --network namespaces")
    env = _tools(tmp_path, **UP, sinfo=_sinfo("lonely\\n"))
    assert no_hosts_of_their_own(SLURM, env) == (
        "the cluster's nodes share this machine's network (no node): "
        "start the cluster with bash ci/cluster.sh start --network namespaces")


def test_a_cluster_that_does_not_list_its_nodes_says_why(tmp_path: Path) -> None:
    env = _tools(tmp_path, **UP, sinfo='[ "$2" = -N ] && exit 1; echo "idle 2"')
    assert no_hosts_of_their_own(SLURM, env) == "sinfo does not list the cluster's nodes"
    env = _tools(tmp_path, **UP, sinfo="echo 'sinfo: error: Unable to contact slurm controller' >&2; exit 1")
    assert no_hosts_of_their_own(SLURM, env).startswith(
        "no SLURM cluster answers: sinfo says 'sinfo: error: Unable to contact slurm controller'")


def test_an_mpi_cell_on_hosts_needs_a_slurm_cluster_first(tmp_path: Path) -> None:
    env = _tools(tmp_path, mpirun=UP["mpirun"])
    assert no_hosts_of_their_own(MPI, env).startswith(
        "mpirun places the ranks on the nodes of a SLURM allocation, and srun is not installed")


def test_mpirun_on_hosts_runs_on_the_allocations_first_node_with_its_nodes_given_back() -> None:
    argv = ["python", "-m", "rank"]
    options = ClusterOptions(partition="p", account="a", time_limit="9", extra=("--bind-to", "none"))
    cmd = launcher_command(MPI, 2, options, "xh-c", argv, on_nodes=True)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    salloc = ["salloc", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--job-name=xh-c", "--partition=p",
              "--account=a", "--time=9"]
    step = ["srun", "--nodes=1", "--ntasks=1", "--relative=0", "--overlap", "--export=ALL", "--unbuffered"]
    mpirun = ["mpirun", "-n", "2", "--oversubscribe", "--tag-output", *root, "--map-by", "ppr:1:node",
              "--bind-to", "none", *argv]
    assert cmd[:len(salloc)] == salloc
    assert cmd[len(salloc):len(salloc) + len(step)] == step
    shell = cmd[len(salloc) + len(step):]
    assert shell[:2] == ["sh", "-c"] and shell[3] == "1(x2)" and shell[4:] == mpirun
    assert 'SLURM_NODELIST="$SLURM_JOB_NODELIST"' in shell[2] and 'SLURM_TASKS_PER_NODE="$0"' in shell[2]
    assert shell[2].endswith('exec "$@"')
    # four ranks on two nodes: two per node, in the allocation and in mpirun's placement
    packed = launcher_command(MPI, 4, ClusterOptions(nodes=2), "xh-c", argv, on_nodes=True)
    assert "--ntasks-per-node=2" in packed and packed[packed.index("sh") + 3] == "2(x2)"
    assert "--map-by" in packed and packed[packed.index("--map-by") + 1] == "ppr:2:node"
    # the site's options left empty are the cluster's defaults: not passed
    bare = launcher_command(MPI, 2, ClusterOptions(), "xh-c", argv, on_nodes=True)
    assert not any(a.startswith(("--partition", "--account", "--time")) for a in bare)
    # not on hosts: mpirun alone, placed by this machine
    assert launcher_command(MPI, 2, ClusterOptions(), "xh-c", argv)[0] == "mpirun"


#: sinfo that answers only the questions the harness asks, word for word
STRICT_SINFO = ('[ "$*" = "-h -N -o %N %o" ] && { printf "xh-node1 198.18.0.1\\nxh-node2 198.18.0.2\\n"; exit 0; }\n'
                '[ "$*" = "-h -o %t %D" ] && { echo "idle 2"; exit 0; }\n'
                'echo "sinfo: asked $*" >&2; exit 1')


def test_sinfo_is_asked_exactly_for_each_nodes_name_and_address(tmp_path: Path) -> None:
    env = _tools(tmp_path, **UP, sinfo=STRICT_SINFO)
    assert no_hosts_of_their_own(SLURM, env) == ""


def test_the_process_environment_is_read_where_none_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _tools(tmp_path, **UP, sinfo=STRICT_SINFO)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert unavailable(SLURM) == "" and no_hosts_of_their_own(SLURM) == ""


def test_an_answer_is_kept_for_its_own_path_only(tmp_path: Path) -> None:
    """Another PATH (another cluster's commands) is asked again, not answered from the first."""
    (tmp_path / "a").mkdir()
    down = _tools(tmp_path / "a", **UP, sinfo="echo 'sinfo: error: Unable to contact slurm controller' >&2; exit 1")
    assert unavailable(SLURM, down).startswith("no SLURM cluster answers")
    (tmp_path / "b").mkdir()
    up = {**down, "PATH": str(tmp_path / "b" / "bin")}
    (tmp_path / "b" / "bin").mkdir()
    for name, body in {**UP, "sinfo": STRICT_SINFO}.items():
        (tmp_path / "b" / "bin" / name).write_text("#!/bin/sh\n" + body + "\n")
        (tmp_path / "b" / "bin" / name).chmod(0o755)
    assert unavailable(SLURM, up) == ""
    assert unavailable(SLURM, down).startswith("no SLURM cluster answers")  # kept, and its own


def test_a_sinfo_that_cannot_start_or_says_much_is_named_in_few_words(tmp_path: Path) -> None:
    env = _tools(tmp_path, **UP, sinfo="exit 0")
    (tmp_path / "bin" / "sinfo").write_text("#!/nonexistent/interpreter\n")
    said = unavailable(SLURM, env)
    assert said.startswith("no SLURM cluster answers: `sinfo -h -o %t %D` could not start: "), said
    env = _tools(tmp_path, **UP, sinfo=f"echo {'e' * 400} >&2; exit 1")
    said = unavailable(SLURM, env)
    assert f"sinfo says '{'e' * 300}';" in said, said
