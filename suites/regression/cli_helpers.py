"""Running the ``xharness`` CLI in a child process, as a user would, for the regression tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.scenarios import runner

#: variables a test must not inherit from the process (or matrix cell) running it
_INHERITED = ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS", *runner.REPLAY_ENV, *runner.RUNTIME_ENV)


def run_xharness(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run the CLI from ``cwd`` (a scratch directory: the installed package is what runs, not
    whatever the project directory would put on ``sys.path``)."""
    full_env = {k: v for k, v in os.environ.items() if k not in _INHERITED}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )
