"""What the harness knows of each runtime under test, in one table.

Every place that needs a release fact about one of the harness' own runtimes (which
distribution is it on the package index, what ``pip install`` gets for one of its releases, where
the project's support of it begins, a release to show in a message) reads it from :data:`RUNTIMES`,
so that changing one fact of it is one edit. Names only, no imports of the runtimes themselves:
reading this table never imports JAX or torch. Which adapter class speaks for a runtime is not a
fact of this table: every runtime, a plugin's too, registers its adapter as an entry point of the
``xharness.runtimes`` group (``harness.adapters``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version


class UnknownRelease(ValueError):
    """A release text that is not a version where a version is needed (a torch_xla pin)."""


def torch_for(release: str) -> str:
    """The ``torch`` a torch_xla release goes with: torch_xla X.Y.Z is built against torch X.Y,
    and torch has no patch release for every torch_xla one (torch_xla 2.8.1 and 2.6.1 pair with
    torch 2.8.0 and 2.6.0; there is no torch 2.8.1), so an exact pin makes those uninstallable.
    The newest torch of the same minor that is not newer than the release: where torch has the
    same version (2.5.1, 2.9.0) that is the one, as the exact pin was, and never a later torch
    patch (2.9.1) that the release was not built with."""
    try:
        version = Version(release)
    except InvalidVersion:
        raise UnknownRelease(f"{release!r} is not a release version") from None
    major, minor, patch = (*version.release, 0, 0)[:3]
    return f"torch>={major}.{minor},<={major}.{minor}.{patch}"


@dataclass(frozen=True)
class RuntimeFacts:
    """One runtime under test."""

    name: str  # as ``--runtime`` and ``HARNESS_RUNTIME`` name it
    #: the distribution that is the runtime on the package index; None for one that has no
    #: releases of its own (the reference runtime is this checkout)
    distribution: str | None = None
    #: what ``pip install`` gets for a release (its environment's pins)
    requirements: Callable[[str], list[str]] | None = None
    #: where the project's claims begin; "" means the range pyproject.toml declares for the
    #: distribution (an environment outside it cannot install the harness)
    floor: str = ""
    example: str = ""  # a release, for messages and help texts
    #: whether the catalog has upstream triggers for it (``xharness repro --runtime``)
    upstream: bool = False

    @property
    def released(self) -> bool:
        """Whether its releases live in environments of their own (``--release``)."""
        return self.distribution is not None


RUNTIMES: dict[str, RuntimeFacts] = {
    facts.name: facts
    for facts in (
        RuntimeFacts("reference"),
        RuntimeFacts(
            "jax", distribution="jax",
            # jaxlib is pinned too: jax accepts a range of jaxlibs, and the release is the pair
            requirements=lambda release: [f"jax=={release}", f"jaxlib=={release}"],
            example="0.10.2", upstream=True,
        ),
        RuntimeFacts(
            "torch_xla", distribution="torch-xla",
            requirements=lambda release: [torch_for(release), f"torch-xla=={release}"],
            # the oldest release line the expected-outcomes table was measured on
            floor=">=2.5", example="2.9.0", upstream=True,
        ),
    )
}
#: runtimes whose releases run in environments of their own, in the order commands list them
RELEASED = tuple(name for name in ("torch_xla", "jax") if RUNTIMES[name].released)
