"""The README's runtime example runs as written, and its commands exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_runtime_example_runs_and_compiles_once(tmp_path: Path) -> None:
    text = README.read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "mark_step" in b)
    script = tmp_path / "example.py"
    script.write_text(example)
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES", "XLA_FLAGS")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss, compiles = proc.stdout.split()
    assert float(loss) < 0.1  # twenty SGD steps towards zero targets
    assert int(compiles) == 1  # the steady loop compiled once


def test_properties_example_is_a_suite_that_passes(tmp_path: Path) -> None:
    text = README.read_text()
    example = next(b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "harness.properties" in b)
    (tmp_path / "test_users_suite.py").write_text(example)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "JAX_NUM_CPU", "XLA_FLAGS"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 passed" in proc.stdout, proc.stdout[-2000:]


def test_setup_commands_are_the_ci_scripts() -> None:
    text = README.read_text()
    assert "bash ci/main.sh" in text and "bash ci/test.sh" in text
    assert "exec bash ci/test.sh" in (README.parent / ".ci/run").read_text()
