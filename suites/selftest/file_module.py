"""A module loaded from its file, for the tests of files that live in no package (the docs'
build hooks, the ci/ scripts)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
