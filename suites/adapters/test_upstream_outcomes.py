"""How a variant's end becomes an outcome, without PyTorch/XLA: a stand-in interpreter dies the
ways releases die (an abort in a CHECK, a hang, an exit without a result) or prints a result."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import pytest

from harness.commands import releases as commands
from harness.releases import catalog
from harness.scenarios import upstream_torch_xla as upstream
from harness.scenarios.expected import ExpectedTable, load

DELETED = ("F0000 00:00:1795463952.559675    5381 pjrt_computation_client.cc:529] Non-OK-status: status\n"
           "Status: INVALID_ARGUMENT: CopyToHostAsync() called on deleted or donated buffer\n"
           "*** Begin stack trace ***\n\ttorch_xla::runtime::PjRtComputationClient::TransferFromDevice()\n")


def fake_python(tmp_path: Path, body: str, stderr: str = "", stdout: str = "",
                release: str = "2.5.1") -> str:
    """A script standing in for a release's interpreter (``python -m MODULE SCENARIO VARIANT``):
    it says its release on stderr as the real child does, prints the given output, then ``body``."""
    (tmp_path / "err.txt").write_text(f"xharness-upstream: torch_xla {release}\n{stderr}")
    (tmp_path / "out.txt").write_text(stdout)
    path = tmp_path / "python"
    path.write_text(f"#!/usr/bin/env bash\ncat {tmp_path}/err.txt >&2\ncat {tmp_path}/out.txt\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_an_abort_with_the_bugs_check_message_is_a_reproduction_with_its_record(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "kill -ABRT $$\n", stderr=DELETED)
    out = upstream.run_variant(upstream.find("aliased-save", "detach-add-aliasing-on"), python, timeout=30)
    assert (out.outcome, out.signature, out.signal) == ("reproduced", "deleted-buffer", signal.SIGABRT)
    assert out.error == ("the process died on SIGABRT: Non-OK-status: status Status: INVALID_ARGUMENT: "
                         "CopyToHostAsync() called on deleted or donated buffer")
    assert "TransferFromDevice" in out.details  # the stack tail is kept
    assert out.release == "2.5.1"  # said before it died
    assert "XLA_ENABLE_PARAM_ALIASING=1" in out.command and "detach-add-aliasing-on" in out.command


def test_an_unrelated_abort_is_a_failure_not_the_bug(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "kill -ABRT $$\n", stderr="F0000 x.cc:1] Check failed: shape.rank() == 2\n")
    out = upstream.run_variant(upstream.find("aliased-save", "detach-add-aliasing-on"), python, timeout=30)
    assert (out.outcome, out.signature) == ("failed", "")
    assert out.error == "the process died on SIGABRT: Check failed: shape.rank() == 2"


def test_a_hang_and_an_exit_without_a_result_are_failures(tmp_path: Path) -> None:
    rep = upstream.find("unhashable-spec", "fsdpv2-scalar-parameter")
    hung = upstream.run_variant(rep, fake_python(tmp_path, "echo 'Thread 0x1 (most recent call first)' >&2\nsleep 30\n"),
                                timeout=1)
    assert hung.outcome == "failed" and hung.error.startswith("hung: no result within 1 s")
    gone = upstream.run_variant(rep, fake_python(tmp_path, "exit 7\n"), timeout=30)
    assert (gone.outcome, gone.exit_code) == ("failed", 7) and gone.error.startswith("exit 7 without a result")


def test_a_death_inside_the_stack_dump_is_the_hang_not_the_bugs_crash(tmp_path: Path) -> None:
    """A trigger still running when its stacks are dumped, killed by that dump (CPython issues
    131580, 116008), hung: the SIGSEGV is the dump's, though the bug's own crash is a SIGSEGV."""
    rep = upstream.find("race-on-handles", "gradient-accumulation")
    dump = "Timeout (0:00:28)!\nThread 0x00007f0000000001 (most recent call first):\n"
    died = upstream.run_variant(rep, fake_python(tmp_path, "kill -SEGV $$\n", stderr=dump), timeout=30)
    assert (died.outcome, died.signature, died.signal) == ("failed", "", None)
    assert died.error.startswith("hung: no result 28 s in") and "SIGSEGV inside that dump" in died.error
    assert died.release == "2.5.1"
    crash = dump + "Fatal Python error: Segmentation fault\n"  # a crash of its own, after the dump
    crashed = upstream.run_variant(rep, fake_python(tmp_path, "kill -SEGV $$\n", stderr=crash), timeout=30)
    assert (crashed.outcome, crashed.signature, crashed.signal) == ("reproduced", "sigsegv", signal.SIGSEGV)


def test_a_result_line_is_taken_as_the_child_judged_it(tmp_path: Path) -> None:
    result = upstream.VariantOutcome("unhashable-spec", "fsdpv2-scalar-parameter", "reproduced",
                                     signature="unhashable-list", error="TypeError: unhashable type: 'list'",
                                     release="2.5.1")
    line = f"{upstream.RESULT_MARKER} {json.dumps(result.to_json())}"
    out = upstream.run_variant(upstream.find("unhashable-spec", "fsdpv2-scalar-parameter"),
                               fake_python(tmp_path, "", stdout=line + "\n"), timeout=30)
    assert (out.outcome, out.signature, out.release) == ("reproduced", "unhashable-list", "2.5.1")


def test_a_scenario_is_judged_on_the_release_its_variants_imported(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "kill -ABRT $$\n", stderr=DELETED)
    run = catalog.run_scenario("aliased-save", python, load(), timeout=30)
    assert run.release == "2.5.1" and run.outcome == "reproduced"
    assert run.verdict.verdict == "as-expected"  # the table says 2.5.1 reproduces aliased-save
    props = run.properties()
    assert {k: props[k] for k in ("runtime", "release", "scenario", "expected", "actual", "verdict")} == {
        "runtime": "torch_xla", "release": "2.5.1", "scenario": "aliased-save",
        "expected": "reproduced", "actual": "reproduced", "verdict": "as-expected"}
    assert props["repro"] == "xharness repro aliased-save --runtime torch_xla --release 2.5.1"


def test_a_fixed_release_that_reproduces_is_a_regression(tmp_path: Path) -> None:
    python = fake_python(tmp_path, "kill -ABRT $$\n", stderr=DELETED, release="2.9.0")
    run = catalog.run_scenario("aliased-save", python, load(), timeout=30)
    assert (run.release, run.outcome, run.verdict.verdict) == ("2.9.0", "reproduced", "regressed")
    assert run.message().startswith("regressed: expected passed (expected.toml line")


@pytest.mark.parametrize(
    ("outcomes", "overall"),
    [(["passed", "reproduced"], "reproduced"), (["reproduced", "failed"], "failed"),
     (["skipped", "passed"], "passed"), (["skipped"], "skipped"), (["passed", "passed"], "passed")],
)
def test_variants_aggregate(outcomes: list[str], overall: str) -> None:
    variants = [upstream.VariantOutcome("s", f"v{i}", o) for i, o in enumerate(outcomes)]
    assert catalog.aggregate(variants) == overall


def test_reproducers_name_catalog_scenarios_and_a_scenario_without_one_is_skipped_saying_so() -> None:
    from harness.scenarios import registry

    ids = [s.id for s in registry.all_scenarios()]
    assert set(upstream.scenarios()) <= set(ids)
    assert {"race-on-handles", "double-discovery", "unhashable-spec", "lost-sharding",
            "aliased-save"} <= set(upstream.scenarios())
    assert isinstance(load(), ExpectedTable)
    run = catalog.run_scenario("no-reproducer-here", "/nonexistent/python")
    assert (run.outcome, run.verdict.verdict, run.variants) == ("skipped", "skipped", [])
    assert run.verdict.reason.startswith("no torch_xla reproducer of no-reproducer-here yet")


def test_the_release_table_lists_every_row(tmp_path: Path) -> None:
    entries = [
        {"release": "2.5.1", "installed": True, "env_built": False, "env_seconds": 0.1, "seconds": 40.0,
         "rows": [{"scenario": "aliased-save", "expected": "reproduced", "actual": "reproduced",
                   "verdict": "as-expected"}]},
        {"release": "0.0.1", "installed": False, "error": "cannot install torch_xla 0.0.1: pip install ...",
         "rows": [{"scenario": "xharness::install", "expected": "-", "actual": "error", "verdict": "not-installed"}]},
    ]
    text = commands.render_table("torch_xla", entries)
    lines = text.splitlines()
    assert lines[0].split() == ["release", "scenario", "expected", "actual", "verdict"]
    assert lines[2].split() == ["2.5.1", "aliased-save", "reproduced", "reproduced", "known-bug"]  # as expected: a known bug
    assert "torch_xla 0.0.1: NOT INSTALLED: cannot install torch_xla 0.0.1" in text
    assert commands.exit_code(entries) == catalog.EXIT_INSTALL
    assert commands.exit_code(entries[:1]) == 0
