"""The flags that say where cells run (``--on``, ``--deadline``), declared once for every command
that runs cells (``run``, ``releases``), and the executor they name."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.executors import EXECUTORS, LOCAL, SLURM
from harness.executors.slurm import SlurmExecutor, SlurmOptions
from harness.executors.slurm_client import SlurmError
from harness.executors.slurm_script import JobDefaults
from harness.executors.unit import LocalExecutor
from harness.matrix.progress import Progress

Executor = LocalExecutor | SlurmExecutor


class NoCluster(Exception):
    """``--on slurm`` and no SLURM controller answers; the message says how to get one."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--on", choices=tuple(EXECUTORS), dest="executor",
                        help="where the cells run: " + "; ".join(f"{k}: {v}" for k, v in EXECUTORS.items())
                        + " (default: [tool.xharness] executor, else local)")
    parser.add_argument("--deadline", type=float, metavar="SECONDS",
                        help="--on slurm: a job still waiting to start this long after the run began is "
                        "cancelled and recorded (default: [tool.xharness.slurm] deadline, else 7200)")


def executor_name(args: argparse.Namespace, project_executor: str | None) -> str:
    """The executor the flags (else the project) name; a usage error for a misplaced deadline."""
    if args.deadline is not None and not args.deadline > 0:
        raise UsageError("--deadline must be a positive number of seconds")
    name: str = args.executor or project_executor or LOCAL
    if args.deadline is not None and name != SLURM:
        raise UsageError("--deadline is for cells run as jobs: add --on slurm")
    return name


def executor_for(name: str, slurm: dict[str, Any], deadline: float | None, out: Path,
                 progress: Progress) -> Executor:
    """The executor ``name`` with the project's ``[tool.xharness.slurm]``; :class:`NoCluster` when
    it is SLURM and no controller answers (nothing has been submitted then)."""
    if name == LOCAL:
        return LocalExecutor()
    options = SlurmOptions(
        defaults=JobDefaults(partition=slurm.get("partition", ""), account=slurm.get("account", ""),
                             options=tuple(slurm.get("options", ()))),
        deadline=float(deadline or slurm.get("deadline") or SlurmOptions.deadline),
    )
    executor = SlurmExecutor(options, out.resolve(), progress)
    try:
        executor.capacity()
    except SlurmError as exc:
        raise NoCluster(
            f"--on slurm: no SLURM cluster answers: {exc}. Point SLURM_CONF at a cluster's "
            "configuration, or start the project's one-machine cluster (bash ci/cluster.sh start, as "
            "root; then eval \"$(bash ci/cluster.sh env)\")") from None
    return executor
