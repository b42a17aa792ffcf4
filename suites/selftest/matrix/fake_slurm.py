"""SLURM's client commands as scripts that print what a real controller prints, for tests of
what the harness asks SLURM and makes of its answers, without a cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TOOLS = ("sbatch", "squeue", "scontrol", "sacct", "scancel", "sinfo")


class FakeSlurm:
    """SLURM's client commands as scripts: each appends its arguments to ``<tool>.args``, prints
    the ``err`` and ``out`` of its current answer and exits with its ``rc``."""

    def __init__(self, root: Path, tools: tuple[str, ...] = TOOLS) -> None:
        self.root = root
        self._said = 0
        root.mkdir(exist_ok=True)
        for tool in tools:
            script = root / tool
            script.write_text(
                "#!/bin/sh\n"
                f'echo "$*" >> "{root}/{tool}.args"\n'
                + self.answer(tool)
                + '[ -n "$d" ] || exit 0\n'
                '[ -f "$d/err" ] && cat "$d/err" >&2\n'
                '[ -f "$d/out" ] && cat "$d/out"\n'
                'exit $(cat "$d/rc")\n'
            )
            script.chmod(0o755)

    def answer(self, tool: str) -> str:
        """A shell line that sets ``$d`` to the folder of ``tool``'s current answer (``out``,
        ``err``, ``rc``; empty before any), looked up once, so a script reads one answer whole."""
        return f'd="$(readlink "{self.root}/{tool}.answer" 2>/dev/null)"\n'

    def says(self, tool: str, out: str = "", rc: int = 0, err: str = "") -> None:
        # the answer replaced whole, its three parts together: a poll that read them as they were
        # written saw a new output with the old exit code (the job gone) or an error with no words
        self._said += 1
        folder = self.root / f"{tool}.said-{self._said}"
        folder.mkdir()
        for name, text in (("out", out), ("rc", str(rc)), ("err", err)):
            (folder / name).write_text(text)
        link = self.root / f"{tool}.answer.new"
        link.unlink(missing_ok=True)
        link.symlink_to(folder)
        link.replace(self.root / f"{tool}.answer")

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
