"""What an XLA flag does to the cost of compiling programs of the suites' size, measured as a ratio
in one run: each flag set compiles the same small sharded programs in fresh processes, in
alternating rounds, and the median milliseconds per compile of each are compared with the first.

The matrix's cells pass ``XLA_FLAGS`` from ``ci/matrix.toml``; this is the measurement behind it.

Usage: ci/compile_flags.py [--rounds N] [--programs N] [-- FLAGS ...]
  FLAGS: one XLA_FLAGS string per set, the first the baseline (default: none, then the matrix's own)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: one process: compile ``count`` distinct programs over a 4-device mesh, print ms per compile
CHILD = """
import sys, time
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
a = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("x", None)))
b = jnp.ones((8, 8))
def program(i):
    def f(a, b):
        c = a * (i + 1) + jnp.sin(b)
        d = c.reshape(4, -1).sum(axis=0) if i % 2 else c @ b.T
        return d, a + i
    return f
count = int(sys.argv[1])
jax.jit(program(-1)).lower(a, b).compile()  # the backend's own start-up, not a program's
start = time.perf_counter()
for i in range(count):
    jax.jit(program(i)).lower(a, b).compile()
print((time.perf_counter() - start) / count * 1000)
"""


def matrix_flags() -> str:
    matrix = tomllib.loads((ROOT / "ci" / "matrix.toml").read_text())
    return str(matrix.get("defaults", {}).get("env", {}).get("XLA_FLAGS", ""))


def one(flags: str, programs: int) -> float:
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_NUM_CPU_DEVICES": "4", "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    done = subprocess.run([sys.executable, "-c", CHILD, str(programs)], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ci/compile_flags.py: XLA_FLAGS={flags!r} failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("flags", nargs="*")
    args = parser.parse_args(argv)
    sets = args.flags or ["", matrix_flags()]
    seen: dict[str, list[float]] = {flags: [] for flags in sets}
    for _ in range(args.rounds):
        for flags in sets:
            seen[flags].append(one(flags, args.programs))
    base = statistics.median(seen[sets[0]])
    for flags in sets:
        median = statistics.median(seen[flags])
        print(f"{median:7.1f} ms/compile  x{median / base:.2f}  XLA_FLAGS={flags!r}  "
              f"(rounds: {', '.join(f'{x:.1f}' for x in seen[flags])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
