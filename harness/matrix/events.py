"""The event stream from the pytest plugin to the supervisor: JSON lines in a file.

A file rather than a socket because the supervisor must be able to read what happened *after* the
process died: each event is written with one ``write`` call before the test goes on, so a SIGSEGV
one instruction later cannot lose it (the kernel holds what ``write`` accepted, whatever becomes of
the process). A rank that a cluster launcher started on another host also fsyncs each event: its
reader is on a machine that outlives that host, and a node that dies takes with it what the shared
file system had not yet been given. On the supervisor's own machine that would buy nothing (a
crash of the machine takes the supervisor too) and cost 0.4 ms an event, about five events a
test. A torn last line (the process died while writing) is ignored by the reader.

Event kinds (``event`` field): ``session`` (pid, rank, versions), ``collected`` (the selected test
items), ``collecterror``, ``collectskip`` (a module skipped as it is imported), ``start`` (a test
begins), ``report`` (one phase: setup, call or teardown), ``finish`` (a test's protocol ended),
``end`` (the session ended with an exit status).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypedDict

from harness.cell_shape import launched

Event = dict[str, Any]


class Item(TypedDict):
    nodeid: str
    file: str
    line: int | None


class EventWriter:
    """Appends events; used inside the pytest process. ``durable`` (default: this process is a
    rank a cluster launcher started, whose events a supervisor on another host reads): each event
    is fsynced too (see the module's docstring)."""

    def __init__(self, path: Path, durable: bool | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.durable = launched() if durable is None else durable

    def emit(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"event": kind, **fields}, default=str) + "\n"
        data = line.encode("utf-8", "replace")
        # O_APPEND + a single write: one event is never interleaved with another
        os.write(self._fd, data)
        if self.durable:
            os.fsync(self._fd)

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass


class EventReader:
    """Reads complete events incrementally (for progress while running, and after exit)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.events: list[Event] = []

    def poll(self) -> list[Event]:
        """New complete events since the last call."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # incomplete tail (or b"")
        fresh: list[Event] = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except ValueError:
                continue  # torn write from a dying process
            if isinstance(event, dict):
                fresh.append(event)
        self.events.extend(fresh)
        return fresh
