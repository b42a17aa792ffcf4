"""The reading of faulthandler's timed stack dumps, for every process that asks for one.

A process the harness may have to kill (a matrix cell's pytest under a per-test limit, a scenario
or teeth child, a PyTorch/XLA trigger) has faulthandler dump every thread's stack at its limit or
shortly before it (``dump_traceback_later``), so that a hang shows where it hung. That dump walks the
frames of threads that keep running, and it can crash the process itself (CPython issues 131580
and 116008): on a loaded machine a process still importing when its limit comes dies by SIGSEGV
inside the dump. Read by its signal alone, that hang becomes a crash, and where a scenario's
signature is that signal, a reproduced bug. Every parent that reads such a death reads it here,
by one rule, so the supervisor, ``xharness repro``, ``xharness teeth`` and a release's catalog
give the same verdict for the same end.
"""

from __future__ import annotations

import re

#: the line faulthandler writes before the stacks of a timed dump (``dump_traceback_later``)
_TIMED_DUMP = re.compile(r"^Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!$", re.MULTILINE)

#: the heading of faulthandler's report of a fatal signal of the process's own
_CRASH_REPORT = "Fatal Python error"


def stack_dump_delay(timeout: float) -> float:
    """When to dump stacks: a grace period (2 to 10 s) before ``timeout``, or half of a short one."""
    grace = min(10.0, max(2.0, timeout * 0.05))
    return timeout - grace if timeout > 2 * grace else timeout / 2


def timed_dump_began(text: str) -> bool:
    """Whether ``text`` (a process's stderr, or its faulthandler file) holds a timed dump."""
    return _TIMED_DUMP.search(text) is not None


def died_in_timed_dump(text: str) -> bool:
    """Whether a process that died by a signal died inside its own timed stack dump: the dump
    began and no crash report of the process's own follows it. A process that crashes later, its
    stacks dumped whole, has faulthandler's "Fatal Python error" after the dump, and that crash
    is the run's."""
    dump = _TIMED_DUMP.search(text)
    return dump is not None and _CRASH_REPORT not in text[dump.end():]


def hung_in_dump(delay: float, death: str) -> str:
    """How a parent says such a death: when the dump came (``delay`` seconds in) and ``death``,
    the process named with its signal (``the process died on SIGSEGV``)."""
    return (f"no result {delay:g} s in, when its thread stacks were dumped; {death} inside that dump, "
            "as CPython's dump of running threads can")
