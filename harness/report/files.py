"""Atomic file writes for every report file.

A reader (a CI upload step, a browser refresh, a concurrent merge) must never see half a report:
each file is written to a temporary sibling, flushed to disk, then renamed over the target, which
POSIX guarantees to be atomic within one file system.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` in one step; on failure the old file (if any) is untouched."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
