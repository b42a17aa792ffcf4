"""Failure paths: every seam fails where it is named, and an operation failing there leaves the
runtime as it was (``harness.properties.failures``).

The invariant's own hypothesis test runs here, with the direct proofs it rests on: each seam is
reached by the operation named for it and raises there (the ``execute`` seam on the executor
thread, its error reaching the reader); an unarmed seam does nothing; a seam name nobody
registered is refused; and the check itself fails on a runtime hand-broken on a failure path (a
cache entry or the skip flag left behind, a lock kept, an error swallowed or let out later).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness.runtime as xr
from harness.files import atomic_writer
from harness.properties import FAILURE_SAFETY, failures
from harness.properties.failures import Op, check_failure_safety
from harness.runtime import kernels, plan_cache, seams, step, topology

test_failure_safety = FAILURE_SAFETY.hypothesis_test()


@pytest.fixture
def directory() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="xh-seams-") as name:
        yield Path(name)


def _values() -> xr.Tensor:
    return xr.tensor(np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4))


def _fresh_kernel() -> Callable[..., Any]:
    def kernel(q: Any, k: Any, v: Any) -> Any:
        return kernels.attention_kernel(q, k, v)

    return kernel


# ------------------------------------------------------------------------------ each seam fires


def _save(directory: Path) -> None:
    xr.save({"w": _values()}, directory / "w.ckpt")


def _report_write(directory: Path) -> None:
    with atomic_writer(directory / "report.xml") as f:  # a report goes through the same writer
        f.write(b"<testsuites/>")


def _step(directory: Path) -> None:
    plan_cache.clear_cache()  # a program compiled before would reach no lowering and no compile
    t = _values()
    u = t.exp() * 2.0 - 1.0
    xr.mark_step()
    xr.wait_device_ops()
    u.numpy()


def _kernel(directory: Path) -> None:
    q = _values()
    kernels.trace_kernel(_fresh_kernel(), q, q, q)


def _discover(directory: Path) -> None:
    topology.reset()
    xr.discover()


#: the operation that reaches each seam, and which of its reaches to fail
DRIVERS: dict[str, tuple[Callable[[Path], None], int]] = {
    "write": (_save, 2),
    "rename": (_save, 1),
    "lower": (_step, 1),
    "compile": (_step, 1),
    "kernel": (_kernel, 1),
    "execute": (_step, 1),
    "discover": (_discover, 1),
}


def test_every_seam_has_a_driver() -> None:
    assert set(DRIVERS) == set(seams.SEAMS)


@pytest.mark.parametrize("seam", list(DRIVERS))
def test_each_seam_fires_where_named(seam: str, directory: Path) -> None:
    drive, nth = DRIVERS[seam]
    with pytest.raises(seams.InjectedFailure) as raised, seams.failing(seam, nth) as armed:
        drive(directory)
    assert raised.value is armed.fired and raised.value.seam == seam and raised.value.nth == nth
    assert armed.reached[seam] == nth
    if seam == "execute":  # on the executor thread, and reported to the caller by the wait
        assert raised.value.thread == "harness-executor"
    else:
        assert raised.value.thread == "MainThread"
    if seam in ("write", "rename"):
        assert list(directory.iterdir()) == [], "a failed save left a file behind"
    drive(directory)  # unarmed, the same operation works


def test_the_flush_of_atomic_writer_is_a_write_seam(directory: Path) -> None:
    with pytest.raises(seams.InjectedFailure), seams.failing("write"):
        _report_write(directory)
    assert list(directory.iterdir()) == []


def test_an_execution_failure_reaches_the_reader(directory: Path) -> None:
    t = _values()
    u = t * 3.0
    with seams.failing("execute") as armed:
        xr.mark_step()  # returns before the execution: the values are handed out
        with pytest.raises(seams.InjectedFailure) as raised:
            u.numpy()
    assert raised.value is armed.fired
    with pytest.raises(seams.InjectedFailure):
        xr.wait_device_ops()  # reported once more to the wait, then not again
    xr.wait_device_ops()
    np.testing.assert_array_equal(t.numpy(), np.arange(8, dtype=np.float32).reshape(1, 1, 2, 4))


# ------------------------------------------------------------------------------ unarmed and unknown


def test_an_unarmed_seam_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing armed, ``reach`` is one test of an empty dict: the counting path is never
    entered (it would raise here), and an arming made later has seen nothing."""

    def entered(seam: str) -> None:
        raise AssertionError(f"an unarmed reach of {seam!r} did work")

    monkeypatch.setattr(seams, "_reached", entered)
    assert seams.armed() == ()
    for seam in seams.SEAMS:
        seams.reach(seam)
    _step(Path("."))
    monkeypatch.undo()
    with seams.failing("execute") as armed:
        assert armed.reached == {} and armed.fired is None


def test_an_arming_the_block_never_reaches_that_often_fires_nothing() -> None:
    with seams.failing("discover", nth=2) as armed:
        _discover(Path("."))
    assert armed.fired is None and armed.reached == {"discover": 1}


@pytest.mark.parametrize("call", ["failing", "reach"])
def test_unknown_seams_are_refused(call: str) -> None:
    with pytest.raises(ValueError, match=r"unknown seam 'compiel'; known seams: write, rename, lower"):
        if call == "failing":
            with seams.failing("compiel"):
                pass
        else:
            with seams.failing("compile"):  # an armed process checks every name it is given
                seams.reach("compiel")


def test_bad_armings_are_refused() -> None:
    with pytest.raises(ValueError, match="counts reaches from 1"), seams.failing("write", nth=0):
        pass
    with seams.failing("write"):
        with pytest.raises(ValueError, match="already armed"), seams.failing("write", nth=2):
            pass
    assert seams.armed() == ()


# ------------------------------------------------------------------------------ the runtime's fixes


def test_a_failed_discovery_is_not_counted() -> None:
    """Found by the invariant: discovery counted itself on entry, so a process whose first
    discovery failed read ``discovery_count() == 2`` after the retry, a double discovery."""
    _discover(Path("."))
    with pytest.raises(seams.InjectedFailure), seams.failing("discover"):
        _discover(Path("."))
    assert xr.discovery_count() == 0
    xr.discover()
    assert xr.discovery_count() == 1


def test_a_failed_compile_is_not_noted_as_compiled() -> None:
    """Found by the invariant: the compile note was taken before compiling, so the retry of a
    program whose compile failed was explained as "the same program as a recent one"."""
    plan_cache.clear_cache()
    t = _values()
    with pytest.raises(seams.InjectedFailure), seams.failing("compile"):
        (t.tanh() + 1.0).numpy()
    assert xr.last_compile_reason() is None
    (t.tanh() + 1.0).numpy()
    reason = xr.last_compile_reason()
    assert reason is not None and reason.startswith("a new program"), reason


# ------------------------------------------------------------------------------ the check has teeth


def _placeholder_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    real = plan_cache.derive

    def claimed_first(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setitem(plan_cache._cache, ("claimed",), None)  # a slot claimed before compiling
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_cache, "derive", claimed_first)


def _flag_left_set(monkeypatch: pytest.MonkeyPatch) -> None:
    real = kernels.trace_kernel

    def unguarded(*args: Any) -> Any:
        monkeypatch.setenv(topology.SKIP_DISCOVERY_FLAG, "true")  # set, and restored only on success
        result = real(*args)
        os.environ.pop(topology.SKIP_DISCOVERY_FLAG)
        return result

    monkeypatch.setattr(kernels, "trace_kernel", unguarded)


def _lock_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    real = failures.mark_step

    def by_hand(wait: bool = False) -> None:
        step._sync_lock.acquire()
        real(wait)
        step._sync_lock.release()

    monkeypatch.setattr(failures, "mark_step", by_hand)


def _swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = failures.save

    def quiet(*args: Any) -> None:
        try:
            real(*args)
        except seams.InjectedFailure:
            pass

    monkeypatch.setattr(failures, "save", quiet)


def _escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    real_save, real_step = failures.save, failures.mark_step
    kept: list[BaseException] = []

    def save(*args: Any) -> None:
        try:
            real_save(*args)
        except seams.InjectedFailure as exc:
            kept.append(exc)  # raised here, and kept to be raised again by the next step
            raise

    def mark_step(wait: bool = False) -> None:
        if kept:
            raise kept.pop()
        real_step(wait)

    monkeypatch.setattr(failures, "save", save)
    monkeypatch.setattr(failures, "mark_step", mark_step)


BROKEN: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], list[Op], str, int, str]] = {
    "placeholder-plan": (_placeholder_plan, [Op("derive"), Op("step")], "compile", 1, "the plan cache gained 1"),
    "flag-left-set": (_flag_left_set, [Op("kernel")], "kernel", 1, "the skip-discovery flag is 'true'"),
    "lock-kept": (_lock_kept, [Op("derive"), Op("step", 1)], "execute", 1, "locks still held: sync lock"),
    "swallowed": (_swallowed, [Op("save")], "rename", 1, "the failure was swallowed"),
    "escapes": (_escapes, [Op("save")], "write", 1, "escaped to the check after it"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_the_check_fails_on_a_broken_failure_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    breaks, program, seam, nth, message = BROKEN[name]
    check_failure_safety(program, seam, nth)  # the runtime as it is keeps the invariant
    breaks(monkeypatch)
    try:
        with pytest.raises(AssertionError, match=message):
            check_failure_safety(program, seam, nth)
    finally:
        if name == "lock-kept":  # released by the thread that kept it, for the tests after this one
            while step._sync_lock._is_owned():
                step._sync_lock.release()
