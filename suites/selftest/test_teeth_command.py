"""``xharness teeth``: the kill matrix end to end, its children real processes as users run them.

The checks that must fail, crash or hang are real checks too: invariants defined in this module
and added to the matrix with ``--extra-checks`` (the way users add their own), so a missed pair, a
dead child and a hung child are each proved on a check that truly misses, dies or hangs, with no
result faked anywhere.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from hypothesis import strategies as st

from harness import cli
from harness.properties.base import Invariant
from harness.report.junit import read_records
from harness.report.records import ERROR, FAILED, KIND_SIGNAL, KIND_TIMEOUT, PASSED, SKIPPED
from harness.runtime import faults

SCHEMA = Path(__file__).parents[2] / "harness/report/schema/junit-10.xsd"
HERE = Path(__file__).resolve()


def _looks_at_nothing(n: int) -> None:
    """A check that never fails, whatever the runtime does: it has no teeth."""


def _abort(n: int) -> None:
    os.abort()  # what a failed CHECK in native code does to the process


def _hang(n: int) -> None:
    time.sleep(600)


def _die_in_the_dump(n: int) -> None:
    """What the child's timed dump leaves when it crashes the process (CPython issues 131580,
    116008): its header and a first thread, then death by a signal with no report of its own."""
    faulthandler.disable()
    sys.stderr.write("Timeout (0:00:04)!\nThread 0x00007f0000000001 (most recent call first):\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSEGV)


def _examples() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"n": st.integers(0, 3)})


TOOTHLESS = Invariant(
    id="toothless",
    title="declares unhashable-spec but checks nothing",
    check=_looks_at_nothing,
    examples=_examples,
    catches=(faults.UNHASHABLE_SPEC,),
    max_examples=5,
)
ABORTING = Invariant(
    id="aborting",
    title="kills its process on the first example",
    check=_abort,
    examples=_examples,
    catches=(faults.DOUBLE_DISCOVERY,),
    max_examples=5,
)
DYING_IN_ITS_DUMP = Invariant(
    id="dying-in-its-dump",
    title="dies by a signal inside its own timed stack dump",
    check=_die_in_the_dump,
    examples=_examples,
    catches=(faults.DOUBLE_DISCOVERY,),
    max_examples=5,
)
HANGING = Invariant(
    id="hanging",
    title="never returns",
    check=_hang,
    examples=_examples,
    catches=(faults.ALIASED_SAVE,),
    max_examples=5,
)


def teeth(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["teeth", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def records(out: Path) -> dict[str, Any]:
    path = out / "junit" / "teeth.xml"
    xmlschema.XMLSchema(SCHEMA).validate(str(path))
    return {r.nodeid: r for r in read_records(path)}


def test_declared_pairs_are_caught_json_and_junit(tmp_path: Path, capsys) -> None:
    checks = "unhashable-spec,spec-normalization,discovery-idempotence"
    code, out, err = teeth(capsys, "--json", "--checks", checks, "--out", str(tmp_path))
    report = json.loads(out)
    assert code == 0, (report, err)
    assert (report["declared"], report["caught"], report["devices"]) == (3, 3, 8)
    pairs = {(p["check"], p["fault"]): p for p in report["pairs"]}
    assert set(pairs) == {
        ("unhashable-spec", "unhashable-spec"),
        ("spec-normalization", "unhashable-spec"),
        ("discovery-idempotence", "double-discovery"),
    }
    for pair in pairs.values():
        assert pair["declared"] and pair["status"] == "caught", pair
        assert pair["seconds"] >= 0
    scenario = pairs[("unhashable-spec", "unhashable-spec")]
    assert scenario["kind"] == "scenario" and scenario["example"] == "unhashable-list"
    assert "unhashable type: 'list'" in scenario["error"]
    for key in (("spec-normalization", "unhashable-spec"), ("discovery-idempotence", "double-discovery")):
        pair = pairs[key]
        assert pair["kind"] == "invariant" and pair["example"] and pair["blob"], pair
        assert pair["size"] is not None and 0 <= pair["size"] <= pair["max_size"], pair
    assert "[3/3]" in err  # progress, one line per finished pair

    cases = records(tmp_path)
    assert set(cases) == {f"teeth/{c}::{f}" for c, f in pairs}
    for case in cases.values():
        assert case.cell == "teeth" and case.final.outcome == PASSED
        assert case.classname == f"teeth.{case.properties['check']}"
        assert case.properties["status"] == "caught"
        assert case.properties["repro"].startswith("xharness teeth --checks ")
        assert case.file.endswith(".py") and case.line
    found = cases["teeth/discovery-idempotence::double-discovery"].properties
    assert found["kind"] == "invariant" and found["fault"] == "double-discovery"
    assert found["example"] == pairs[("discovery-idempotence", "double-discovery")]["example"]
    assert found["blob"] and found["size"] and found["error"].startswith("AssertionError")


def test_table_with_undeclared_pairs(tmp_path: Path, capsys) -> None:
    code, out, _ = teeth(
        capsys, "--checks", "unhashable-spec,coverage", "--faults", "unhashable-spec,lost-sharding",
        "--all-pairs", "--out", str(tmp_path),
    )
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].split() == ["check", "kind", "unhashable-spec", "lost-sharding"]
    row = lines[1].split()
    assert row[:3] == ["unhashable-spec", "scenario", "caught"]
    assert row[3] in ("caught*", "-")  # information only: either way the run passes
    assert lines[2].split()[:2] == ["coverage", "invariant"]
    assert any(line.startswith("1/1 declared pairs caught; 8 devices") for line in lines), out
    assert any("undeclared pair" in line for line in lines)
    cases = records(tmp_path)
    assert len(cases) == 4  # every pair that ran has its record; undeclared ones never fail
    assert all(c.final.outcome == PASSED for c in cases.values())
    assert cases["teeth/unhashable-spec::lost-sharding"].properties["declared"] == "false"


@pytest.mark.jax_independent
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--checks", "spec-normalization,no-such-check"], ["'no-such-check'", "sync-aliasing"]),
        (["--faults", "lost-sharding,bogus"], ["'bogus'", "race-on-handles", "aliased-save"]),
        (["--devices", "0"], ["--devices", "got 0"]),
        (["--timeout", "-1"], ["--timeout"]),
        (["--extra-checks", "no_such_module_here:X"], ["no_such_module_here"]),
        (["--extra-checks", f"{HERE}:NOTHING"], ["no attribute 'NOTHING'"]),
        (["--extra-checks", f"{HERE}:teeth"], ["holds a function", "Invariant"]),
        (["--extra-checks", "harness.properties:SYNC_ALIASING"], ["'sync-aliasing' is already used"]),
    ],
)
def test_usage_errors_exit_2_naming_the_value(args, named, tmp_path: Path, capsys) -> None:
    code, out, err = teeth(capsys, *args, "--out", str(tmp_path))
    assert code == cli.EXIT_USAGE, (out, err)
    for text in named:
        assert text in err, err
    assert not (tmp_path / "junit").exists()  # nothing ran, nothing written


def test_a_missed_declared_pair_fails(tmp_path: Path, capsys) -> None:
    code, out, _ = teeth(
        capsys, "--json", "--checks", "toothless", "--extra-checks", f"{HERE}:TOOTHLESS",
        "--out", str(tmp_path),
    )
    report = json.loads(out)
    assert code == 1, report
    (pair,) = report["pairs"]
    assert (pair["check"], pair["fault"], pair["status"]) == ("toothless", "unhashable-spec", "missed")
    assert report["checks"][0]["origin"] == f"{HERE}:TOOTHLESS"
    (case,) = records(tmp_path).values()
    assert case.final.outcome == FAILED
    assert "toothless has no teeth for unhashable-spec" in case.final.message
    assert case.file.endswith("test_teeth_command.py")
    assert f"--extra-checks {HERE}:TOOTHLESS" in case.properties["repro"]


def test_a_child_that_dies_still_yields_its_record(tmp_path: Path, capsys) -> None:
    code, out, _ = teeth(
        capsys, "--json", "--checks", "aborting,dying-in-its-dump,double-discovery", "--extra-checks",
        f"{HERE}:ABORTING", "--extra-checks", f"{HERE}:DYING_IN_ITS_DUMP", "--out", str(tmp_path),
    )
    report = json.loads(out)
    assert code == 1, report
    pairs = {p["check"]: p for p in report["pairs"]}
    dead = pairs["aborting"]
    assert (dead["status"], dead["error_kind"], dead["signal"]) == ("error", KIND_SIGNAL, 6)
    assert "SIGABRT" in dead["error"] and "aborting x double-discovery" in dead["details"]
    assert Path(dead["log"]).is_file()
    # a signal inside the child's own timed dump is the hang the dump was for
    in_dump = pairs["dying-in-its-dump"]
    assert (in_dump["status"], in_dump["error_kind"], in_dump["signal"]) == ("error", KIND_TIMEOUT, None)
    assert "SIGSEGV" in in_dump["error"] and "inside that dump" in in_dump["error"]
    assert pairs["double-discovery"]["status"] == "caught"  # the other pair is unaffected
    cases = records(tmp_path)
    crash = cases["teeth/aborting::double-discovery"].final
    assert (crash.outcome, crash.kind, crash.signal) == (ERROR, KIND_SIGNAL, 6)
    assert "killed by signal 6 (SIGABRT)" in crash.message
    assert cases["teeth/double-discovery::double-discovery"].final.outcome == PASSED


def test_a_hung_child_is_stopped_and_recorded(tmp_path: Path, capsys) -> None:
    code, out, _ = teeth(
        capsys, "--json", "--checks", "hanging", "--extra-checks", f"{HERE}:HANGING",
        "--timeout", "6", "--out", str(tmp_path),
    )
    report = json.loads(out)
    assert code == 1, report
    (pair,) = report["pairs"]
    assert (pair["status"], pair["error_kind"]) == ("error", KIND_TIMEOUT)
    assert "no result within 6 s" in pair["error"]
    assert "Timeout (0:00:04)" in pair["details"]  # every thread's stack, dumped before the kill
    assert 5 < pair["seconds"] < 60
    (case,) = records(tmp_path).values()
    assert (case.final.outcome, case.final.kind) == (ERROR, KIND_TIMEOUT)


@pytest.mark.jax_independent
def test_a_pair_the_topology_cannot_host_is_skipped_not_passed(tmp_path: Path, capsys) -> None:
    code, out, _ = teeth(
        capsys, "--checks", "sharding-preservation", "--devices", "1", "--out", str(tmp_path)
    )
    assert code == 1, out
    assert "0/1 declared pairs caught (1 skipped); 1 device," in out
    assert "needs at least 2 devices, the run has 1" in out
    (case,) = records(tmp_path).values()
    assert case.final.outcome == SKIPPED and "needs at least 2 devices" in case.final.message
