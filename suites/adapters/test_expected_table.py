"""The expected-outcomes table: parsing with errors that name the line, release ranges, and the
verdict on every (expected, actual) pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.scenarios import expected as ex

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
    # the releases bisect measured between them: the fixes' first releases, 2.7.0 and 2.6.0
    assert shipped.lookup("torch_xla", "2.6.1", "unhashable-spec").outcome == "reproduced"
    assert shipped.lookup("torch_xla", "2.7.0", "unhashable-spec").outcome == "passed"
    assert shipped.lookup("torch_xla", "2.6.0", "aliased-save").outcome == "passed"
    assert shipped.lookup("torch_xla", "2.7.0", "race-on-handles") is None  # not measured: no row


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


# ------------------------------------------------------------------------------ backends
def test_a_row_without_backend_means_cpu_and_a_gpu_run_needs_its_own_row(tmp_path: Path) -> None:
    t = table(tmp_path, row("<2.6"))
    (only,) = t.rows
    assert only.backend == "cpu"
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec").outcome == "reproduced"
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec", backend="cpu") is only
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec", backend="gpu") is None
    got = t.judge("torch_xla", "2.5.1", "unhashable-spec", "reproduced", backend="gpu")
    assert got.verdict == "unexpected" and got.expected is None
    assert 'on gpu' in got.reason and 'backend = "gpu"' in got.reason


def test_a_backend_row_is_judged_on_its_backend_only(tmp_path: Path) -> None:
    gpu = row("<2.6", "passed", extra='backend = "gpu"')
    t = table(tmp_path, row("<2.6") + gpu)
    assert [r.backend for r in t.rows] == ["cpu", "gpu"]
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec", "gpu").outcome == "passed"
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec", "cpu").outcome == "reproduced"
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec", "tpu") is None
    got = t.judge("torch_xla", "2.5.1", "unhashable-spec", "reproduced", backend="gpu")
    assert got.verdict == "regressed" and "expected.toml line 7" in got.reason
    assert t.judge("torch_xla", "2.5.1", "unhashable-spec", "reproduced").verdict == "as-expected"
    assert "on gpu" in t.rows[1].describe()


def test_rows_of_one_backend_may_not_overlap_rows_of_two_never_do(tmp_path: Path) -> None:
    t = table(tmp_path, row("<2.6", extra='backend = "gpu"') + row(">=2.5", "passed", extra='backend = "gpu"'))
    with pytest.raises(ex.ExpectedTableError, match=r"rows at lines 1 and 7 both cover torch_xla 2.5.1 .* on gpu"):
        t.lookup("torch_xla", "2.5.1", "unhashable-spec", "gpu")
    assert t.lookup("torch_xla", "2.5.1", "unhashable-spec") is None  # no cpu row at all
    # an explicit cpu row and a row without the key are the same backend: they overlap
    t = table(tmp_path, row("<2.6") + row(">=2.5", "passed", extra='backend = "cpu"'))
    with pytest.raises(ex.ExpectedTableError, match=r"both cover torch_xla 2.5.1 .* on cpu"):
        t.lookup("torch_xla", "2.5.1", "unhashable-spec")


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ('"cuda"', r"expected.toml:1: expect.backend: unknown backend 'cuda' \(one of cpu, gpu, tpu"),
        ("1", r"expected.toml:1: expect.backend: unknown backend 1"),
    ],
)
def test_an_unknown_backend_names_file_line_and_field(tmp_path: Path, backend: str, message: str) -> None:
    with pytest.raises(ex.ExpectedTableError, match=message):
        table(tmp_path, row(extra=f"backend = {backend}"))


def test_the_shipped_table_has_no_gpu_rows_yet() -> None:
    """The one GPU measurement (JAX 0.11.2, a field run) is outside the declared range: a GPU
    run of a 0.10 release reads unexpected until it is measured there."""
    shipped = ex.load()
    assert {r.backend for r in shipped.rows} == {"cpu"}
    assert shipped.lookup("jax", "0.10.2", "host-aliasing").outcome == "reproduced"
    assert shipped.lookup("jax", "0.10.2", "host-aliasing", "gpu") is None


@pytest.mark.parametrize(("rate", "message"), [
    ('"18 from 20"', 'a rate like "18 of 20"'), ('"0 of 5"', "0 < k <= n"), ('"6 of 5"', "0 < k <= n"),
    ("18", 'a rate like "18 of 20"'),
])
def test_a_malformed_rate_names_its_line(tmp_path: Path, rate: str, message: str) -> None:
    with pytest.raises(ex.ExpectedTableError, match=rf"expected.toml:1: expect.at_least: .*{message}"):
        table(tmp_path, row(extra=f"at_least = {rate}"))


def test_runs_that_disagree_are_flaky_unless_the_row_states_a_rate_they_meet(tmp_path: Path) -> None:
    every = table(tmp_path, row("<2.6"))
    rated = table(tmp_path, row("<2.6", extra='at_least = "18 of 20"'))
    assert rated.lookup("torch_xla", "2.5.1", "unhashable-spec").rate() == "18 of 20"
    # 19 of 20: what the row says the race does; known bug, green
    v = rated.judge("torch_xla", "2.5.1", "unhashable-spec", ex.FLAKY, counts={"reproduced": 19, "passed": 1})
    assert (v.verdict, v.actual, v.green) == (ex.AS_EXPECTED, ex.REPRODUCED, True)
    assert "reproduced in 19 of 20 runs, as expected: at least 18 of 20" in v.reason
    # 1 of 3: below the rate; and a row that says every time: never "unexpectedly-fixed"
    for judged in (rated, every):
        v = judged.judge("torch_xla", "2.5.1", "unhashable-spec", ex.FLAKY, counts={"reproduced": 1, "passed": 2})
        assert (v.verdict, v.green) == (ex.VERDICT_FLAKY, False)
        assert "the runs disagreed (passed 2 of 3, reproduced 1 of 3)" in v.reason
    # a run that broke another way is never excused by a rate
    v = rated.judge("torch_xla", "2.5.1", "unhashable-spec", ex.FLAKY, counts={"reproduced": 19, "failed": 1})
    assert v.verdict == ex.VERDICT_FLAKY
    # runs that agree are judged as one run is
    assert rated.judge("torch_xla", "2.5.1", "unhashable-spec", ex.PASSED).verdict == ex.UNEXPECTEDLY_FIXED


def test_a_crash_or_race_trigger_runs_several_times_and_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.scenarios import upstream_torch_xla as upstream

    rep = upstream.find("race-on-handles", "helper-sequence-without-wait")
    quiet = upstream.find("unhashable-spec", "fsdpv2-scalar-parameter")
    assert rep.race and rep.runs() == 3 and quiet.runs() == 1
    monkeypatch.setenv("XHARNESS_RUNS", "5")
    assert rep.runs() == 5
    seen = iter(["reproduced", "reproduced", "passed", "reproduced", "reproduced"])

    def fake(r: object, python: object = None, timeout: object = None) -> upstream.VariantOutcome:
        outcome = next(seen)
        return upstream.VariantOutcome("race-on-handles", "helper-sequence-without-wait", outcome,
                                       error=f"one run {outcome}", seconds=1.0)

    monkeypatch.setattr(upstream, "run_variant", fake)
    out = upstream.run_repeated(rep)
    assert (out.outcome, out.counts, out.seconds) == (ex.FLAKY, {"reproduced": 4, "passed": 1}, 5.0)
    assert out.error == "reproduced in 4 of 5 runs, passed in 1 of 5 runs"
    assert "a run that passed: one run passed" in out.details
