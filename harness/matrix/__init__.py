"""The device matrix: cells (``ci/matrix.toml``), availability probes, and the supervisor that
runs each cell's suites in fresh processes and turns every outcome, crashes included, into records.

Modules, one job each: ``config`` (cells, parsing, validation), ``probe`` (can this machine run a
cell), ``events`` (the plugin-to-supervisor stream), ``outcomes`` (events to attempts, merged over
ranks), ``multiproc`` (starting, watching and stopping a cell's processes), ``supervisor`` (one
cell: launches, crash attribution, restarts, reruns), ``progress`` (terminal lines), ``commands``
(``xharness run`` and ``xharness cells``).

A run leaves under its output directory: ``junit/<cell>.xml``, ``matrix.json`` (per-cell wall
time, time in tests, overhead, launches), and ``logs/<cell>/``: ``rank<i>.log`` (the raw output
of each rank, with a ``[xharness] start <node id>`` line before every test), ``rank<i>.stack``
(faulthandler dumps: crashes, time limits, stack requests) and the per-launch event streams.
"""

from harness.matrix.config import Cell, Matrix, MatrixError, load_matrix

__all__ = ["Cell", "Matrix", "MatrixError", "load_matrix"]
