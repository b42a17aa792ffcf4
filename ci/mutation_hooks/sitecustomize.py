"""Run by every Python process started with this directory on ``PYTHONPATH``: during mutmut's
stats run of a ``children = true`` profile, record the mutated functions this process calls
(``mutation_hits``). ``ci/mutation.py`` puts this directory on the path for such profiles only."""

import mutation_hits

mutation_hits.record_in_child()
