"""Synthetic records covering every classification the reports must render.

A plain module (not ``conftest``) so test modules can import it by a name no other suite uses.
"""

from __future__ import annotations

from harness.report.records import (
    ERROR,
    FAILED,
    KIND_EXIT,
    KIND_SIGNAL,
    KIND_TIMEOUT,
    PASSED,
    SKIPPED,
    Attempt,
    TestRecord,
)

SCRIPT = "<script>document.body.setAttribute('data-pwned','1')</script><img src=x onerror=alert(1)>"
MODULE = "suites/regression/test_catalog.py"


def props(scenario: str, cell: str, seed: int = 7, **extra: str) -> dict[str, str]:
    base = {
        "cell": cell,
        "backend": "cpu",
        "devices": "4",
        "processes": "1",
        "runtime": "reference",
        "mode": "injected",
        "scenario": scenario,
        "seed": str(seed),
        "schedule": "pct:3",
        "jax": "0.10.2",
        "jaxlib": "0.10.2",
        "repro": f"xharness repro {scenario} --inject --cell {cell} --seed {seed}",
    }
    base.update(extra)
    return base


def make_records(cell: str = "cpu-4") -> list[TestRecord]:
    """One record of each kind, all in one cell."""
    return [
        TestRecord(
            f"{MODULE}::TestRace::test_passes[fixed]",
            cell,
            file=MODULE,
            line=10,
            attempts=[Attempt(PASSED, 0.25, stdout="ok\n")],
            properties=props("race-on-handles", cell),
        ),
        TestRecord(
            f"{MODULE}::test_fails",
            cell,
            file=MODULE,
            line=20,
            attempts=[
                Attempt(FAILED, 1.0, "AssertionError: first", "Traceback 1\nassert 1 == 2"),
                Attempt(FAILED, 1.5, "AssertionError: second", "Traceback 2\nassert 1 == 3"),
            ],
            properties=props("unhashable-spec", cell),
        ),
        TestRecord(
            f"{MODULE}::test_flaky",
            cell,
            file=MODULE,
            line=30,
            attempts=[
                Attempt(FAILED, 0.5, "DuplicateDiscoveryError: discovery ran twice", "tb flaky"),
                Attempt(PASSED, 0.4),
            ],
            properties=props("double-discovery", cell),
        ),
        TestRecord(
            f"{MODULE}::test_segfault",
            cell,
            file=MODULE,
            line=40,
            attempts=[
                Attempt(
                    ERROR,
                    2.0,
                    "",
                    'Fatal Python error: Segmentation fault\n  File "executor.py", line 9 in handles',
                    stderr="Fatal Python error: Segmentation fault",
                    kind=KIND_SIGNAL,
                    signal=11,
                )
            ],
            properties=props("race-on-handles", cell, seed=11),
        ),
        TestRecord(
            f"{MODULE}::test_hangs",
            cell,
            file=MODULE,
            attempts=[
                Attempt(ERROR, 60.0, "", "Thread 0x1 (most recent call first)", kind=KIND_TIMEOUT)
            ],
            properties=props("aliased-save", cell),
        ),
        TestRecord(
            f"{MODULE}::test_exits",
            cell,
            file=MODULE,
            attempts=[Attempt(ERROR, 0.1, "os._exit during test", "", kind=KIND_EXIT, exit_code=3)],
            properties=props("lost-sharding", cell),
        ),
        TestRecord(
            "suites/models/test_models.py::test_needs_gpu",
            cell,
            file="suites/models/test_models.py",
            attempts=[Attempt(SKIPPED, 0.0, "no GPU on this machine")],
        ),
        TestRecord(
            "suites/models/test_models.py::test_hostile_output",
            cell,
            file="suites/models/test_models.py",
            attempts=[Attempt(FAILED, 0.3, f"AssertionError: {SCRIPT}", f"stack {SCRIPT}")],
            properties={"repro": f"pytest 'x' # {SCRIPT}"},
        ),
    ]
