"""Deterministic control of thread interleavings, for finding and replaying races.

Timing-dependent bugs (upstream PyTorch/XLA #9128: a caller read a placeholder's handle before the
executor thread filled it) only show on runners slow or loaded in the right way. This package
makes the interleaving an input instead: a *controlled run* executes the participating threads
strictly one at a time and, at every schedule point, a strategy decides which one continues. The
choices form a ``Schedule``; printing it with a failure and replaying it reproduces the failure.

What is controlled
    The test body (participant 0) and every ``sched.Thread`` a participant starts (1, 2, ... in
    spawn order). They switch only at schedule points: ``point(name)`` calls, and every operation
    of ``Event`` (and ``Latch``, its set-once form), ``Lock``, ``RLock``, ``SimpleQueue`` and
    ``Thread`` (start, join) that synchronizes. A participant that would block on one of those
    primitives is parked instead, and resumed when what it waits for holds; a wait with a
    timeout may be chosen to expire, without any real sleep. Deadlocks, livelocks
    (``max_steps``) and participants stuck in something uncontrolled (``stall_timeout``) become
    errors listing every thread, its point and its stack, never a hang.

What stays free
    Threads that are not participants (started before the run, by a non-participant, or owned by
    libraries such as XLA) run as usual; the primitives behave like ``threading``'s for them, and
    ``point()`` does nothing. Code between two points of one participant runs atomically with
    respect to the other participants, so a data race needs a ``point()`` between the accesses.

End of a run
    When the body returns, the run ends. Participants still parked (an idle worker blocked on its
    queue) are released: they continue uncontrolled, their blocking calls now real ones. A run
    that fails instead abandons its participants: each raises ``Abandoned`` (a
    ``BaseException``) at its next point and unwinds. Owners of long-lived threads register
    ``on_activate``/``on_deactivate`` callbacks to stop them around every run, so that they are
    restarted as participants inside the next one.

Without a run active, ``point()`` is one global read, and the primitives are ``threading``'s.

Strategies (after the Rust ``shuttle`` crate): ``check_random``, ``check_pct`` (probabilistic
concurrency testing), ``check_dfs`` (preemption-bounded exhaustive search), ``check_hypothesis``
and ``hypothesis_schedules`` (shrinkable schedules), ``replay``; and ``stress``, the free-running
baseline with random sleeps, for comparison.
"""

from harness.sched.api import (
    check,
    check_dfs,
    check_hypothesis,
    check_pct,
    check_random,
    replay,
)
from harness.sched.baseline import stress
from harness.sched.errors import (
    Abandoned,
    DeadlockError,
    LivelockError,
    NondeterminismError,
    ScheduleError,
    ScheduleFailure,
    StallError,
    ThreadReport,
)
from harness.sched.hooks import discard_hook, on_activate, on_deactivate
from harness.sched.points import point
from harness.sched.primitives import Event, Latch, Lock, RLock, SimpleQueue, Thread
from harness.sched.results import CheckResult, Failure
from harness.sched.schedule import Schedule
from harness.sched.scheduler import Decision, RunRecord, Strategy, is_controlled, thread_id
from harness.sched.strategies import (
    DFSStrategy,
    HypothesisPolicy,
    PCTStrategy,
    RandomStrategy,
    ReplayStrategy,
    hypothesis_schedules,
)

__all__ = [
    "Abandoned",
    "CheckResult",
    "DFSStrategy",
    "DeadlockError",
    "Decision",
    "Event",
    "Failure",
    "HypothesisPolicy",
    "Latch",
    "LivelockError",
    "Lock",
    "NondeterminismError",
    "PCTStrategy",
    "RLock",
    "RandomStrategy",
    "ReplayStrategy",
    "RunRecord",
    "Schedule",
    "ScheduleError",
    "ScheduleFailure",
    "SimpleQueue",
    "StallError",
    "Strategy",
    "Thread",
    "ThreadReport",
    "check",
    "check_dfs",
    "check_hypothesis",
    "check_pct",
    "check_random",
    "discard_hook",
    "hypothesis_schedules",
    "is_controlled",
    "on_activate",
    "on_deactivate",
    "point",
    "replay",
    "stress",
    "thread_id",
]
