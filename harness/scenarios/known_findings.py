"""What the invariants found in real runtimes: each bug, where upstream tracks it, how to tell its
failures from any other, and which releases carry it.

The ready test of an invariant (``harness.properties.base``) expects the failure a finding
describes on a release that carries it, and fails, as unexpectedly fixed, when the runtime stops
showing it. The dashboard's findings page (``harness.report.findings``) and ``xharness report
upstream`` read the same list. It lives here, below the invariants, and imports nothing heavier
than the expected-outcomes table: rendering a report must not start JAX.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.runtimes import RELEASED


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
    #: where it was found when no invariant's examples drew it (then ``invariant`` names the
    #: check that judged it, one of ``harness.network.checks.CHECKS``): the report says so
    found_in: str = ""

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
        return table_of(self.runtime).carries(self.runtime, version, self.name) is not False

    def explains(self, leaf: BaseException) -> bool:
        return not self.match or re.search(self.match, f"{type(leaf).__name__}: {leaf}") is not None


def table_of(runtime: str) -> Any:
    """The expected-outcomes table whose rows say which releases of ``runtime`` carry a finding:
    the harness' own for a runtime it releases (``RELEASED``), the project's for a plugin's."""
    return expected_table() if runtime in RELEASED else project_table()


def names() -> tuple[str, ...]:
    """What a table's rows and a trigger may name beside the scenarios: every known finding that
    no catalog scenario reproduces (the harness' and the plugins')."""
    from harness.scenarios import upstream_findings

    return tuple(dict.fromkeys((*upstream_findings.finding_names(), *(f.id for f in plugin_findings() if f.id))))


def table_names() -> tuple[str, ...]:
    """What a project's expected table may name: the registered scenarios (entry-point names,
    nothing imported) and every known finding of its own (the harness' and the plugins')."""
    from harness import entrypoints

    return tuple(e.name for e in entrypoints.entry_points(entrypoints.SCENARIOS)) + names()


@functools.cache
def project_table() -> Any:
    """The project's expected-outcomes table (``[tool.xharness] expected``), read once per
    process; an empty one where the project names none (every outcome is then unexpected). A
    project file or table that cannot be read is the user's to fix: :class:`UsageError`, naming
    the file and line, wherever a plugin's finding needs it (the dashboard, the summary, a run)."""
    from harness import project
    from harness.errors import UsageError
    from harness.scenarios import expected

    try:
        own = project.load()
        if own.expected is None:
            return expected.ExpectedTable(Path("(no expected table: [tool.xharness] expected)"), ())
        return expected.load(own.expected, scenarios=table_names())
    except (project.ProjectError, expected.ExpectedTableError) as exc:
        raise UsageError(str(exc)) from None


def check_findings(entry: Any, obj: Any) -> str | None:
    """Why ``obj`` is not the known findings of runtime ``entry.name`` (``xharness.findings``)."""
    items = tuple(obj) if isinstance(obj, tuple | list) else (obj,)
    wrong = next((f for f in items if not isinstance(f, KnownFinding)), None)
    if wrong is not None or not items:
        what = "nothing" if not items else f"a {type(wrong).__name__}"
        return f"{entry.value} holds {what}, not only harness.api.KnownFinding items"
    for finding in items:
        if finding.runtime != entry.name:
            return (f"the finding {finding.name!r} is of runtime {finding.runtime!r}, registered as "
                    f"{entry.name!r}: they must agree")
        if bool(finding.scenario) == bool(finding.id):
            return f"the finding {finding.name or finding.summary[:40]!r} needs a scenario or an id, one of them"
    return None


@functools.cache
def registered() -> tuple[tuple[bool, KnownFinding], ...]:
    """Every finding registered under ``xharness.findings`` (the harness' own ``KNOWN_FINDINGS``
    first, through the same group), each with whether a plugin declared it; a broken
    registration is left out, said on stderr."""
    from harness import entrypoints

    loaded = entrypoints.load_group(entrypoints.FINDINGS, check_findings)
    return tuple((not entry.builtin, f) for entry, obj in loaded.items.values()
                 for f in (tuple(obj) if isinstance(obj, tuple | list) else (obj,)))


def plugin_findings() -> tuple[KnownFinding, ...]:
    """The findings plugins declare (``xharness.findings``)."""
    return tuple(f for plugin, f in registered() if plugin)


def all_findings() -> tuple[KnownFinding, ...]:
    """The harness' findings in the order ``KNOWN_FINDINGS`` declares them (they come registered
    by runtime), then the plugins'."""
    own = sorted((f for plugin, f in registered() if not plugin), key=KNOWN_FINDINGS.index)
    return (*own, *plugin_findings())


@functools.cache
def expected_table() -> Any:
    """The harness' expected-outcomes table, read once per process (a malformed one raises).

    The names its rows may use are the registered scenarios' entry-point names and the findings'
    own, read without loading any scenario: an invariant's ready test asks this inside a release's
    process, which must not import the catalog's modules for it."""
    from harness import entrypoints
    from harness.scenarios import expected, upstream_findings

    names = tuple(e.name for e in entrypoints.entry_points(entrypoints.SCENARIOS))
    return expected.load(expected.default_path(), scenarios=names + tuple(upstream_findings.finding_names()))


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
    # found by the launcher cells on the one-machine SLURM cluster (suites/cluster/
    # test_coordinator_port.py); its check is the network checks' "blamed": the job that is aborted
    # did nothing wrong, and its error blames a restart of a rank that never restarted
    KnownFinding(
        invariant="blamed",
        runtime="jax",
        upstream="none found: searched jax-ml/jax issues for 'SLURM coordinator port collision two "
        "jobs same node', 'SLURM_JOB_ID % 4096 coordinator port', 'unexpectedly tried to connect with "
        "a different incarnation SLURM', 'jax.distributed.initialize port already in use slurm'; the "
        "port's formula is jax-ml/jax#12152's (SlurmCluster, 2022)",
        summary="JAX's SLURM detection puts the coordinator on port SLURM_JOB_ID % 4096 + 61440 of the "
        "job's first node: two jobs whose ids differ by 4096 and share that node pick one port, the "
        "second job's coordination service starts there without an error, and the first job, which "
        "did nothing wrong, is aborted ('unexpectedly tried to connect with a different incarnation')",
        match=r"which did nothing wrong, was aborted|share one coordinator address",
        id="slurm-jobs-4096-apart",
        found_in="launcher cells on a one-machine SLURM cluster, two jobs 4096 ids apart on one node",
        must_fail=False,  # no invariant's ready test draws it: the launcher cells and the reproducer do
    ),
]


def known_findings(invariant: str, runtime: str, version: str) -> list[KnownFinding]:
    """The findings that say how ``invariant`` breaks on this runtime release."""
    return [
        f
        for f in all_findings()
        if f.invariant == invariant and f.runtime == runtime and f.holds_on(version)
    ]


def isolated_invariants(runtime: str, version: str) -> list[str]:
    """Invariants whose known failure on this release breaks the process for the tests after it."""
    return sorted({f.invariant for f in all_findings() if f.poisons and f.runtime == runtime and f.holds_on(version)})


def known_finding(invariant: str, runtime: str, version: str) -> KnownFinding | None:
    found = known_findings(invariant, runtime, version)
    return found[0] if found else None


#: the harness' own findings, registered by runtime under ``xharness.findings`` as a plugin's are
JAX_FINDINGS = tuple(f for f in KNOWN_FINDINGS if f.runtime == "jax")
TORCH_XLA_FINDINGS = tuple(f for f in KNOWN_FINDINGS if f.runtime == "torch_xla")
