"""``xharness bench matrix``: the project's matrix run as CI runs it, cold and then warm, and
optionally against an earlier revision in the same sitting.

Why: the main job's time is set by its first run on a fresh machine (an empty compilation cache,
no earlier run to plan from) more than by a developer's warm runs, and the two differ by half.
So each run here starts in directories of its own: a fresh JAX compilation cache, a fresh
bytecode cache and a fresh ``--out`` (no history); the warm run that follows reuses all three,
as a second run on the same machine does. The user's own caches and reports are never read or
touched. A revision (``--against REV``) is exported (``git archive``, nothing is written to the
repository) into the same temporary directory and runs there with this interpreter; its runs
alternate with the working tree's, cold with cold and warm with warm, swapping who goes first
every round, so a shared machine's changing load lands on both alike.

The figures are the runs' own (``harness.report.run_figures``): the wall ``matrix.json``
records, cell-seconds, idle core-seconds and tests per second; next to them the command's own
wall, start to exit, as the bench timed it. Nothing is asserted: timings of a shared machine are
reported, never tested.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness.errors import UsageError
from harness.exits import EXIT_FAILED, EXIT_OK
from harness.matrix.interrupt import sigterm_interrupts
from harness.report.run_figures import RunFiguresError, read_figures

COLD, WARM = "cold", "warm"
#: what ``--state`` runs per tree and round: a warm run needs the caches its cold run filled
STATES = {"cold": (COLD,), "both": (COLD, WARM)}
WORKING_TREE = "working tree"


@dataclass(frozen=True)
class Tree:
    """A source tree whose matrix is run: the working tree, or a revision exported for the bench."""

    label: str
    root: Path


@dataclass(frozen=True)
class Run:
    """One run of a tree's matrix: its place in the bench, its exit status, its figures."""

    tree: str
    state: str
    round: int
    exit_code: int
    command_wall: float
    figures: dict[str, Any]


def run(args: argparse.Namespace) -> int:
    """The bench: every round, a cold then a warm run of each tree; the table (or JSON) after."""
    if args.rounds < 1:
        raise UsageError("--rounds must be at least 1")
    top = _toplevel()
    with tempfile.TemporaryDirectory(prefix="xharness-bench-matrix-") as scratch:
        base = Path(args.keep) if args.keep else Path(scratch)
        base.mkdir(parents=True, exist_ok=True)
        trees = [Tree(WORKING_TREE, top)]
        if args.against:
            trees.append(Tree(args.against, _export(top, args.against, base / "trees")))
        runs = [_one(tree, state, round_no, base / f"round{round_no}" / f"tree{trees.index(tree)}", args)
                for round_no, state, tree in order(trees, args.rounds, args.state)]
        report = {"command": "xharness bench matrix", "rounds": args.rounds, "cells": args.cells or "all",
                  "trees": [t.label for t in trees], "runs": [r.__dict__ for r in runs],
                  "kept": str(base) if args.keep else None}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(table(runs))
    return EXIT_OK if all(r.exit_code == EXIT_OK and r.figures for r in runs) else EXIT_FAILED


def order(trees: list[Tree], rounds: int, state: str) -> list[tuple[int, str, Tree]]:
    """The runs in the order they run: per round, the cold runs of every tree one after the other,
    then their warm runs; the tree that goes first alternates from one round to the next."""
    runs = []
    for round_no in range(1, rounds + 1):
        turn = trees if round_no % 2 else list(reversed(trees))
        runs += [(round_no, s, tree) for s in STATES[state] for tree in turn]
    return runs


def _one(tree: Tree, state: str, round_no: int, where: Path, args: argparse.Namespace) -> Run:
    """One run of ``tree``'s matrix in ``where`` (its output, compilation and bytecode caches):
    emptied first for a cold run, reused as the cold run left it for a warm one."""
    if state == COLD:
        shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True, exist_ok=True)
    out = where / "out"
    command = [sys.executable, "-m", "harness.cli", "run", "--out", str(out),
               "--compile-cache", str(where / "jax")]
    if args.cells:
        command += ["--cells", args.cells]
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(where / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the prefix keeps the tree clean; the cache is the point
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree.root), os.environ.get("PYTHONPATH", "")) if p)
    print(f"xharness bench matrix: round {round_no}, {state} run of the {tree.label} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    with (where / f"{state}.log").open("w") as log:
        code = _supervised(command, tree.root, env, log)
    wall = time.monotonic() - started
    if state == COLD and out.is_dir():  # the warm run writes over it: its figures and durations stay
        shutil.copytree(out, where / "cold-out", dirs_exist_ok=True, ignore=shutil.ignore_patterns("logs"))
    try:
        figures = read_figures(out).as_dict()
    except RunFiguresError as exc:
        print(f"xharness bench matrix: {exc}; the run's log: {where / f'{state}.log'}", file=sys.stderr)
        figures = {}
    return Run(tree.label, state, round_no, code, round(wall, 3), figures)


def _supervised(command: list[str], cwd: Path, env: dict[str, str], log: IO[str]) -> int:
    """The run's exit status. Interrupted (Ctrl-C, or SIGTERM, taken as Ctrl-C), the bench passes
    SIGTERM on and waits: the run then stops its cells' process groups, which live in sessions of
    their own and would outlive a run killed outright."""
    with sigterm_interrupts():
        child = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGTERM)
            child.wait()
            raise


def _toplevel() -> Path:
    """The working tree's root (a git checkout: a revision to compare with comes from it)."""
    found = _git(Path.cwd(), "rev-parse", "--show-toplevel")
    return Path(found.strip())


def _export(top: Path, revision: str, into: Path) -> Path:
    """``revision``'s files in a directory of their own (``git archive``: nothing is written to
    the repository, no worktree is registered), for its matrix to run there."""
    commit = _git(top, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}").strip()
    target = into / commit[:12]
    if not target.is_dir():
        target.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(top), "archive", "--format=tar", commit],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            raise UsageError(f"--against {revision}: git archive failed: {archive.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def _git(where: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise UsageError("bench matrix needs git (a revision to compare with, the tree's root)") from None
    if proc.returncode != 0:
        what = " ".join(args)
        said = proc.stderr.strip() or "no such revision"
        raise UsageError(f"bench matrix: git {what}: {said}")
    return proc.stdout


def table(runs: list[Run]) -> str:
    """The runs as a table, in the order they ran."""
    head = ("round", "tree", "state", "exit", "wall s", "command s", "cores", "cell-s", "idle core-s", "tests", "tests/s")
    rows = [head]
    for r in runs:
        f = r.figures
        if not f:
            rows.append((str(r.round), r.tree, r.state, str(r.exit_code), "-", f"{r.command_wall:.1f}",
                         "-", "-", "-", "-", "-"))
            continue
        rows.append((str(r.round), r.tree, r.state, str(r.exit_code), f"{f['wall']:.1f}", f"{r.command_wall:.1f}",
                     str(f["cores"]), f"{f['cell_seconds']:.1f}", f"{f['idle_core_seconds']:.1f}",
                     str(f["tests"]), f"{f['tests_per_second']:.2f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])
