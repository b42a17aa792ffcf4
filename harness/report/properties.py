"""The test-case properties that tie a record to a runtime release, one name each.

Their writers (the release cells and ``xharness bisect`` in ``harness.releases``) and their
readers (the dashboard and the step summary) import these names from here, so that a property is
never spelled twice and a renamed one breaks at import, not silently in a report. The verdicts a
record carries are the expected-outcomes table's (``harness.scenarios.expected``).
"""

from __future__ import annotations

#: the release a record ran against, as its environment names it (``0.10.2``, ``wheel-1a2b...``)
RELEASE = "release"
#: the runtime that was released (the ``runtime`` property names the runtime under test, which
#: for a release's suites is the reference runtime riding on it)
RELEASE_RUNTIME = "release-runtime"
#: which check of a release the record belongs to: one of :data:`CHECKS`
RELEASE_CHECK = "release-check"
#: the checks: the catalog's scenarios, the invariants against the release, the harness's suites
#: on it, and a release ``xharness bisect`` tried
CHECK_CATALOG, CHECK_INVARIANTS, CHECK_SUITES, CHECK_BISECT = "catalog", "invariants", "suites", "bisect"
CHECKS = (CHECK_CATALOG, CHECK_INVARIANTS, CHECK_SUITES, CHECK_BISECT)
#: checks whose records are scenarios judged on a release (the others are test suites)
SCENARIO_CHECKS = (CHECK_CATALOG, CHECK_BISECT)
#: the judgement of a scenario on a release (``harness.scenarios.expected.VERDICTS``, or
#: ``not-installed``)
VERDICT = "verdict"
#: a bisect's records: the search's cell, the turn a release was tried in, the release, and its
#: role in the answer (last good, first changed...)
BISECT, BISECT_ORDER, BISECT_RELEASE, BISECT_ROLE = "bisect", "bisect-order", "bisect-release", "bisect-role"
#: the one command that replays a record
REPRO = "repro"
