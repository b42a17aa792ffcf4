"""Run by every Python process started with this directory on ``PYTHONPATH``: during mutmut's
stats run of a ``children = true`` profile, record the mutated functions this process calls
(``mutation_child``). ``ci/mutation.py`` puts this directory on the path for such profiles only."""

import mutation_child

mutation_child.record_in_child()
