"""The fork server's point, in a PyTorch/XLA release's environment (``harness.scenarios.warm_fork``):
a trigger's run finds torch imported already, and torch_xla, which reads the trigger's flags when
it is imported, not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.scenarios import warm_fork

pytestmark = pytest.mark.jax_independent


def test_a_run_of_a_release_finds_torch_imported_and_torch_xla_not(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the server: torch is imported once, before the run; torch_xla, which reads the
    trigger's flags at import, never is."""
    pytest.importorskip("torch", reason="torch is not installed here: runs in a PyTorch/XLA release's environment")
    (tmp_path / "warm_probe.py").write_text(
        "import sys\n\ndef probe(argv):\n    return 10 * ('torch' in sys.modules) + ('torch_xla' in sys.modules)\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    warm_fork.stop()
    try:
        done = warm_fork.run("warm_probe:probe", [], {}, timeout=120)
    finally:
        warm_fork.stop()
    assert done is not None and done.returncode == 10
