"""The batch script a cell becomes under ``xharness run --on slurm``: the cell's resources as
``#SBATCH`` lines, then the one command that runs the cell inside the job.

Pure text from a cell and the run's defaults, so the mapping is read and tested on its own:

- a cell whose ranks the supervisor starts (``launcher = "local"``) is one task on one node with
  a CPU per process: the supervisor runs inside the job exactly as it runs here;
- a launcher cell (``slurm``, ``mpi``) asks for its nodes and one task per rank, and its own
  ``srun`` or ``mpirun`` starts the ranks inside that allocation;
- a GPU cell asks for its GPUs as generic resources (``--gres=gpu:N`` per node);
- the cell's ``cluster`` table (partition, account, time limit, ``sbatch``) wins over the run's
  defaults (``[tool.xharness.slurm]``), which win over the site's.

The script is kept beside the job's output: ``sbatch <script>`` submits the same job by hand.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.backends import Backend
from harness.matrix.config import Cell
from harness.matrix.launchers import LOCAL

#: the job's output file, in the unit's directory (``%j``: the job id; requeued attempts append)
OUTPUT_NAME = "job-%j.out"


@dataclass(frozen=True)
class JobDefaults:
    """What every cell's job gets unless its ``cluster`` table says otherwise."""

    partition: str = ""
    account: str = ""
    options: tuple[str, ...] = ()  # more sbatch arguments for every job


def job_name(label: str) -> str:
    """A job's name in ``squeue``: the harness' prefix and the cell (or part) it runs."""
    return "xh-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in label)


def per_node_devices(cell: Cell) -> int:
    """The devices each node of ``cell``'s job must have: all of them for a cell the supervisor
    runs on one node, a node's tasks' worth for a launcher cell."""
    if cell.launcher == LOCAL:
        return cell.total_devices
    nodes = cell.cluster.nodes or cell.processes
    return cell.devices * (cell.cluster.tasks_per_node or max(1, cell.processes // nodes))


def resources(cell: Cell, defaults: JobDefaults) -> list[str]:
    """The sbatch options that give ``cell`` what it declares."""
    options = cell.cluster
    out: list[str] = []
    if cell.launcher == LOCAL:
        out += ["--nodes=1", "--ntasks=1", f"--cpus-per-task={cell.processes}"]
    else:
        nodes = options.nodes or cell.processes
        out += [f"--nodes={nodes}", f"--ntasks={cell.processes}"]
        if options.tasks_per_node:
            out.append(f"--ntasks-per-node={options.tasks_per_node}")
    if cell.backend == Backend.GPU:
        out.append(f"--gres=gpu:{per_node_devices(cell)}")
    partition = options.partition or defaults.partition
    account = options.account or defaults.account
    if partition:
        out.append(f"--partition={partition}")
    if account:
        out.append(f"--account={account}")
    if options.time_limit:
        out.append(f"--time={options.time_limit}")
    return out + list(defaults.options) + list(options.sbatch)


def script(cell: Cell, label: str, directory: Path, workdir: Path, command: Sequence[str],
           defaults: JobDefaults) -> str:
    """The whole batch script: its options, then ``command`` run in ``workdir``. ``--requeue``:
    a preempted or requeued job runs again from the start, and only its last attempt's results
    are read (``harness.executors.slurm_job``), so a requeue neither loses nor doubles a record."""
    lines = ["#!/bin/bash",
             f"# the cell {cell.name} ({label}) of an xharness run, as one job"]
    options = [f"--job-name={job_name(label)}", f"--output={directory / OUTPUT_NAME}", "--open-mode=append",
               f"--chdir={workdir}", "--requeue", *resources(cell, defaults)]
    lines += [f"#SBATCH {shlex.quote(option)}" for option in options]
    lines += ["set -e", "exec " + shlex.join(command), ""]
    return "\n".join(lines)
