"""The launcher table: a rank's identity from its launcher's own variables, the command each
launcher starts a cell's ranks with, and why a launcher cannot run here (without a cluster: the
cluster itself is under test in suites/cluster)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.matrix import launchers
from harness.matrix.launchers import (
    MPI,
    SLURM,
    ClusterOptions,
    identity,
    launcher_command,
    unavailable,
)


def test_a_rank_is_who_its_launcher_says() -> None:
    slurm = identity(SLURM, {"SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "xh-node2",
                             "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0", "SLURM_NODEID": "1",
                             "SLURM_STEP_NUM_NODES": "2"}, "vm")
    assert (slurm.rank, slurm.host, slurm.job, slurm.step, slurm.node_index, slurm.nodes) == (1, "xh-node2", "42", "0", 1, 2)
    mpi = identity(MPI, {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, "host-a")
    assert (mpi.rank, mpi.local_rank, mpi.host) == (3, 1, "host-a")


def test_the_commands_carry_the_site_options() -> None:
    options = ClusterOptions(partition="a100", account="proj", time_limit="30:00", nodes=2, extra=("--gres=gpu:8",))
    cmd = launcher_command(SLURM, 2, options, "xharness-c-1-launch1", ["python", "-m", "x"])
    assert cmd[0] == "srun" and "--ntasks=2" in cmd and "--nodes=2" in cmd and "--kill-on-bad-exit=1" in cmd
    assert {"--partition=a100", "--account=proj", "--time=30:00", "--gres=gpu:8", "--job-name=xharness-c-1-launch1"} <= set(cmd)
    assert cmd[-3:] == ["python", "-m", "x"]
    mpi = launcher_command(MPI, 2, ClusterOptions(), "unused", ["python"])
    assert mpi[:3] == ["mpirun", "-n", "2"] and ("--allow-run-as-root" in mpi) == (os.geteuid() == 0)


def test_a_missing_launcher_or_silent_cluster_says_how_to_get_one(tmp_path: Path) -> None:
    launchers.forget_answers()
    assert "ci/cluster.sh start" in unavailable(SLURM, {"PATH": str(tmp_path)})
    assert "openmpi-bin" in unavailable(MPI, {"PATH": str(tmp_path)})
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\nexit 0\n")
    (fake / "sinfo").write_text("#!/bin/sh\necho 'sinfo: error: Munge encode failed: Failed to access munge.socket' >&2\nexit 1\n")
    for tool in ("srun", "sinfo"):
        (fake / tool).chmod(0o755)
    launchers.forget_answers()
    why = unavailable(SLURM, {"PATH": str(fake), "SLURM_CONF": "/nowhere"})
    assert why.startswith("munge (the cluster's authentication) is down") and "ci/cluster.sh start" in why
    launchers.forget_answers()
