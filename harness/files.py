"""Atomic file replacement, shared by checkpoints and reports.

A reader (a CI upload step, a browser refresh, a concurrent merge, a restarted training job) must
never see half a file: the data goes to a temporary sibling, is flushed to disk, and is renamed
over the target, which POSIX makes atomic within one file system. The result gets the usual
permissions for a new file (``0666`` less the umask), not the private mode of a temporary file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from harness import hooks


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _reach(seam: str) -> None:
    """A failure seam of the runtime (``harness.runtime.seams``), where the runtime is loaded:
    a report written without it never imports it (nor JAX through it)."""
    hooks.call("file-seam", seam)


@contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Write ``path`` through the yielded binary handle; on any failure the old file is untouched."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _new_file_mode())
        with os.fdopen(fd, "wb") as handle:
            yield handle
            _reach("write")
            handle.flush()
            os.fsync(handle.fileno())
        _reach("rename")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
