"""The catalog commands stay light: ``xharness list`` and the parent half of ``xharness repro``
never import JAX (its import and backend start-up are most of a repro's wall time; the child
pays them once). Checked in a fresh interpreter, since this one has JAX loaded already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

# what the command line imports, and names: the same on every JAX
pytestmark = pytest.mark.jax_independent


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("argv", [["list"], ["list", "--json"]])
def test_list_does_not_import_jax(argv: list[str]) -> None:
    proc = _fresh(f"""
        import sys
        from harness.cli import main
        code = main({argv!r})
        print("JAX-IMPORTED", "jax" in sys.modules, "RUNTIME-IMPORTED", "harness.runtime" in sys.modules)
        sys.exit(code)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "JAX-IMPORTED False RUNTIME-IMPORTED False" in proc.stdout
    assert "race-on-handles" in proc.stdout


def test_repro_parent_does_not_import_jax() -> None:
    """The child is replaced by a canned result: what is left is the parent's own work."""
    proc = _fresh("""
        import json, subprocess, sys
        from harness.scenarios import child
        result = {"scenario": "aliased-save", "mode": "fixed", "outcome": "passed", "seed": 0,
                  "seconds": 0.1, "signature": "", "variants": [], "repro": "", "note": "", "explore": ""}
        def fake_run(cmd, **kwargs):
            return subprocess.CompletedProcess(cmd, 0, child.RESULT_MARKER + " " + json.dumps(result) + "\\n", "")
        subprocess.run = fake_run
        from harness.cli import main
        code = main(["repro", "aliased-save", "--json"])
        print("JAX-IMPORTED", "jax" in sys.modules)
        sys.exit(code)
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "JAX-IMPORTED False" in proc.stdout
    out = json.loads(proc.stdout.split("JAX-IMPORTED")[0])
    assert out["outcome"] == "passed"


def test_signatures_name_lazy_exception_types_without_importing_them() -> None:
    from harness.scenarios.base import Signature

    sig = Signature("x", "harness.runtime.errors:PlaceholderAccessError", r"placeholder")
    assert sig.describe() == "PlaceholderAccessError: /placeholder/"
    from harness.runtime.errors import PlaceholderAccessError

    assert sig.exception_type() is PlaceholderAccessError
    assert sig.matches_exception(PlaceholderAccessError("GetHandle() on placeholder"))
    assert not sig.matches_exception(ValueError("placeholder"))


def test_the_command_line_starts_without_numpy() -> None:
    """Every ``xharness`` process loads the command table first, so what it imports every command
    pays, the matrix's own children included (``xharness run`` of a test, the repro parent):
    numpy is a tenth of a second there, and only a command that computes needs it."""
    proc = _fresh("""
        import sys
        import harness.cli
        print("NUMPY-IMPORTED", "numpy" in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "NUMPY-IMPORTED False" in proc.stdout
