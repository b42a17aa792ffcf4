"""A fuzzer over the command line, the environment and the files a user hands the harness.

Hypothesis draws argument vectors (the real subcommands and flags, read from the parser, with
wrong, empty, huge, unicode and negative values) and environments (declared settings with bad
values, and near misses of their names). Every input carries at least one value that is wrong by
construction (a poison), so every run must stop with exit 2 before it starts anything, name what
is at fault, and print no traceback; a command that starts a process for such an input fails the
test. The files (a matrix file, a JUnit input, an expected-outcomes table, a run-history entry, a
checkpoint) are drawn as truncations, wrong types and unknown keys: each is read with its own
clear error or not at all, never with a traceback.

It runs in-process where it can (``harness.cli.main``) and in a subprocess where it must (an
argument vector as an ``exec`` passes it). Under the CI profile it tries a few hundred inputs in
well under a minute; the explore profile (``--hypothesis-profile=xharness-explore``) scales each
test's examples up.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from harness import cli
from harness import settings as declared

pytestmark = pytest.mark.cell_independent
ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 130}


def _scaled(n: int) -> int:
    """``n`` examples under the CI profile (100 examples by default), more under a wider one."""
    return max(1, n * settings.default.max_examples // 100)


FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


class StartedChild(BaseException):
    """A command started a process for an input it should have refused."""


@contextlib.contextmanager
def _no_children() -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise StartedChild(f"a process was started: {args[0] if args else kwargs.get('args')}")

    saved = subprocess.Popen, subprocess.run
    subprocess.Popen, subprocess.run = refuse, refuse  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        subprocess.Popen, subprocess.run = saved  # type: ignore[misc]


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """``xharness ARGV`` in this process: its exit code and its stderr."""
    err, out = io.StringIO(), io.StringIO()
    with _environment(env), _no_children(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


# ------------------------------------------------------------------------------ what is drawn
#: wrong, empty, huge, unicode and negative values (argv from a shell never holds a NUL)
ODD = st.sampled_from(["", " ", "0", "-1", "-5", "x", "abc", "1e999", "nan", "inf", "-inf", "9" * 40,
                       "ünïcødé", "∂∆", "a,b", ",", "--", "-", "cpu-1", "reference", "3.12", "s1:zz"])
WORDS = st.one_of(ODD, st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                               max_size=6))

#: per command, values wrong by construction for one of its flags (or positionals)
POISONS: dict[str, dict[str, list[str]]] = {
    "run": {"--reruns": ["-1", "x"], "--jobs": ["0", "-3", "x"], "--timeout": ["0", "-1", "nan", "x"],
            "--cells": ["no-such-cell"], "--runtime": ["no-such-runtime"], "--matrix": ["missing/matrix.toml"]},
    "cells": {"--matrix": ["missing/matrix.toml"]},
    "repro": {"scenario": ["no-such-scenario"], "--seed": ["x", "1.5"], "--timeout": ["x"],
              "--explore": ["bogus"], "--runtime": ["no-such-runtime"], "--cell": ["no-such-cell"]},
    "teeth": {"--devices": ["0", "-2", "x"], "--timeout": ["0", "nan", "x"], "--jobs": ["0", "x"],
              "--checks": ["no-such-check"], "--faults": ["no-such-switch"], "--runtime": ["no-such-runtime"]},
    "init": {"--dir": ["missing-dir"], "--python": ["three", "3"]},
    "releases": {"runtime": ["no-such-runtime"], "--timeout": ["x"]},
    "bisect": {"--keep": ["x"], "--timeout": ["x"]},
    "bench": {"case": ["no-such-case"], "--steps": ["x"], "--seeds": ["x"]},
    "list": {"kind": ["no-such-kind"]},
}
#: the other flags each command takes, drawn with any value (from the parser itself)
_PARSER = cli.build_parser()


def _flags(command: str) -> list[tuple[str, bool]]:
    """``(flag, takes_a_value)`` of a subcommand, as its parser declares them."""
    sub = next(a for a in _PARSER._actions if a.__class__.__name__ == "_SubParsersAction")  # noqa: SLF001
    found = []
    for action in sub.choices[command]._actions:  # noqa: SLF001
        if action.option_strings and action.dest != "help":
            found.append((action.option_strings[-1], action.nargs != 0))
    return found


@st.composite
def poisoned_argv(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """An argument vector with at least one poison; returns it and the names an error may cite."""
    command = draw(st.sampled_from(sorted(POISONS)))
    poisons = POISONS[command]
    chosen = draw(st.lists(st.sampled_from(sorted(poisons)), min_size=1, max_size=2, unique=True))
    flags = [f for f in _flags(command) if f[0] not in poisons]
    extra = draw(st.lists(st.sampled_from(flags), max_size=3, unique=True)) if flags else []
    argv, cited = [command], []
    for name in chosen:
        value = draw(st.sampled_from(poisons[name]))
        cited += [name, value]
        if not name.startswith("-"):
            argv.append(value)
        else:
            argv += [name, value]
    if command in ("repro", "bisect") and "scenario" not in chosen:
        scenario = draw(st.sampled_from(["aliased-save", "wait-gap", "no-such-scenario"]))
        argv.insert(1, scenario)
        cited.append(scenario)
    if command == "releases" and "runtime" not in chosen:
        argv[1:1] = [draw(st.sampled_from(["torch_xla", "jax"])), "not-a-version"]
        cited.append("not-a-version")
    elif command == "releases":
        argv.append("2.9.0")
    if command == "bisect":
        argv += ["--runtime", "torch_xla"]
        cited.append("--runtime")
    for flag, takes in extra:
        argv += [flag, draw(WORDS)] if takes else [flag]
        cited.append(flag)
    return argv, cited


#: declared settings with values they do not accept
BAD_SETTINGS = st.sampled_from([
    ("HARNESS_MATMUL_PRECISION", "bogus"), ("HARNESS_WAIT_TIMEOUT", "abc"), ("HARNESS_WAIT_TIMEOUT", "-5"),
    ("HARNESS_WAIT_TIMEOUT", "nan"), ("HARNESS_COMPLETION_DELAY", "x"), ("HARNESS_EXECUTION_DELAY", "-1"),
    ("JAX_NUM_CPU_DEVICES", "abc"), ("JAX_NUM_CPU_DEVICES", "0"), ("HARNESS_RUNTIME", "nope"),
    ("HARNESS_CRASH_MODE", "weird"), ("HARNESS_FAULTS", "nonsense"), ("HARNESS_NUM_SLICES", "1.5"),
    ("HARNESS_PARAM_ALIASING", "maybe"), ("XHARNESS_COMPILE_CACHE_MAX_MB", "-3"), ("HARNESS_PROCESS_ID", "-1"),
    ("HARNESS_INIT_TIMEOUT", "∞"), ("XHARNESS_PYTHON_FROM", "ubuntu"),
])


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory with no project configuration: nothing a fuzzed path names may touch the tree."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XHARNESS_PROJECT", raising=False)
    for name in declared.ENVIRONMENT:
        if name.startswith("HARNESS_") and name != "HARNESS_CELL":
            monkeypatch.delenv(name, raising=False)
    return tmp_path


# ------------------------------------------------------------------------------ the properties
@pytest.mark.jax_independent
@settings(max_examples=_scaled(150), **FUZZ)
@given(drawn=poisoned_argv(), bad_env=st.lists(BAD_SETTINGS, max_size=1))
def test_a_poisoned_command_line_is_a_named_usage_error(workdir: Path, drawn: tuple[list[str], list[str]],
                                                        bad_env: list[tuple[str, str]]) -> None:
    argv, cited = drawn
    env = dict(bad_env)
    note(f"argv={argv!r} env={env!r}")
    code, err = _run(argv, env)
    assert "Traceback (most recent call last)" not in err, err
    assert code == 2, (code, err)
    names = [c for c in [*cited, *env] if len(c.strip()) > 1]
    assert any(n in err for n in names), f"exit 2 names none of {names}: {err}"


@pytest.mark.jax_independent
@settings(max_examples=_scaled(60), **FUZZ)
@given(command=st.sampled_from([["list"], ["list", "invariants"], ["config"], ["cells"], ["repro", "aliased-save"],
                                ["teeth", "--checks", "coverage"], ["run", "--cells", "cpu-1"], ["init"]]),
       bad=st.lists(BAD_SETTINGS, min_size=1, max_size=3, unique_by=lambda s: s[0]),
       near=st.lists(st.sampled_from(["HARNES_FAULTS", "HARNESS_WAIT_TIMOUT", "XHARNESS_PROJEKT"]), max_size=1))
def test_a_bad_setting_stops_every_command_before_it_starts(workdir: Path, command: list[str],
                                                            bad: list[tuple[str, str]], near: list[str]) -> None:
    env = {**dict(bad), **dict.fromkeys(near, "1")}
    code, err = _run(command, env)
    assert "Traceback (most recent call last)" not in err, err
    assert code == 2, (code, err)
    assert any(f"{name}=" in err and "(from the environment)" in err for name, _ in bad), err
    assert not (workdir / "reports").exists() and not (workdir / "xharness.toml").exists()


# ------------------------------------------------------------------------------ files
def _mutations(text: str) -> st.SearchStrategy[str]:
    """``text`` cut short, with a line swapped for a wrong type or an unknown key, or both."""
    lines = text.splitlines(keepends=True)

    @st.composite
    def mutate(draw: st.DrawFn) -> str:
        out = list(lines)
        for _ in range(draw(st.integers(0, 2))):
            i = draw(st.integers(0, max(0, len(out) - 1)))
            out[i] = draw(st.sampled_from([
                'devices = "four"\n', "timeout = -1\n", "unknown_key = 1\n", "paths = 3\n", "[cells.\n",
                'backend = "quantum"\n', 'runtime = { name = "nope" }\n', '<testcase name="x" time="abc"/>\n',
                '<testsuite tests="lots">\n', "releases = 3\n", 'outcome = "maybe"\n', "", "\x01\n",
                'env = { HARNESS_WAIT_TIMEOUT = "soon" }\n',
            ]))
        joined = "".join(out)
        cut = draw(st.integers(0, len(joined)))
        return joined[:cut] if draw(st.booleans()) else joined

    return mutate()


MATRIX_TEXT = (ROOT / "ci" / "matrix.toml").read_text(encoding="utf-8")
JUNIT_TEXT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites tests="2" failures="1" errors="0" time="0.5">
<testsuite name="cpu-1" tests="2" failures="1" errors="0" skipped="0" time="0.5">
<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" line="3" time="0.1"/>
<testcase classname="tests.test_a" name="test_bad" file="tests/test_a.py" line="6" time="0.4">
<failure message="assert 1 == 2">details</failure>
</testcase>
</testsuite>
</testsuites>
"""
EXPECTED_TEXT = (ROOT / "harness" / "scenarios" / "expected.toml").read_text(encoding="utf-8")


@pytest.mark.jax_independent
@settings(max_examples=_scaled(40), **FUZZ)
@given(text=_mutations(MATRIX_TEXT))
def test_a_damaged_matrix_file_is_named(workdir: Path, text: str) -> None:
    (workdir / "ci").mkdir(exist_ok=True)
    path = workdir / "ci" / "matrix.toml"
    path.write_text(text, encoding="utf-8")
    code, err = _run(["cells", "--matrix", str(path), "--json"], {})
    assert "Traceback (most recent call last)" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert str(path) in err, err


@pytest.mark.jax_independent
@settings(max_examples=_scaled(40), **FUZZ)
@given(text=_mutations(JUNIT_TEXT), command=st.sampled_from(["merge", "summary", "html"]))
def test_a_damaged_junit_input_is_named(workdir: Path, text: str, command: str) -> None:
    path = workdir / "in.xml"
    path.write_text(text, encoding="utf-8")
    out = workdir / "out" / ("index.html" if command == "html" else "out.xml")
    shutil.rmtree(workdir / "out", ignore_errors=True)
    code, err = _run(["report", command, str(path), "--out", str(out)], {})
    assert "Traceback (most recent call last)" not in err, err
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        assert "in.xml" in err, err
        assert not out.exists()  # a refused input writes nothing


@pytest.mark.jax_independent
@settings(max_examples=_scaled(40), **FUZZ)
@given(text=_mutations(EXPECTED_TEXT))
def test_a_damaged_expected_table_raises_its_own_error(workdir: Path, text: str) -> None:
    from harness.scenarios import expected

    path = workdir / "expected.toml"
    path.write_text(text, encoding="utf-8")
    try:
        expected.load(path)
    except expected.ExpectedTableError as exc:
        assert str(path) in str(exc)


@pytest.mark.jax_independent
@settings(max_examples=_scaled(30), **FUZZ)
@given(cut=st.floats(0, 1), junk=st.sampled_from(["", "{", "[]", '{"run": 3}', "\xff\xfe", "null"]))
def test_a_damaged_history_entry_is_left_out_with_a_warning(workdir: Path, cut: float, junk: str) -> None:
    junit = workdir / "junit.xml"
    junit.write_text(JUNIT_TEXT, encoding="utf-8")
    history = workdir / "history"
    shutil.rmtree(history, ignore_errors=True)
    code, err = _run(["report", "html", str(junit), "--out", str(workdir / "a" / "index.html"),
                      "--history", str(history)], {})
    assert code in (0, 1), err
    (entry,) = sorted(history.glob("*.json"))
    text = entry.read_text(encoding="utf-8")
    entry.write_text(text[: int(len(text) * cut)] + junk, encoding="utf-8")
    code, err = _run(["report", "html", str(junit), "--out", str(workdir / "b" / "index.html"),
                      "--history", str(history)], {})
    assert "Traceback (most recent call last)" not in err, err
    assert code in (0, 1), (code, err)
    if "history" in err:  # a damaged entry is named, and the report is written without it
        assert entry.name in err, err
    assert (workdir / "b" / "index.html").is_file()


@settings(max_examples=_scaled(30), **FUZZ)
@given(cut=st.integers(0, 10_000), flip=st.integers(-1, 10_000))
def test_a_checkpoint_cut_short_or_flipped_raises_checkpoint_error(tmp_path: Path, cut: int, flip: int) -> None:
    import numpy as np

    import harness.runtime as xr
    from harness.runtime.errors import CheckpointError

    path = tmp_path / "ckpt.bin"
    xr.save({"w": xr.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))}, str(path))
    data = bytearray(path.read_bytes())
    damaged = data[: cut % (len(data) + 1)]
    if 0 <= flip < len(damaged):
        damaged[flip] ^= 0x5A
    path.write_bytes(bytes(damaged))
    if bytes(damaged) == bytes(data):
        return
    with pytest.raises(CheckpointError, match=str(path)):
        xr.load(str(path))


# ------------------------------------------------------------------------------ in a subprocess
@pytest.mark.jax_independent
@pytest.mark.own_process
@settings(max_examples=_scaled(6), **FUZZ)
@given(drawn=poisoned_argv(), bad_env=st.lists(BAD_SETTINGS, max_size=1))
def test_a_poisoned_command_line_as_exec_passes_it(workdir: Path, drawn: tuple[list[str], list[str]],
                                                   bad_env: list[tuple[str, str]]) -> None:
    """The same property through a real process: argv as bytes from ``exec``, stderr as printed."""
    argv, _ = drawn
    env = {k: v for k, v in os.environ.items() if k != "XHARNESS_PROJECT"}
    env.update(bad_env)
    done = subprocess.run([sys.executable, "-m", "harness.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=workdir, timeout=120)
    assert "Traceback (most recent call last)" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
