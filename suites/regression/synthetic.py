"""A scenario made up for a test of the runner: its variants are the test's own functions."""

from __future__ import annotations

from typing import Any

import harness.runtime as xr
from harness.scenarios.base import InvariantViolation, Scenario, Signature, Variant


def synthetic_scenario(variants: dict[str, Variant], **fields: Any) -> Scenario:
    """A catalog record around ``variants``: its switch is ``unhashable-spec``, its one signature
    an ``InvariantViolation`` whose message starts with "broken"; ``fields`` override the rest."""
    defaults: dict[str, Any] = {
        "id": "synthetic",
        "title": "synthetic",
        "upstream": ("example/repo#1",),
        "component": "none",
        "trigger": "none",
        "fault": xr.faults.UNHASHABLE_SPEC,
        "signatures": (Signature("invariant", InvariantViolation, r"^broken"),),
    }
    return Scenario(variants=variants, **{**defaults, **fields})
