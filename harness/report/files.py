"""Atomic file writes for every report file.

A reader (a CI upload step, a browser refresh, a concurrent merge) must never see half a report:
each file is written to a temporary sibling, flushed to disk, then renamed over the target, which
POSIX guarantees to be atomic within one file system.
"""

from __future__ import annotations

from pathlib import Path

from harness.files import atomic_writer


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` in one step; on failure the old file (if any) is untouched."""
    with atomic_writer(path) as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
