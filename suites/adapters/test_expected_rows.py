"""Every way a row of the expected-outcomes table can be malformed, with the exact sentence a
maintainer reads; the line a row is reported at; how a row and its release ranges read back; and
which releases carry a bug by the table's rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from harness.scenarios import expected as ex

pytestmark = pytest.mark.cell_independent

SCENARIOS = ("unhashable-spec", "aliased-save")


def _load(tmp_path: Path, text: str) -> ex.ExpectedTable:
    path = tmp_path / "expected.toml"
    path.write_text(text)
    return ex.load(path, SCENARIOS)


def _row(releases: str = "<2.6", outcome: str = "reproduced", extra: str = "") -> str:
    return (f'[[expect]]\nruntime = "torch_xla"\nreleases = "{releases}"\nscenario = "unhashable-spec"\n'
            f'outcome = "{outcome}"\n{extra}\n')


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ex.ExpectedTableError) as caught:
        _load(tmp_path, text)
    return str(caught.value).replace(str(tmp_path / "expected.toml"), "T")


_BASE = 'runtime = "torch_xla"\nreleases = "<2.6"\nscenario = "unhashable-spec"\noutcome = "passed"\n'


@pytest.mark.parametrize(("body", "message"), [
    (_BASE + 'colour = "red"\n',
     "T:2: expect.colour: unknown key (expected one of at_least, backend, outcome, releases, runtime, "
     "scenario, why)"),
    ('runtime = "torch_xla"\nreleases = "<2.6"\noutcome = "passed"\n', "T:2: expect.scenario: missing"),
    (_BASE.replace('"<2.6"', "26"), "T:2: expect.releases: must be a string, got 26"),
    (_BASE.replace('"torch_xla"', '"reference"'),
     "T:2: expect.runtime: unknown runtime 'reference' (one of jax, torch_xla)"),
    (_BASE.replace('"unhashable-spec"', '"nope"'),
     "T:2: expect.scenario: unknown scenario 'nope' (one of unhashable-spec, aliased-save)"),
    (_BASE.replace('"passed"', '"crashed"'),
     "T:2: expect.outcome: unknown outcome 'crashed' (one of reproduced, passed, failed, skipped)"),
    (_BASE.replace('"<2.6"', '"lots"'),
     "T:2: expect.releases: not a version range like '<2.6' or '>=2.6,<3': 'lots'"),
    (_BASE + "why = 3\n", "T:2: expect.why: must be a string"),
    (_BASE + 'backend = "cuda"\n',
     "T:2: expect.backend: unknown backend 'cuda' (one of cpu, gpu, tpu; without the key: cpu)"),
    (_BASE + 'at_least = "3 from 4"\n', "T:2: expect.at_least: a rate like \"18 of 20\" (0 < k <= n), got '3 from 4'"),
    (_BASE + 'at_least = "5 of 4"\n', "T:2: expect.at_least: a rate like \"18 of 20\" (0 < k <= n), got '5 of 4'"),
    (_BASE + "at_least = 4\n", "T:2: expect.at_least: a rate like \"18 of 20\" (0 < k <= n), got 4"),
])
def test_each_malformed_field_reads_as_one_exact_sentence(tmp_path: Path, body: str, message: str) -> None:
    assert _error(tmp_path, "# measured on a CPU\n[[expect]]\n" + body) == message


def test_a_table_level_mistake_names_the_file(tmp_path: Path) -> None:
    assert _error(tmp_path, '[expectations]\nx = 1\n[other]\n') == (
        "T: unknown top-level key 'expectations' (rows are [[expect]] tables)")
    assert _error(tmp_path, 'expect = "all"\n') == "T: 'expect' must be an array of tables ([[expect]])"
    assert _error(tmp_path, "expect = [1]\n") == "T: expect.: each row is a table"
    assert _error(tmp_path, "[[expect]\n").startswith("T: not valid TOML: ")
    missing = tmp_path / "absent.toml"
    with pytest.raises(ex.ExpectedTableError) as caught:
        ex.load(missing, SCENARIOS)
    assert str(caught.value) == f"{missing}: cannot read: No such file or directory"


def test_rows_are_reported_at_their_header_lines_however_the_header_is_spaced(tmp_path: Path) -> None:
    text = "# table\n\n" + _row("<2.6") + "  [[ expect ]]\n" + _row(">=2.9", "passed").split("\n", 1)[1]
    table = _load(tmp_path, text)
    assert [r.line for r in table.rows] == [3, 9]
    assert table.judge("torch_xla", "2.9.0", "unhashable-spec", ex.REPRODUCED).reason == (
        "expected passed (expected.toml line 9), got reproduced")
    # rows written inline have no header line: the message names the file alone
    inline = ('expect = [{runtime = "torch_xla", releases = "<2.6", scenario = "unhashable-spec", '
              'outcome = "passed"}, {runtime = "torch_xla", releases = "<2.6", scenario = "unhashable-spec", '
              'outcome = "passed", why = 1}]\n')
    assert _error(tmp_path, inline) == "T: expect.why: must be a string"
    first = _load(tmp_path, inline.replace(", why = 1", ""))
    assert [r.line for r in first.rows] == [None, None]


def test_a_row_reads_back_with_its_defaults_and_stated_fields(tmp_path: Path) -> None:
    plain, rated = _load(tmp_path, _row("<2.6") + _row(">=2.9", "passed", 'why = "fixed in 2.9"\n'
                                                      'backend = "gpu"\nat_least = " 18  of 20 "')).rows
    assert (plain.why, plain.backend, plain.at_least, plain.rate()) == ("", "cpu", None, "every time")
    assert (rated.why, rated.backend, rated.at_least, rated.rate()) == ("fixed in 2.9", "gpu", (18, 20), "18 of 20")
    assert plain.describe() == "torch_xla <2.6 on cpu: reproduced"
    (every,) = _load(tmp_path, _row(extra='at_least = "4 of 4"')).rows
    assert (every.at_least, every.rate()) == ((4, 4), "4 of 4")
    anything = ex.Expectation("jax", SpecifierSet(""), "host-aliasing", ex.PASSED)
    assert anything.describe() == "jax (any release) on cpu: passed"


def test_a_row_covers_its_runtime_scenario_backend_and_releases_only() -> None:
    row = ex.Expectation("torch_xla", SpecifierSet(">=2.6"), "lost-sharding", ex.PASSED)
    assert row.covers("torch_xla", "2.7.0rc1", "lost-sharding")
    assert row.covers("torch_xla", "2.6.0+cu121", "lost-sharding", "cpu")
    assert not row.covers("torch_xla", "2.5.1", "lost-sharding")
    assert not row.covers("jax", "2.7.0", "lost-sharding")
    assert not row.covers("torch_xla", "2.7.0", "aliased-save")
    assert not row.covers("torch_xla", "2.7.0", "lost-sharding", "gpu")


def test_a_release_that_is_no_version_is_named_in_the_error() -> None:
    assert ex.public_version("2.5.1+cu121") == ex.public_version("2.5.1")
    with pytest.raises(ex.ExpectedTableError) as caught:
        ex.public_version("nightly")
    assert str(caught.value) == "not a release version: 'nightly'"


def test_reproduced_ranges_read_lower_bound_first() -> None:
    table = ex.ExpectedTable(Path("expected.toml"), (
        ex.Expectation("jax", SpecifierSet("<0.5,>=0.4.1"), "host-aliasing", ex.REPRODUCED),
        ex.Expectation("jax", SpecifierSet("!=0.6.1,<0.7,>0.5"), "host-aliasing", ex.REPRODUCED),
        ex.Expectation("jax", SpecifierSet("<0.9,==0.8.*"), "host-aliasing", ex.REPRODUCED),
        ex.Expectation("jax", SpecifierSet("<0.10,~=0.9.0"), "host-aliasing", ex.REPRODUCED),
        ex.Expectation("jax", SpecifierSet("<0.13,!=0.12.3,!=0.12.1,!=0.12.2,!=0.12.0"), "host-aliasing",
                       ex.REPRODUCED),
        ex.Expectation("jax", SpecifierSet(""), "host-aliasing", ex.REPRODUCED, backend="gpu"),
        ex.Expectation("jax", SpecifierSet(">=0.7,<0.8"), "host-aliasing", ex.PASSED),
        ex.Expectation("jax", SpecifierSet("<0.3"), "wait-gap", ex.REPRODUCED),
    ))
    assert table.reproduced_ranges("jax", "host-aliasing") == [
        ">=0.4.1,<0.5", ">0.5,!=0.6.1,<0.7", "==0.8.*,<0.9", "~=0.9.0,<0.10",
        "!=0.12.0,!=0.12.1,!=0.12.2,!=0.12.3,<0.13"]
    assert table.reproduced_ranges("jax", "host-aliasing", "gpu") == ["every release"]
    assert table.reproduced_ranges("torch_xla", "host-aliasing") == []


def test_a_release_carries_a_bug_where_a_row_covering_it_says_reproduced_on_any_backend() -> None:
    table = ex.ExpectedTable(Path("expected.toml"), (
        ex.Expectation("jax", SpecifierSet("<0.5"), "host-aliasing", ex.REPRODUCED),
        ex.Expectation("jax", SpecifierSet(">=0.5"), "host-aliasing", ex.PASSED),
        ex.Expectation("jax", SpecifierSet(">=0.6"), "host-aliasing", ex.REPRODUCED, backend="gpu"),
        ex.Expectation("jax", SpecifierSet(">=0.9"), "wait-gap", ex.SKIPPED),
    ))
    assert table.carries("jax", "0.4.30", "host-aliasing") is True
    assert table.carries("jax", "0.5.1rc1", "host-aliasing") is False  # a prerelease of a fixed release
    assert table.carries("jax", "0.5.2", "host-aliasing") is False
    assert table.carries("jax", "0.6.0+cuda", "host-aliasing") is True  # the GPU row says so
    assert table.carries("jax", "0.9.1", "wait-gap") is False
    assert table.carries("jax", "0.8.0", "wait-gap") is None  # nobody measured it
    assert table.carries("torch_xla", "0.4.0", "host-aliasing") is None


def test_a_run_that_passed_or_skipped_is_that_whatever_its_variants_show() -> None:
    reproduced = [{"outcome": "failed", "signature": "a"}]
    assert ex.actual_outcome(ex.PASSED, {"a"}, reproduced) == ex.PASSED
    assert ex.actual_outcome(ex.SKIPPED, {"a"}, reproduced) == ex.SKIPPED
    assert ex.actual_outcome("failed", {"a"}, reproduced) == ex.REPRODUCED
    assert ex.actual_outcome("failed", {"a"}, [{"outcome": SKIP, "signature": "a"} for SKIP in [ex.SKIPPED]]) == ex.FAILED
    assert ex.actual_outcome("failed", {"a"}, [{"outcome": "failed"}]) == ex.FAILED


def test_the_table_judges_a_machine_skip_only_when_told() -> None:
    table = ex.ExpectedTable(Path("expected.toml"), (
        ex.Expectation("jax", SpecifierSet("<0.5"), "host-aliasing", ex.PASSED, line=4),))
    release = table.judge("jax", "0.4.0", "host-aliasing", ex.SKIPPED)
    assert (release.verdict, release.reason) == (ex.UNEXPECTED, "expected passed (expected.toml line 4), got skipped")
    machine = table.judge("jax", "0.4.0", "host-aliasing", ex.SKIPPED, machine_skip=True)
    assert (machine.verdict, machine.reason) == (ex.VERDICT_SKIPPED, "this machine cannot run it")


def test_a_table_without_rows_loads_empty_and_keeps_its_path(tmp_path: Path) -> None:
    empty = _load(tmp_path, "# nothing measured yet\n")
    assert (empty.path, empty.rows) == (tmp_path / "expected.toml", ())
    assert empty.judge("torch_xla", "2.5.1", "unhashable-spec", ex.SKIPPED).verdict == ex.VERDICT_SKIPPED
    overlapping = _load(tmp_path, _row("<2.6") + _row(">=2.5", "passed"))
    with pytest.raises(ex.ExpectedTableError) as caught:
        overlapping.lookup("torch_xla", "2.5.1", "unhashable-spec")
    assert str(caught.value) == (f"{tmp_path / 'expected.toml'}: rows at lines 1 and 7 both cover torch_xla 2.5.1 "
                                 "for 'unhashable-spec' on cpu; narrow their release ranges")


def test_every_verdict_carries_the_row_outcome_and_the_run_outcome() -> None:
    row = ex.Expectation("torch_xla", SpecifierSet("<2.6"), "lost-sharding", ex.PASSED, line=9)
    machine = ex.judge(ex.PASSED, ex.SKIPPED, machine_skip=True, row=row)
    assert (machine.verdict, machine.expected, machine.actual) == (ex.VERDICT_SKIPPED, ex.PASSED, ex.SKIPPED)
    unrowed = ex.judge(None, ex.REPRODUCED)
    assert (unrowed.expected, unrowed.actual) == (None, ex.REPRODUCED)
    gpu = ex.judge(None, ex.FAILED, backend="gpu")
    assert (gpu.verdict, gpu.expected, gpu.actual) == (ex.UNEXPECTED, None, ex.FAILED)


def test_runs_that_disagree_list_the_commonest_outcome_first() -> None:
    rated = ex.Expectation("torch_xla", SpecifierSet("<2.6"), "race-on-handles", ex.REPRODUCED, line=9,
                           at_least=(1, 4))
    met = ex.judge(ex.REPRODUCED, ex.FLAKY, row=rated, counts={ex.PASSED: 1, ex.REPRODUCED: 3})
    assert (met.verdict, met.expected, met.actual) == (ex.AS_EXPECTED, ex.REPRODUCED, ex.REPRODUCED)
    assert met.reason == "reproduced in 3 of 4 runs, as expected: at least 1 of 4 (expected.toml line 9)"
    # the bug never showed: no rate excuses that, however low
    never = ex.judge(ex.REPRODUCED, ex.FLAKY, row=rated, counts={ex.PASSED: 2, ex.SKIPPED: 2})
    assert (never.verdict, never.expected, never.actual) == (ex.VERDICT_FLAKY, ex.REPRODUCED, ex.FLAKY)
    assert never.reason == ("the runs disagreed (passed 2 of 4, skipped 2 of 4); the table expects reproduced "
                            "1 of 4 (expected.toml line 9)")
    shown = ex.judge(ex.REPRODUCED, ex.FLAKY, counts={ex.PASSED: 1, ex.REPRODUCED: 3})
    assert shown.reason == "the runs disagreed (reproduced 3 of 4, passed 1 of 4); the table expects no rate"
