"""The command layer: every ``xharness`` subcommand, one module per command family.

It is the top room under ``harness.cli``: a command parses its flags, checks what the user gave
before starting anything, calls down into the rooms that do the work (the matrix, the releases,
the report, the teeth, the benchmarks) and turns the outcome into an exit code of
``harness.exits``. No room imports a command, so the work a command does can be called and tested
without its argument parser.
"""
