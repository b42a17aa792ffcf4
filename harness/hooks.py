"""Hooks a lower room calls and a higher one fills in, so that neither reaches into the other.

Some code must act only when another part of the harness is loaded: a file write is a failure
seam of the reference runtime (``harness.runtime.seams``) only in a process that runs the runtime,
a first discovery takes its rank's turn only in a multi-process launch (``harness.matrix.
multiproc``), and a per-test limit bounds the runtime's waits only where the runtime is imported.
Importing the other part to ask would import JAX into every report command, or a room above into
one below. Instead the part that is loaded registers a function under a hook's name when it is
imported, and the caller calls the hook, which does nothing when nobody registered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: the hooks there are, with who calls them and who fills them in
HOOKS: dict[str, str] = {
    "file-seam": "harness.files calls it with 'write' or 'rename' at each step of an atomic write; "
    "harness.runtime.seams registers reach",
    "first-discovery": "harness.runtime.topology calls it before the process' first discovery; "
    "harness.matrix.multiproc registers the rank's turn",
    "wait-timeout": "harness.plugin calls it with the seconds a per-test limit leaves the runtime's "
    "waits; harness.runtime.config registers the option's setter",
}

_registered: dict[str, list[Callable[..., Any]]] = {name: [] for name in HOOKS}


def register(name: str, function: Callable[..., Any]) -> None:
    """Fill in the hook ``name`` (once per function: a module imported twice adds nothing)."""
    if name not in HOOKS:
        raise ValueError(f"unknown hook {name!r}; known hooks: {', '.join(HOOKS)}")
    if function not in _registered[name]:
        _registered[name].append(function)


def call(name: str, *args: Any) -> None:
    """Call every function registered under ``name``, in the order registered; nothing when none."""
    for function in _registered[name]:
        function(*args)
