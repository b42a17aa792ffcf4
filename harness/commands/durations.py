"""``xharness durations``: refresh the committed seconds per cell and test file from a run.

A fresh clone has no earlier run to plan ``xharness run`` from; the committed file
(``harness.matrix.durations``) stands in for it. This command writes it from a run's own reports
(``matrix.json`` and ``junit/<cell>.xml`` of ``--from``), replacing the cells that run had and
keeping the others, so a run of a few cells refreshes those. Exit 2 when the directory holds no
run or the existing file cannot be read (``--replace`` writes it anew).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness import project
from harness.errors import UsageError
from harness.exits import EXIT_OK
from harness.matrix import durations, test_files
from harness.matrix.config import Matrix, MatrixError, load_matrix, project_matrix
from harness.report.files import write_atomic

__all__ = ["add_parsers", "durations_command"]


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser(
        "durations",
        help="write the committed seconds per cell and test file (what plans a run with no earlier run)",
        description="Write the seconds each cell's test files took in a run (matrix.json and "
        "junit/<cell>.xml of --from) to the committed durations file, replacing the cells that run "
        "had and keeping the others. A run with no earlier run in its --out plans its start order "
        "and splits from this file.",
    )
    parser.add_argument("--from", dest="source", type=Path, default=None, metavar="DIR",
                        help="a run's output directory (default: the project's reports directory); "
                        "a cold run's, as the runs that read the file are")
    parser.add_argument("--matrix", type=Path, default=None,
                        help="matrix file (default: the project's, as for run)")
    parser.add_argument("--to", type=Path, default=None, metavar="FILE",
                        help=f"the file to write (default: {durations.FILE_NAME} next to the matrix file)")
    parser.add_argument("--replace", action="store_true",
                        help="write only the run's cells (default: keep the file's other cells)")
    parser.set_defaults(handler=durations_command)


def durations_command(args: argparse.Namespace) -> int:
    matrix = _matrix(args.matrix)
    source: Path = args.source or _project().reports_dir()
    target: Path = args.to or durations.durations_path(matrix)
    files = {name: test_files.cell_files(cell, matrix.root) for name, cell in matrix.cells.items()}
    try:
        measured = durations.from_run(source, files)
        old = durations.Durations() if args.replace else durations.load(target)
    except durations.DurationsError as exc:
        raise UsageError(str(exc)) from None
    if not measured:
        raise UsageError(f"{source}: the run there has no cell that ran (all skipped or interrupted)")
    write_atomic(target, durations.dumps(durations.merged(old, measured)))
    kept = sorted(set(old.cells) - set(measured.cells))
    print(f"{target}: {len(measured.cells)} cell(s) from {source}"
          + (f", {len(kept)} kept ({', '.join(kept)})" if kept else ""))
    for name, cell in sorted(measured.cells.items(), key=lambda item: -item[1].length):
        print(f"  {name:<16} {cell.length:7.1f} s in one process ({len(cell.files)} files, start-up {cell.startup:.1f} s)")
    return EXIT_OK


def _matrix(path: Path | None) -> Matrix:
    try:
        return load_matrix(path) if path is not None else project_matrix(_project())
    except MatrixError as exc:
        raise UsageError(f"--matrix: {exc}" if path is not None else str(exc)) from None


def _project() -> project.Project:
    try:
        return project.load()
    except project.ProjectError as exc:
        raise UsageError(str(exc)) from None
