"""What a rank blamed when it failed: read from its own words (its error report and its stderr).

A runtime's verdict on a fault is only as good as what it tells the person on call: which rank or
host, and what kind of failure. The patterns here are the coordination service's and gloo's own
messages (JAX's ``client.h`` termination, the service's unhealthy-task and heartbeat-timeout
errors, gRPC's deadline on the heartbeat RPC, gloo's connection errors) and the runtimes' own
errors; each maps to a kind and to the ranks it names. Pure: a history can be re-judged offline.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: the kinds a blame can have, from what the words claim
CRASHED = "crashed"  # the runtime says a task crashed or died
HEARTBEAT = "heartbeat"  # a task stopped sending heartbeats, cause left open
UNREACHABLE = "unreachable"  # this task could not reach a peer or the coordination service
TIMEOUT = "timeout"  # an operation timed out, no peer named


@dataclass(frozen=True)
class Blame:
    """What one rank's failure names: the ranks it holds responsible and the kind it claims."""

    ranks: frozenset[int]
    kind: str
    evidence: str  # the line the blame was read from

    def describe(self) -> str:
        who = ", ".join(f"rank {r}" for r in sorted(self.ranks)) or "no rank"
        return f"{self.kind} ({who}): {self.evidence[:200]}"


_UNHEALTHY = re.compile(r"following tasks are unhealthy[^\n]*:\s*\n((?:\s*\d+\s*\n?)+)", re.I)
_TASK_TIMEOUT = re.compile(r"Task (\d+) heartbeat timeout", re.I)
_LEADER = re.compile(r"leader task was preempted/died/restarted|Failed to send RPC to coordination service", re.I)
_HEARTBEAT_RPC = re.compile(r"DEADLINE_EXCEEDED[^\n]*\n\s*RPC: /xla\.coordination\.CoordinationService/Heartbeat", re.I)
_REMOTE = re.compile(r"remote=\[?(\d+\.\d+\.\d+\.\d+)\]?")
_TIMED_OUT = re.compile(r"timed out|timeout|DEADLINE_EXCEEDED", re.I)
_CONNECT = re.compile(r"Connection (refused|reset)|connect(ion)? failed|unreachable|Socket closed", re.I)


#: glog's line head (``E1205 18:56:47.356769 5135 file.cc:1549] ``) and the service's error id
_LOG_HEAD = re.compile(r"^[EFWI]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]\s*(\[\d+\]\s*)?")


def _line_of(text: str, start: int) -> str:
    """The line that holds ``start``, without glog's head: the words a person reads."""
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    return _LOG_HEAD.sub("", text[begin : end if end >= 0 else len(text)].strip())


def read(text: str, addresses: Mapping[str, int], coordinator: int = 0) -> Blame | None:
    """The blame in a rank's words (its error message and stderr), or None when it names none.

    ``addresses`` maps each host's address to its rank, so that gloo's ``remote=[ADDR]`` names a
    rank; the coordination service is on ``coordinator``."""
    if m := _UNHEALTHY.search(text):
        ranks = frozenset(int(n) for n in m.group(1).split())
        crashed = re.search(r"The tasks have crashed", text[m.end() - 1 : m.end() + 200])
        return Blame(ranks, CRASHED if crashed else HEARTBEAT, _line_of(text, m.start()))
    if m := _TASK_TIMEOUT.search(text):
        return Blame(frozenset({int(m.group(1))}), HEARTBEAT, _line_of(text, m.start()))
    if m := _LEADER.search(text):
        return Blame(frozenset({coordinator}), UNREACHABLE, _line_of(text, m.start()))
    if m := _HEARTBEAT_RPC.search(text):
        return Blame(frozenset({coordinator}), UNREACHABLE, _line_of(text, m.start()))
    if m := _REMOTE.search(text):
        rank = addresses.get(m.group(1))
        return Blame(frozenset({rank} if rank is not None else ()), UNREACHABLE, _line_of(text, m.start()))
    if m := _CONNECT.search(text):
        return Blame(frozenset(), UNREACHABLE, _line_of(text, m.start()))
    if m := _TIMED_OUT.search(text):
        return Blame(frozenset(), TIMEOUT, _line_of(text, m.start()))
    return None
