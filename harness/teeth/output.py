"""What a kill-matrix run leaves behind: the terminal table, the JSON object, the JUnit file.

The JUnit file is one suite (``teeth``) with one test case per pair, written by the same writer as a
matrix cell, so ``xharness report html`` and ``xharness report merge`` show it like any cell: a
caught pair passes and carries its counterexample as properties, a missed declared pair is a
``<failure>`` saying the check has no teeth for that switch, a dead or hung child is an
``<error>`` whose type is its kind (signal, exit, timeout), and a pair the topology cannot host is
``<skipped>`` with the reason.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.properties.base import Invariant
from harness.report import properties as prop
from harness.report import records as rec
from harness.report.junit import write_cell_xml
from harness.teeth.checks import INVARIANT, Check
from harness.teeth.matrix import CAUGHT, ERROR, MISSED, SKIPPED, Pair, PairResult, headline
from harness.teeth.matrix import exit_code as _exit_code

#: the JUnit suite (the dashboard's column) of a kill-matrix run
CELL = "teeth"
DEFAULT_DEVICES = 8
LABELS = {CAUGHT: "caught", MISSED: "MISSED", SKIPPED: "skipped", ERROR: "ERROR"}
#: undeclared pairs are for information only: marked so they never read as a verdict
UNDECLARED_LABELS = {CAUGHT: "caught*", MISSED: "-", SKIPPED: "skip*", ERROR: "error*"}
NOT_RUN = "n/a"
INTERRUPTED = 130  # the CLI's code for Ctrl-C


@dataclass
class TeethRun:
    checks: list[Check]
    faults: list[str]
    pairs: list[Pair]  # the plan; an interrupted run has fewer results
    results: list[PairResult]
    devices: int
    seconds: float
    junit: Path | None = None
    interrupted: bool = False
    runtime: str = "reference"  # whose fault switches the columns are (``--runtime``)

    def result(self, check: str, fault: str) -> PairResult | None:
        return next((r for r in self.results if r.check == check and r.fault == fault), None)

    @property
    def declared(self) -> list[PairResult]:
        return [r for r in self.results if r.declared]

    @property
    def exit_code(self) -> int:
        return INTERRUPTED if self.interrupted else _exit_code(self.results)

    def repro(self, result: PairResult) -> str:
        """The command that runs just this pair again, the same way."""
        parts = ["xharness", "teeth", "--checks", result.check, "--faults", result.fault]
        if not result.declared:
            parts.append("--all-pairs")
        if self.devices != DEFAULT_DEVICES:
            parts += ["--devices", str(self.devices)]
        if self.runtime != "reference":
            parts += ["--runtime", self.runtime]
        origin = next((c.origin for c in self.checks if c.id == result.check), "")
        if origin:  # only the spec that brings this check: the others are not needed to replay it
            parts += ["--extra-checks", origin]
        return " ".join(shlex.quote(p) for p in parts)


# ----------------------------------------------------------------------------------- the table


def label(run: TeethRun, check: Check, fault: str) -> str:
    result = run.result(check.id, fault)
    if result is None:
        return NOT_RUN if fault not in check.declares else "not run"
    return (LABELS if result.declared else UNDECLARED_LABELS)[result.status]


def summary(run: TeethRun) -> str:
    declared = run.declared
    planned = sum(p.declared for p in run.pairs)
    caught = sum(r.status == CAUGHT for r in declared)
    text = f"{caught}/{planned} declared pairs caught"
    others = [
        f"{n} {status}"
        for status in (MISSED, ERROR, SKIPPED)
        if (n := sum(r.status == status for r in declared))
    ]
    if planned > len(declared):
        others.append(f"{planned - len(declared)} not run")
    if others:
        text += f" ({', '.join(others)})"
    text += f"; {run.devices} device{'s' if run.devices != 1 else ''}, {run.seconds:.1f} s"
    if run.interrupted:
        text += "; interrupted, the pairs that had not finished are missing"
    return text


def _detail(r: PairResult) -> str:
    pair = f"{r.check} x {r.fault}" + ("" if r.declared else " (undeclared)")
    if r.status == CAUGHT:
        if r.kind == INVARIANT:
            size = "?" if r.size is None else str(r.size)
            bound = f" (bound {r.max_size})" if r.max_size else ""
            text = f"  {pair}: size {size}{bound}: {headline(r.example) or r.error}"
        else:
            text = f"  {pair}: reproduced {r.example or r.error}"
        return text + (f" [{r.note}]" if r.note else "")
    if r.status == MISSED:
        if not r.declared:
            return ""
        return f"  MISSED {pair}: {r.check} has no teeth for {r.fault}: {r.note}"
    if r.status == SKIPPED:
        return f"  skipped {pair}: {r.note}"
    where = f" (output: {r.log})" if r.log else ""
    note = f"{r.note}: " if r.note else ""
    return f"  ERROR {pair}: {note}{r.error}{where}"


def render_table(run: TeethRun) -> str:
    headers = ["check", "kind", *run.faults]
    rows = [[c.id, f"{c.kind} ({c.plugin})" if c.plugin else c.kind, *(label(run, c, f) for f in run.faults)]
            for c in run.checks]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(headers), *(line(r) for r in rows), "", summary(run)]
    details = [d for r in run.results if (d := _detail(r))]
    out += details
    declared = [(c.id, m) for c in run.checks if (m := mutants(c))]
    if declared:
        out.append("mutants each check must kill (run by ci/mutants.py, not by this command):")
        out += [f"  {check}: {', '.join(names)}" for check, names in declared]
    if any(not r.declared for r in run.results):
        out.append("* an undeclared pair, run by --all-pairs for information: never a failure")
    if run.junit is not None:
        out.append(f"junit: {run.junit}")
    return "\n".join(out)


def mutants(check: Check) -> tuple[str, ...]:
    """The runtime mutants an invariant declares it must kill (``Invariant.mutants``)."""
    return tuple(check.target.mutants) if isinstance(check.target, Invariant) else ()


def progress_line(result: PairResult, done: int, total: int) -> str:
    shown = (LABELS if result.declared else UNDECLARED_LABELS)[result.status]
    return f"[{done}/{total}] {shown:<8} {result.check} x {result.fault} ({result.seconds:.1f} s)"


# ------------------------------------------------------------------------------------ JSON


def to_json(run: TeethRun) -> dict[str, Any]:
    declared = run.declared
    return {
        "devices": run.devices,
        "seconds": round(run.seconds, 3),
        "exit_code": run.exit_code,
        "interrupted": run.interrupted,
        "faults": list(run.faults),
        "checks": [
            {"id": c.id, "kind": c.kind, "declares": list(c.declares), "mutants": list(mutants(c)), "origin": c.origin,
             "plugin": c.plugin}
            for c in run.checks
        ],
        "declared": sum(p.declared for p in run.pairs),
        "caught": sum(r.status == CAUGHT for r in declared),
        "pairs": [{**r.to_dict(), "repro": run.repro(r)} for r in run.results],
        "junit": str(run.junit) if run.junit is not None else None,
    }


# ----------------------------------------------------------------------------------- JUnit


def _attempt(r: PairResult) -> rec.Attempt:
    if r.status == SKIPPED:
        return rec.Attempt(rec.SKIPPED, message=r.note)
    if not r.declared or r.status == CAUGHT:
        return rec.Attempt(rec.PASSED, duration=r.seconds)
    if r.status == MISSED:
        return rec.Attempt(
            rec.FAILED,
            duration=r.seconds,
            message=f"{r.check} has no teeth for {r.fault}: {r.note}",
            details=r.details,
        )
    message = f"{r.note}: {r.error}" if r.note else r.error
    return rec.Attempt(
        rec.ERROR,
        duration=r.seconds,
        message=message,
        details=r.details,
        kind=r.error_kind,
        signal=r.signal,
        exit_code=r.exit_code,
    )


def to_record(run: TeethRun, check: Check, r: PairResult) -> rec.TestRecord:
    file, line = check.location()
    properties = {
        prop.CHECK: r.check,
        prop.FAULT: r.fault,
        prop.KIND: r.kind,
        prop.DECLARED: "true" if r.declared else "false",
        prop.STATUS: r.status,
        prop.DEVICES: str(run.devices),
    }
    optional = {
        prop.SIZE: "" if r.size is None else str(r.size),
        prop.MAX_SIZE: "" if r.size is None or not r.max_size else str(r.max_size),
        prop.EXAMPLE: r.example,
        prop.BLOB: r.blob,
        prop.ERROR: r.error,
        prop.NOTE: r.note,
        prop.ORIGIN: check.origin,
    }
    properties.update({k: v for k, v in optional.items() if v})
    properties[prop.REPRO] = run.repro(r)
    return rec.TestRecord(
        nodeid=f"{CELL}/{r.check}::{r.fault}",
        cell=CELL,
        file=file,
        line=line,
        attempts=[_attempt(r)],
        properties=properties,
    )


def write_junit(run: TeethRun, path: Path) -> None:
    by_id = {c.id: c for c in run.checks}
    write_cell_xml(CELL, [to_record(run, by_id[r.check], r) for r in run.results], path)
