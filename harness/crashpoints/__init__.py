"""Crash consistency of every file the project writes: each save killed at each of its file
operations in turn (SQLite's crash tests, with ``SIGKILL`` for the power cut).

:mod:`~harness.crashpoints.engine` runs a writer in a child process and kills it at its Nth
operation, counted at the operating-system level; :mod:`~harness.crashpoints.explore` walks N
and judges what each kill left with the project's own loaders; :mod:`~harness.crashpoints.cases`
holds the project's writers. ``python -m harness.crashpoints`` prints the table of kill points.
"""
