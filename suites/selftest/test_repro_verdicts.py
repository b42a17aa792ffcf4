"""What ``xharness repro`` makes of a child that ends without a result (the child is faked: the
verdict is the parent's reading of how the process ended)."""

from __future__ import annotations

import json
import subprocess

import pytest

from harness.cli import main

pytestmark = pytest.mark.jax_independent  # the parent's reading of an exit status and its stderr

#: what faulthandler wrote when its watchdog thread crashed a child it was dumping, seen in a cold
#: matrix on a loaded machine: the child was still importing 4 s into a 6-s limit
DUMP_CUT_SHORT = 'Timeout (0:00:04)!\nThread 0x00007fcbf9dd5b80 (most recent call first):\n  File "<frozen posixpath>"\n'


def _repro(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], returncode: int, stderr: str,
           *extra: str) -> tuple[int, dict]:
    def child(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, returncode, "", stderr)

    monkeypatch.setattr(subprocess, "run", child)
    code = main(["repro", "lost-sharding", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def test_a_child_that_dies_inside_its_own_stack_dump_is_hung_not_crashed(monkeypatch, capsys) -> None:
    code, out = _repro(monkeypatch, capsys, -11, DUMP_CUT_SHORT, "--timeout", "6")
    assert code == 1 and out["outcome"] == "failed"
    assert out["signature"] == "hung: no result within 6 s"
    assert "no result 4 s in" in out["error"] and "died on SIGSEGV inside that dump" in out["error"]


#: what faulthandler writes when the process itself crashes (``faulthandler.enable``): a crash of
#: the run, whatever its time limit
OWN_CRASH = ('Fatal Python error: Segmentation fault\n\nThread 0x00007fcbf9dd5b80 (most recent call first):\n'
             '  File "harness/runtime/executor.py", line 140 in _dispatch\n')


@pytest.mark.parametrize("stderr", ["", OWN_CRASH, DUMP_CUT_SHORT + OWN_CRASH],
                         ids=["nothing-written", "its-own-crash", "its-own-crash-after-a-whole-dump"])
def test_any_other_death_by_signal_is_named_by_its_signal(monkeypatch, capsys, stderr: str) -> None:
    code, out = _repro(monkeypatch, capsys, -11, stderr, "--timeout", "6")
    assert code == 1 and out["outcome"] == "failed"
    assert out["signature"] == "signal SIGSEGV" and out["error"] == "the process died on SIGSEGV"
