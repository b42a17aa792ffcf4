"""The exit codes of every ``xharness`` command, declared once.

A CI step, a bisect script or a wrapper branches on these numbers, so each number means one thing
whatever command returns it, and each has one name. The commands return these names; the
documentation's table of exit codes is generated from ``TABLE`` (docs/reference/exit-codes.md,
filled by docs/_hooks/reference.py; ``suites/selftest/test_docs.py`` checks it). The module
sits at the bottom of the package so that a room that decides an outcome (the release catalog, the
scenario child, the benchmarks) names the same constant the command returns.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "EXIT_FAILED",
    "EXIT_INSTALL",
    "EXIT_INTERRUPTED",
    "EXIT_NO_BACKEND",
    "EXIT_NO_CLUSTER",
    "EXIT_NO_NETWORK",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "TABLE",
    "ExitCode",
    "markdown_table",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INSTALL = 3
EXIT_UNAVAILABLE = 4
EXIT_NO_BACKEND = 5
EXIT_NO_CLUSTER = 6
EXIT_NO_NETWORK = 7
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class ExitCode:
    """One exit status: its number, its name in code and what it tells the caller."""

    code: int
    name: str
    meaning: str


TABLE: tuple[ExitCode, ...] = (
    ExitCode(EXIT_OK, "EXIT_OK", "success: every test passed (flaky passes are flagged), the scenario "
             "behaved as its mode or the expected table says, a bisect found a change"),
    ExitCode(EXIT_FAILED, "EXIT_FAILED", "a test or scenario failed, a verdict differs from the expected "
             "table, a declared fault was missed, or a bisect's ends agree"),
    ExitCode(EXIT_USAGE, "EXIT_USAGE", "usage or configuration error: a bad flag, an unknown name, a "
             "file that does not parse, a broken plugin; nothing was run"),
    ExitCode(EXIT_INSTALL, "EXIT_INSTALL", "a release could not be installed (the others still ran; for "
             "bisect: none in the range could be)"),
    ExitCode(EXIT_UNAVAILABLE, "EXIT_UNAVAILABLE", "the runtime under test cannot be imported by this "
             "interpreter and no release was named"),
    ExitCode(EXIT_NO_BACKEND, "EXIT_NO_BACKEND", "bench: the backend asked for is not on this machine"),
    ExitCode(EXIT_NO_CLUSTER, "EXIT_NO_CLUSTER", "run --on slurm: no SLURM controller answers (its commands "
             "are missing or the controller is down); nothing was submitted"),
    ExitCode(EXIT_NO_NETWORK, "EXIT_NO_NETWORK", "nemesis: no network of hosts can be made here (not root, or "
             "ip, nft, tc or unshare missing); the message says which"),
    ExitCode(EXIT_INTERRUPTED, "EXIT_INTERRUPTED", "interrupted (Ctrl-C or SIGTERM); what finished is "
             "kept and merged"),
)


def markdown_table() -> str:
    """The documentation's table of exit codes, as this module declares them."""
    rows = ["| code | name | meaning |", "|---|---|---|"]
    rows += [f"| {e.code} | `{e.name}` | {e.meaning} |" for e in TABLE]
    return "\n".join(rows)
