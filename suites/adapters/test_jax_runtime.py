"""JAX as the runtime under test: the invariants that apply to it, and its multi-process start-up.

The invariants run in a child process with ``HARNESS_RUNTIME=jax`` (the runtime under test is
chosen per process): every one either holds, is skipped naming the capability JAX lacks, or is the
known upstream finding (``host-copy``, jax-ml/jax#37830), never an unexplained failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

# the same in every interpreter whichever torch or torch_xla it holds: no release's own run repeats it
pytestmark = pytest.mark.release_independent

ROOT = Path(__file__).resolve().parents[2]


def test_the_invariants_hold_on_jax_or_skip_with_the_reason() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HARNESS_"))}
    env.update(HARNESS_RUNTIME="jax", JAX_NUM_CPU_DEVICES="8")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rxs", "-p", "no:cacheprovider", "suites/properties/test_invariants.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    assert "jax-ml/jax/issues/37830" in out, out[-3000:]  # host-copy: the known finding, as xfail
    for lacking in ("lacks aliasing", "lacks fsdp", "lacks discovery-count"):
        assert lacking in out, out[-3000:]
    for held in ("test_coverage", "test_round_trip", "test_uneven_split", "test_donation"):
        assert f"SKIPPED [1] {held}" not in out


@pytest.mark.multiprocess
@pytest.mark.processes(2)
def test_a_second_jax_distributed_initialize_is_a_clear_error_not_a_hang() -> None:
    """In a multi-process cell ``jax.distributed`` is already up; initializing it again must fail
    at once with JAX's own clear message, in every rank, never wait on the coordinator."""
    import jax

    outcome: list[BaseException | None] = []

    def again() -> None:
        try:
            if os.environ.get("HARNESS_LAUNCHER", "local") != "local":  # as the rank did: detected
                jax.distributed.initialize(initialization_timeout=20)
            else:
                jax.distributed.initialize(
                    coordinator_address=os.environ["HARNESS_COORDINATOR"],
                    num_processes=int(os.environ["HARNESS_PROCESSES"]),
                    process_id=int(os.environ["HARNESS_PROCESS_ID"]),
                    initialization_timeout=20,
                )
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the error is the point
            outcome.append(exc)

    worker = threading.Thread(target=again, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "a second jax.distributed.initialize hung"
    (error,) = outcome
    # JAX 0.10 names the rule it enforces first: once the backend is up (it is, in a running
    # cell), "must be called before any JAX calls"; before that, "should only be called once"
    assert isinstance(error, RuntimeError), repr(error)
    assert "only be called once" in str(error) or "must be called before any JAX calls" in str(error), repr(error)


def test_host_aliasing_reproduces_on_jax_as_the_table_expects() -> None:
    """The catalog's JAX trigger (jax-ml/jax#37830) in fresh processes of this interpreter."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HARNESS_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "repro", "host-aliasing", "--runtime", "jax", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads(proc.stdout)
    assert run["runtime"] == "jax" and run["outcome"] == "reproduced" and run["verdict"] == "as-expected"
    variants = {v["variant"]: v for v in run["variants"]}
    assert set(variants) == {"device-put", "device-put-may-alias-false", "device-put-gpu-transfer-race"}
    gpu = variants.pop("device-put-gpu-transfer-race")
    assert gpu["outcome"] == "skipped" and gpu["machine_skip"], gpu  # this machine has no GPU
    assert all(v["signature"] == "aliased-host-buffer" for v in variants.values())


def test_a_scenario_without_a_jax_trigger_is_a_usage_error() -> None:
    from harness import cli

    assert cli.main(["repro", "aliased-save", "--runtime", "jax"]) == cli.EXIT_USAGE
    # a JAX release runs in its own environment (suites/adapters/test_jax_releases.py); a release
    # that is not a version is refused before anything is installed
    assert cli.main(["repro", "host-aliasing", "--runtime", "jax", "--release", "latest"]) == cli.EXIT_USAGE
