"""What an invariant is: a plain check, the inputs that exercise it, and the bugs it must catch.

An ``Invariant`` pairs a plain function (``check(**example)`` raises ``AssertionError`` or the
runtime's own error when the runtime breaks the rule; usable without hypothesis) with a strategy
of examples, and declares the fault switches it must catch. From those it offers a ready
hypothesis test (for a user's suite: ``test_x = invariant.hypothesis_test()``) and ``search``,
which runs hypothesis and returns the shrunk counterexample instead of raising: the tool the
teeth meta-tests and ``xharness teeth`` are built on.

Every example runs inside ``harness.runtime.testing.isolated()``, so one example's pending graph,
options or simulated topology never leak into the next, and a falsifying example replays alone.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

#: settings of a search: deterministic (the same counterexample on every machine), no deadline
#: (XLA compile times vary), no example database (a search must not depend on earlier runs), and
#: no explain phase: after shrinking it re-runs the counterexample hundreds of times to mark which
#: parts could vary, which took 4 to 8 s of the 0.5 to 9 s a schedule search needs, for notes the
#: shrunk schedule already makes plain (its draws are its preemptions)
SEARCH_SETTINGS = dict(
    deadline=None,
    phases=[phase for phase in Phase if phase is not Phase.explain],
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)

_BLOB = re.compile(r"@reproduce_failure\((.*?)\)")


@dataclass(frozen=True)
class Falsified:
    """A shrunk counterexample: what hypothesis reported, and how big it is."""

    invariant: str
    example: str  # the shrunk example, as hypothesis printed it (or the rule steps of a machine)
    size: int  # the invariant's own measure: dimensions, mesh axes, rule steps...
    error: str  # ``Type: message`` of the failure the example raised
    blob: str  # hypothesis' ``@reproduce_failure`` arguments, when it printed them
    faults: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "example": self.example,
            "size": self.size,
            "error": self.error,
            "blob": self.blob,
            "faults": list(self.faults),
        }


@dataclass(frozen=True)
class KnownFinding:
    """An invariant a real runtime is known to break, with the upstream report: the ready test
    expects the failure (and fails, as unexpectedly fixed, when the runtime stops breaking it).

    Every finding has a reproducer in the runtime's own API: a catalog scenario's (``scenario``),
    or its own (``id``, in ``upstream_findings.FINDING_REPRODUCERS``). Which releases carry it is
    read from the expected-outcomes table's rows of that name, never written twice, and
    ``xharness report upstream NAME`` writes the issue to file."""

    invariant: str
    runtime: str
    #: where upstream tracks it: the issue's address first (``https://...``, then what it covers),
    #: or ``none found: searched ...`` with the queries, so that the next search starts from them
    upstream: str
    summary: str
    #: a regular expression every failure must match to be this finding (``Type: message``);
    #: empty accepts any failure. A failure that does not match is reported, never excused.
    match: str = ""
    scenario: str = ""  # the catalog scenario that reproduces it, if there is one
    #: the finding's own name where no catalog scenario reproduces it: its upstream reproducers
    #: and its rows in the expected-outcomes table carry this name
    id: str = ""
    #: the backend the finding shows on, whose expected-outcomes rows give its releases
    backend: str = "cpu"
    #: a run that finds nothing is "unexpectedly fixed"; False where the CI profile's examples
    #: are known to miss the bug on these releases (say why where the finding is declared)
    must_fail: bool = True
    #: the failure leaves the runtime's process broken for later tests (after the partial-sync
    #: donation, PyTorch/XLA's later steps fail "Check failed: tensor_data" even with the failed
    #: programs' tensors gone): such an invariant runs in a process of its own
    #: (``isolated_invariants``)
    poisons: bool = False

    @property
    def name(self) -> str:
        """The name its reproducers, its table rows and its report go by."""
        return self.scenario or self.id

    @property
    def upstream_link(self) -> str:
        """The upstream issue's address, or "" where none was found."""
        return self.upstream.split()[0] if self.upstream.startswith("https://") else ""

    def holds_on(self, version: str) -> bool:
        """Whether this release carries it: the expected-outcomes table's rows of ``name`` say so.
        A release no row covers (nobody measured it) may carry it too."""
        return expected_table().carries(self.runtime, version, self.name) is not False

    def explains(self, leaf: BaseException) -> bool:
        return not self.match or re.search(self.match, f"{type(leaf).__name__}: {leaf}") is not None


@functools.cache
def expected_table() -> Any:
    """The harness' expected-outcomes table, read once per process (a malformed one raises)."""
    from harness.scenarios import expected

    return expected.load(expected.default_path())


#: what the invariants found on real runtimes (docs/reference/invariants.md, "Known findings")
KNOWN_FINDINGS: list[KnownFinding] = [
    KnownFinding(
        invariant="host-copy",
        runtime="jax",
        upstream="https://github.com/jax-ml/jax/issues/37830",
        summary="jax.device_put aliases a writeable numpy buffer on CPU: writing the host array "
        "afterwards changes the jax.Array",
        match=r"the device buffer aliases the caller's memory",
        scenario="host-aliasing",
    ),
    KnownFinding(
        invariant="host-copy",
        runtime="jax",
        upstream="https://github.com/jax-ml/jax/issues/37830 has the cause (device_put keeps only a "
        "reference to a writeable numpy buffer, under a promise that the caller leaves it alone) "
        "and shows it on the CPU; the GPU's race is not reported: searched jax-ml/jax issues for "
        "'device_put asynchronous numpy array mutated after device_put', 'device_put copy numpy "
        "buffer race GPU', 'kImmutableUntilTransferCompletes device_put numpy' (found by a field "
        "run on an H100 with JAX 0.11.2)",
        summary="on a GPU jax.device_put returns before the transfer has read the numpy buffer: a "
        "write right after it reaches the jax.Array",
        match=r"the transfer to the \w+ read the caller's memory",
        scenario="host-aliasing",
        backend="gpu",
        must_fail=False,  # a race: on the CPU the aliasing finding above is what fails
    ),
    # xm.unlazy of some tensors donates buffers pending values still read (the #8422 mechanism
    # in the caller #8484 left alone); both machines find it, shrunk to in-place, derive, sync.
    # A later step over the leftovers of such an example fails on the same deleted data
    # ("Check failed: tensor_data"), so that message is part of the finding too.
    *(
        KnownFinding(
            invariant=invariant,
            runtime="torch_xla",
            upstream="https://github.com/pytorch/xla/issues/8422",
            summary="a sync of some tensors (xm.unlazy, _xla_sync_multi with sync_xla_data) "
            "donates buffers other pending values still read",
            match=r"buffer with shape .* is deleted|Check failed: tensor_data|Check failed: HasValue\(\)",
            scenario="partial-sync-donation",
            poisons=True,
            # both releases fail the same shrunk program and the scenario reproduces there, but
            # whether the CI profile's derandomized (swarmed) programs happen to hit it depends on
            # the draws: a run that misses it is not a fix
            must_fail=False,
        )
        for invariant in ("sync-aliasing", "partial-sync")
    ),
    # FSDPv2's spec of a 0-d parameter is a list before 2.7 (#8522; the fix #8613 is first in
    # 2.7.0, xharness bisect): unhashable, so the op-sharding cache raises, and the spec is not
    # the tuple the normalization invariant asks for
    *(
        KnownFinding(
            invariant=invariant,
            runtime="torch_xla",
            upstream="https://github.com/pytorch/xla/issues/8522",
            summary="FSDPv2 prepares a 0-d parameter's partition spec as a list",
            match=r"unhashable type: 'list'|for a 0-d parameter: not a tuple",
            scenario="unhashable-spec",
        )
        for invariant in ("spec-normalization", "op-sharding-cache")
    ),
    # #8482 before 2.6: a save after an in-place write through an alias holds the alias' old value
    KnownFinding(
        invariant="sync-aliasing",
        runtime="torch_xla",
        upstream="https://github.com/pytorch/xla/issues/8482",
        summary="xm.save reads a functional alias before syncing it: the checkpoint holds a stale value",
        match=r"the checkpoint of tensor \d+ after",
        scenario="aliased-save",
        must_fail=False,  # one of the failures the machine reports on 2.5.1, not the only one
    ),
    # the training programs' partial syncs (``_xla_sync_multi(..., sync_xla_data=True)``) meet #8422
    # too: the same program with its syncs made full steps passes
    *(
        KnownFinding(
            invariant=invariant,
            runtime="torch_xla",
            upstream="https://github.com/pytorch/xla/issues/8422",
            summary="a sync of some tensors in a training program donates buffers other pending "
            "values still read",
            match=r"buffer with shape .* is deleted|Check failed: tensor_data|Check failed: HasValue\(\)"
            r"|Check failed: !buffer->IsDeleted\(\)",
            scenario="partial-sync-donation",
            poisons=True,
            must_fail=False,  # about one program in 20 to 60 draws such a sync: CI's few usually miss it
        )
        for invariant in ("training-differential", "step-boundary")
    ),
    # the semantics oracle against eager torch: a second backward accumulating a sum's gradient
    # into .grad adds the sum's element count instead of 1 (t.sum().backward() twice: 25, not 2,
    # for a 4x6 parameter); the wrong gradient then moves the parameter wrongly at the next step
    KnownFinding(
        invariant="semantics-oracle",
        runtime="torch_xla",
        upstream="none found: searched pytorch/xla and pytorch/pytorch issues for 'gradient "
        "accumulation wrong backward twice xla tensor grad', 'expand inplace functionalization "
        "wrong result xla', 'expand_inverse functionalization in-place mutation expanded view', "
        "'calling backward twice grad wrong value functionalization XLA_DISABLE_FUNCTIONALIZATION', "
        "'grad accumulation incorrect second backward sum expand AccumulateGrad'; nearest: "
        "pytorch/xla#5839 (a write through select() of an expand, closed in 2025 as no longer "
        "reproducible) and pytorch/pytorch#114302 with PR #114538 (expand's inverse under "
        "torch.compile)",
        summary="a second backward() of x.sum() into an existing .grad accumulates x.numel() instead "
        "of 1 per element (torch.ones((4, 6), device=xla, requires_grad=True).sum().backward() twice: "
        "grad 25, eager torch 2); x.mean() accumulates right",
        match=r"the runtime read .*, eager PyTorch",
        scenario="expanded-grad-accumulation",
        must_fail=False,  # the CI profile's programs need two backward passes into one .grad
    ),
    KnownFinding(
        invariant="step-boundary",
        runtime="torch_xla",
        upstream="https://github.com/pytorch/xla/issues/9751 (the uncached ReplicateShardedData "
        "program; #7943 saw the symptom on a TPU); found here by the step-boundary invariant",
        summary="in SPMD with a sharded input, reading a gradient or an updated parameter (.cpu()) "
        "before the step boundary compiles a program again on every iteration: every host read "
        "of a split value compiles a replication program (ReplicateShardedData), never cached",
        match=r"compiled \d+ program\(s\) again|kept compiling",
        scenario="sharded-read-compiles",
        must_fail=False,
    ),
    # the swarm's alias chains found it on 2.9.0: a read of x[::2] after re-sharding, 1e-45 read
    # back as 0; a strided read of a split value is a computation on the device, and XLA's CPU
    # backend runs computations with subnormals flushed to zero (a plain read keeps them)
    KnownFinding(
        invariant="round-trip",
        runtime="torch_xla",
        upstream="https://github.com/openxla/xla/issues/22858 (XLA:CPU flushes subnormals to zero "
        "in every computation, by design: jax-ml/jax#16200 was closed as intended, #26658 is open); "
        "searched pytorch/xla issues for 'denormal subnormal values become zero CPU PJRT', 'tiny "
        "float 1e-45 slice returns 0 flush denormals': none found there",
        summary="a float32 value split over the devices and read through a strided view (x[::2], "
        "one element per device) loses its subnormal numbers: they are flushed to zero",
        match=r"read through the views .*: only subnormal numbers differ",
        id="subnormal-flush-sharded-view",
        must_fail=False,  # the CI profile's chains rarely draw a strided view of a subnormal
    ),
    KnownFinding(
        invariant="round-trip",
        runtime="torch_xla",
        upstream="none found: searched pytorch/xla issues for 'mark_sharding NaN payload changed "
        "canonical NaN bits', 'resharding tensor already on device mark_sharding changes values "
        "NaN', 'torch_xla SPMD sharded tensor cpu() NaN values different bits signaling NaN', and "
        "openxla/xla for 'NaN payload not preserved after computation canonical NaN'",
        summary="mark_sharding of bfloat16 data already on the device rewrites NaN payloads to the "
        "canonical NaN (0x7fc1 and the signalling 0x7f81 read back 0x7fc0; the sign survives): "
        "every number survives, the bits do not (float32 payloads survive)",
        match=r"only NaN payloads differ",
        id="nan-payload-resharding",
    ),
]


def known_findings(invariant: str, runtime: str, version: str) -> list[KnownFinding]:
    """The findings that say how ``invariant`` breaks on this runtime release."""
    return [
        f
        for f in KNOWN_FINDINGS
        if f.invariant == invariant and f.runtime == runtime and f.holds_on(version)
    ]


def isolated_invariants(runtime: str, version: str) -> list[str]:
    """Invariants whose known failure on this release breaks the process for the tests after it."""
    return sorted({f.invariant for f in KNOWN_FINDINGS if f.poisons and f.runtime == runtime and f.holds_on(version)})


def known_finding(invariant: str, runtime: str, version: str) -> KnownFinding | None:
    found = known_findings(invariant, runtime, version)
    return found[0] if found else None


def explained(findings: list[KnownFinding], exc: BaseException) -> list[KnownFinding] | None:
    """The findings that account for every failure in ``exc`` (hypothesis reports each distinct
    one), or None when some failure is none of them: that one is news, never excused."""
    used: list[KnownFinding] = []
    for leaf in _leaves(exc):
        finding = next((f for f in findings if f.explains(leaf)), None)
        if finding is None:
            return None
        if finding not in used:
            used.append(finding)
    return used


@dataclass(frozen=True)
class Invariant:
    """One rule every runtime must keep: a plain check, the examples that exercise it, and the
    fault switches it must catch.

    ``check(**example)`` raises ``AssertionError`` (or the runtime's own error) when the runtime
    breaks the rule, and works without hypothesis; ``hypothesis_test()`` is a ready test for a
    suite, and ``search()`` the shrunk counterexample ``xharness teeth`` reports. A plugin registers
    one under the ``xharness.invariants`` entry-point group, named by its ``id``; it is checked when
    loaded (its ``id`` is the entry point's, it ``needs`` only capabilities the harness knows).
    """

    #: the invariant's id, as commands name it (``xharness teeth --checks ID``); the entry point's name
    id: str
    #: one line stating the rule
    title: str
    #: the plain check: called with one example's values as keyword arguments, it returns when the
    #: rule holds and raises when it is broken
    check: Callable[..., None]
    #: a function returning the hypothesis strategy of examples (dicts of ``check``'s keyword
    #: arguments), built lazily: it may need the devices
    examples: Callable[[], st.SearchStrategy[dict[str, Any]]]
    #: the fault switches it must catch (of the runtime under test): ``xharness teeth`` turns each
    #: on and fails when the search finds no counterexample
    catches: tuple[str, ...] = ()
    #: an example's size (dimensions, axes, operations...), the measure a shrunk counterexample is
    #: reported and bounded by
    size: Callable[[dict[str, Any]], int] = lambda example: 0
    #: the largest shrunk counterexample the teeth tests accept (0: no bound)
    max_size: int = 0
    #: examples per run under the CI profile (scaled with a wider profile: ``scaled_examples``)
    max_examples: int = 100
    #: examples a search for a counterexample may try (teeth); a focused program search needs more
    #: than a CI run, since a bug's sequence is a small corner of the programs it can draw
    search_examples: int = 0
    #: the fewest devices the process must address; with fewer the invariant is skipped
    min_devices: int = 1
    #: capabilities of the runtime under test the invariant needs (``harness.adapters.base``)
    needs: tuple[str, ...] = ()
    #: run each example inside ``isolated()``; an invariant that only reads cached objects and
    #: records nothing (the spec checks) skips it, which is a third of its time per example
    isolate: bool = True
    #: the runtime mutants it must kill (stems of ``suites/properties/mutants/*.patch``): bugs
    #: nobody planted behind a switch, run by ``ci/mutants.py``, never by ``search``
    mutants: tuple[str, ...] = ()
    #: what it needs beyond the runtime under test (the semantics oracle: an eager torch to ask):
    #: why that is missing, or None; the ready test skips with the reason, a search refuses
    resources: Callable[[], str | None] | None = None

    def run_example(self, example: dict[str, Any]) -> None:
        """Check one example in isolation, remembering it if it fails."""
        from harness.runtime.testing import isolated

        try:
            if self.isolate:
                with isolated():
                    self.check(**example)
            else:
                self.check(**example)
        except BaseException as exc:
            try:  # each distinct failure hypothesis reports keeps its own example
                exc.__dict__.setdefault("xharness_example", example)
            except AttributeError:
                pass
            raise

    def unmet(self) -> str | None:
        """Why the runtime under test cannot host this invariant, or None."""
        from harness.adapters import Unsupported, current, require

        try:
            require(current(), *self.needs)
        except Unsupported as exc:
            return f"{self.id}: {exc}"
        missing = self.resources() if self.resources is not None else None
        return f"{self.id}: {missing}" if missing else None

    def scaled_examples(self) -> int:
        """``max_examples`` under the loaded profile: the invariant's own count is for the CI
        profile (hypothesis' default of 100 examples), a wider profile scales it up alike."""
        return max(1, math.ceil(self.max_examples * settings.default.max_examples / 100))

    def hypothesis_test(self, **overrides: Any) -> Callable[[], None]:
        """A ready test function for pytest (or to call directly), under the loaded hypothesis
        profile with the invariant's example count scaled to it; ``overrides`` win."""
        invariant = self

        def test() -> None:
            import pytest

            from harness.adapters import current

            if reason := invariant.unmet():
                pytest.skip(reason)
            options: dict[str, Any] = {"max_examples": invariant.scaled_examples()}
            rt = current()
            findings = known_findings(invariant.id, rt.name, rt.version())
            if findings:
                # a failure here is judged, not debugged: whether a known finding explains it does
                # not depend on its size, and shrinking a whole training program on a real release
                # cost minutes (step-boundary on torch_xla 2.9.0: 146 s against 14 s); an
                # unexplained one is re-raised as drawn, and ``search()`` shrinks it
                options["phases"] = tuple(p for p in Phase if p is not Phase.shrink)
            run = settings(**{**options, **overrides})(given(invariant.examples())(invariant.run_example))
            if not findings:
                run()
                return
            try:
                run()
            except BaseException as exc:  # noqa: BLE001 - the known failure, reported as such
                used = None if isinstance(exc, KeyboardInterrupt | SystemExit) else explained(findings, exc)
                if used is None:
                    raise
                pytest.xfail(
                    "known upstream bug "
                    + "; ".join(f"{f.upstream}: {f.summary}" for f in used)
                    + f" ({type(exc).__name__})"
                )
            required = [f for f in findings if f.must_fail]
            if required:
                pytest.fail(
                    f"unexpectedly fixed: {rt.name} {rt.version()} keeps {invariant.id}, but "
                    + "; ".join(f"{f.upstream} ({f.summary})" for f in required)
                    + " was expected to break it; update KNOWN_FINDINGS"
                )

        test.__name__ = f"test_{self.id.replace('-', '_')}"
        test.__qualname__ = test.__name__
        test.__doc__ = self.title
        return test

    def search(self, max_examples: int | None = None, **overrides: Any) -> Falsified | None:
        """Run hypothesis; the shrunk counterexample, or None when none was found. Raises
        ``harness.adapters.Unsupported`` when the runtime under test cannot host the invariant."""
        if reason := self.unmet():
            from harness.adapters import Unsupported

            raise Unsupported(reason)
        budget = max_examples or self.search_examples or self.max_examples
        options = {**SEARCH_SETTINGS, "max_examples": budget, **overrides}
        test = settings(**options)(given(self.examples())(self.run_example))
        try:
            test()
        except BaseException as exc:  # noqa: BLE001 - any failure of the runtime is a finding
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            return self._falsified(exc)
        return None

    def _falsified(self, exc: BaseException) -> Falsified:
        """The smallest of the failures hypothesis reported (it reports each distinct one)."""
        from harness.adapters import current

        found = [
            (
                self.size(e.__dict__["xharness_example"])
                if "xharness_example" in e.__dict__
                else -1,
                i,
                e,
            )
            for i, e in enumerate(_leaves(exc))
        ]
        size, _, leaf = min(found, key=lambda f: (f[0] < 0, f[0], f[1]))
        notes = "\n".join(getattr(leaf, "__notes__", ()))
        blob = _BLOB.search(notes) or _BLOB.search("\n".join(getattr(exc, "__notes__", ())))
        shown = "\n".join(
            line
            for line in notes.splitlines()
            if not line.startswith(("You can reproduce", "@reproduce"))
        ).strip()
        return Falsified(
            invariant=self.id,
            example=shown or repr(leaf.__dict__.get("xharness_example", {})),
            size=size,
            error=f"{type(leaf).__name__}: {leaf}".strip(),
            blob=blob.group(1) if blob else "",
            faults=tuple(sorted(current().faults_on())),
        )


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


@contextmanager
def switched_on(names: tuple[str, ...]) -> Iterator[None]:
    """Every named fault switch of the runtime under test on for the block."""
    from contextlib import ExitStack

    from harness.adapters import current

    with ExitStack() as stack:
        for name in names:
            stack.enter_context(current().inject(name))
        yield
