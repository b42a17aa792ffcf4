"""``xharness list`` and ``xharness repro``: the catalog from the command line.

``repro`` runs the scenario in a child process configured as the requested cell (8 CPU devices by
default), judges the outcome (a death by signal is matched against the scenario's signal
signatures) and always prints the one command that replays the run exactly. A child that hangs
dumps all its thread stacks shortly before the time limit, and the dump is shown with the result.
``HARNESS_FAULTS`` naming an unknown switch is a usage error, found before any child starts (as
every setting is: ``harness.settings``).

A race scenario runs under schedule control (``harness.scenarios.explore``): ``--explore`` picks
the strategy, ``--schedule`` replays one schedule (a string, or a file holding one), and the output
names the failing schedule with a second replay line for exactly that schedule.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

from harness import stack_dumps
from harness.commands import plugins
from harness.errors import UsageError
from harness.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE

DEFAULT_DEVICES = 8
#: what ``xharness list`` lists
KINDS = ("scenarios", "runtimes", "invariants")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list", help="list the failure catalog, the runtimes under test or the invariants",
        description="List what is registered (the harness' own items and every installed plugin's, "
        "each with the distribution it comes from). A plugin that fails to load is named on stderr "
        "and left out.",
    )
    p.add_argument("kind", nargs="?", choices=KINDS, default="scenarios",
                   help="what to list (default: scenarios, the catalog)")
    p.add_argument("--json", action="store_true", help="one JSON array of records")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("repro", help="run one scenario, fixed or injected")
    p.add_argument("scenario")
    p.add_argument("--inject", action="store_true", help="turn the scenario's fault switch on")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--cell", default=None, help="a cell of the matrix file (default: 8 CPU devices)"
    )
    p.add_argument("--matrix", default=None, help="matrix file for --cell (default: the project's, as for run)")
    p.add_argument("--runtime", default=None,
                   help="runtime under test: the scenario's own by default (the reference runtime's "
                   "fault switches for the harness' catalog, a plugin's runtime for its scenarios); "
                   "torch_xla or jax run the catalog's upstream trigger instead")
    p.add_argument(
        "--release",
        default=None,
        help="with --runtime torch_xla or jax: run in this release's cached environment (built if "
        "needed); a version, a wheel file, a directory of wheels, or 'installed' (this interpreter's)",
    )
    from harness.releases import interpreters

    interpreters.add_argument(p)
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds before the run counts as hung"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR|off",
        help="JAX's persistent compilation cache for the run (default: $XHARNESS_COMPILE_CACHE, "
        "else ~/.cache/xharness/jax)",
    )
    control = p.add_mutually_exclusive_group()
    control.add_argument(
        "--explore",
        choices=("random", "pct", "dfs", "hypothesis", "stress"),
        default=None,
        help="run the variants under this schedule-control strategy (seeded by --seed; a race "
        "scenario has its own default)",
    )
    control.add_argument(
        "--schedule",
        default=None,
        metavar="STRING|FILE",
        help="replay one schedule (like s1:0x14.1x6.0), or the first one a file holds",
    )
    p.set_defaults(handler=cmd_repro)


def _origin(entry: Any) -> dict[str, Any]:
    """Where a registered item comes from, as ``list --json`` shows it."""
    if entry is None:
        return {"distribution": None, "version": None, "entry_point": None}
    return {"distribution": entry.distribution, "version": entry.version,
            "entry_point": f"{entry.name} = {entry.value}"}


def _from(entry: Any) -> str:
    """`` (from plugin-dist 1.0)`` for a plugin's item; nothing for the harness' own."""
    return "" if entry is None or entry.builtin else f"  (from {entry.distribution} {entry.version})"


def _record(s: Any) -> dict[str, Any]:
    from harness.scenarios import registry

    return {
        "id": s.id,
        "title": s.title,
        "upstream": list(s.upstream),
        "links": s.upstream_links(),
        "component": s.component,
        "trigger": s.trigger,
        "fault": s.fault,
        "signatures": [
            {"name": sig.name, "match": sig.describe(), "crash_mode": sig.crash_mode}
            for sig in s.signatures
        ],
        "variants": list(s.variants),
        "needs": s.needs.to_json(),
        # a variant that needs more than the scenario (a mechanism some backends lack): where
        # its needs are unmet it is skipped with ``why``, and the others still run
        "variant_needs": {name: needs.to_json() for name, needs in s.variant_needs.items()},
        "runtime": s.runtime,
        **_origin(registry.origin(s.id)),
    }


def cmd_list(args: argparse.Namespace) -> int:
    from harness import project

    try:  # what is listed is what a run of this project collects: its file must be readable first
        project.load()
    except project.ProjectError as exc:
        raise UsageError(str(exc)) from None
    if args.kind == "runtimes":
        return _list_runtimes(args.json)
    if args.kind == "invariants":
        return _list_invariants(args.json)
    from harness.scenarios import registry

    scenarios = registry.all_scenarios()
    if args.json:
        print(json.dumps([_record(s) for s in scenarios], indent=2))
        return EXIT_OK
    width = max((len(s.id) for s in scenarios), default=0)
    for s in scenarios:
        print(f"{s.id:<{width}}  {s.title}{_from(registry.origin(s.id))}")
        if s.runtime != "reference":
            print(f"{'':<{width}}  runtime: {s.runtime}; fault switch: {s.fault}")
        print(
            f"{'':<{width}}  upstream: {', '.join(s.upstream) or 'none (found in-house)'}; signatures: {', '.join(sig.describe() for sig in s.signatures)}"
        )
        for name, needs in s.variant_needs.items():
            where = f"{' or '.join(needs.backends)} only" if needs.backends else "own needs"
            print(f"{'':<{width}}  variant {name}: {where}" + (f" ({needs.why})" if needs.why else ""))
    return EXIT_OK


def _list_runtimes(as_json: bool) -> int:
    """Every registered runtime: its class, capabilities and origin (loading a class imports
    its adapter module, never the runtime itself)."""
    from harness import adapters

    loaded = adapters.registry()
    records = []
    for name, (entry, cls) in loaded.items.items():
        records.append({"name": name, "adapter": entry.value, "capabilities": sorted(cls.capabilities),
                        **_origin(entry)})
    if as_json:
        print(json.dumps(records, indent=2))
        return EXIT_OK
    width = max((len(r["name"]) for r in records), default=0)
    for record, entry in zip(records, (e for e, _ in loaded.items.values()), strict=True):
        print(f"{record['name']:<{width}}  {record['adapter']}{_from(entry)}")
        print(f"{'':<{width}}  capabilities: {', '.join(record['capabilities']) or '(none)'}")
    return EXIT_OK


def _list_invariants(as_json: bool) -> int:
    from harness.properties import registry

    records = [{"id": i.id, "title": i.title, "needs": list(i.needs), "catches": list(i.catches),
                **_origin(registry.origin(i.id))} for i in registry.INVARIANTS]
    if as_json:
        print(json.dumps(records, indent=2))
        return EXIT_OK
    width = max((len(r["id"]) for r in records), default=0)
    for invariant in registry.INVARIANTS:
        print(f"{invariant.id:<{width}}  {invariant.title}{_from(registry.origin(invariant.id))}")
        if invariant.needs or invariant.catches:
            print(f"{'':<{width}}  needs: {', '.join(invariant.needs) or '-'}; catches: "
                  f"{', '.join(invariant.catches) or '-'}")
    return EXIT_OK


def _cell_environment(args: argparse.Namespace) -> tuple[dict[str, str], int]:
    """The child's environment and its device count, for ``--cell`` or the default."""

    env = dict(os.environ)
    if args.cell is None:
        flags = env.get("XLA_FLAGS", "")
        match = re.search(r"--xla_force_host_platform_device_count=(\d+)", flags)
        if match:
            return env, int(match.group(1))
        env.setdefault("JAX_NUM_CPU_DEVICES", str(DEFAULT_DEVICES))
        return env, int(env["JAX_NUM_CPU_DEVICES"])
    from pathlib import Path

    from harness import project
    from harness.matrix.config import MatrixError, load_matrix, project_matrix
    from harness.matrix.probe import probe

    try:
        matrix = load_matrix(Path(args.matrix)) if args.matrix else project_matrix(project.load())
        (cell,) = matrix.select([args.cell])
    except MatrixError as exc:
        raise UsageError(f"--matrix: {exc}" if args.matrix else str(exc)) from None
    except project.ProjectError as exc:
        raise UsageError(str(exc)) from None
    if cell.processes > 1:
        raise UsageError(
            f"cell {cell.name!r} runs {cell.processes} processes; repro runs single-process cells (use `xharness run --cells {cell.name}`)"
        )
    available = probe(cell)
    if not available.available:
        raise UsageError(f"cell {cell.name!r} cannot run on this machine: {available.reason}")
    env.update(cell.environment(args.runtime or "reference"))
    return env, cell.devices


def cmd_repro(args: argparse.Namespace) -> int:
    from harness.releases import catalog
    from harness.scenarios import explore, runner

    if args.release or args.runtime in catalog.UPSTREAM_RUNTIMES:
        return _repro_release(args)
    plugins.require_loadable("xharness repro")
    scenario = _scenario_for(args)
    schedule = None
    if args.schedule is not None:
        try:
            schedule = explore.read_schedule(args.schedule)
        except (OSError, ValueError) as exc:
            raise UsageError(str(exc)) from None
    how = explore.resolve(
        explore.default(scenario.explore) if scenario.explore else None, args.explore, schedule
    )
    table = _release_table(scenario, args.inject)
    env = _child_environment(args, scenario)
    replay = runner.repro_command(
        scenario.id,
        args.inject,
        args.seed,
        args.cell,
        explore=how.strategy if how is not None else None,
        schedule=schedule,
    )
    note = runner.forced_on_note(scenario, args.inject, env.get("HARNESS_FAULTS", ""))
    start = time.perf_counter()
    try:
        proc = subprocess.run(_child_command(args, scenario, schedule), env=env, capture_output=True,
                              text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as exc:
        out = _result(
            scenario.id,
            args,
            runner.FAILED,
            f"hung: no result within {args.timeout:g} s",
            start,
            replay,
        )
        out["error"] = "the process was killed at the time limit; its thread stacks are on stderr"
        out["note"] = note
        # the output read so far is bytes even with text=True
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return _emit(out, args, stderr, tail=_HUNG_TAIL)
    if proc.returncode == EXIT_USAGE:
        raise UsageError(proc.stderr.strip() or f"scenario {scenario.id!r} cannot run in this cell")
    out = _child_outcome(proc, args, scenario, start, replay, note)
    if table is not None:
        _judge_release(table, scenario, out)
    return _emit(out, args, proc.stderr)


def _repro_release(args: argparse.Namespace) -> int:
    """A real runtime: the upstream trigger, judged against the expected-outcomes table."""
    from harness.releases import catalog

    if args.runtime in (None, "reference"):
        raise UsageError("--release names a release of a real runtime: add --runtime torch_xla (or jax)")
    if args.runtime not in catalog.UPSTREAM_RUNTIMES:
        known = ", ".join(catalog.UPSTREAM_RUNTIMES)
        raise UsageError(f"--release: runtime {args.runtime!r} has no releases the harness installs; known: {known}")
    return catalog.repro(args)


def _scenario_for(args: argparse.Namespace) -> Any:
    """The scenario named, checked against ``--runtime`` and loadable with its own runtime's
    adapter, before any process starts; ``args.runtime`` becomes the scenario's runtime."""
    from harness import adapters
    from harness.releases import catalog
    from harness.scenarios import registry

    try:
        scenario = registry.get(args.scenario)
    except registry.UnknownScenario as exc:
        raise UsageError(str(exc)) from None
    if args.runtime is not None and args.runtime != scenario.runtime:
        known = ", ".join(dict.fromkeys((scenario.runtime, *catalog.UPSTREAM_RUNTIMES)))
        if args.runtime not in adapters.names():
            raise UsageError(f"unknown runtime {args.runtime!r}; known: {', '.join(adapters.names())}")
        raise UsageError(f"--runtime {args.runtime}: scenario {scenario.id!r} drives runtime "
                         f"{scenario.runtime!r}, and has no trigger for {args.runtime} (runtimes for it: {known})")
    args.runtime = scenario.runtime
    try:
        adapters.adapter_class(scenario.runtime)
    except adapters.UnknownRuntime as exc:
        raise UsageError(str(exc)) from None
    return scenario


def _child_environment(args: argparse.Namespace, scenario: Any) -> dict[str, str]:
    """The scenario child's environment: the cell's, the runtime under test and the compile
    cache; a cell too small for the scenario is a usage error here, before the child starts."""
    from harness import compile_cache

    env, devices = _cell_environment(args)
    env["HARNESS_RUNTIME"] = scenario.runtime
    cache = compile_cache.choose(args.compile_cache)
    if cache.path is None and "cannot be used" in cache.note:
        print(f"xharness: {cache.note}", file=sys.stderr)
    env = cache.environment(env)
    unmet = scenario.needs.unmet(devices)
    if unmet:
        raise UsageError(
            f"scenario {scenario.id!r} cannot run on {args.cell or f'{devices} devices'}: {unmet}"
        )
    return env


def _child_command(args: argparse.Namespace, scenario: Any, schedule: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "harness.scenarios.child", scenario.id, "--seed", str(args.seed)]
    cmd += ["--timeout", str(args.timeout)]
    if args.inject:
        cmd.append("--inject")
    if args.cell:
        cmd += ["--cell", args.cell]
    if schedule is not None:
        cmd += ["--schedule", schedule]
    elif args.explore is not None:
        cmd += ["--explore", args.explore]
    return cmd


def _child_outcome(proc: subprocess.CompletedProcess[str], args: argparse.Namespace, scenario: Any,
                   start: float, replay: str, note: str) -> dict[str, Any]:
    """What the child's end says: its result line, else the signal that killed it (the
    scenario's signature when it names that signal and the fault was injected), else its exit."""
    from harness.scenarios import child, runner

    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(child.RESULT_MARKER)), None)
    if line is not None:
        out: dict[str, Any] = json.loads(line[len(child.RESULT_MARKER) :])
        out["run_seconds"] = out.pop("seconds")
        out.update(seconds=round(time.perf_counter() - start, 3), repro=replay, cell=args.cell)
        return out
    if proc.returncode < 0 and stack_dumps.died_in_timed_dump(proc.stderr):
        # no result by the time its stacks were dumped: that signal is the dump's, not the
        # scenario's crash; the run is the hang the dump was for (a busy machine's slow start too)
        name = signal.Signals(-proc.returncode).name
        out = _result(scenario.id, args, runner.FAILED, f"hung: no result within {args.timeout:g} s", start, replay)
        out["error"] = (stack_dumps.hung_in_dump(stack_dumps.stack_dump_delay(args.timeout), f"the process died on {name}")
                        + " (a longer --timeout lets it finish or hang for good)")
    elif proc.returncode < 0:
        signum = -proc.returncode
        sig = scenario.signature_for_signal(signum)
        name = signal.Signals(signum).name
        outcome = runner.REPRODUCED if (args.inject and sig) else runner.FAILED
        out = _result(
            scenario.id, args, outcome, sig.name if sig else f"signal {name}", start, replay
        )
        out["error"] = f"the process died on {name}"
    else:
        out = _result(scenario.id, args, runner.FAILED, f"exit {proc.returncode} without a result", start, replay)
    out["note"] = note
    return out


def _release_table(scenario: Any, inject: bool) -> Any:
    """The project's expected-outcomes table (``[tool.xharness] expected``), read before anything
    starts, when it will judge this run: a plugin runtime's scenario with its switch off runs the
    runtime as it is installed, as a release's trigger runs; None otherwise."""
    if scenario.runtime == "reference" or inject:
        return None
    from harness import project
    from harness.scenarios import expected, known_findings

    try:
        own = project.load()
        return expected.load(own.expected, scenarios=known_findings.table_names()) if own.expected is not None else None
    except (project.ProjectError, expected.ExpectedTableError) as exc:
        raise UsageError(str(exc)) from None


def _judge_release(table: Any, scenario: Any, out: dict[str, Any]) -> None:
    """Judge a fixed run of a plugin runtime's scenario by the row for the runtime's version: a
    trigger that fails with one of the scenario's signatures *reproduced* the bug, one that ran
    clean *passed* (``harness.scenarios.expected``)."""
    from harness.scenarios import expected

    actual = expected.actual_outcome(out["outcome"], {sig.name for sig in scenario.signatures},
                                     out.get("variants", []))
    version = str(out.get("version") or "")
    try:
        verdict = table.judge(scenario.runtime, version, scenario.id, actual,
                              backend=out.get("backend") or expected.DEFAULT_BACKEND)
    except expected.ExpectedTableError as exc:  # a version that is no release, two rows at once
        raise UsageError(str(exc)) from None
    out["verdict"] = {"verdict": verdict.verdict, "expected": verdict.expected, "actual": actual,
                      "reason": verdict.reason, "release": version}


def _describe_exploration(found: dict[str, Any]) -> str:
    """``pct (seed 0): 20 schedules, no failure`` / ``... failed at run 3, schedule s1:...``."""
    seed = found.get("seed")
    what = found["strategy"] + (f" (seed {seed})" if seed is not None else "")
    runs = found.get("schedules", 0)
    if found.get("schedule") is None and found.get("preemptions") is None:
        tail = ", its bounded space exhausted" if found.get("exhausted") else ""
        return f"{what}: {runs} schedule{'' if runs == 1 else 's'} explored{tail}"
    if found.get("schedule") is None:
        return f"{what}: failed at run {runs} (free-running, no schedule to replay)"
    n = found.get("preemptions")
    return (
        f"{what}: failed at run {runs}, schedule {found['schedule']} "
        f"({n} preemption{'' if n == 1 else 's'})"
    )


_HUNG_TAIL = 400  # lines of a hung child's stderr shown: the whole stack dump, within reason


def _result(
    scenario: str, args: argparse.Namespace, outcome: str, signature: str, start: float, replay: str
) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "mode": "injected" if args.inject else "fixed",
        "outcome": outcome,
        "signature": signature,
        "seed": args.seed,
        "seconds": round(time.perf_counter() - start, 3),
        "variants": [],
        "repro": replay,
        "cell": args.cell,
    }


def _emit(out: dict[str, Any], args: argparse.Namespace, stderr: str, tail: int = 30) -> int:
    verdict = out.get("verdict")
    if verdict is not None:  # a runtime as installed, judged by the expected-outcomes table
        from harness.scenarios import expected

        ok = verdict["verdict"] in expected.GREEN
    else:
        ok = out["outcome"] in ("passed", "reproduced")
    if args.json:
        print(json.dumps(out))
    else:
        seen = f": {out['signature']}" if out.get("signature") else ""
        print(
            f"{out['scenario']} [{out['mode']}] {out['outcome']}{seen} ({out['seconds']:.1f} s, seed {out['seed']})"
        )
        if out.get("note"):
            print(f"  note: {out['note']}")
        if verdict is not None:
            print(f"  {out.get('runtime')} {verdict['release']}: {verdict['verdict']} ({verdict['reason']})")
        if out.get("error") and not out.get("variants"):
            print(f"  {out['error']}")
        schedules = []
        for v in out.get("variants", []):
            detail = f" - {v['error']}" if v.get("error") else ""
            print(f"  {v['variant']}: {v['outcome']}{detail}")
            found = v.get("exploration")
            if found:
                print(f"    {_describe_exploration(found)}")
                if found.get("replay") and found["replay"] != out["repro"]:
                    schedules.append(found["replay"])
        if not ok and stderr.strip():
            print("\n".join(stderr.strip().splitlines()[-tail:]), file=sys.stderr)
        for line in schedules:
            print(f"replay schedule: {line}")
        print(f"replay: {out['repro']}")
    return EXIT_OK if ok else EXIT_FAILED
