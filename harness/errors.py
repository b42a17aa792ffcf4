"""Errors shared by every layer of the harness.

They live at the bottom of the package so that the layers that raise them (scenarios, matrix,
reports, benchmarks, properties) need not import the command-line entry point above them, which
maps them to exit codes.
"""

from __future__ import annotations


class UsageError(Exception):
    """A mistake the user can fix (bad flag, unknown name, malformed file): exit 2."""
