"""Calls of mutated functions made in the processes a test starts, counted as that test's.

mutmut maps each mutant to the tests that reach its function by recording, in the test's own
process, every call of a mutated function (its stats run); a mutant then runs against those tests
only. The cluster-only code runs in other processes: ``xharness run`` is a child of the test, its
SLURM executor submits jobs, the jobs start cells and the cells start ranks. Unseen, every mutant
there would read "no tests", and a profile of that code would score nothing. This module carries
those calls back, for a profile with ``children = true`` (``ci/mutation.toml``):

* in every process a test starts (``mutation_child``, imported by the ``sitecustomize`` beside this file, which ``ci/mutation.py``
  puts on ``PYTHONPATH`` with mutmut's copy of the harness, so the children import the mutants),
  during the stats run: the name of each mutated function called is appended, once per process,
  to a file of that process in ``$XHARNESS_MUTATION_HITS``;
* in the test's process (this module as a pytest plugin, ``-p mutation_hits``): the directory is
  emptied before each test, and the children's calls are added to the test's own before mutmut's
  teardown records them.

A module run as a program (``python -m harness.executors.slurm_job``, a job's last line) is
``__main__`` in its process, where mutmut would neither name its calls nor switch its mutants on;
both are translated to and from the module's own name.

A process killed before it wrote a call loses it: the mapping can only miss tests, never invent
one, so a missed mutant reads "no tests" and counts as surviving. Each test also starts on an
empty SLURM queue: a mutant that hung until mutmut's timeout leaves its jobs behind, and they
would hold the nodes the next mutant's test waits for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mutation_child import STATS, hits_dir


def _children_calls(directory: Path) -> set[str]:
    names: set[str] = set()
    for path in directory.glob("*.hits"):
        names.update(line for line in path.read_text(encoding="utf-8").splitlines() if line)
    return names


def _empty_queue() -> None:
    """Cancel every job of this user and wait (up to a minute) until none is left."""
    if shutil.which("scancel") is None or not os.environ.get("SLURM_CONF"):
        return
    user = os.environ.get("USER") or "root"
    subprocess.run(["scancel", "--quiet", f"--user={user}"], check=False, timeout=60)
    for _ in range(60):
        left = subprocess.run(["squeue", "-h", f"--user={user}"], capture_output=True, text=True, timeout=60)
        if left.returncode != 0 or not left.stdout.strip():
            return
        time.sleep(1)


# -- the pytest plugin (the test's own process) ----------------------------------------------------


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """The quickest tests first (by mutmut's own timings): a mutant is killed by its first failing
    test (mutmut runs with -x), and most are killed by a quick one."""
    stats = Path("mutmut-stats.json")  # mutmut runs the tests in its copy, beside this file
    if not stats.exists():
        return
    import json

    seconds = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: seconds.get(item.nodeid, float("inf")))


def pytest_runtest_setup(item: Any) -> None:
    directory = hits_dir()
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
    _empty_queue()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: Any, nextitem: Any) -> Any:
    directory = hits_dir()
    if directory is not None and os.environ.get("MUTANT_UNDER_TEST") == STATS and directory.is_dir():
        from mutmut.state import state

        state()._stats.update(_children_calls(directory))
    yield
