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

# -- what the supervisor writes into every record of a cell (harness.matrix.supervisor)
#: the cell and its shape: name, backend, devices in all and per process, processes, slices
CELL, BACKEND, DEVICES, DEVICES_PER_PROCESS, PROCESSES, SLICES = (
    "cell", "backend", "devices", "devices_per_process", "processes", "slices")
#: the runtime under test with its options, and the JAX it ran on
RUNTIME, JAX, JAXLIB = "runtime", "jax", "jaxlib"
#: a multi-process launch's turn order: its seed, the order drawn and the order the ranks took
TURN_SEED, TURN_ORDER, TURNS = "turn-seed", "turn-order", "turns"
#: a launcher cell's launch: the launcher, each rank's host (``0:xh-node1 1:xh-node2``), job, step
LAUNCHER, RANK_HOSTS, JOB, STEP = "launcher", "rank-hosts", "job", "step"
#: where a cell ran under ``--on slurm`` (harness.executors.slurm): the executor, the cell's job, its
#: node(s), the attempt read (a requeued job's last) and, for a job that died, its final state
EXECUTOR, EXECUTOR_JOB, EXECUTOR_NODES, EXECUTOR_ATTEMPT, EXECUTOR_STATE = (
    "executor", "executor-job", "executor-nodes", "executor-attempt", "executor-state")

# -- what a scenario or a property test records (the catalog's suites, the plugin)
#: the scenario, its mode (fixed or injected) and the seed it ran with
SCENARIO, MODE, SEED = "scenario", "mode", "seed"
#: the signature an injected scenario showed (one of its declared ones), as ``xharness repro`` says it
SIGNATURE = "signature"
#: hypothesis' shrunk example, the blob that replays it, and how its seed was chosen
HYPOTHESIS_EXAMPLE, HYPOTHESIS_BLOB, HYPOTHESIS_SEED = "hypothesis-example", "hypothesis-blob", "hypothesis-seed"
#: a release's judgement: what the expected-outcomes table says, what happened, and why
EXPECTED, ACTUAL, REASON = "expected", "actual", "reason"
#: what each variant of a scenario saw on a release
VARIANTS = "variants"
#: the answer of a bisect: its result, direction, answer, first changed and last good releases,
#: suspects, the releases it tried and the range it searched
BISECT_RESULT, BISECT_DIRECTION, BISECT_ANSWER = "bisect-result", "bisect-direction", "bisect-answer"
BISECT_FIRST, BISECT_LAST_GOOD, BISECT_SUSPECTS = "bisect-first", "bisect-last-good", "bisect-suspects"
BISECT_TRIED, BISECT_RANGE = "bisect-tried", "bisect-range"

# -- what the JUnit writer adds itself (harness.report.junit; never copied back into a record)
PROP_ATTEMPTS, PROP_DURATIONS = "attempts", "durations"
#: written only when classname, name and file cannot give the node id back (harness-level records)
PROP_NODEID = "nodeid"

# -- a mutant's record (harness.report.kills) and a teeth pair's (harness.teeth.output)
PROP_MUTANT, PROP_CATEGORY, PROP_COUSIN, PROP_RESULT, PROP_KILLER = (
    "mutant", "category", "cousin", "mutant_result", "killer")
CHECK, FAULT, KIND, DECLARED, STATUS = "check", "fault", "kind", "declared", "status"
#: a teeth pair's details: the shrunk example's size and bound, the example and its blob, the
#: error or note, and where the check is declared
SIZE, MAX_SIZE, EXAMPLE, BLOB, ERROR, NOTE, ORIGIN = (
    "size", "max_size", "example", "blob", "error", "note", "origin")
