"""Runtime options and fault switches."""

from __future__ import annotations

import subprocess
import sys

import pytest

import harness.runtime as xr
from harness.runtime import faults


def test_configure_returns_previous_and_restore_puts_it_back() -> None:
    before = xr.options.functionalization, xr.options.param_aliasing
    prev = xr.configure(functionalization=not before[0], param_aliasing=not before[1])
    assert (prev.functionalization, prev.param_aliasing) == before
    assert (xr.options.functionalization, xr.options.param_aliasing) == (not before[0], not before[1])
    xr.config.restore(prev)
    assert (xr.options.functionalization, xr.options.param_aliasing) == before


def test_configure_rejects_unknown_option() -> None:
    with pytest.raises(TypeError, match="functionalisation"):
        xr.configure(functionalisation=False)


def test_every_switch_is_off_by_default() -> None:
    assert set(faults.SWITCHES) == {
        "race-on-handles",
        "double-discovery",
        "unhashable-spec",
        "lost-sharding",
        "aliased-save",
        "wait-gap",
        "partial-sync-donation",
        "host-aliasing",
        "deleted-shard",
        "sharded-read-compiles",
        "expanded-grad-accumulation",
        "stale-on-timeout",
    }
    assert faults.enabled() == frozenset()


def test_inject_nests_and_unwinds() -> None:
    name = faults.UNHASHABLE_SPEC
    with xr.faults.inject(name):
        assert faults.active(name)
        with xr.faults.inject(name):
            assert faults.active(name)
        assert faults.active(name), "the inner exit must not turn off the outer injection"
        with xr.faults.inject(faults.ALIASED_SAVE):
            assert faults.enabled() == {name, faults.ALIASED_SAVE}
        assert faults.enabled() == {name}
    assert not faults.active(name)


def test_inject_unwinds_on_exception() -> None:
    with pytest.raises(KeyError), xr.faults.inject(faults.LOST_SHARDING):
        raise KeyError("boom")
    assert not faults.active(faults.LOST_SHARDING)


def test_unknown_switch_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault switch 'no-such-bug'"):
        with xr.faults.inject("no-such-bug"):
            pass  # pragma: no cover


def test_env_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_FAULTS", "unhashable-spec, aliased-save")
    assert faults.enabled() == {faults.UNHASHABLE_SPEC, faults.ALIASED_SAVE}
    monkeypatch.setenv("HARNESS_FAULTS", "unhashable-spec,bogus")
    with pytest.raises(ValueError, match="bogus"):
        faults.active(faults.UNHASHABLE_SPEC)
    monkeypatch.delenv("HARNESS_FAULTS")
    assert faults.enabled() == frozenset()


@pytest.mark.own_process
def test_env_options_in_a_fresh_process() -> None:
    code = (
        "import harness.runtime as xr\n"
        "from harness.runtime import faults\n"
        "print(xr.options.functionalization, xr.options.param_aliasing, xr.options.num_slices,"
        " sorted(faults.enabled()))\n"
    )
    env = {
        "HARNESS_DISABLE_FUNCTIONALIZATION": "1",
        "HARNESS_PARAM_ALIASING": "0",
        "HARNESS_NUM_SLICES": "2",
        "HARNESS_FAULTS": "lost-sharding",
        "JAX_PLATFORMS": "cpu",
    }
    import os

    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "False False 2 ['lost-sharding']"
