"""The expected-outcomes table: parsing with errors that name the line, release ranges, and the
verdict on every (expected, actual) pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapters import expected as ex

SCENARIOS = ("unhashable-spec", "aliased-save", "double-discovery")


def table(tmp_path: Path, text: str) -> ex.ExpectedTable:
    path = tmp_path / "expected.toml"
    path.write_text(text)
    return ex.load(path, SCENARIOS)


def row(releases: str = "<2.6", outcome: str = "reproduced", scenario: str = "unhashable-spec",
        runtime: str = "torch_xla", extra: str = "") -> str:
    return (f'[[expect]]\nruntime = "{runtime}"\nreleases = "{releases}"\nscenario = "{scenario}"\n'
            f'outcome = "{outcome}"\n{extra}\n')


def test_the_shipped_table_loads_and_covers_the_measured_releases() -> None:
    shipped = ex.load()
    for release in ("2.5.1", "2.9.0"):
        for scenario in ("unhashable-spec", "aliased-save", "lost-sharding", "race-on-handles"):
            assert shipped.lookup("torch_xla", release, scenario) is not None, (release, scenario)
        # double-discovery needs a multi-slice TPU: no release has a row, every run skips
        assert shipped.lookup("torch_xla", release, "double-discovery") is None
    assert shipped.lookup("torch_xla", "2.5.1", "unhashable-spec").outcome == "reproduced"
    assert shipped.lookup("torch_xla", "2.9.0", "unhashable-spec").outcome == "passed"
    assert shipped.lookup("torch_xla", "2.7.0", "aliased-save") is None  # not measured: no row


def test_ranges_match_public_versions_and_prereleases(tmp_path: Path) -> None:
    t = table(tmp_path, row("<2.6") + row(">=2.9", "passed"))
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec").outcome == "reproduced"
    assert t.lookup("torch_xla", "2.5.1+cu121", "unhashable-spec").outcome == "reproduced"
    assert t.lookup("torch_xla", "2.9.0", "unhashable-spec").outcome == "passed"
    assert t.lookup("torch_xla", "2.10.0rc1", "unhashable-spec").outcome == "passed"
    assert t.lookup("torch_xla", "2.7.0", "unhashable-spec") is None
    assert t.lookup("jax", "2.5.1", "unhashable-spec") is None
    assert t.lookup("torch_xla", "2.5.1", "aliased-save") is None


def test_overlapping_rows_are_an_error_naming_both_lines(tmp_path: Path) -> None:
    t = table(tmp_path, row("<2.6") + row(">=2.5", "passed"))
    with pytest.raises(ex.ExpectedTableError, match=r"rows at lines 1 and 7 both cover torch_xla 2.5.1"):
        t.lookup("torch_xla", "2.5.1", "unhashable-spec")
    assert t.lookup("torch_xla", "2.4.0", "unhashable-spec").outcome == "reproduced"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (row(outcome="broken"), r"expected.toml:1: expect.outcome: unknown outcome 'broken'"),
        (row(releases="lots"), r"expected.toml:1: expect.releases: not a version range"),
        (row(scenario="nope"), r"expected.toml:1: expect.scenario: unknown scenario 'nope'"),
        (row(runtime="reference"), r"expect.runtime: unknown runtime 'reference'"),
        (row() + row(">=2.9", extra='colour = "red"'), r"expected.toml:7: expect.colour: unknown key"),
        ('[[expect]]\nruntime = "torch_xla"\n', r"expected.toml:1: expect.releases: missing"),
        ("[[expect]\n", r"not valid TOML"),
        ('[expectations]\nx = 1\n', r"unknown top-level key 'expectations'"),
    ],
)
def test_a_malformed_table_names_file_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ex.ExpectedTableError, match=message):
        table(tmp_path, text)


@pytest.mark.parametrize(
    ("expected", "actual", "machine", "verdict"),
    [
        ("reproduced", "reproduced", False, "as-expected"),
        ("passed", "passed", False, "as-expected"),
        ("skipped", "skipped", False, "as-expected"),
        ("passed", "reproduced", False, "regressed"),
        ("passed", "failed", False, "regressed"),
        ("reproduced", "passed", False, "unexpectedly-fixed"),
        ("reproduced", "failed", False, "unexpected"),
        ("passed", "skipped", False, "unexpected"),  # the release lost what the trigger needs
        ("passed", "skipped", True, "skipped"),  # this machine lacks it: never the release's fault
        (None, "skipped", False, "skipped"),
        (None, "passed", False, "unexpected"),  # a result nobody said what to expect of
        (None, "reproduced", False, "unexpected"),
    ],
)
def test_verdicts(expected: str | None, actual: str, machine: bool, verdict: str) -> None:
    got = ex.judge(expected, actual, machine)
    assert got.verdict == verdict, got
    assert got.green == (verdict in ("as-expected", "skipped"))
    assert got.reason


def test_the_verdict_names_the_row_it_used(tmp_path: Path) -> None:
    t = table(tmp_path, row("<2.6"))
    got = t.judge("torch_xla", "2.5.1", "unhashable-spec", "passed")
    assert got.verdict == "unexpectedly-fixed"
    assert "expected.toml line 1" in got.reason
