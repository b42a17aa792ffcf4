"""Installable wheels of empty distributions, for asking pip offline what a release fits."""

from __future__ import annotations

import zipfile
from pathlib import Path


def tiny_wheel(directory: Path, name: str, version: str, tag: str, requires_python: str = "") -> Path:
    """A real wheel of an empty distribution ``name`` ``version`` with the given tag and floor."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if requires_python:
        metadata += f"Requires-Python: {requires_python}\n"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n")
        archive.writestr(f"{info}/RECORD", "")
    return path
