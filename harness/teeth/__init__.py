"""The kill matrix: does every check catch the bugs it says it catches?

A check (a catalog scenario, an invariant of ``harness.properties``, or a user's own) declares the
fault switches it must catch. ``xharness teeth`` runs each (check, switch) pair with that one switch
on, each pair in a fresh process with a fixed device count, and shows which pairs were caught. A
declared pair that is missed means the check has no teeth for that bug, and the command fails.

Layers: ``checks`` (what a check is, built-in and ``--extra-checks``), ``matrix`` (the plan and one
pair judged in this process), ``child`` (one pair in a fresh process), ``launch`` (the children,
in parallel, each death or hang still a result), ``output`` (table, JSON, JUnit) and ``commands``.
This package imports none of them: a child arms its stack-dump timer before anything heavy loads.
"""
