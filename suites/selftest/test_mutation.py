"""The mutation job of the harness's own logic still works: its configuration loads, and mutmut
runs a few mutants of one small room and kills some of them.

The full run is a weekly job of its own (ci/mutation.sh); this keeps a change that breaks it (a
room renamed, a profile that no longer parses, mutmut's results read wrongly) from waiting a week
to be seen. It is cell-independent: it runs mutmut in a process of its own.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "mutation.py"

pytestmark = [pytest.mark.cell_independent, pytest.mark.jax_independent]


def _module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ci_mutation", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["ci_mutation"] = module
    spec.loader.exec_module(module)
    return module


def test_every_room_is_a_file_that_exists_and_every_profile_loads() -> None:
    mutation = _module()
    for name in ("main", "cluster", "cluster-fake", "smoke"):
        chosen = mutation.profile(name)
        assert chosen.only_mutate and chosen.tests, name
        for room in chosen.only_mutate:
            assert list(ROOT.glob(room)), f"{name}: room {room} matches no file"
        for test in chosen.tests:
            assert (ROOT / test.split("::")[0]).exists(), f"{name}: no {test}"
    equivalents = tomllib.loads((ROOT / "ci" / "mutation_equivalents.toml").read_text())
    for mutant, entry in equivalents.items():
        assert entry.get("source") and entry.get("why"), mutant


def test_a_change_names_the_functions_it_touched(tmp_path: Path) -> None:
    mutation = _module()
    source = tmp_path / "m.py"
    source.write_text("def a():\n    return 1\n\n\nclass C:\n    def b(self):\n        return 2\n")
    assert mutation.functions_at(source, {2}) == ["x_a"]
    assert mutation.functions_at(source, {7}) == ["x\u01c1C\u01c1b"]
    assert mutation.functions_at(source, {4}) == []


def test_a_room_scores_kills_over_judged_and_an_unjudged_survivor_fails_the_floor() -> None:
    mutation = _module()
    tally = mutation.RoomScore("harness/x.py", mutants=10, killed=8, equivalent=1, survived=1)
    assert tally.score == pytest.approx(8 / 9)
    assert mutation.below_floor([tally]) == [tally]
    tally.survived = 0
    assert mutation.below_floor([tally]) == []


def test_a_sampled_room_is_estimated_with_what_no_test_reaches_counted_as_survivors() -> None:
    """A profile too slow to run whole is scored from a random sample of the mutants its tests
    reach; those no test reaches are survivors for certain, not part of the draw."""
    mutation = _module()
    score, low, high = mutation.Estimate("harness/x.py", unreached=10, reached=90, judged=30, killed=27).score()
    assert score == pytest.approx(0.81)  # 90% of the 90 reached, over all 100
    assert 0.6 < low < score < high < 0.9
    every = mutation.Estimate("harness/x.py", unreached=0, reached=50, judged=50, killed=50).score()
    assert every[0] == every[2] == pytest.approx(1.0) and every[1] < 1.0


def test_a_prefiltered_room_carries_the_sample_s_uncertainty_on_the_rest_alone() -> None:
    """The prefilter ran every mutant: its kills are known whole, and only the mutants it left are
    estimated from the draw, so the interval narrows by their share."""
    mutation = _module()
    plain = mutation.Estimate("harness/x.py", unreached=0, reached=100, judged=10, killed=9).score()
    split = mutation.Estimate("harness/x.py", unreached=0, reached=20, judged=10, killed=9, certain=80).score()
    assert split[0] == pytest.approx(0.98)  # 80 known, and 90% of the 20 others
    assert split[1] > plain[1] and split[1] > 0.85 and split[2] <= 1.0
    assert split[2] - split[1] == pytest.approx((plain[2] - plain[1]) * 0.2)


def test_a_draw_is_made_among_reached_mutants_neither_killed_first_nor_known_equivalent() -> None:
    mutation = _module()
    names = ["m.f__mutmut_1", "m.f__mutmut_2", "m.f__mutmut_3", "m.g__mutmut_1", "m.f__mutmut_4"]
    assert mutation.candidates(names, {"m.f"}, {"m.f__mutmut_2"}, {"m.f__mutmut_3"}) == ["m.f__mutmut_1",
                                                                                          "m.f__mutmut_4"]


def test_a_prefilter_must_mutate_the_same_rooms_with_some_of_the_profile_s_tests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mutation = _module()
    settings = tmp_path / "mutation.toml"
    monkeypatch.setattr(mutation, "SETTINGS", settings)
    base = '[profiles.fast]\nonly_mutate = ["a.py"]\ntests = ["t1"]\n'
    settings.write_text(base + '[profiles.slow]\nonly_mutate = ["a.py"]\ntests = ["t1", "t2"]\nprefilter = "fast"\n')
    assert mutation.profile("slow").prefilter == "fast"
    for wrong in ('"nowhere"', '"slow"'):
        settings.write_text(base + f'[profiles.slow]\nonly_mutate = ["a.py"]\ntests = ["t1"]\nprefilter = {wrong}\n')
        with pytest.raises(mutation.UsageError, match="not another profile"):
            mutation.profile("slow")
    settings.write_text(base + '[profiles.slow]\nonly_mutate = ["a.py"]\ntests = ["t2"]\nprefilter = "fast"\n')
    with pytest.raises(mutation.UsageError, match="some of this profile's tests"):
        mutation.profile("slow")


def test_a_sync_of_the_tree_keeps_the_cache_and_the_sample_and_drops_what_the_tree_lost(tmp_path: Path) -> None:
    """A later run judges the drawn mutants again by name: their record outlives the copy's sync,
    as mutmut's cache does, while a file gone from the tree leaves the copy."""
    mutation = _module()
    (tmp_path / "mutants").mkdir()
    kept = [tmp_path / "mutants" / "mutmut-stats.json", tmp_path / mutation.SAMPLE_RECORD]
    for path in kept:
        path.write_text("x")
    stray = tmp_path / "harness" / "gone_from_the_tree.py"
    stray.parent.mkdir()
    stray.write_text("")
    mutation.sync_tree(tmp_path)
    assert all(path.read_text() == "x" for path in kept)
    assert not stray.exists() and (tmp_path / "harness" / "settings.py").is_file()


def test_mutmut_runs_a_few_mutants_of_one_room_and_kills_some(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "run", "--profile", "smoke", "--max-children", "1",
         "harness.install_source.x_requirement__mutmut_[1-6]"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**_environment(), "XHARNESS_MUTATION_DIR": str(tmp_path)},
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    row = next(line for line in done.stdout.splitlines() if line.startswith("harness/install_source.py"))
    mutants, killed = (int(cell) for cell in row.split()[1:3])
    assert mutants > 5 and killed > 0, row


def _environment() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}


def test_what_a_runs_tests_left_behind_is_found_by_its_mark_and_killed(tmp_path: Path) -> None:
    """A mutant's test killed on its timeout leaves what it started (an salloc, a rank): the run
    finds those processes by the variable every child of its tests inherits, and kills them;
    another process is left alone."""
    import os

    mutation = _module()
    marker = f"XHARNESS_MUTATION_HITS={tmp_path}/hits"
    left = subprocess.Popen(["sleep", "30"], env={**os.environ, "XHARNESS_MUTATION_HITS": f"{tmp_path}/hits"})
    other = subprocess.Popen(["sleep", "30"], env={**os.environ, "XHARNESS_MUTATION_HITS": f"{tmp_path}/hits-of-another-run"})
    try:
        assert mutation.leftovers(marker) == [left.pid]
        mutation.sweep(marker, shares_cluster=False)
        assert left.wait(timeout=10) == -9 and other.poll() is None
    finally:
        for proc in (left, other):
            proc.kill()
            proc.wait()


def test_a_mutant_listed_as_equivalent_cannot_be_listed_twice(tmp_path: Path) -> None:
    """Two entries of one mutant make the file unreadable (TOML forbids a table twice), and every
    later score fails on it: the second listing is refused, and the file is left as it was."""
    listed = next(iter(_module().equivalents()))
    before = (ROOT / "ci" / "mutation_equivalents.toml").read_bytes()
    done = subprocess.run([sys.executable, str(SCRIPT), "equivalent", listed, "--why", "again"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**_environment(), "XHARNESS_MUTATION_DIR": str(tmp_path)})
    assert done.returncode == 2 and f"{listed} is already listed" in done.stderr, done.stderr
    assert (ROOT / "ci" / "mutation_equivalents.toml").read_bytes() == before
