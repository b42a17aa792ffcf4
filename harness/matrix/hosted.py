"""Which runner each cell's CI job runs on: a hosted one, the labels the project names, or none.

A hosted runner (GitHub's ``ubuntu-latest``) is one machine with a few CPU cores, no accelerator,
no SLURM cluster and no MPI, and its jobs run as a user: it can run a cell of CPU devices and
processes, nothing else. The project names the runners of the rest in ``[tool.xharness.runners]``,
by cell name or by what the cell needs (``gpu``, ``tpu``, ``slurm``, ``mpi``, ``namespaces``); a
cell no runner serves is not dropped in silence but listed, with the reason, in the report's
notes (``xharness cells --github``, what the workflow's plan job writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.matrix.config import Cell

#: the labels of the runner a cell of CPU devices runs on when the project names none
HOSTED = ("ubuntu-latest",)
#: what a hosted runner lacks, by the key a project names a runner for it with
LACKS = {
    "gpu": "a GPU",
    "tpu": "a TPU",
    "slurm": "a SLURM cluster (its ranks are started by srun)",
    "mpi": "Open MPI's mpirun (its ranks are started by it)",
    "namespaces": "root, for a network namespace per rank",
}


def need(cell: Cell, executor: str | None = None) -> str:
    """The key of what ``cell`` needs that a hosted runner lacks (a key of ``LACKS``), or "";
    under the project's ``executor = "slurm"`` every cell is a SLURM job, so every cell needs one."""
    if cell.backend in ("gpu", "tpu"):
        return cell.backend
    if cell.launcher in ("slurm", "mpi"):
        return cell.launcher
    if executor == "slurm":
        return "slurm"
    if cell.network == "namespaces":
        return "namespaces"
    return ""


@dataclass(frozen=True)
class Placement:
    """A cell's job: the runner labels it runs on, or, where none serves it, why."""

    cell: str
    runs_on: tuple[str, ...]
    why: str = ""


def unknown_keys(cells: Iterable[Cell], runners: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The keys of ``runners`` that name neither one of ``cells`` nor a need (a misspelling,
    ``gpus``, would otherwise leave its cells "not run" while the user believes them served)."""
    names = {cell.name for cell in cells}
    return [key for key in runners if key not in names and key not in LACKS]


def place(cells: Iterable[Cell], runners: Mapping[str, tuple[str, ...]],
          executor: str | None = None) -> list[Placement]:
    """Each cell's runner: the labels named for its name, else for what it needs, else a hosted
    runner where it needs nothing one lacks; a cell left with none says why."""
    placed = []
    for cell in cells:
        kind = need(cell, executor)
        labels = runners.get(cell.name) or (runners.get(kind) if kind else None)
        if labels:
            placed.append(Placement(cell.name, tuple(labels)))
        elif not kind:
            placed.append(Placement(cell.name, HOSTED))
        else:
            placed.append(Placement(cell.name, (), (
                f"cell {cell.name} not run: it needs {LACKS[kind]}, which a hosted runner lacks; name "
                f"the labels of a runner that has it in [tool.xharness.runners] ({kind} = [...] or "
                f"\"{cell.name}\" = [...])")))
    return placed
