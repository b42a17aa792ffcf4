"""Release orchestration: real runtime releases under test, each in a cached environment built with
an interpreter it fits (``envs``, ``interpreters``, ``release_spec``), the catalog judged against
them (``catalog``, ``cells``, ``commands``: ``xharness releases``, ``repro --runtime``) and the
search for the release that changed an outcome (``bisect``, ``bisect_run``).

This room sits above the scenarios, the matrix and the report, which it drives; nothing below it
imports it.
"""
