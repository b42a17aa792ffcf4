"""Run the suites against mutants of the runtime: realistic bugs nobody planted as a fault switch.

A fault switch only proves that a check catches the bug it was written for. A mutant is a bug
the checks were *not* written for (``suites/properties/mutants/NN-name.patch``), so whether the
suites fail on it measures how much they really see. Each mutant runs in its own temporary copy
of the working tree (tracked files and untracked files git does not ignore, so uncommitted suites
count): the real tree is never patched, and mutants can run side by side.

Results per mutant:

- ``killed``: pytest failed (exit 1); the first failing test is named;
- ``survived``: pytest passed (exit 0), so no check saw the bug;
- ``stale``: the patch no longer applies to the tree (refresh it);
- ``timeout``: pytest outlived the time limit although the unmutated baseline finished in time;
- ``error``: any other pytest exit (usage error, internal error, nothing collected, a crash), or
  the run did not import ``harness`` from its own copy.

The unmutated baseline runs first: a mutant can only be judged against suites that pass. Exit
0 when every mutant was killed, 1 when any survived or is stale, timed out or errored (they are
named on the last line), 2 for usage errors and a failing baseline. ``--junit`` writes one test
case per mutant (failed when it survived), which ``xharness report html`` turns into the
dashboard's kill table.

    .venv/bin/python ci/mutants.py [--only NAME...] [--suites PATH...] [--jobs N] [--timeout S]
                                   [--json FILE] [--junit FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS_DIR = ROOT / "suites" / "properties" / "mutants"
DEFAULT_SUITES = (
    "suites/properties",
    "suites/regression",
    "suites/selftest/runtime",
    "suites/models",
)
HEADER_FIELDS = ("Title", "Category", "Cousin of", "Where", "What goes wrong")
EXIT_ALL_KILLED, EXIT_HOLES, EXIT_USAGE = 0, 1, 2

# A pytest plugin loaded into every run (``-p``): it records where ``harness`` was imported from,
# so that a run which silently used the real tree (an editable install winning over PYTHONPATH)
# is refused instead of being reported as a survivor.
PROBE_MODULE = "xh_mutant_probe"
PROBE_SOURCE = """\
import json
import os
import sys


def _record():
    names = ("harness", "harness.runtime")
    where = {name: getattr(sys.modules.get(name), "__file__", None) for name in names}
    with open(os.environ["XH_MUTANT_PROBE_OUT"], "w") as f:
        json.dump(where, f)


def pytest_configure(config):
    _record()


def pytest_sessionfinish(session, exitstatus):
    _record()
"""


class UsageError(Exception):
    """A mistake in the command line or the mutants directory: exit 2."""


@dataclass
class Mutant:
    name: str
    path: Path
    fields: dict[str, str]

    @property
    def category(self) -> str:
        return self.fields.get("Category", "?")


@dataclass
class Outcome:
    mutant: str
    category: str
    result: str
    killer: str = ""
    seconds: float = 0.0
    detail: str = ""
    title: str = ""
    cousin: str = ""


@dataclass
class Run:
    """One pytest run in a copy: exit code (None when it timed out), output tail and where the
    ``harness`` it imported lives."""

    returncode: int | None
    output: str
    seconds: float
    imported: dict[str, str | None] = field(default_factory=dict)


# --------------------------------------------------------------------------- mutants


def read_header(path: Path) -> dict[str, str]:
    """The ``Key: value`` lines before the first ``diff --git`` (values continue on lines
    indented by two spaces)."""
    fields: dict[str, str] = {}
    key: str | None = None
    for line in path.read_text().splitlines():
        if line.startswith("diff --git "):
            break
        match = re.match(r"^([A-Z][A-Za-z ]*?): (.*)$", line)
        if match:
            key = match.group(1)
            fields[key] = match.group(2).strip()
        elif key is not None and line.startswith("  ") and not line.startswith("    "):
            fields[key] += " " + line.strip()
        else:
            key = None
    return fields


def discover_mutants(directory: Path = MUTANTS_DIR) -> list[Mutant]:
    return [Mutant(p.stem, p, read_header(p)) for p in sorted(directory.glob("*.patch"))]


def select(mutants: list[Mutant], only: list[str] | None) -> list[Mutant]:
    """``--only`` names a mutant by file stem (``05-transpose-...``), by name without the number,
    or by number alone."""
    if not only:
        return mutants
    chosen: list[Mutant] = []
    for wanted in only:
        hits = [
            m
            for m in mutants
            if wanted in (m.name, m.name.split("-", 1)[-1], m.name.split("-", 1)[0])
        ]
        if not hits:
            known = ", ".join(m.name for m in mutants)
            raise UsageError(f"--only {wanted!r}: no such mutant; known: {known}")
        chosen.extend(h for h in hits if h not in chosen)
    return chosen


# --------------------------------------------------------------------------- trees


def tree_files(root: Path) -> list[str]:
    """Tracked files plus untracked files git does not ignore, as they are in the working tree."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UsageError(f"{root} is not a git working tree (git ls-files failed: {exc})") from exc
    return [f for f in out.decode().split("\0") if f]


def snapshot(root: Path, dest: Path) -> None:
    """Copy the working tree's files once, so every mutant and the baseline see the same tree even
    while someone keeps editing the real one."""
    for rel in tree_files(root):
        src = root / rel
        if not src.exists() and not src.is_symlink():  # deleted in the working tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, target)


def git_env(copy: Path) -> dict[str, str]:
    # stop git from finding a repository above the copy: the patch must land in the copy itself
    return dict(os.environ, GIT_CEILING_DIRECTORIES=str(copy.parent))


def apply_patch(patch: Path, copy: Path) -> str | None:
    """Apply ``patch`` inside ``copy``; the error text when it does not apply."""
    proc = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(patch)],
        cwd=copy,
        capture_output=True,
        text=True,
        env=git_env(copy),
    )
    return (
        None
        if proc.returncode == 0
        else (proc.stderr.strip() or f"git apply exited {proc.returncode}")
    )


# --------------------------------------------------------------------------- pytest


_live: set[subprocess.Popen] = set()
_live_lock = threading.Lock()


def _stop(proc: subprocess.Popen) -> None:
    """End a pytest run and everything it started (it leads its own process group)."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_pytest(copy: Path, probe_dir: Path, suites: list[str], timeout: float) -> Run:
    probe_out = copy.parent / "probe.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), str(probe_dir)])
    env["XH_MUTANT_PROBE_OUT"] = str(probe_out)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        PROBE_MODULE,
        *suites,
    ]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=copy,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    with _live_lock:
        _live.add(proc)
    try:
        try:
            output, _ = proc.communicate(timeout=timeout)
            returncode: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            _stop(proc)
            output, _ = proc.communicate()
            returncode = None
    finally:
        with _live_lock:
            _live.discard(proc)
    seconds = time.monotonic() - start
    imported: dict[str, str | None] = {}
    if probe_out.exists():
        try:
            imported = json.loads(probe_out.read_text())
        except ValueError:
            imported = {}
    return Run(returncode, output or "", seconds, imported)


def imported_from_copy(run: Run, copy: Path) -> str | None:
    """Why the run cannot be trusted, or None when ``harness`` came from ``copy``."""
    problems = []
    for name in ("harness", "harness.runtime"):
        where = run.imported.get(name)
        if where is None:
            problems.append(f"{name} was not imported")
        elif not Path(where).resolve().is_relative_to(copy.resolve()):
            problems.append(f"{name} came from {where}, not from the copy")
    return "; ".join(problems) or None


_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - |$)", re.M)


def killing_test(output: str) -> str:
    match = _FAILED.search(output)
    return match.group(1) if match else ""


def tail(output: str, lines: int = 25) -> str:
    return "\n".join(output.rstrip().splitlines()[-lines:])


# --------------------------------------------------------------------------- one mutant


def judge(
    mutant: Mutant, snap: Path, probe_dir: Path, suites: list[str], timeout: float
) -> Outcome:
    outcome = Outcome(
        mutant.name,
        mutant.category,
        "error",
        title=mutant.fields.get("Title", ""),
        cousin=mutant.fields.get("Cousin of", ""),
    )
    work = Path(tempfile.mkdtemp(prefix=f"xh-mutant-{mutant.name[:2]}-"))
    try:
        copy = work / "tree"
        shutil.copytree(snap, copy, symlinks=True)
        failure = apply_patch(mutant.path, copy)
        if failure is not None:
            outcome.result, outcome.detail = "stale", failure
            return outcome
        run = run_pytest(copy, probe_dir, suites, timeout)
        outcome.seconds = round(run.seconds, 1)
        if run.returncode is None:
            outcome.result, outcome.detail = (
                "timeout",
                f"still running after {timeout:.0f} s\n{tail(run.output)}",
            )
            return outcome
        if run.returncode not in (0, 1):
            outcome.detail = f"pytest exited {run.returncode}\n{tail(run.output)}"
            return outcome
        untrusted = imported_from_copy(run, copy)
        if untrusted is not None:  # a pass or a failure of some other tree says nothing
            outcome.detail = f"refusing to judge: {untrusted}"
            return outcome
        if run.returncode == 0:
            outcome.result = "survived"
        else:
            outcome.result, outcome.killer = "killed", killing_test(run.output)
        return outcome
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- report


def table(outcomes: list[Outcome]) -> str:
    rows = [("mutant", "category", "result", "killing test", "seconds")]
    for o in outcomes:
        killer = o.killer if len(o.killer) <= 72 else o.killer[:71] + "~"
        rows.append((o.mutant, o.category, o.result, killer or "-", f"{o.seconds:.1f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for r in rows:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "  " + r[4].rjust(7)
        )
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(tmp, path)


def write_junit(path: Path, outcomes: list[Outcome]) -> None:
    """The kill table as a JUnit file of the cell ``mutants`` (``harness.report.kills``)."""
    from harness.report.junit import write_report
    from harness.report.kills import mutant_record
    from harness.report.merge import build_report

    write_report(build_report([mutant_record(asdict(o)) for o in outcomes]), path)


def resolve_suites(given: list[str] | None) -> tuple[list[str], list[str]]:
    """The suite paths to run and the defaults skipped because they do not exist (yet)."""
    if given:
        missing = [s for s in given if not (ROOT / s.split("::", 1)[0]).exists()]
        if missing:
            raise UsageError(f"suite path(s) not found under {ROOT}: {', '.join(missing)}")
        return list(given), []
    present = [s for s in DEFAULT_SUITES if (ROOT / s).exists()]
    skipped = [s for s in DEFAULT_SUITES if s not in present]
    if not present:
        raise UsageError(f"none of the default suites exist: {', '.join(DEFAULT_SUITES)}")
    return present, skipped


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ci/mutants.py",
        description="Run the suites against each runtime mutant and report which are killed.",
    )
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="only these mutants (file stem, name or number)"
    )
    parser.add_argument(
        "--suites",
        nargs="+",
        metavar="PATH",
        help=f"pytest paths (default: {' '.join(DEFAULT_SUITES)})",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument(
        "--timeout", type=float, help="seconds per mutant (default: 3x the baseline, at least 120)"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also write the results as JUnit (one test case per mutant, failed when it survived), "
        "for `xharness report html`",
    )
    parser.add_argument("--mutants-dir", type=Path, default=MUTANTS_DIR, help=argparse.SUPPRESS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse's own usage errors already exit 2
        raise SystemExit(EXIT_USAGE if exc.code else 0) from None
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        mutants = discover_mutants(args.mutants_dir)
        if not mutants:
            raise UsageError(f"no mutant patches (*.patch) in {args.mutants_dir}")
        chosen = select(mutants, args.only)
        suites, skipped = resolve_suites(args.suites)
        tree_files(ROOT)  # a usage error, before any copying, when this is not a git working tree
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for s in skipped:
        print(f"note: default suite {s} does not exist yet; running without it", file=sys.stderr)
    print(f"suites: {' '.join(suites)}", file=sys.stderr)

    base = Path(tempfile.mkdtemp(prefix="xh-mutants-"))
    try:
        probe_dir = base / "probe"
        probe_dir.mkdir()
        (probe_dir / f"{PROBE_MODULE}.py").write_text(PROBE_SOURCE)
        snap = base / "snapshot"
        snapshot(ROOT, snap)

        baseline_copy = base / "baseline" / "tree"
        shutil.copytree(snap, baseline_copy, symlinks=True)
        print("baseline: running the suites on the unmutated tree ...", file=sys.stderr)
        baseline = run_pytest(baseline_copy, probe_dir, suites, args.timeout or 3600.0)
        untrusted = (
            imported_from_copy(baseline, baseline_copy) if baseline.returncode is not None else None
        )
        if baseline.returncode != 0 or untrusted:
            why = (
                "did not finish in time"
                if baseline.returncode is None
                else untrusted or f"pytest exited {baseline.returncode}"
            )
            print(
                f"error: the baseline (no mutant) fails: {why}; "
                "fix the suites before judging mutants",
                file=sys.stderr,
            )
            print(tail(baseline.output, 40), file=sys.stderr)
            return EXIT_USAGE
        timeout = args.timeout or max(120.0, 3 * baseline.seconds)
        print(
            f"baseline: passed in {baseline.seconds:.1f} s; limit per mutant {timeout:.0f} s",
            file=sys.stderr,
        )

        outcomes: list[Outcome] = []
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(judge, m, snap, probe_dir, suites, timeout) for m in chosen]
            try:
                for future in as_completed(futures):
                    o = future.result()
                    outcomes.append(o)
                    print(f"{o.mutant}: {o.result} {o.killer} ({o.seconds:.1f} s)", file=sys.stderr)
            except KeyboardInterrupt:
                for f in futures:
                    f.cancel()
                with _live_lock:
                    running = list(_live)
                for proc in running:
                    _stop(proc)
                raise
        outcomes.sort(key=lambda o: o.mutant)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print(table(outcomes))
    counts = {
        r: sum(o.result == r for o in outcomes)
        for r in ("killed", "survived", "stale", "timeout", "error")
    }
    print(", ".join(f"{n} {r}" for r, n in counts.items() if n) + f" of {len(outcomes)} mutants")
    for o in outcomes:
        if o.result in ("stale", "error", "timeout") and o.detail:
            print(f"\n{o.mutant} ({o.result}):\n{o.detail}")
    if args.json:
        write_json(
            args.json,
            {
                "suites": suites,
                "skipped_default_suites": skipped,
                "baseline_seconds": round(baseline.seconds, 1),
                "timeout_seconds": timeout,
                "counts": counts,
                "mutants": [asdict(o) for o in outcomes],
            },
        )
    if args.junit:
        write_junit(args.junit, outcomes)
    holes = [o for o in outcomes if o.result != "killed"]
    if holes:
        print(
            "\nnot killed: " + ", ".join(f"{o.mutant} ({o.result})" for o in holes),
            file=sys.stderr,
        )
    return EXIT_ALL_KILLED if not holes else EXIT_HOLES


if __name__ == "__main__":
    sys.exit(main())
