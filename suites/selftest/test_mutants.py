"""The runtime mutants and their runner (``ci/mutants.py``), checked without running the suites.

A mutant that no longer applies measures nothing, and a runner that cannot tell a kill from a
survivor measures the wrong thing; both would go unnoticed until someone read a kill table. So
every patch must apply to the tree as it is, carry the header the README and the runner read, and
the runner is run end to end once each way: on a tiny suite that surely kills its mutant, and on
one that cannot see it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import harness.runtime as xr
from harness.runtime import faults

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "ci" / "mutants.py"
MUTANTS = ROOT / "suites" / "properties" / "mutants"
PATCHES = sorted(MUTANTS.glob("*.patch"))
REQUIRED_CATEGORIES = {
    "spec handling",
    "op-sharding cache",
    "sharding coverage/layout",
    "sharding preservation",
    "aliasing and write-back",
    "donation",
    "sync",
    "discovery",
    "checkpoints",
    "failure paths",
    "crash consistency",
    "training programs",
    "semantics",
}
#: categories whose every mutant an invariant must declare (``Invariant.mutants``): checks written
#: for them, so a mutant of theirs that no check claims is a mutant nobody answers for
DECLARED_CATEGORIES = {"failure paths", "training programs", "semantics"}
# the end-to-end runs: a write-back bug that only a non-self-inverse permutation shows
E2E_MUTANT = "05-transpose-writeback-uses-perm"
KILLING_PROBE = "suites/selftest/test_mutants.py::test_probe_cyclic_3d_permutation_write_back"
BLIND_PROBE = "suites/selftest/test_mutants.py::test_probe_swap_write_back"


@functools.cache
def _runner() -> ModuleType:
    """``ci/mutants.py``, imported once (it is a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("ci_mutants", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_mutants"] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def _in_git_tree() -> bool:
    """The runner's own copies are not git trees: there the checks that need git do not apply."""
    proc = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=ROOT, capture_output=True, text=True
    )
    return proc.returncode == 0 and Path(proc.stdout.strip()).resolve() == ROOT


needs_git = pytest.mark.skipif(
    not _in_git_tree(), reason="not a git working tree (a mutant run's copy)"
)


# ---------------------------------------------------------------- the patches


@pytest.mark.jax_independent
def test_there_are_enough_mutants_spanning_every_category() -> None:
    headers = [_runner().read_header(p) for p in PATCHES]
    assert len(PATCHES) >= 8, f"only {len(PATCHES)} mutants in {MUTANTS}"
    missing = REQUIRED_CATEGORIES - {h.get("Category") for h in headers}
    assert not missing, f"no mutant in categories {sorted(missing)}"


@pytest.mark.jax_independent
def test_names_and_numbers_are_unique() -> None:
    stems = [p.stem for p in PATCHES]
    assert all(re.fullmatch(r"\d\d-[a-z0-9]+(-[a-z0-9]+)*", s) for s in stems), stems
    numbers = [s.split("-", 1)[0] for s in stems]
    names = [s.split("-", 1)[1] for s in stems]
    assert len(set(numbers)) == len(numbers), f"numbers used twice: {numbers}"
    assert len(set(names)) == len(names), f"names used twice: {names}"


@pytest.mark.jax_independent
@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_header_fields(patch: Path) -> None:
    fields = _runner().read_header(patch)
    text = patch.read_text()
    head = text[: text.index("diff --git ")]
    for key in _runner().HEADER_FIELDS:
        assert fields.get(key), f"{patch.name}: header field {key!r} is missing or empty"
    assert fields["Category"] in REQUIRED_CATEGORIES, (
        f"{patch.name}: unknown category {fields['Category']!r}"
    )
    assert fields["Cousin of"].split()[0] in faults.SWITCHES, (
        f"{patch.name}: 'Cousin of' must start with a fault id"
    )
    assert fields.get("Mutant") == patch.stem, f"{patch.name}: 'Mutant:' names another file"
    assert re.search(r"^    \S", head, re.M), f"{patch.name}: no indented observation script"
    assert re.search(r"^  mutated: \S", head, re.M) and re.search(r"^  real: +\S", head, re.M), (
        f"{patch.name}: the observed output on the mutated and the real tree is missing"
    )


@pytest.mark.jax_independent
@pytest.mark.parametrize("patch", PATCHES, ids=[p.stem for p in PATCHES])
def test_mutants_touch_only_the_runtime(patch: Path) -> None:
    paths = re.findall(r"^diff --git a/(\S+) b/(\S+)$", patch.read_text(), re.M)
    assert paths, f"{patch.name}: no diff"
    for a, b in paths:
        assert a == b and a.startswith("harness/runtime/"), f"{patch.name}: touches {a} -> {b}"


@pytest.mark.jax_independent
@needs_git
def test_every_patch_applies_to_the_current_tree() -> None:
    """``git apply --check`` reads the working tree and writes nothing."""
    stale = {}
    for patch in PATCHES:
        proc = subprocess.run(
            ["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True
        )
        if proc.returncode:
            stale[patch.name] = proc.stderr.strip()
    assert not stale, f"stale mutants (refresh them against the runtime): {stale}"


@pytest.mark.jax_independent
def test_declared_mutants_exist_and_failure_paths_are_declared() -> None:
    """``Invariant.mutants`` names patches that exist, and every failure-path mutant is named by
    some invariant: ``xharness teeth`` shows them, ``ci/mutants.py`` runs them."""
    from harness.properties import INVARIANTS

    stems = {p.stem for p in PATCHES}
    declared = {m: i.id for i in INVARIANTS for m in i.mutants}
    missing = {m: i for m, i in declared.items() if m not in stems}
    assert not missing, f"invariants declare mutants with no patch in {MUTANTS}: {missing}"
    headers = {p.stem: _runner().read_header(p) for p in PATCHES}
    unclaimed = [s for s, h in headers.items() if h.get("Category") in DECLARED_CATEGORIES and s not in declared]
    assert not unclaimed, f"mutants no invariant declares in its mutants: {unclaimed}"


@pytest.mark.jax_independent
def test_teeth_lists_the_mutants_a_check_declares() -> None:
    """``xharness teeth`` names them under its table (and in its JSON) without running them."""
    from harness.properties import FAILURE_SAFETY
    from harness.teeth import output
    from harness.teeth.checks import as_check

    run = output.TeethRun(checks=[as_check(FAILURE_SAFETY)], faults=[], pairs=[], results=[], devices=8, seconds=0.0)
    assert f"  failure-safety: {', '.join(FAILURE_SAFETY.mutants)}" in output.render_table(run).splitlines()
    assert output.to_json(run)["checks"][0]["mutants"] == list(FAILURE_SAFETY.mutants)


@pytest.mark.jax_independent
def test_readme_lists_every_mutant() -> None:
    readme = (MUTANTS / "README.md").read_text()
    missing = [p.stem for p in PATCHES if p.stem not in readme]
    assert not missing, f"README.md does not list {missing}"


# ---------------------------------------------------------------- the runner


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RUNNER), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.jax_independent
@needs_git
@pytest.mark.parametrize(
    "args",
    [
        ("--only", "nosuch"),
        ("--suites", "suites/no-such-suite"),
        ("--jobs", "0"),
        ("--timeout", "-1"),
        ("--bogus",),
    ],
    ids=["unknown-mutant", "missing-suite", "no-jobs", "negative-timeout", "unknown-option"],
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    proc = _run(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "baseline" not in proc.stderr, "a usage error must stop before anything runs"


@pytest.mark.jax_independent
@needs_git
def test_no_patches_is_a_usage_error(tmp_path: Path) -> None:
    proc = _run("--mutants-dir", str(tmp_path))
    assert proc.returncode == 2 and "no mutant patches" in proc.stderr


@pytest.mark.jax_independent
def test_killing_test_is_read_from_the_summary() -> None:
    out = "....F\n=== short summary ===\nFAILED suites/a.py::test_b[x-1] - AssertionError: no\n"
    assert _runner().killing_test(out) == "suites/a.py::test_b[x-1]"
    assert _runner().killing_test("ERROR suites/c.py::test_d\n") == "suites/c.py::test_d"
    assert _runner().killing_test("1 passed\n") == ""


@pytest.mark.jax_independent
def test_a_run_that_imported_another_harness_is_refused(tmp_path: Path) -> None:
    runner = _runner()
    copy = tmp_path / "tree"
    inside = {"harness": str(copy / "harness/__init__.py"), "harness.runtime": str(copy / "r.py")}
    assert runner.imported_from_copy(runner.Run(0, "", 1.0, inside), copy) is None
    real = {**inside, "harness": str(ROOT / "harness" / "__init__.py")}
    assert "not from the copy" in runner.imported_from_copy(runner.Run(0, "", 1.0, real), copy)
    assert "not imported" in runner.imported_from_copy(runner.Run(1, "", 1.0, {}), copy)


@needs_git
def test_end_to_end_killed_and_survived(tmp_path: Path) -> None:
    """The same mutant, two tiny suites, run at once: one sees the bug, one cannot."""
    target = ROOT / "harness" / "runtime" / "functional.py"
    before = target.read_bytes()
    runs = {}
    for label, suite in (("killed", KILLING_PROBE), ("survived", BLIND_PROBE)):
        out = tmp_path / f"{label}.json"
        runs[label] = (
            out,
            subprocess.Popen(
                [
                    sys.executable,
                    str(RUNNER),
                    "--only",
                    E2E_MUTANT,
                    "--suites",
                    suite,
                    "--timeout",
                    "90",
                    "--json",
                    str(out),
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
    for label, (out, proc) in runs.items():
        output, _ = proc.communicate(timeout=150)
        assert proc.returncode == (0 if label == "killed" else 1), output
        (result,) = json.loads(out.read_text())["mutants"]
        assert result["mutant"] == E2E_MUTANT and result["result"] == label, output
        if label == "killed":
            assert result["killer"] == KILLING_PROBE, output
        assert E2E_MUTANT in output and label in output, "the table names the mutant and its result"
    assert target.read_bytes() == before, "the real tree was patched"


# ---------------------------------------------------------------- the probes of the end-to-end runs


def _write_through(perm: tuple[int, ...]) -> None:
    host = np.arange(27, dtype=np.float32).reshape(3, 3, 3)
    t = xr.tensor(host)
    t.permute(*perm)[0].fill_(-1.0)
    host.transpose(perm)[0] = -1.0
    np.testing.assert_array_equal(t.numpy(), host)


def test_probe_cyclic_3d_permutation_write_back() -> None:
    """A write through permute(1, 2, 0) reaches the base elements a numpy view would."""
    _write_through((1, 2, 0))


def test_probe_swap_write_back() -> None:
    """The same through a swap, which is its own inverse (so it cannot see mutant 05)."""
    _write_through((1, 0, 2))
