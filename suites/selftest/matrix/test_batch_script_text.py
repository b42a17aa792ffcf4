"""The whole batch script of a cell's job, as ``sbatch`` reads it."""

from __future__ import annotations

from pathlib import Path

from harness.executors.slurm_script import JobDefaults, resources, script
from harness.matrix.config import Cell, ClusterOptions
from harness.matrix.launchers import SLURM


def test_packed_launcher_cell_asks_for_tasks_per_node() -> None:
    cell = Cell(
        "d",
        backend="gpu",
        devices=1,
        processes=4,
        launcher=SLURM,
        cluster=ClusterOptions(nodes=2, tasks_per_node=2),
    )
    assert resources(cell, JobDefaults()) == [
        "--nodes=2",
        "--ntasks=4",
        "--ntasks-per-node=2",
        "--gres=gpu:2",
    ]


def test_script_is_exactly_options_then_one_command() -> None:
    cell = Cell("cpu-2", devices=4, processes=2)
    text = script(
        cell,
        "cpu-2[1/2]",
        Path("/shared/u"),
        Path("/repo dir"),
        ["/v/python", "-m", "x", "/a b/spec"],
        JobDefaults(partition="batch"),
    )
    assert text == (
        "#!/bin/bash\n"
        "# the cell cpu-2 (cpu-2[1/2]) of an xharness run, as one job\n"
        "#SBATCH --job-name=xh-cpu-2_1_2_\n"
        "#SBATCH --output=/shared/u/job-%j.out\n"
        "#SBATCH --open-mode=append\n"
        "#SBATCH '--chdir=/repo dir'\n"
        "#SBATCH --requeue\n"
        "#SBATCH --nodes=1\n"
        "#SBATCH --ntasks=1\n"
        "#SBATCH --cpus-per-task=2\n"
        "#SBATCH --partition=batch\n"
        "set -e\n"
        "exec /v/python -m x '/a b/spec'\n"
    )
