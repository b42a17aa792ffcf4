"""The planned pairs, each in its own child process, a few at a time.

Each child's output goes to ``<out>/logs/teeth/<check>--<fault>.log`` and its result to a JSON file
next to it. A child that leaves no result still yields one for its pair: killed by a signal, an
exit without a result, or a hang past ``--timeout`` (the child dumps its thread stacks shortly
before the limit, then it and anything it started are killed) all become ``error`` results with
the signal or exit code and the tail of the output. The children inherit the caller's environment
except what would change the pair under test: ``HARNESS_FAULTS`` (each pair has exactly its one
switch on), the variables a matrix cell owns (an enclosing cell's device count or runtime options)
and ``XLA_FLAGS``' forced device count; ``JAX_NUM_CPU_DEVICES`` is ``--devices`` and
``HARNESS_CRASH_MODE`` is ``raise``, so a reproduced bug is an exception the child can judge.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from harness import stack_dumps
from harness.report.records import KIND_EXIT, KIND_SIGNAL, KIND_TIMEOUT
from harness.teeth.checks import INVARIANT
from harness.teeth.matrix import ERROR, Pair, PairResult

#: lines of a dead child's output kept with its result (the end is where a crash shows)
TAIL_LINES = 60
_POLL = 0.1
_FORCED_COUNT = re.compile(r"\s*--xla_force_host_platform_device_count=\S*")
_SCRUBBED = ("HARNESS_FAULTS", "HARNESS_CRASH_MODE", "HARNESS_EXECUTION_DELAY")


@dataclass
class LaunchSettings:
    devices: int
    timeout: float
    jobs: int
    logs: Path
    seed: int = 0
    runtime: str = "reference"  # the runtime under test in every child (``--runtime``)


def child_environment(devices: int, runtime: str = "reference") -> dict[str, str]:
    """The caller's environment made into a clean kill-matrix process (module docstring)."""
    from harness.matrix.config import OWNED_ENV

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in OWNED_ENV and k not in _SCRUBBED and not k.startswith("PYTEST_XDIST")
    }
    flags = _FORCED_COUNT.sub("", env.get("XLA_FLAGS", "")).strip()
    if flags:
        env["XLA_FLAGS"] = flags
    else:
        env.pop("XLA_FLAGS", None)
    env.update(
        JAX_PLATFORMS="cpu",
        JAX_NUM_CPU_DEVICES=str(devices),
        HARNESS_CRASH_MODE="raise",
        PYTHONUNBUFFERED="1",
        HARNESS_RUNTIME=runtime,
    )
    return env


def _file_stem(pair: Pair) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{pair.check.id}--{pair.fault}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """The child and whatever it started (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    kept = text.rstrip().splitlines()
    if len(kept) > lines:
        kept = [f"[... {len(kept) - lines} earlier lines ...]", *kept[-lines:]]
    return "\n".join(kept)


def run_child(pair: Pair, settings: LaunchSettings, stop: threading.Event) -> PairResult | None:
    """Run one pair in a fresh process; None when ``stop`` was set before it finished."""
    from harness.matrix.multiproc import describe_exit

    stem = _file_stem(pair)
    log, result_file = settings.logs / f"{stem}.log", settings.logs / f"{stem}.result.json"
    result_file.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "harness.teeth.child", pair.check.id, pair.fault]
    cmd += ["--result", str(result_file), "--timeout", f"{settings.timeout:g}"]
    cmd += ["--seed", str(settings.seed)]
    if pair.declared:
        cmd.append("--declared")
    if pair.check.origin:  # the user's module that defines this check, and no other
        cmd += ["--extra-checks", pair.check.origin]
    env = child_environment(settings.devices, settings.runtime)
    started = time.monotonic()
    timed_out = False
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # a hang is killed with everything it started
        )
        try:
            while proc.poll() is None:
                if stop.wait(_POLL):
                    _kill(proc)
                    return None
                if time.monotonic() - started > settings.timeout:
                    timed_out = True
                    _kill(proc)
        finally:
            if proc.poll() is None:
                _kill(proc)
    wall = round(time.monotonic() - started, 3)
    if result_file.is_file() and not timed_out:
        result = PairResult.from_dict(json.loads(result_file.read_text(encoding="utf-8")))
        result_file.unlink(missing_ok=True)
        result.log = str(log)
        return result
    output = log.read_text(encoding="utf-8", errors="replace")
    code = proc.returncode
    if code is not None and code < 0 and not timed_out and stack_dumps.died_in_timed_dump(output):
        return PairResult.of(  # the signal is the dump's (harness.stack_dumps): the check hung
            pair, ERROR, seconds=wall, error_kind=KIND_TIMEOUT, details=_tail(output, 400),
            error=stack_dumps.hung_in_dump(stack_dumps.stack_dump_delay(settings.timeout),
                                           f"the check's process {describe_exit(code)}"),
            log=str(log),
        )
    if timed_out:
        return PairResult.of(
            pair, ERROR, seconds=wall, error_kind=KIND_TIMEOUT, details=_tail(output, 400),
            error=f"no result within {settings.timeout:g} s: the check's process was killed "
            "(its thread stacks, dumped shortly before, are in its output)",
            log=str(log),
        )
    return PairResult.of(
        pair,
        ERROR,
        seconds=wall,
        error=f"the check's process {describe_exit(code)} before it finished",
        error_kind=KIND_SIGNAL if code < 0 else KIND_EXIT,
        signal=-code if code < 0 else None,
        exit_code=code if code >= 0 else None,
        details=_tail(output),
        log=str(log),
    )


def _launch_order(pairs: Sequence[Pair]) -> list[int]:
    """Invariants first, the last-registered first (the searches that take longest, such as the
    state machine's, sit at the end of the registry), so the short pairs fill in around them."""
    return sorted(
        range(len(pairs)),
        key=lambda i: (pairs[i].check.kind != INVARIANT, not pairs[i].declared, -i),
    )


def run_all(
    pairs: Sequence[Pair],
    settings: LaunchSettings,
    on_result: Callable[[PairResult], None] = lambda r: None,
) -> tuple[list[PairResult], bool]:
    """Every pair's result in plan order, and whether Ctrl-C stopped the run (the results are
    then those that finished; the running children are killed)."""
    settings.logs.mkdir(parents=True, exist_ok=True)
    results: dict[int, PairResult] = {}
    stop = threading.Event()
    interrupted = False
    pool = ThreadPoolExecutor(max_workers=max(1, settings.jobs), thread_name_prefix="teeth")
    try:
        futures = {pool.submit(run_child, pairs[i], settings, stop): i for i in _launch_order(pairs)}
        for future in as_completed(futures):
            result = future.result()
            if result is not None:
                results[futures[future]] = result
                on_result(result)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [results[i] for i in sorted(results)], interrupted
