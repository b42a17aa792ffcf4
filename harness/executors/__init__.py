"""Where a matrix cell runs: in a process of this machine under the supervisor (``local``, the
default), or as a job of a SLURM cluster (``slurm``: ``xharness run --on slurm``), where the same
supervisor runs inside the job and the run here submits, follows, cancels and reads back.

Either way a cell's records, its JUnit file and the merged report are the same; a job that dies
(its node, its time limit, its memory, a preemption) becomes a record that names the job, the node
and the cause.
"""

from __future__ import annotations

LOCAL, SLURM = "local", "slurm"

#: every executor, with what a user reads about it in ``xharness run --help``
EXECUTORS: dict[str, str] = {
    LOCAL: "each cell in processes of this machine, under the supervisor",
    SLURM: "each cell (or part of one) as a job of the SLURM cluster sbatch reaches",
}
