"""One rank of a faulted job: ``python -m harness.network.worker``, run as a host of a fabric.

It speaks a line protocol with the nemesis (``harness.network.job``) so that a fault can start at
a named point of the program rather than at a guessed time: before each point it prints
``{"point": NAME}`` and waits for a line on stdin. Everything it learns goes to stdout as one
JSON object a line (``initialized``, each ``collective`` with the value it returned and the value
it should have, ``checkpoint``, ``error``, ``done``), flushed at once, so that a rank killed
mid-way still leaves what it did. Whatever JAX itself says goes to stderr, which the job keeps
for the blame.

The collective ``k`` (from 1) is an all-gather in which rank ``r`` contributes ``(r + 1) * k``:
every row of the answer is known in advance, so a stale or wrong value cannot pass for a right one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_T0 = time.monotonic()


def emit(**fields: Any) -> None:
    fields["t"] = round(time.monotonic() - _T0, 3)
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def point(name: str) -> None:
    """Stop at ``name`` until the nemesis says go (it starts the faults due there first)."""
    emit(point=name)
    line = sys.stdin.readline()
    if not line:  # the nemesis is gone: nobody will judge this run
        raise SystemExit(3)


def expected_rows(ranks: int, k: int) -> list[float]:
    return [float((r + 1) * k) for r in range(ranks)]


def _rows(rows: Any) -> list[float]:
    """Each rank's row of an answer as one number: a row that is not constant is as wrong as a
    wrong constant (NaN, which equals nothing)."""
    return [float(row[0]) if float(row[0]) == float(row[-1]) else float("nan") for row in rows]


def _gather_jax(rank: int, k: int, size: int) -> list[float]:
    import numpy as np
    from jax.experimental import multihost_utils

    mine = np.full((size,), float((rank + 1) * k), dtype=np.float32)
    return _rows(np.asarray(multihost_utils.process_allgather(mine)))


class _Reference:
    """The same collective through the reference runtime: a tensor sharded one piece per process,
    updated in place each step; its read is the all-gather."""

    def __init__(self, ranks: int, size: int) -> None:
        import jax
        import numpy as np

        import harness.runtime as xr

        self.xr = xr
        devices = list(range(jax.device_count()))  # the runtime's mesh takes positions, not ids
        self.mesh = xr.Mesh(devices, (len(devices),), ("x",))
        per = len(devices) // ranks
        base = np.concatenate([np.full((size * per,), float(r + 1), np.float32) for r in range(ranks)])
        self.base = xr.tensor(base)
        xr.mark_sharding(self.base, self.mesh, ("x",))
        self.value = xr.tensor(np.zeros_like(base))
        xr.mark_sharding(self.value, self.mesh, ("x",))
        xr.mark_step()
        self.ranks, self.size, self.per = ranks, size, per

    def gather(self, k: int) -> list[float]:
        self.value.add_(self.base)  # after k steps: (r + 1) * k on rank r's piece
        self.xr.mark_step()
        return _rows(self.value.numpy().reshape(self.ranks, self.size * self.per))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.network.worker")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--coordinator", required=True, help="HOST:PORT of the coordination service")
    parser.add_argument("--heartbeat", type=float, default=10.0, help="JAX's heartbeat timeout (s)")
    parser.add_argument("--init-timeout", type=float, default=60.0)
    parser.add_argument("--collectives", type=int, default=3)
    parser.add_argument("--size", type=int, default=1024, help="floats each rank contributes")
    parser.add_argument("--runtime", choices=("jax", "reference"), default="jax")
    parser.add_argument("--checkpoint", type=Path, help="save each step's answer here (atomically)")
    args = parser.parse_args(argv)

    try:
        import jax

        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        point("initialize")
        jax.distributed.initialize(
            coordinator_address=args.coordinator, num_processes=args.ranks, process_id=args.rank,
            heartbeat_timeout_seconds=int(max(1, args.heartbeat)),
            initialization_timeout=int(max(1, args.init_timeout)),
        )
        emit(event="initialized", process=jax.process_index(), devices=jax.device_count(),
             hostname=os.uname().nodename)
        reference = _Reference(args.ranks, args.size) if args.runtime == "reference" else None
        for k in range(1, args.collectives + 1):
            point(f"collective:{k}")
            started = time.monotonic()
            rows = reference.gather(k) if reference else _gather_jax(args.rank, k, args.size)
            want = expected_rows(args.ranks, k)
            emit(event="collective", k=k, value=rows, expected=want, ok=rows == want,
                 seconds=round(time.monotonic() - started, 3))
            if args.checkpoint is not None:
                point(f"save:{k}")
                _save(args.checkpoint, args.rank, k, rows)
                emit(event="checkpoint", k=k)
        point("done")
        emit(event="done")
        return 0
    except SystemExit:
        raise
    except BaseException as exc:  # the rank's own first error, in its own words
        emit(event="error", type=type(exc).__name__, message=str(exc)[:2000])
        return 1


def _save(directory: Path, rank: int, k: int, rows: list[float]) -> None:
    from harness.files import atomic_writer

    body = json.dumps({"rank": rank, "k": k, "value": rows}).encode()
    with atomic_writer(directory / f"rank{rank}.json") as handle:
        handle.write(body)


if __name__ == "__main__":
    sys.exit(main())
