"""One statistics script measured against another source tree: its ``collect`` runs in a child
process that imports ``harness`` from that tree (``ci/swarm_stats.py --baseline``,
``ci/training_stats.py --baseline``), so two versions of the strategies are compared by the same
counting code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def measure(tree: Path, module: str, *args: str | int) -> dict[str, Any]:
    """``module.collect(*args)`` (a module of this folder) with ``harness`` imported from ``tree``;
    each argument reaches ``collect`` as the type it has here (text or a whole number)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "JAX_NUM_CPU_DEVICES": os.environ.get("JAX_NUM_CPU_DEVICES", "8")}
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import importlib, harness; "
        "assert harness.__file__.startswith(sys.argv[2]), harness.__file__; "
        "args = json.loads(sys.argv[4]); "
        "print(json.dumps(importlib.import_module(sys.argv[3]).collect(*args)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(Path(__file__).parent), str(tree.resolve()), module, json.dumps(list(args))],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"measuring {tree} failed:\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
