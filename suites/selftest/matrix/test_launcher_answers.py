"""What a real cluster's launchers say, and what the harness makes of it: every variable a rank's
identity is read from (and the default when one is missing or not a number), the exact command
each launcher gets for each shape of cell, and every answer a cluster or an MPI install gives when
asked whether it can run a cell, from fake ``sinfo`` and ``mpirun`` programs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_slurm import launcher_tools

from harness.matrix import launchers
from harness.matrix.launchers import (
    LOCAL,
    MPI,
    SLURM,
    ClusterOptions,
    identity,
    launcher_command,
    unavailable,
)

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]


def test_every_field_of_a_slurm_rank_comes_from_its_own_variable() -> None:
    rank = identity(SLURM, {"SLURM_PROCID": "5", "SLURM_LOCALID": "1", "SLURMD_NODENAME": "n7",
                            "SLURM_JOB_ID": "99", "SLURM_STEP_ID": "3", "SLURM_NODEID": "2",
                            "SLURM_STEP_NUM_NODES": "4", "SLURM_NNODES": "8"}, "vm")
    assert rank.fields() == {"launcher": SLURM, "rank": 5, "local_rank": 1, "host": "n7", "job": "99",
                             "step": "3", "node_index": 2, "nodes": 4}
    # the allocation's node count where the step's is not set; the machine's name where the node's is not
    fallback = identity(SLURM, {"SLURM_NNODES": "8"}, "vm")
    assert (fallback.rank, fallback.local_rank, fallback.host, fallback.nodes) == (0, 0, "vm", 8)
    assert (fallback.job, fallback.step, fallback.node_index) == ("", "", 0)
    assert identity(SLURM, {}, "vm").nodes == 1
    # a value that is not a whole number is not read as one
    odd = identity(SLURM, {"SLURM_PROCID": "x1", "SLURM_STEP_NUM_NODES": "", "SLURM_NNODES": "2"}, "vm")
    assert (odd.rank, odd.nodes) == (0, 2)
    assert identity(SLURM, {"SLURM_PROCID": " 3 "}, "vm").rank == 3
    assert identity(SLURM, {"SLURM_PROCID": "-1"}, "vm").rank == -1  # a number is read as written


def test_every_field_of_an_mpi_and_a_local_rank() -> None:
    rank = identity(MPI, {"OMPI_COMM_WORLD_RANK": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
                          "OMPI_MCA_ess_base_jobid": "1234", "OMPI_COMM_WORLD_NODE_RANK": "2"}, "host-b")
    assert rank.fields() == {"launcher": MPI, "rank": 6, "local_rank": 2, "host": "host-b", "job": "1234",
                             "step": "", "node_index": 2, "nodes": 1}
    assert identity(MPI, {}, "host-b").job == ""
    local = identity(LOCAL, {"HARNESS_PROCESS_ID": "1", "SLURM_PROCID": "7"}, "me")
    assert local.fields() == {"launcher": LOCAL, "rank": 1, "local_rank": 0, "host": "me", "job": "",
                              "step": "", "node_index": 0, "nodes": 1}


def test_srun_gets_one_task_per_node_unless_the_cell_packs_them() -> None:
    argv = ["python", "-m", "rank"]
    plain = launcher_command(SLURM, 2, ClusterOptions(), "xh-c", argv)
    assert plain == ["srun", "--ntasks=2", "--nodes=2", "--kill-on-bad-exit=1", "--unbuffered", "--export=ALL",
                     "--job-name=xh-c", "--ntasks-per-node=1", *argv]
    packed = launcher_command(SLURM, 4, ClusterOptions(nodes=2, tasks_per_node=2), "xh-c", argv)
    assert "--nodes=2" in packed and "--ntasks=4" in packed and "--ntasks-per-node=2" in packed
    assert "--ntasks-per-node=1" not in packed
    # fewer nodes than ranks and no tasks per node: SLURM places them
    shared = launcher_command(SLURM, 4, ClusterOptions(nodes=2), "xh-c", argv)
    assert not any(a.startswith("--ntasks-per-node") for a in shared)
    # empty site options are the cluster's defaults: not passed at all
    assert not any(a.startswith(("--partition", "--account", "--time")) for a in plain)
    timed = launcher_command(SLURM, 1, ClusterOptions(time_limit="5", extra=("--mem=1G",)), "j", argv)
    assert timed[-4:] == ["--mem=1G", *argv] and "--time=5" in timed


def test_mpirun_gets_the_count_the_placement_and_the_site_arguments() -> None:
    argv = ["python", "-m", "rank"]
    cmd = launcher_command(MPI, 3, ClusterOptions(tasks_per_node=2, extra=("--bind-to", "none")), "unused", argv)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert cmd == ["mpirun", "-n", "3", "--oversubscribe", "--tag-output", *root, "--map-by", "ppr:2:node",
                   "--bind-to", "none", *argv]
    with pytest.raises(ValueError, match="starts no command"):
        launcher_command(LOCAL, 2, ClusterOptions(), "x", argv)


_tools = launcher_tools


@pytest.mark.parametrize(("sinfo", "said"), [
    ("echo 'idle 2'", ""),
    ("echo 'mix 1'; echo 'down 1'", ""),
    ("echo 'alloc 2'", ""),
    ("echo 'down 2'; echo 'drain 1'", "the SLURM cluster has no node up (sinfo: down 2 drain 1)"),
    ("true", "the SLURM cluster has no node up (sinfo: nothing)"),
    ("echo 'slurm_load_partitions: Unable to contact slurm controller' >&2; exit 1",
     "no SLURM cluster answers: sinfo says 'slurm_load_partitions: Unable to contact slurm controller'"),
    ("exit 3", "no SLURM cluster answers: sinfo says 'exit 3'"),
])
def test_what_sinfo_answers_decides_whether_a_slurm_cell_runs(tmp_path: Path, sinfo: str, said: str) -> None:
    env = _tools(tmp_path, srun="exit 0", sinfo=sinfo)
    why = unavailable(SLURM, env)
    if said:
        assert why.startswith(said), why
    else:
        assert why == ""


def test_a_cluster_that_does_not_answer_in_time_is_as_good_as_absent(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launchers, "PROBE_TIMEOUT", 0.3)
    env = _tools(tmp_path, srun="exit 0", sinfo="exec /bin/sleep 5")
    why = unavailable(SLURM, env)
    assert why.startswith("no SLURM cluster answers: `sinfo -h -o %t %D` did not answer within 0.3 s"), why
    assert "ci/cluster.sh start" in why


@pytest.mark.parametrize(("version", "said"), [
    ("mpirun (Open MPI) 4.1.4", ""),
    ("mpirun (Open MPI) 5.0.3", "mpirun is Open MPI 5: JAX's OmpiCluster detects Open MPI 4's ORTE "
                                "(OMPI_MCA_orte_hnp_uri); install Open MPI 4"),
    ("HYDRA build details:", "mpirun is not Open MPI (HYDRA build details:): JAX detects Open MPI only"),
])
def test_only_open_mpi_4_can_run_an_mpi_cell(tmp_path: Path, version: str, said: str) -> None:
    env = _tools(tmp_path, mpirun=f"[ \"$*\" = --version ] || exit 9; echo '{version}'; echo 'second line'")
    why = unavailable(MPI, env)
    assert why == said
    silent = _tools(tmp_path, mpirun="exit 0")
    assert unavailable(MPI, silent) == "mpirun is not Open MPI (no version): JAX detects Open MPI only"


def test_an_answer_is_kept_for_a_minute_per_cluster_and_forgotten_on_request(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    env = _tools(tmp_path, srun="exit 0", sinfo="echo 'down 2'")
    assert unavailable(SLURM, env).startswith("the SLURM cluster has no node up")
    (tmp_path / "bin" / "sinfo").write_text("#!/bin/sh\necho 'idle 2'\n")
    assert unavailable(SLURM, env).startswith("the SLURM cluster has no node up")  # kept
    assert unavailable(SLURM, {**env, "SLURM_CONF": "/another"}) == ""  # another cluster: asked
    clock = [launchers.time.monotonic()]
    monkeypatch.setattr(launchers.time, "monotonic", lambda: clock[0])
    (tmp_path / "bin" / "sinfo").write_text("#!/bin/sh\necho 'down 2'\n")
    assert unavailable(SLURM, env).startswith("the SLURM cluster has no node up")
    clock[0] += 3600.0
    (tmp_path / "bin" / "sinfo").write_text("#!/bin/sh\necho 'idle 2'\n")
    assert unavailable(SLURM, env) == ""  # an hour later: asked again
    (tmp_path / "bin" / "sinfo").write_text("#!/bin/sh\necho 'down 2'\n")
    launchers.forget_answers()
    assert unavailable(SLURM, env).startswith("the SLURM cluster has no node up")
    assert unavailable(LOCAL, {}) == ""
