"""Mutation testing of the harness's own logic with mutmut, scored per room against a floor.

The runtime has its own teeth (``ci/mutants.py``: hand-written mutant patches of the reference
runtime). This is the other half: the code that decides what ran, what passed and what a record
says. mutmut mutates the function bodies of the rooms named in ``[tool.mutmut] only_mutate``
(pyproject.toml) and runs, against each mutant, the tests that reach that function. A mutant that
every test passes on is a bug the suites cannot see; each one is either killed by a test of
behaviour a user would notice, or listed as equivalent (``ci/mutation_equivalents.toml``) with a
one-line reason.

mutmut runs in a scratch copy of the tree (``.mutation/<profile>/``, kept between runs: it is
mutmut's cache, so an unchanged function is not run again), which keeps the working tree clean and
lets a profile (``ci/mutation.toml``) mutate other rooms against other tests. Tests that start the
harness in a child process run it unmutated: mutmut maps mutants to the tests that reach them
in its own process.

Usage:
  ci/mutation.py run [--profile P] [--since REF] [--max-children N] [--check] [MUTANT...]
  ci/mutation.py score [--profile P] [--check] [--markdown]
  ci/mutation.py survivors [--profile P] [--room ROOM]
  ci/mutation.py equivalent NAME --why REASON [--profile P]

Exit: 0 every room at or above its floor (or no --check), 1 a room below its floor, 2 usage
(unknown profile or mutant, no results yet, mutmut missing), 3 mutmut itself failed (its clean run
failed: a test fails without any mutant).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import hashlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "ci" / "mutation.toml"
EQUIVALENTS = ROOT / "ci" / "mutation_equivalents.toml"
#: where the scratch copies live (kept between runs: mutmut's cache); a test points it elsewhere
WORK = Path(os.environ.get("XHARNESS_MUTATION_DIR", ROOT / ".mutation"))
MAIN = "main"
#: what a profile whose code runs in the tests' children puts on their path (Profile.children)
HOOKS = Path("ci") / "mutation_hooks"
HITS_VARIABLE = "XHARNESS_MUTATION_HITS"

#: mutmut's exit codes per mutant, as this score reads them: a timeout or a crash under a mutant
#: is a kill (the suite noticed), "no tests" is a survivor (nothing looked)
KILLED_CODES = {1, 3, 36, -24, 24, 152, 255, -11, -9, 37}
SURVIVED_CODES = {0, 5, 33}

EXIT_OK, EXIT_BELOW_FLOOR, EXIT_USAGE, EXIT_MUTMUT = 0, 1, 2, 3


class UsageError(Exception):
    """A mistake in how the script was called, or in its configuration files."""


@dataclass(frozen=True)
class Profile:
    """One mutmut run: which rooms it mutates and which tests it runs against them."""

    name: str
    only_mutate: tuple[str, ...]
    tests: tuple[str, ...]
    #: the rooms' code runs in processes the tests start (ci/mutation_hooks/mutation_hits.py):
    #: they import the mutants and report the functions they call
    children: bool = False
    #: the tests share one real cluster, so one mutant runs at a time
    shares_cluster: bool = False
    #: mutmut's patience with a mutant that hangs: its wall-clock limit is (the tests' own time +
    #: constant) x multiplier; None keeps mutmut's default (15 x, + 1 s)
    timeout: tuple[float, float] | None = None
    #: another profile over the same rooms whose tests are some of this one's: a mutant it killed
    #: is killed here without a run, and a draw (``sample``) is made among the rest only
    prefilter: str = ""

    @property
    def workdir(self) -> Path:
        return WORK / self.name

    def room_of(self, source: str) -> str | None:
        return next((room for room in self.only_mutate if fnmatch.fnmatch(source, room)), None)


@dataclass
class RoomScore:
    room: str
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    survived: int = 0
    unchecked: int = 0
    survivors: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        judged = self.killed + self.survived
        return 1.0 if judged == 0 else self.killed / judged


def pyproject_mutmut() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    try:
        return dict(data["tool"]["mutmut"])
    except KeyError:
        raise UsageError("pyproject.toml has no [tool.mutmut] table") from None


def settings() -> dict[str, object]:
    try:
        return tomllib.loads(SETTINGS.read_text())
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{SETTINGS.relative_to(ROOT)}: {error}") from None


def profile(name: str) -> Profile:
    main = pyproject_mutmut()
    if name == MAIN:
        return Profile(
            MAIN,
            tuple(_strings(main, "only_mutate")),
            tuple(_strings(main, "pytest_add_cli_args_test_selection")),
        )
    profiles = settings().get("profiles", {})
    assert isinstance(profiles, dict)
    if name not in profiles:
        known = ", ".join([MAIN, *profiles])
        raise UsageError(f"no profile {name!r} (known: {known}); profiles live in {SETTINGS.name}")
    own = profiles[name]
    flags = {key: own.get(key, False) for key in ("children", "shares_cluster")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise UsageError(f"profile {name!r}: {key} must be true or false")
    timeout = own.get("timeout")
    if timeout is not None and not (
            isinstance(timeout, list) and len(timeout) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) and x > 0 for x in timeout)):
        raise UsageError(f"profile {name!r}: timeout must be [multiplier, constant seconds], both positive")
    prefilter = own.get("prefilter", "")
    if prefilter and (prefilter not in profiles or prefilter == name):
        raise UsageError(f"profile {name!r}: prefilter {prefilter!r} is not another profile of {SETTINGS.name}")
    if prefilter:
        other = profile(prefilter)
        if set(other.only_mutate) != set(_strings(own, "only_mutate")) or \
                not set(other.tests) <= set(_strings(own, "tests")):
            raise UsageError(f"profile {name!r}: prefilter {prefilter!r} must mutate the same rooms "
                             "and run some of this profile's tests")
    return Profile(name, tuple(_strings(own, "only_mutate")), tuple(_strings(own, "tests")), **flags,
                   timeout=None if timeout is None else (float(timeout[0]), float(timeout[1])), prefilter=prefilter)


def _strings(table: dict[str, object], key: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{key} must be a list of strings")
    return value


def floor_of(room: str) -> float:
    floors = settings().get("floors", {})
    assert isinstance(floors, dict)
    return float(floors.get(room, floors.get("default", 0.9)))


def equivalents() -> dict[str, dict[str, str]]:
    if not EQUIVALENTS.exists():
        return {}
    try:
        return tomllib.loads(EQUIVALENTS.read_text())
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{EQUIVALENTS.relative_to(ROOT)}: {error}") from None


# -- the scratch copy --------------------------------------------------------------------------


def tree_files() -> list[str]:
    """The files a fresh clone with this working tree's changes would hold."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode()
    return [name for name in out.split("\0") if name and (ROOT / name).is_file()]


#: a profile's record of the mutants drawn at random (``sample``): kept across runs, which judge
#: them again by name
SAMPLE_RECORD = "sample.txt"


def sync_tree(target: Path) -> None:
    """Copy the tree into ``target``, leaving mutmut's ``mutants/`` (its cache) and the sample's
    record where they are."""
    target.mkdir(parents=True, exist_ok=True)
    wanted = set(tree_files())
    for name in wanted:
        source, copy = ROOT / name, target / name
        if copy.exists() and copy.read_bytes() == source.read_bytes():
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, copy)
    for path in sorted(target.rglob("*"), reverse=True):
        relative = path.relative_to(target)
        if relative.parts[0] in {"mutants", ".hypothesis", "reports", ".venv", "hits", SAMPLE_RECORD} \
                or "__pycache__" in relative.parts:
            continue
        if path.is_file() and str(relative) not in wanted:
            path.unlink()


def write_profile_config(chosen: Profile) -> None:
    """Give the copy a [tool.mutmut] for this profile: the main one's, with its rooms and tests."""
    if chosen.name == MAIN:
        return
    pyproject = chosen.workdir / "pyproject.toml"
    text = pyproject.read_text()
    start = text.index("\n[tool.mutmut]\n") + 1
    end = text.find("\n[", start + 1)
    table = text[start : len(text) if end < 0 else end + 1]
    replaced = table
    for key, values in (("only_mutate", chosen.only_mutate),
                        ("pytest_add_cli_args_test_selection", chosen.tests)):
        replaced = _replace_list(replaced, key, values)
    if chosen.children:
        replaced = replaced.replace("\npytest_add_cli_args = [", '\npytest_add_cli_args = [\n  "-p", "mutation_hits",', 1)
    if chosen.timeout is not None:
        multiplier, constant = chosen.timeout
        replaced = replaced.rstrip("\n") + f"\ntimeout_multiplier = {multiplier}\ntimeout_constant = {constant}\n"
    pyproject.write_text(text.replace(table, replaced))


def _replace_list(table: str, key: str, values: Sequence[str]) -> str:
    start = table.index(f"{key} = [")
    end = table.index("]", start) + 1
    return table[:start] + f"{key} = {json.dumps(list(values))}" + table[end:]


# -- which mutants: a change's functions -------------------------------------------------------


def changed_functions(since: str, chosen: Profile) -> list[str]:
    """mutmut name patterns for the functions of the profile's rooms that a change touched."""
    diff = subprocess.run(
        ["git", "diff", "--unified=0", since, "--", "harness"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    touched: dict[str, set[int]] = {}
    current = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else ""
        elif line.startswith("@@") and current:
            added = line.split("+", 1)[1].split(" ", 1)[0]
            first, _, count = added.partition(",")
            length = int(count) if count else 1
            touched.setdefault(current, set()).update(range(int(first), int(first) + max(length, 1)))
    patterns = []
    for source, lines in sorted(touched.items()):
        if chosen.room_of(source) is None or not (ROOT / source).exists():
            continue
        module = source[: -len(".py")].replace("/", ".")
        for name in functions_at(ROOT / source, lines):
            patterns.append(f"{module}.{name}__mutmut_*")
    return patterns


def functions_at(source: Path, lines: set[int]) -> list[str]:
    """mutmut's names (``x_f``, ``xǁClassǁf``) of the functions that hold any of ``lines``."""
    names = []
    tree = ast.parse(source.read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _holds(node, lines):
            names.append(f"x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and _holds(member, lines):
                    names.append(f"x\u01c1{node.name}\u01c1{member.name}")
    return names


def _holds(node: ast.AST, lines: set[int]) -> bool:
    first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    return any(first <= line <= last for line in lines)


# -- the score ---------------------------------------------------------------------------------


def mutant_source(workdir: Path, name: str) -> str | None:
    """The text of one mutant's function in mutmut's copy, which an equivalence is bound to."""
    module, _, function = name.rpartition(".")
    path = workdir / "mutants" / (module.replace(".", "/") + ".py")
    if not path.exists():
        return None
    text = path.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
            return ast.get_source_segment(text, node)
    return None


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def results(chosen: Profile) -> dict[str, tuple[str, int | None]]:
    """Every mutant of the profile's rooms: its room and mutmut's exit code (None: not run)."""
    mutants = chosen.workdir / "mutants"
    found: dict[str, tuple[str, int | None]] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        source = str(meta.relative_to(mutants))[: -len(".meta")]
        room = chosen.room_of(source)
        if room is None:
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for name, code in codes.items():
            found[name] = (room, code)
    return found


def killed_before(chosen: Profile) -> set[str]:
    """The mutants the profile's prefilter killed (none without one, or before its first run):
    its tests are some of this profile's, so each is killed here too."""
    if not chosen.prefilter:
        return set()
    first = profile(chosen.prefilter)
    if not (first.workdir / "mutants").is_dir():
        return set()
    return {name for name, (_, code) in results(first).items() if code in KILLED_CODES}


def score(chosen: Profile) -> tuple[list[RoomScore], list[str]]:
    """Each room's counts, and the equivalents that no longer match their mutant (stale)."""
    known = equivalents()
    rooms = {room: RoomScore(room) for room in chosen.only_mutate}
    stale = []
    first = killed_before(chosen)
    for name, (room, code) in sorted(results(chosen).items()):
        tally = rooms[room]
        tally.mutants += 1
        if name in first:
            tally.killed += 1
        elif code is None:
            tally.unchecked += 1
        elif code in KILLED_CODES:
            tally.killed += 1
        elif name in known and _still_equivalent(chosen.workdir, name, known[name]):
            tally.equivalent += 1
        else:
            if name in known:
                stale.append(name)
            tally.survived += 1
            tally.survivors.append(name)
    return list(rooms.values()), stale


def _still_equivalent(workdir: Path, name: str, entry: dict[str, str]) -> bool:
    text = mutant_source(workdir, name)
    return text is not None and fingerprint(text) == entry.get("source")


def table(scores: Iterable[RoomScore], markdown: bool) -> str:
    head = ("room", "mutants", "killed", "equivalent", "survived", "unrun", "score", "floor")
    rows = [
        (s.room, str(s.mutants), str(s.killed), str(s.equivalent), str(s.survived),
         str(s.unchecked), f"{s.score:.1%}", f"{floor_of(s.room):.0%}")
        for s in scores
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| `" + row[0] + "` | " + " | ".join(row[1:]) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows])


def below_floor(scores: Iterable[RoomScore]) -> list[RoomScore]:
    return [s for s in scores if s.mutants and s.score < floor_of(s.room)]


# -- the commands ------------------------------------------------------------------------------


def mutmut_command() -> list[str]:
    found = shutil.which("mutmut", path=str(Path(sys.executable).parent)) or shutil.which("mutmut")
    if not found:
        raise UsageError("mutmut is not installed: pip install -e '.[test]'")
    return [found]


def command_run(args: argparse.Namespace) -> int:
    chosen = profile(args.profile)
    sync_tree(chosen.workdir)
    write_profile_config(chosen)
    names = list(args.mutants)
    if args.sample:
        names += sample(chosen, args.sample, args.seed)
    if args.since:
        names += changed_functions(args.since, chosen)
        if not names:
            print(f"ci/mutation.py: no function of the rooms changed since {args.since}")
            return EXIT_OK
    # mutmut puts its copy first on the tests' path itself; a child process a test starts imports
    # the harness unmutated (mutmut could not tell which mutants it reaches, nor read its own
    # configuration from the child's directory)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST")}
    jobs = args.max_children
    if chosen.children:  # ... unless the code under test only runs there (Profile.children)
        env["PYTHONPATH"] = os.pathsep.join([str(chosen.workdir / "mutants"), str(chosen.workdir / HOOKS)])
        env[HITS_VARIABLE] = str(chosen.workdir / "hits")
        # the scripts the tests start (ci/*.sh) run the project's environment by its relative path
        for where in (chosen.workdir, chosen.workdir / "mutants"):
            where.mkdir(exist_ok=True)
            if not (where / ".venv").exists():
                (where / ".venv").symlink_to(ROOT / ".venv")
    if chosen.shares_cluster:
        jobs = 1
    cmd = [*mutmut_command(), "run", "--max-children", str(jobs)]
    done = subprocess.run([*cmd, *names], cwd=chosen.workdir, env=env)
    if done.returncode == 0 and not names:
        # mutmut keeps a survivor's verdict (and a "no tests" one's) until its function changes;
        # the tests may have changed since, so every survivor is judged again by name
        scores, _ = score(chosen)
        again = [name for tally in scores for name in tally.survivors]
        if again:
            print(f"ci/mutation.py: judging {len(again)} survivors of earlier runs again")
            done = subprocess.run([*cmd, *again], cwd=chosen.workdir, env=env)
    if chosen.children:
        sweep(f"{HITS_VARIABLE}={env[HITS_VARIABLE]}", chosen.shares_cluster)
    if done.returncode != 0:
        print(f"ci/mutation.py: mutmut run failed (exit {done.returncode})", file=sys.stderr)
        return EXIT_MUTMUT
    return command_score(args)


def leftovers(marker: str) -> list[int]:
    """The processes a run's tests left behind: those whose environment holds ``marker`` (the
    profile's hits variable, which every process a test starts inherits). mutmut kills a mutant's
    test process when it times out, and what that test started (an ``salloc``, a rank) lives on."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in environ:
            found.append(int(entry.name))
    return sorted(found)


def sweep(marker: str, shares_cluster: bool) -> None:
    """Kill what the run's tests left, so that it holds no node of the cluster for the next run
    (a job left holding one makes the next mutants' cluster tests time out, which mutmut counts as
    kills); on the project's own cluster, also cancel the harness's jobs still queued."""
    for pid in leftovers(marker):
        try:
            command = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            os.kill(pid, signal.SIGKILL)
            print(f"ci/mutation.py: killed process {pid} the tests left: {command.strip()[:200]}")
        except OSError:
            pass
    if not shares_cluster or not shutil.which("squeue"):
        return
    try:
        listed = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return
    jobs = [job for job, _, name in (line.partition(" ") for line in listed.splitlines())
            if name.startswith(("xharness-", "xh-"))]
    if jobs:
        print(f"ci/mutation.py: cancelling job(s) the tests left queued: {' '.join(jobs)}")
        subprocess.run(["scancel", *jobs], check=False, timeout=30)


def reached(chosen: Profile) -> set[str]:
    """The functions (mutmut's mangled names) some test reaches, by mutmut's last mapping."""
    stats = chosen.workdir / "mutants" / "mutmut-stats.json"
    if not stats.exists():
        return set()
    mapping = json.loads(stats.read_text()).get("tests_by_mangled_function_name", {})
    return {name for name, tests in mapping.items() if tests}


def function_of(mutant: str) -> str:
    return mutant.rsplit("__mutmut_", 1)[0]


def candidates(names: Iterable[str], functions: set[str], killed: set[str], equivalent: set[str]) -> list[str]:
    """The mutants a draw is made among: reached by a test, and neither killed by the prefilter
    nor judged equivalent (a survivor known as such would spend a cluster's minutes for nothing)."""
    return sorted(name for name in names
                  if function_of(name) in functions and name not in killed and name not in equivalent)


def sample(chosen: Profile, count: int, seed: int) -> list[str]:
    """``count`` mutants drawn at random among those some test reaches (a profile too slow to run
    whole; the rest need no run: nothing reaches them, they survive), added to the profile's
    record of its sample (``sample.txt``), from which ``estimate`` reads the score."""
    known = {name for name, entry in equivalents().items() if _still_equivalent(chosen.workdir, name, entry)}
    every = candidates(results(chosen), reached(chosen), killed_before(chosen), known)
    if not every:
        raise UsageError(f"no mutants of profile {chosen.name!r} that a test reaches yet: run it once first")
    drawn = random.Random(seed).sample(every, min(count, len(every)))
    record = chosen.workdir / SAMPLE_RECORD
    earlier = set(record.read_text().split()) if record.exists() else set()
    record.write_text("".join(f"{name}\n" for name in sorted(earlier | set(drawn))))
    return drawn


@dataclass(frozen=True)
class Estimate:
    """A room's score estimated from a random sample of the mutants its tests reach.

    With a prefilter, the mutants it killed are a stratum known whole (``certain``); the sample is
    drawn among the rest, and only they carry the sample's uncertainty."""

    room: str
    unreached: int  # survivors for certain: no test reaches their function
    reached: int  # mutants a test reaches (not equivalent, not killed by the prefilter)
    judged: int  # of those, in the sample and run
    killed: int
    certain: int = 0  # killed by the prefilter's run of every mutant

    def score(self) -> tuple[float, float, float]:
        """The room's score and its 95% interval (Wilson's, over the sample of reached mutants)."""
        total = self.unreached + self.certain + self.reached
        share, n, z = self.killed / self.judged, self.judged, 1.96
        centre = (share + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return tuple((self.certain + x * self.reached) / total
                     for x in (share, max(0.0, centre - half), min(1.0, centre + half)))


def estimates(chosen: Profile) -> list[Estimate]:
    """Each room's estimate, where the profile was run on a sample (``sample``)."""
    record = chosen.workdir / SAMPLE_RECORD
    if not record.exists():
        return []
    drawn, functions, known = set(record.read_text().split()), reached(chosen), equivalents()
    first = killed_before(chosen)
    found: dict[str, list[int]] = {room: [0, 0, 0, 0, 0] for room in chosen.only_mutate}
    for name, (room, code) in results(chosen).items():
        counts = found[room]
        if name in first:
            counts[4] += 1
            continue
        if name in known and _still_equivalent(chosen.workdir, name, known[name]):
            continue
        if function_of(name) not in functions:
            counts[0] += 1
            continue
        counts[1] += 1
        if name in drawn and code is not None:
            counts[2] += 1
            counts[3] += code in KILLED_CODES
    return [Estimate(room, *counts) for room, counts in found.items() if counts[2]]


def command_score(args: argparse.Namespace) -> int:
    chosen = profile(args.profile)
    if not (chosen.workdir / "mutants").is_dir():
        raise UsageError(f"no results for profile {chosen.name!r} yet: ci/mutation.py run first")
    scores, stale = score(chosen)
    print(table(scores, markdown=getattr(args, "markdown", False)))
    for est in estimates(chosen):
        score_, low, high = est.score()
        first = f"{est.certain} killed by {chosen.prefilter}'s tests; " if chosen.prefilter else ""
        rest = " other" if chosen.prefilter else ""
        print(f"{est.room}: estimated {score_:.1%} (95% interval {low:.1%} to {high:.1%}): {first}{est.killed} "
              f"killed of {est.judged} drawn at random among the {est.reached}{rest} mutants a test reaches; "
              f"{est.unreached} no test reaches")
    for name in stale:
        print(f"stale equivalent: {name} changed since it was judged; judge it again", file=sys.stderr)
    low = below_floor(scores)
    for room in low:
        print(f"below floor: {room.room} {room.score:.1%} < {floor_of(room.room):.0%}", file=sys.stderr)
    return EXIT_BELOW_FLOOR if args.check and low else EXIT_OK


def command_survivors(args: argparse.Namespace) -> int:
    chosen = profile(args.profile)
    scores, _ = score(chosen)
    for tally in scores:
        if args.room and tally.room != args.room:
            continue
        for name in tally.survivors:
            print(name)
    return EXIT_OK


def command_equivalent(args: argparse.Namespace) -> int:
    chosen = profile(args.profile)
    if args.name in equivalents():  # a second entry would make the file unreadable (TOML)
        raise UsageError(f"{args.name} is already listed in {EQUIVALENTS.name}: edit its entry there")
    text = mutant_source(chosen.workdir, args.name)
    if text is None:
        raise UsageError(f"no mutant {args.name!r} in {chosen.workdir / 'mutants'}")
    entry = f'\n["{args.name}"]\nsource = "{fingerprint(text)}"\nwhy = {json.dumps(args.why)}\n'
    with EQUIVALENTS.open("a") as out:
        out.write(entry)
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="ci/mutation.py", description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run mutmut over a profile's rooms, then score them")
    run.add_argument("mutants", nargs="*", help="mutmut names or patterns (default: every mutant)")
    run.add_argument("--since", help="only the functions changed since this git revision")
    run.add_argument("--sample", type=int, default=0, help="also N mutants drawn at random (see --seed)")
    run.add_argument("--seed", type=int, default=0, help="the draw of --sample")
    run.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    scored = commands.add_parser("score", help="print the score per room of the last run")
    scored.add_argument("--markdown", action="store_true")
    survivors = commands.add_parser("survivors", help="list the survivors not judged equivalent")
    survivors.add_argument("--room")
    equivalent = commands.add_parser("equivalent", help="record a survivor as equivalent")
    equivalent.add_argument("name")
    equivalent.add_argument("--why", required=True)
    for sub in (run, scored, survivors, equivalent):
        sub.add_argument("--profile", default=MAIN)
        sub.add_argument("--check", action="store_true", help="exit 1 when a room is below its floor")
    return top


COMMANDS = {
    "run": command_run, "score": command_score,
    "survivors": command_survivors, "equivalent": command_equivalent,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as error:
        print(f"ci/mutation.py: {error}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
