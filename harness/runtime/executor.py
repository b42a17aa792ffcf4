"""Asynchronous execution: a step's graph launched on the executor thread.

Like PyTorch/XLA's ``XLAGraphExecutor``: a sync walks the pending IR of the tensors being
synced, looks its program up in a cache (compiling with ``jax.jit`` on a miss, with the requested
output shardings and donation), then hands the execution to one executor thread and returns at
once. The outputs are *placeholder* device data, filled when the execution completes; reading one
waits for it. ``wait_device_ops()`` waits for everything submitted so far.

That wait has two steps, as upstream's has since pytorch/xla#5811: the executor thread's barrier
(everything queued so far was dispatched), then the operation tracker (every execution started has
completed on the device). A barrier alone is not enough once completion happens elsewhere: the
``wait-gap`` switch re-creates the v2.1 runtime, where the execution was registered by a closure
run later on another thread, so a wait could find nothing registered and return early.

Lowering and compilation happen on the caller's thread so that a graph that cannot compile fails
the ``mark_step`` that asked for it; only execution is asynchronous. The parts live in modules of
their own: device data and placeholders (``device_data``), host transfers and layouts
(``transfers``), the graph walk (``graphs``), the plan cache and compilation (``plan_cache``),
bounded waits (``deadlines``), per-device liveness checks (``liveness``), and the executor thread
with the operation tracker (``worker``). This module is the execution's lifecycle, with donation.

The executor thread and the placeholders synchronize through ``harness.sched``'s primitives, and
the places where the caller and the executor thread touch the same device data are schedule
points. Outside a controlled run they are ``threading``'s primitives and the points do nothing;
inside one (``harness.sched.check_pct`` and friends) the scheduler decides who goes first at each
of them, which is how the race of upstream issue #9128 is found and replayed without a slow
device. The executor thread is stopped around every run (``on_activate``/``on_deactivate``) so
that the first submission inside a run starts it again as a participant.
"""

from __future__ import annotations

import time
import warnings
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import jax

from harness import sched
from harness.runtime import config, faults, ir, layouts, plan_cache, seams
from harness.runtime.deadlines import Ticket, await_latch
from harness.runtime.device_data import DeviceData, crash_mode
from harness.runtime.graphs import Walk
from harness.runtime.liveness import as_xla_would, check_inputs_live
from harness.runtime.plan_cache import Executable
from harness.runtime.transfers import metrics
from harness.runtime.worker import ExecutionAbandoned, operations, worker

# Donation is requested for every updated parameter. JAX promises that a donated array is deleted
# by the donating call, and reports a donation XLA declined (it could not reuse the buffer) with
# this warning; some releases then leave that array alive. The runtime's own promise is the
# stronger one PyTorch/XLA makes: a donated buffer is gone. It deletes a declined one itself once
# the execution has completed (``_Execution._complete``), so the warning is only noise here.
warnings.filterwarnings("ignore", message="Some donated buffers were not usable")


class Execution:
    """One launched graph: what the executor thread runs for it."""

    __slots__ = (
        "exe", "inputs", "outputs", "moved_in", "moved_out", "delay", "nap", "late", "tracked", "ticket", "donated",
        "__weakref__",
    )

    def __init__(
        self,
        exe: Executable,
        inputs: list[DeviceData],
        outputs: list[DeviceData],
        moved_in: list[Any],
        moved_out: list[Any],
        ticket: Ticket,
    ) -> None:
        self.ticket = ticket
        ticket.job = weakref.ref(self)
        self.donated: list[jax.Array] = []  # what this execution was given to consume
        self.exe = exe
        self.inputs = inputs
        self.outputs = outputs
        self.moved_in = moved_in
        self.moved_out = moved_out
        self.delay = config.options.execution_delay  # the device speed when it was launched
        self.nap = config.options.completion_delay  # how long the device runs after dispatch
        # v2.1's order: the execution is registered by a closure after dispatch (``wait-gap``)
        self.late = faults.active(faults.WAIT_GAP)
        self.tracked = False

    def track(self) -> None:
        operations.start()
        self.tracked = True  # no point since the count changed: a torn-down run cannot split them

    def untrack(self) -> None:
        if self.tracked:
            operations.finish()
            self.tracked = False

    def __call__(self) -> None:
        """The executor thread's part: dispatch, then completion here or, late, on a closure."""
        self.ticket.dispatched = time.monotonic()
        try:
            results = self._dispatch()
            if self.late:
                worker.closure(lambda: self._close(results))
                return
            self._complete(results)
        except BaseException as exc:
            self._failed(exc)

    def _close(self, results: list[jax.Array]) -> None:
        """Upstream's ``lockfn``: only now is the execution known to ``wait_device_ops``."""
        try:
            sched.point("executor.track")
            self.track()
            self._complete(results)
        except BaseException as exc:
            self._failed(exc)

    def _dispatch(self) -> list[jax.Array]:
        exe, inputs, outputs = self.exe, self.inputs, self.outputs
        # an input that shares its buffers is judged, deleted or not, by the look below, which
        # names it (JAX 0.12 marks a whole array deleted once any of its pieces is)
        args = [inputs[i].array(deleted_ok=inputs[i].shares) for i in exe.arg_order]
        if not faults.active(faults.DELETED_SHARD):
            check_inputs_live(args, inputs, exe.arg_order, self.ticket)
        elif crash_mode() != "signal":
            # the bug trusts the global array's flag and hands XLA the gone buffer, which JAX 0.10
            # answers with SIGSEGV (crash mode does exactly that); here XLA's own complaint is
            # raised instead, so that a test process survives the reproduced bug
            as_xla_would(args, inputs, exe.arg_order, self.ticket)
        if exe.donated:  # a moved argument's original is donated too: the tensor's buffer is gone
            self.donated = [args[p] for p in exe.donated]
        args = [a if m is None else jax.device_put(a, m) for a, m in zip(args, self.moved_in, strict=True)]
        if exe.donated:
            self.donated += [args[p] for p in exe.donated if self.moved_in[p] is not None]
        sched.point("executor.launch")
        seams.reach("execute")
        if self.delay and not sched.is_controlled():  # under control, the scheduler decides
            time.sleep(self.delay)
        results = exe.compiled(*args)
        results = [r if m is None else jax.device_put(r, m) for r, m in zip(results, self.moved_out, strict=True)]
        for out, result in zip(outputs, results, strict=True):
            out.fill(result)
        return results

    def _complete(self, results: list[jax.Array]) -> None:
        # filled first (readers may start), then the execution ends only when the device is done,
        # so that ``wait_device_ops`` means what upstream's does: every execution has completed
        if self.nap:  # a slow device: done later than dispatched, whoever is scheduled meanwhile
            time.sleep(self.nap)
        try:
            jax.block_until_ready(results)  # one call for every output
        except Exception:
            for result in results:
                try:
                    jax.block_until_ready(result)
                except Exception:
                    # a late completion (``wait-gap``) can find its output already donated to a
                    # later execution, which could only run once this one had finished: done
                    if not result.is_deleted():
                        raise
        self._consume_donated()
        metrics.completed += 1
        self.untrack()

    def _consume_donated(self) -> None:
        """Delete what this execution was donated and JAX left alive (a donation XLA declined, or
        a moved argument's original), now that the execution no longer reads it: the runtime's
        promise is that a donated buffer is gone, on every release."""
        donated, self.donated = self.donated, []
        for array in donated:
            if not array.is_deleted():
                try:
                    array.delete()
                except Exception:  # already gone through an array sharing its buffers
                    pass

    def _failed(self, exc: BaseException) -> None:
        """Every output carries the failure to whoever reads it, and the execution is over."""
        try:
            if isinstance(exc, sched.Abandoned):
                raise
            if self.ticket.given_up:  # its failure was reported when the wait gave up on it
                return
            for out in self.outputs:  # filled ones too: a failed execution's values are garbage
                if out.error is None:
                    out.fail(exc)
            worker.note_failure(exc)
            self.untrack()
        except sched.Abandoned:
            # the run is being torn down: the outputs are settled once it is over (``stop``);
            # settled now, a participant still unwinding would read them as a plain error
            worker.interrupted(self)
            raise

    def give_up(self, error: BaseException) -> None:
        """A wait gave up on this execution (``_Worker.give_up``): its values fail with
        ``error``, it stops counting as running, and waiting for it ends."""
        self.ticket.given_up = True
        for out in self.outputs:
            if out.error is None:
                out.settle(error)
        self.untrack()
        self.ticket.done.set()

    def abandon(self) -> None:
        for out in self.outputs:
            if out.is_placeholder:
                out.settle(
                    ExecutionAbandoned(
                        f"the execution producing this {ir.aval_text(out.aval)} value was abandoned "
                        "with the controlled run that launched it"
                    )
                )
        self.untrack()  # it will never complete: no later wait may count on it


def execute(
    roots: Sequence[ir.Node],
    out_shardings: Sequence[Any],
    donate: Iterable[DeviceData] = (),
    wait: bool = False,
) -> list[DeviceData]:
    """Compile (or fetch) and launch the graph of ``roots``; returns one placeholder per root."""
    walk = Walk(roots)
    inputs = walk.inputs
    donate_ids = {id(d) for d in donate}
    donate_idx = tuple([i for i, d in enumerate(inputs) if id(d) in donate_ids]) if donate_ids else ()
    requested = tuple(out_shardings)
    precision = config.options.matmul_precision  # part of the key: another precision, another program
    # a requested layout by its representative: another spelling of it is the same program
    layouts_key = tuple(
        s if s is None else layouts.representative(s, len(r.aval.shape)) for s, r in zip(requested, roots, strict=True)
    )
    key = (walk.key, walk.root_positions, layouts_key, donate_idx, precision)
    plan = plan_cache.lookup(key)
    if plan is None:
        plan = plan_cache.derive(walk, requested, donate_idx, precision)
        plan_cache.store(key, plan)
    else:
        metrics.cache_hits += 1
    exe, where = plan.exe, plan.where
    metrics.executions += 1
    ticket = Ticket(metrics.executions, exe.name)
    outputs = [
        DeviceData(aval, sharding, None, kid, aid, ticket)
        for aval, sharding, kid, aid in zip(plan.out_avals, plan.out_shardings, plan.out_kids, plan.out_aids, strict=True)
    ]
    for slot, sharding in zip(where, requested, strict=True):
        if sharding is not None:  # as asked: the plan may have been compiled for another spelling
            outputs[slot].sharding = sharding
    job = Execution(exe, inputs, outputs, plan.moved_in, plan.moved_out, ticket)
    if not job.late:  # upstream #5811's ``StartOperation``: known to every wait before it is queued
        job.track()
    try:
        done = worker.submit(job)
    except sched.Abandoned:  # torn down around the submission: settled (and untracked) after it
        worker.interrupted(job)
        raise
    if wait:
        await_latch(done, "a waiting sync", ticket)
        failed = next((o.error for o in outputs if o.error is not None), None)
        if failed is not None:  # this execution's own failure, reported here and not again
            earlier = worker.take_failure()
            if earlier is not None and earlier is not failed:
                worker.note_failure(earlier)  # an earlier, unrelated failure stays queued
            raise failed
    return [outputs[slot] for slot in where]


def wait_device_ops(raise_errors: bool = True) -> None:
    """Wait for every execution submitted so far; raise the first that failed since the last wait.

    ``raise_errors=False`` only waits and forgets the failure (cleanup between tests)."""
    worker.wait_all(raise_errors)
