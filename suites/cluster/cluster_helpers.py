"""Helpers the cluster suites share (their fixture is in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the default matrix's multi-process cells (ci/matrix.toml)
TWIN_CELLS = ("cpu-2slice", "cpu-2x4")


def xharness_run(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``xharness run --out OUT ARGS`` from the project's root, outside this pytest's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run([sys.executable, "-m", "harness.cli", "run", "--out", str(out), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
