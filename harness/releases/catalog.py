"""The catalog against a real runtime: one scenario's upstream trigger, every variant in a fresh
process of the runtime's interpreter, its outcome judged against the expected-outcomes table
(``xharness repro --runtime torch_xla|jax``).

A scenario's outcome is its variants' (``harness.scenarios.upstream_torch_xla``): ``failed`` if
any broke in a way that is not the bug, else ``reproduced`` if any showed the bug's signature,
else ``passed`` if any ran, else ``skipped``. The outcome is then judged against the expected
table (``harness.scenarios.expected``) for the release the variants actually imported, which is
not always the one asked for.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.adapters.runtimes import RELEASED, RUNTIMES
from harness.backends import Backend
from harness.errors import UsageError
from harness.exits import EXIT_FAILED, EXIT_INSTALL, EXIT_OK, EXIT_UNAVAILABLE
from harness.matrix.config import RELEASED_RUNTIMES
from harness.releases import envs, interpreters, release_spec
from harness.releases.release_spec import ReleaseSpec
from harness.report import properties as prop
from harness.scenarios import upstream_torch_xla as upstream
from harness.scenarios.expected import (
    FAILED,
    FLAKY,
    PASSED,
    REPRODUCED,
    SKIPPED,
    VERDICT_SKIPPED,
    ExpectedTable,
    ExpectedTableError,
    Verdict,
)
from harness.scenarios.expected import load as load_table
from harness.scenarios.upstream_torch_xla import VariantOutcome

#: exit codes beyond the CLI's 0/1/2
#: a release of each runtime, for messages
#: runtimes ``xharness repro --runtime`` runs upstream triggers for; without ``--release`` each
#: runs on the one this interpreter imports
UPSTREAM_RUNTIMES = tuple(name for name in RELEASED if RUNTIMES[name].upstream)


class RuntimeUnavailable(Exception):
    """The runtime is not importable by the interpreter that would run it."""


@dataclass
class ScenarioRun:
    runtime: str
    release: str  # as imported by the variants (torch_xla.__version__)
    scenario: str
    outcome: str
    verdict: Verdict
    variants: list[VariantOutcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def machine_skip(self) -> bool:
        return self.outcome == SKIPPED and all(v.machine_skip for v in self.variants)

    def properties(self) -> dict[str, str]:
        """What the JUnit record carries (and the dashboard's release table reads)."""
        return {
            prop.RUNTIME: self.runtime,
            prop.RELEASE: self.release,
            prop.SCENARIO: self.scenario,
            prop.EXPECTED: self.verdict.expected or "(no row)",
            prop.ACTUAL: self.outcome,
            prop.VERDICT: self.verdict.verdict,
            prop.REASON: self.verdict.reason,
            prop.VARIANTS: "; ".join(
                f"{v.variant}: {v.outcome}" + (f" ({v.signature})" if v.signature else "")
                for v in self.variants
            ),
            prop.REPRO: repro_line(self.scenario, self.runtime, self.release),
        }

    def message(self) -> str:
        """The verdict and what each variant saw, for a failed record and the terminal."""
        lines = [f"{self.verdict.verdict}: {self.verdict.reason}"]
        for v in self.variants:
            lines.append(f"  {v.variant}: {v.outcome}" + (f" - {v.error}" if v.error else ""))
        return "\n".join(lines)

    def details(self) -> str:
        """Tracebacks and crash tails of the variants that did not pass, with their commands."""
        parts = []
        for v in self.variants:
            if v.outcome in (PASSED, SKIPPED) and not v.details:
                continue
            parts.append(f"--- {v.variant}: {v.outcome}\n$ {v.command}\n{v.details}".rstrip())
        return "\n\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime,
            "release": self.release,
            "scenario": self.scenario,
            "outcome": self.outcome,
            "expected": self.verdict.expected,
            "verdict": self.verdict.verdict,
            "reason": self.verdict.reason,
            "machine_skip": self.machine_skip,
            "seconds": self.seconds,
            "variants": [v.to_json() for v in self.variants],
        }


def aggregate(variants: list[VariantOutcome]) -> str:
    outcomes = {v.outcome for v in variants}
    for outcome in (FAILED, FLAKY, REPRODUCED, PASSED):
        if outcome in outcomes:
            return outcome
    return SKIPPED


def flaky_counts(variants: list[VariantOutcome]) -> dict[str, int]:
    """The outcome counts of the variants whose runs disagreed (what a flaky scenario is judged by)."""
    counts: dict[str, int] = {}
    for variant in variants:
        if variant.outcome == FLAKY:
            for outcome, n in variant.counts.items():
                counts[outcome] = counts.get(outcome, 0) + n
    return counts


def run_scenario(
    scenario: str,
    python: str | None = None,
    table: ExpectedTable | None = None,
    timeout: float = upstream.DEFAULT_TIMEOUT,
    runtime: str = "torch_xla",
) -> ScenarioRun:
    """Every variant of ``scenario`` in a fresh process of ``python``, judged. A catalog
    scenario nobody has written a reproducer for yet is skipped, saying so."""
    started = time.monotonic()
    if not upstream.reproducers(scenario, runtime):
        verdict = Verdict(VERDICT_SKIPPED, None, SKIPPED,
                          f"no {runtime} reproducer of {scenario} yet (harness/scenarios/upstream_{runtime}.py)")
        return ScenarioRun(runtime, "", scenario, SKIPPED, verdict, [], 0.0)
    variants = [upstream.run_repeated(r, python, timeout) for r in upstream.reproducers(scenario, runtime)]
    outcome = aggregate(variants)
    release = next((v.release for v in variants if v.release), "")
    machine_skip = outcome == SKIPPED and all(v.machine_skip for v in variants)
    table = table or load_table()
    backend = next((v.backend for v in variants if v.backend), "") or Backend.CPU
    if release:
        verdict = table.judge(runtime, release, scenario, outcome, machine_skip, backend=backend,
                              counts=flaky_counts(variants))
    else:  # no variant said which release it ran: nothing to compare with
        from harness.scenarios.expected import judge

        verdict = judge(None, outcome, machine_skip, counts=flaky_counts(variants))
    return ScenarioRun(runtime, release, scenario, outcome, verdict, variants,
                       round(time.monotonic() - started, 3))


def importable_here(module: str = "torch_xla", python: str | None = None) -> bool:
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        return importlib.util.find_spec(module) is not None
    import subprocess

    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def python_for(runtime: str, release: ReleaseSpec | None, progress: Any = None) -> str:
    """The interpreter that runs ``runtime``: ``release``'s environment (built or reused; this
    one for ``installed``), or this one when no release is named (then the runtime must be
    importable here)."""
    if release is not None:
        return str(release_spec.ensure(release, progress=progress).python)
    if not importable_here(runtime):
        raise RuntimeUnavailable(
            f"{runtime} is not importable by {sys.executable}; name a release (--release "
            f"{RUNTIMES[runtime].example if runtime in RUNTIMES else '1.0'}) to run it in that release's own cached "
            "environment, or install it here"
        )
    return sys.executable


def repro_line(scenario: str, runtime: str, release: str | None = None) -> str:
    """The one command that runs ``scenario``'s upstream trigger again on ``runtime`` (in the
    environment of ``release``, as a command line names it, when given)."""
    line = f"xharness repro {scenario} --runtime {runtime}"
    return f"{line} --release {shlex.quote(release)}" if release else line


def say(message: str) -> None:
    """A progress line of the release commands, on stderr."""
    print(f"xharness: {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ repro
def repro(args: argparse.Namespace) -> int:
    """``xharness repro SCENARIO --runtime torch_xla [--release V] [--json]``."""
    from harness.scenarios import registry

    try:
        upstream.check_name(args.scenario)
    except registry.UnknownScenario as exc:
        raise UsageError(str(exc)) from None
    if getattr(args, "inject", False):
        raise UsageError(
            f"--inject turns a fault switch on, and runtime {args.runtime} has none: against a "
            "real runtime the upstream trigger runs as written (drop --inject)"
        )
    if args.runtime not in UPSTREAM_RUNTIMES:
        raise UsageError(f"runtime {args.runtime!r} has no upstream reproducers here")
    if args.release and args.runtime not in RELEASED_RUNTIMES:
        raise UsageError(
            f"--release installs a release of {', '.join(RELEASED_RUNTIMES)}; runtime "
            f"{args.runtime} under test is the one this interpreter imports (drop --release)"
        )
    spec = release_spec.parse_argument(args.runtime, args.release) if args.release else None
    if spec is not None:
        interpreters.apply_argument(getattr(args, "python", None))
    if not upstream.reproducers(args.scenario, args.runtime):
        raise UsageError(f"scenario {args.scenario!r} has no {args.runtime} reproducer")
    try:
        table = load_table()
    except ExpectedTableError as exc:
        raise UsageError(str(exc)) from None
    try:
        python = python_for(args.runtime, spec, progress=say)
    except envs.ReleaseInstallError as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_INSTALL
    except RuntimeUnavailable as exc:
        print(f"xharness: error: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    run = run_scenario(args.scenario, python, table, timeout=args.timeout, runtime=args.runtime)
    replay = repro_line(args.scenario, args.runtime, spec.text if spec is not None else None)
    if args.json:
        print(json.dumps({**run.to_json(), "python": python, "repro": replay}))
    else:
        release = run.release or "(unknown release)"
        expected = run.verdict.expected or "no row"
        print(f"{run.scenario} [{run.runtime} {release}] {run.outcome} "
              f"(expected: {expected}) -> {run.verdict.verdict} ({run.seconds:.1f} s)")
        print(f"  {run.verdict.reason}")
        for v in run.variants:
            seen = f" [{v.signature}]" if v.signature else ""
            print(f"  {v.variant}: {v.outcome}{seen}" + (f" - {v.error}" if v.error else ""))
        if not run.verdict.green:
            details = run.details()
            if details:
                print(details, file=sys.stderr)
        print(f"replay: {replay}")
    return EXIT_OK if run.verdict.green else EXIT_FAILED

