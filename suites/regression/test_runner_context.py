"""The runner and ``xharness repro`` around the scenarios: contexts, fault switches, hangs."""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest
from synthetic import synthetic_scenario

import harness.runtime as xr
from harness import stack_dumps
from harness.cli import main
from harness.commands import catalog as commands
from harness.scenarios import runner
from harness.scenarios.base import Context, InvariantViolation, Needs, Scenario

FAULT = xr.faults.UNHASHABLE_SPEC


def _scenario(**variants) -> Scenario:  # noqa: ANN003
    return synthetic_scenario(variants, fault=FAULT)


@pytest.fixture
def no_env_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in runner.REPLAY_ENV + runner.RUNTIME_ENV:
        monkeypatch.delenv(name, raising=False)


# ---------------------------------------------------------------- one fresh context per variant


def test_each_variant_gets_a_fresh_context(no_env_switches: None) -> None:
    seen: dict[str, np.ndarray] = {}
    contexts: list[Context] = []

    def record(name: str):  # noqa: ANN202
        def variant(ctx: Context) -> None:
            contexts.append(ctx)
            seen[name] = ctx.normal(4)

        return variant

    result = runner.run(_scenario(first=record("first"), second=record("second")), False, seed=7, devices=1)
    assert result.outcome == runner.PASSED
    np.testing.assert_array_equal(seen["first"], seen["second"])
    assert contexts[0] is not contexts[1]
    alone: dict[str, np.ndarray] = {}
    runner.run(_scenario(second=lambda ctx: alone.setdefault("second", ctx.normal(4))), False, seed=7, devices=1)
    np.testing.assert_array_equal(alone["second"], seen["second"])
    assert all(c.seed == 7 for c in contexts)


# ---------------------------------------------------------------- HARNESS_FAULTS


def test_unknown_switch_in_harness_faults_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_FAULTS", "aliased-save,no-such-switch")

    def no_child(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("no child may start")

    monkeypatch.setattr(commands.subprocess, "run", no_child)
    assert main(["repro", "aliased-save"]) == 2
    err = capsys.readouterr().err
    assert "HARNESS_FAULTS" in err and "'no-such-switch'" in err and "aliased-save" in err


def broken_only_when_switched_on(ctx: Context) -> None:
    if xr.faults.active(FAULT):
        raise InvariantViolation("broken by the switch")


def test_forced_switch_in_fixed_mode_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_CRASH_MODE", raising=False)
    monkeypatch.setenv("HARNESS_FAULTS", FAULT)
    result = runner.run(_scenario(only=broken_only_when_switched_on), False, seed=0, devices=1)
    assert result.outcome == runner.FAILED
    assert "forced on by HARNESS_FAULTS" in result.note and FAULT in result.note
    assert "forced on by HARNESS_FAULTS" in result.variants[0].error
    assert result.to_json()["note"] == result.note
    assert result.repro.startswith(f"HARNESS_FAULTS={FAULT} ")


def test_no_note_without_the_scenario_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_FAULTS", xr.faults.ALIASED_SAVE)
    result = runner.run(_scenario(only=broken_only_when_switched_on), False, seed=0, devices=1)
    assert result.outcome == runner.PASSED and result.note == ""
    monkeypatch.setenv("HARNESS_FAULTS", FAULT)
    injected = runner.run(_scenario(only=broken_only_when_switched_on), True, seed=0, devices=1)
    assert injected.outcome == runner.REPRODUCED and injected.note == ""


# ---------------------------------------------------------------- needs


def test_needs_has_no_unchecked_fields() -> None:
    """Every field of Needs is one that ``unmet`` checks, but ``why``, the text that goes with an
    unmet need."""
    checked = {"devices", "device_multiple", "processes", "max_processes", "backends"}
    assert {f.name for f in dataclasses.fields(Needs)} == checked | {"why"}
    assert Needs(devices=2).unmet(1) and Needs(device_multiple=2).unmet(3)
    assert Needs(processes=2).unmet(1, 1) and Needs(backends=("tpu",)).unmet(1, 1, "cpu")
    assert Needs(max_processes=1).unmet(8, 2) and not Needs(max_processes=1).unmet(8, 1)


# ---------------------------------------------------------------- hung children


@pytest.mark.parametrize(("timeout", "delay"), [(600, 590), (60, 57), (4, 2), (1, 0.5)])
def test_stack_dump_comes_before_the_limit(timeout: float, delay: float) -> None:
    assert stack_dumps.stack_dump_delay(timeout) == pytest.approx(delay)


def test_hung_child_stderr_is_decoded(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HARNESS_FAULTS", raising=False)
    calls = []

    def hang(cmd, **kwargs):  # noqa: ANN001, ANN003, ANN202
        calls.append(cmd)
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"], output=b"", stderr=b"Thread 0x1 (most recent call first):\n  File \"x.py\", line 3 in spin\n")

    monkeypatch.setattr(commands.subprocess, "run", hang)
    assert main(["repro", "aliased-save", "--timeout", "7"]) == 1
    captured = capsys.readouterr()
    assert "hung: no result within 7 s" in captured.out
    assert 'File "x.py", line 3 in spin' in captured.err
    assert "b'" not in captured.err
    assert calls[0][calls[0].index("--timeout") + 1] == "7.0"
