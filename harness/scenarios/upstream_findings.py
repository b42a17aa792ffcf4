"""Reproducers of the known findings that no catalog scenario re-creates, each in its runtime's
own API (PyTorch/XLA's; JAX's for two SLURM jobs that share a coordinator port).

A finding of an invariant (``harness.scenarios.known_findings.KNOWN_FINDINGS``) whose mechanism is the
runtime's own (a backend's arithmetic, a canonicalization) needs no fault switch in the reference
runtime to be worth filing: the invariant that found it is its teeth. What it needs is the shrunk
program, written in the runtime's API, so that the release job can watch it (its rows in
``expected.toml`` carry the finding's ``id``, and a release that stops showing it is
``unexpectedly-fixed``) and ``xharness report upstream ID`` can file it. These run exactly as the
catalog's triggers do (``upstream_torch_xla``, which lists them with its own); this module imports
neither that one nor the expected-outcomes table, which reads the names from here.
"""

from __future__ import annotations

from typing import Any

from harness.scenarios.base import InvariantViolation, Signature
from harness.scenarios.reproducer import MachineLacks, Reproducer, torch_xla_sharding_api


class BitsChanged(InvariantViolation):
    """A value read back from the device differs, bit for bit, from the one written."""


#: bfloat16 bit patterns: a quiet NaN with a payload, a signalling NaN, a negative quiet NaN with
#: a payload, and 1.0 (which must survive anyway)
BF16_NAN_PAYLOADS = (0x7FC1, 0x7F81, 0xFFC3, 0x3F80)


def _vector_mesh() -> tuple[Any, int]:
    """SPMD on, and a one-axis mesh over every device."""
    import numpy as np
    import torch_xla.runtime as xr

    xs = torch_xla_sharding_api()
    xr.use_spmd()
    n = xr.global_runtime_device_count()
    if n < 2:
        raise MachineLacks(f"needs 2 or more devices to split a value over, this process has {n}")
    return xs.Mesh(np.arange(n), (n,), ("x",)), n


def _bits16(t: Any) -> list[int]:
    """A bfloat16 tensor's bit patterns (through torch alone: some releases' torch cannot hand
    arrays to the numpy installed beside them)."""
    import torch

    return [b & 0xFFFF for b in t.detach().cpu().view(torch.int16).tolist()]


def bfloat16_nan_payloads_resharded() -> None:
    """The round-trip invariant's shrunk example: bfloat16 data on the device, given a sharding
    with ``mark_sharding``, read back bit for bit."""
    import torch
    import torch_xla.core.xla_model as xm

    mesh, n = _vector_mesh()
    bits = [BF16_NAN_PAYLOADS[i % len(BF16_NAN_PAYLOADS)] for i in range(2 * n)]
    signed = [b - 0x10000 if b & 0x8000 else b for b in bits]
    t = torch.tensor(signed, dtype=torch.int16).view(torch.bfloat16).to(xm.xla_device())
    if _bits16(t) != bits:
        raise AssertionError("the transfer to the device already changed the bits")
    torch_xla_sharding_api().mark_sharding(t, mesh, ("x",))
    got = _bits16(t)
    if got != bits:
        numbers_kept = all(g == b for g, b in zip(got, bits, strict=True) if b & 0x7F80 != 0x7F80)
        which = "only NaN payloads differ" if numbers_kept else "numbers differ"
        raise BitsChanged(
            f"mark_sharding of bfloat16 data on the device changed its bits ({which}): wrote "
            f"{[hex(b) for b in bits[:4]]}, read {[hex(b) for b in got[:4]]}"
        )


def subnormals_through_a_sharded_view() -> None:
    """The round-trip invariant's shrunk example: float32 subnormals in a value split over the
    devices, one element each, read through a strided view."""
    import torch
    import torch_xla.core.xla_model as xm

    mesh, n = _vector_mesh()
    tiny = torch.finfo(torch.float32).tiny
    values = [(1e-45, 1.0, 2e-45, 3.0)[i % 4] for i in range(n)]
    t = torch.tensor(values, dtype=torch.float32).to(xm.xla_device())
    torch_xla_sharding_api().mark_sharding(t, mesh, ("x",))
    got = t[::2].cpu()
    want = torch.tensor(values[::2], dtype=torch.float32)
    if not torch.equal(got.view(torch.int32), want.view(torch.int32)):
        flushed = torch.where((want != 0) & (want.abs() < tiny), torch.zeros_like(want), want)
        which = "only subnormal numbers differ: flushed to zero" if torch.equal(got, flushed) else "numbers differ"
        raise BitsChanged(
            f"x[::2] of a float32 value split over {n} devices ({which}): wrote {want[:2].tolist()}, "
            f"read {got[:2].tolist()}"
        )


# ------------------------------------------------------------------ JAX: two SLURM jobs, one port

class JobAborted(InvariantViolation):
    """A job that did nothing wrong was aborted by another job's ranks."""


class SharedCoordinator(InvariantViolation):
    """Two concurrent jobs' coordination services listen on one address."""


#: one rank of a job: JAX's own SLURM detection picks the coordinator (the job's first node and a
#: port derived from SLURM_JOB_ID), then the rank holds for argv[1] seconds and shuts down
SLURM_RANK = """
import os, sys, time
import jax
me = f"job {os.environ['SLURM_JOB_ID']} rank {os.environ['SLURM_PROCID']}"
try:
    jax.distributed.initialize(initialization_timeout=30)
except Exception as exc:
    print(f"{me}: failed: {type(exc).__name__}: {exc}", flush=True)
    sys.exit(3)
from jax._src import distributed
print(f"{me}: initialized, coordinator {distributed.global_state.coordinator_address}", flush=True)
time.sleep(float(sys.argv[1]))
jax.distributed.shutdown()
print(f"{me}: done", flush=True)
"""


def _slurm_job(job_id: int, hold: float) -> list:
    """The two ranks of a one-node SLURM job on this machine, as srun would start them: only the
    variables JAX's SLURM detection reads."""
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI"))}
    ranks = []
    for rank in range(2):
        env = {**base, "JAX_PLATFORMS": "cpu", "SLURM_JOB_ID": str(job_id), "SLURM_STEP_NODELIST": "localhost",
               "SLURM_NTASKS": "2", "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank), "SLURM_STEP_NUM_NODES": "1"}
        ranks.append(subprocess.Popen([sys.executable, "-c", SLURM_RANK, str(hold)], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return ranks


def _first_line(text: str, *needles: str) -> str:
    for line in text.splitlines():
        if any(n in line for n in needles):
            return line.strip()[:300]
    return ""


def slurm_jobs_4096_apart_on_one_node() -> None:
    """Job A (id X, two ranks) initializes and holds; job B (id X + 4096, two ranks, the same
    first node) starts while A runs. A site's scheduler hands out such a pair after 4096
    submissions, and two jobs share a node wherever nodes are shared.

    Only what the bug does is reported as it: A aborted with the coordination service's own words
    for another job's ranks (a different incarnation, an unhealthy task), or B's service on A's
    address. Anything else (a rank that never initialized, A dying of something else, B failing)
    is an ``AssertionError``: a failure to look into, never the finding, and never a pass."""
    import subprocess
    import time

    first = 1000 + int(time.time()) % 3000  # another pair on every run: no port left over from the last
    a = _slurm_job(first, hold=12.0)
    b: list = []
    try:
        lines = [p.stdout.readline() for p in a]  # type: ignore[union-attr]
        if not all(": initialized" in line for line in lines):
            a_out = "".join(lines) + "".join(p.communicate(timeout=60)[0] for p in a)
            raise AssertionError(f"job A ({first}) did not initialize on its own: {a_out.strip()[:400]}")
        b = _slurm_job(first + 4096, hold=2.0)
        b_out = [p.communicate(timeout=90)[0] for p in b]
        a_out = [line + p.communicate(timeout=90)[0] for line, p in zip(lines, a, strict=True)]
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"a rank of job A or B did not end in {exc.timeout:.0f} s") from None
    finally:
        for p in a + b:
            if p.poll() is None:
                p.kill()
                p.wait()
    a_address = lines[0].split("coordinator ")[-1].strip()
    b_address = _first_line(b_out[0], ": initialized").split("coordinator ")[-1]
    aborted = [i for i, p in enumerate(a) if p.returncode != 0]
    if aborted:
        why = _first_line("".join(a_out), "incarnation", "unhealthy")
        if not why:
            raise AssertionError(f"job A ({first}) died (rank(s) {aborted}) without the coordination service "
                                 f"naming another job: {''.join(a_out).strip()[-400:]}")
        raise JobAborted(
            f"job A ({first}), which did nothing wrong, was aborted (rank(s) {aborted}, exit "
            f"{[a[i].returncode for i in aborted]}) once job B ({first + 4096}) started on its node: "
            f"both chose the coordinator {a_address}: {why}"
        )
    if b_address == a_address:
        raise SharedCoordinator(
            f"job B ({first + 4096}) started its coordination service on {b_address}, where job A "
            f"({first}) holds its own, without an error: two concurrent jobs share one coordinator "
            "address (this time each job's ranks happened to reach their own service)"
        )
    failed = [i for i, p in enumerate(b) if p.returncode != 0]
    if failed:
        raise AssertionError(f"job B ({first + 4096}) failed (rank(s) {failed}) on {b_address or 'no address'}, "
                             f"job A on {a_address}: {''.join(b_out).strip()[-400:]}")


_NAN_PAYLOADS_REWRITTEN = Signature("nan-payloads-rewritten", BitsChanged, r"only NaN payloads differ")
_SUBNORMALS_FLUSHED = Signature("subnormals-flushed", BitsChanged, r"only subnormal numbers differ")
_JOB_ABORTED = Signature("job-aborted", JobAborted, r"which did nothing wrong, was aborted")
_SHARED_COORDINATOR = Signature("shared-coordinator", SharedCoordinator, r"share one coordinator address")


#: the reproducers of known findings that no catalog scenario re-creates, each named by the
#: finding's ``id`` (its rows in the expected-outcomes table use the same name)
FINDING_REPRODUCERS: tuple[Reproducer, ...] = (
    Reproducer(
        "nan-payload-resharding", "bfloat16-mark-sharding", bfloat16_nan_payloads_resharded,
        "the shrunk counterexample of the round-trip invariant", signatures=(_NAN_PAYLOADS_REWRITTEN,),
    ),
    Reproducer(
        "subnormal-flush-sharded-view", "strided-read-of-split-value", subnormals_through_a_sharded_view,
        "the shrunk counterexample of the round-trip invariant", signatures=(_SUBNORMALS_FLUSHED,),
    ),
    Reproducer(
        "slurm-jobs-4096-apart", "two-jobs-one-node", slurm_jobs_4096_apart_on_one_node,
        "jax-ml/jax#12152 (SlurmCluster: the coordinator on port SLURM_JOB_ID % 4096 + 61440 of the "
        "job's first node); found by the launcher cells on the one-machine SLURM cluster",
        signatures=(_JOB_ABORTED, _SHARED_COORDINATOR), runtime="jax",
    ),
)


def finding_names(runtime: str | None = None) -> list[str]:
    """The known findings (no catalog scenario's) with reproducers here, for ``runtime`` or any."""
    return list(dict.fromkeys(r.scenario for r in FINDING_REPRODUCERS if runtime in (None, r.runtime)))
