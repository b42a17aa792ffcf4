"""SLURM's client commands as scripts that print what a real controller prints, for tests of
what the harness asks SLURM and makes of its answers, without a cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TOOLS = ("sbatch", "squeue", "scontrol", "sacct", "scancel", "sinfo")


class FakeSlurm:
    """SLURM's client commands as scripts: each prints ``<tool>.out``, exits ``<tool>.rc`` and
    appends its arguments to ``<tool>.args``."""

    def __init__(self, root: Path, tools: tuple[str, ...] = TOOLS) -> None:
        self.root = root
        root.mkdir(exist_ok=True)
        for tool in tools:
            script = root / tool
            script.write_text(
                "#!/bin/sh\n"
                f'echo "$*" >> "{root}/{tool}.args"\n'
                f'[ -f "{root}/{tool}.err" ] && cat "{root}/{tool}.err" >&2\n'
                f'[ -f "{root}/{tool}.out" ] && cat "{root}/{tool}.out"\n'
                f'exit $(cat "{root}/{tool}.rc" 2>/dev/null || echo 0)\n'
            )
            script.chmod(0o755)

    def says(self, tool: str, out: str = "", rc: int = 0, err: str = "") -> None:
        # each file replaced whole: a poll that reads it mid-write would see the job gone
        for suffix, text in (("out", out), ("rc", str(rc)), ("err", err)):
            written = self.root / f"{tool}.{suffix}.new"
            written.write_text(text)
            written.replace(self.root / f"{tool}.{suffix}")

    def asked(self, tool: str) -> list[str]:
        path = self.root / f"{tool}.args"
        return path.read_text().splitlines() if path.exists() else []


def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """Fake SLURM commands first on PATH, ahead of the system's own (a real cluster's are not asked)."""
    fake = FakeSlurm(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.root}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return fake


def launcher_tools(tmp_path: Path, **scripts: str) -> dict[str, str]:
    """An environment whose PATH holds only the given programs (name -> shell body), with the
    launchers' cached answers forgotten, so the next probe asks these programs."""
    from harness.matrix import launchers

    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = fake / name
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(0o755)
    launchers.forget_answers()
    return {"PATH": str(fake), "SLURM_CONF": str(tmp_path / "slurm.conf")}
