"""The fork server that PyTorch/XLA's triggers run from (``harness.scenarios.warm_fork``): each run
must be the fresh process a new interpreter would be, in every way a trigger can tell: its own
arguments, environment, output, session and death, and nothing left of the run before it."""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.scenarios import warm_fork

pytestmark = pytest.mark.jax_independent

ENTRIES = '''
import json, os, signal, subprocess, sys, time

LEFT = []


def report(argv):
    print(json.dumps({"argv": argv, "env": dict(os.environ), "pid": os.getpid(), "sid": os.getsid(0),
                      "left": list(LEFT), "stdin": sys.stdin.read()}))
    print("on stderr", file=sys.stderr)
    LEFT.append(argv[0])
    os.environ["SET_BY_A_RUN"] = "1"
    return int(argv[1])


def abort(argv):
    print("before the abort", file=sys.stderr)
    os.kill(os.getpid(), signal.SIGABRT)


def hang(argv):
    child = subprocess.Popen(["sleep", "300"])
    print(child.pid, flush=True)
    time.sleep(300)


def raise_(argv):
    raise ValueError("a run that raises")


def kill_the_server(argv):
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(1)
'''


@pytest.fixture
def entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The module of the runs' entries, importable by a server started now."""
    (tmp_path / "warm_entries.py").write_text(textwrap.dedent(ENTRIES))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    warm_fork.stop()
    yield "warm_entries"
    warm_fork.stop()


def _json(text: str) -> dict:
    return json.loads(text.splitlines()[0])


def test_a_run_gets_its_arguments_and_exactly_its_environment_and_says_its_exit(entries: str) -> None:
    done = warm_fork.run(f"{entries}:report", ["first", "3"], {"ONLY": "this"}, timeout=60)
    assert done is not None and done.returncode == 3
    seen = _json(done.stdout)
    assert seen["argv"] == ["first", "3"]
    assert seen["env"] == {"ONLY": "this"}
    assert seen["stdin"] == ""  # no stdin of the server's
    assert seen["sid"] == seen["pid"]  # a session of its own: its group is killed with it
    assert done.stderr == "on stderr\n"


def test_each_run_is_a_fresh_process_with_nothing_of_the_one_before(entries: str) -> None:
    first = warm_fork.run(f"{entries}:report", ["first", "0"], {"A": "1"}, timeout=60)
    second = warm_fork.run(f"{entries}:report", ["second", "0"], {"A": "1"}, timeout=60)
    assert first is not None and second is not None
    one, two = _json(first.stdout), _json(second.stdout)
    assert one["pid"] != two["pid"]
    assert two["left"] == []  # the first run's module state died with it
    assert "SET_BY_A_RUN" not in two["env"]


def test_a_run_killed_by_a_signal_is_that_signal_and_keeps_what_it_wrote(entries: str) -> None:
    done = warm_fork.run(f"{entries}:abort", [], {}, timeout=60)
    assert done is not None and done.returncode == -6
    assert "before the abort" in done.stderr
    again = warm_fork.run(f"{entries}:report", ["after", "0"], {}, timeout=60)  # the server lives on
    assert again is not None and again.returncode == 0


def test_a_run_that_raises_exits_1_with_its_traceback(entries: str) -> None:
    done = warm_fork.run(f"{entries}:raise_", [], {}, timeout=60)
    assert done is not None and done.returncode == 1
    assert "ValueError: a run that raises" in done.stderr


def test_a_hung_run_is_killed_with_what_it_started(entries: str) -> None:
    started = time.monotonic()
    done = warm_fork.run(f"{entries}:hang", [], {"PATH": os.environ["PATH"]}, timeout=3)
    assert done is not None and done.returncode is None
    assert time.monotonic() - started < 60
    grandchild = int(done.stdout.split()[0])
    for _ in range(100):  # killed with the run's group; init reaps it
        stat = Path(f"/proc/{grandchild}/stat")
        if not stat.exists() or stat.read_text().split(") ", 1)[1].startswith("Z"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the hung run's own child {grandchild} outlived it")


def test_a_server_that_dies_under_a_run_is_no_verdict_and_is_replaced(entries: str) -> None:
    assert warm_fork.run(f"{entries}:kill_the_server", [], {}, timeout=60) is None  # the caller runs it itself
    done = warm_fork.run(f"{entries}:report", ["next", "0"], {}, timeout=60)
    assert done is not None and done.returncode == 0
