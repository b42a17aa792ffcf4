"""``xharness init``: what a maintainer's repository needs to run the harness, written for them.

It reads the repository first: the runtime its ``pyproject.toml`` registers (``--runtime``, or a
question on a terminal, where it registers several), its expected-outcomes table (a TOML file
with ``[[expect]]`` rows), and how xharness itself is installed here (``harness.install_source``).
Then three files:

* the ``[tool.xharness]`` section, appended to the repository's ``pyproject.toml`` (or an
  ``xharness.toml`` where there is none): the test paths, the runtime and the table it found, and
  the starter cells (``harness/matrix/starter.toml``), with the other keys shown commented out.
  A section that exists is the maintainer's: it is kept as it is, ``--force`` or not;
* an example test that uses the pytest plugin's fixtures and markers, so that the first
  ``xharness run`` has something green to show across the cells (refused when it exists, unless
  ``--force``);
* a GitHub Actions workflow (``workflow.py``; refused when it exists, unless ``--force`` or
  ``--workflow-only``, which writes it alone): its cells are read from the project when it runs,
  so the cells a maintainer adds later run in CI without writing it again.

The workflow installs xharness as it is installed here, or as ``--install`` says; a line a CI
runner cannot use (a path on this machine) is refused, naming the option, since a workflow that
fails at its first step teaches nothing.

``reports/`` is added to ``.gitignore`` once. It says what it wrote, and writes nothing when it
refuses: an error leaves the repository as it was.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness import install_source, project
from harness.commands.workflow import ACTIONS, workflow
from harness.entrypoints import OWN_DISTRIBUTION, RUNTIMES
from harness.errors import UsageError
from harness.exits import EXIT_OK
from harness.matrix.config import STARTER
from harness.project import OWN_FILE, PYPROJECT
from harness.project import SECTION as _SECTION

__all__ = ["ACTIONS", "TEST_FILE", "WORKFLOW_FILE", "add_parsers", "cmd_init", "workflow"]

TEST_FILE = Path("tests") / "test_xharness_example.py"
WORKFLOW_FILE = Path(".github") / "workflows" / "xharness.yml"


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="write a starter [tool.xharness], an example test and a CI workflow for your repository",
        description="Write the [tool.xharness] section (pyproject.toml, or xharness.toml where there "
        "is none), tests/test_xharness_example.py and .github/workflows/xharness.yml. A [tool.xharness] "
        "that exists is kept as it is; an example test or workflow that exists is left alone and the "
        "command fails, unless --force (or --workflow-only, for the workflow).",
    )
    p.add_argument("--dir", type=Path, default=Path("."), help="the repository's root (default: .)")
    p.add_argument("--force", action="store_true",
                   help="replace the example test and the workflow (never the [tool.xharness] section)")
    p.add_argument("--workflow-only", action="store_true",
                   help="write .github/workflows/xharness.yml alone, replacing it: the rest of the "
                   "repository (its [tool.xharness] included) is left as it is")
    p.add_argument("--python", default=None, metavar="X.Y",
                   help="the Python the workflow sets up (default: the one init runs under)")
    p.add_argument("--install", default=None, metavar="REQUIREMENT",
                   help="the pip requirement the workflow installs xharness with, e.g. "
                   "'xharness @ git+https://HOST/OWNER/xharness@COMMIT' (default: how xharness is "
                   "installed here, when a CI runner can install that)")
    p.add_argument("--runtime", default=None, metavar="NAME",
                   help="the runtime under test, where the repository registers several (default: ask on a "
                   "terminal, else the first its pyproject.toml registers, named on stderr)")
    p.set_defaults(handler=cmd_init)


@dataclass(frozen=True)
class Planned:
    """One file ``init`` writes: its path, its new text, and what happens to it."""

    path: Path
    text: str
    action: str  # "write", "append", "replace"


def cmd_init(args: argparse.Namespace) -> int:
    root: Path = args.dir
    if not root.is_dir():
        raise UsageError(f"--dir {root}: no such directory")
    python = args.python or f"{sys.version_info.major}.{sys.version_info.minor}"
    if not re.fullmatch(r"3\.\d+", python):
        raise UsageError(f"--python must be a version like 3.12, got {python!r}")
    install = install_line(args.install)
    kept, kept_runtime = existing_section(root)
    if kept is not None:
        runtime = kept_runtime
    else:
        runtime = choose_runtime(registered_runtimes(root), args.runtime, sys.stdin.isatty())
    flow = file_plan(root / WORKFLOW_FILE, workflow(python, install, runtime), args.force or args.workflow_only)
    if args.workflow_only:
        plans = [flow]
    else:
        section = None if kept is not None else config_plan(root, starter_cells(), runtime, find_expected(root))
        plans = [*([section] if section else []), file_plan(root / TEST_FILE, example_test(), args.force), flow,
                 *gitignore_plan(root)]
    for plan in plans:  # every check first: a refusal writes nothing at all
        if plan.action == "replace":
            old = plan.path.read_text(encoding="utf-8", errors="replace")
            if old == plan.text:
                print(f"xharness init: unchanged {plan.path}")
                continue
            print(f"xharness init: replace {plan.path}; what changes:")
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(keepends=True), plan.text.splitlines(keepends=True),
                fromfile=f"{plan.path} (before)", tofile=f"{plan.path} (now)"))
        plan.path.parent.mkdir(parents=True, exist_ok=True)
        plan.path.write_text(plan.text, encoding="utf-8")
        if plan.action != "replace":
            print(f"xharness init: {plan.action} {plan.path}")
    if kept is not None and not args.workflow_only:
        print(f"xharness init: keep [tool.xharness] of {kept} as it is (init never rewrites it)")
    origin = "--python" if args.python else "the Python init runs under; --python X.Y for another"
    print(f"xharness init: the workflow sets up Python {python} ({origin}) and installs {install.requirement}")
    print(f"xharness init: {resolved_jax(python)}")
    if install.note:
        print(f"xharness init: note: {install.note}", file=sys.stderr)
    print("next: xharness cells (what runs here), then xharness run", file=sys.stderr)
    return EXIT_OK


def resolved_jax(python: str) -> str:
    """What JAX the workflow's Python gets: the one this Python resolved (where it is the
    workflow's), and the range xharness declares, from which pip takes the newest release that
    supports that Python (JAX 0.11 and later need Python 3.12 or newer)."""
    import importlib.metadata

    declared = next((r.split(";")[0] for r in importlib.metadata.requires(OWN_DISTRIBUTION) or ()
                     if re.match(r"jax\s*[<>=!~]", r)), "jax")
    try:
        here = importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        here = "none"
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    if python == mine:
        return (f"JAX {here} is what Python {mine} resolved here ({declared}); the workflow's runner "
                "resolves the newest release of that range for the same Python, so a newer one may "
                "have come out since")
    return (f"the workflow's Python {python} is not this one ({mine}, JAX {here}): its runner resolves "
            f"the newest release of {declared} that Python {python} supports, which may not be the "
            "JAX tested here")


def install_line(given: str | None) -> install_source.InstallLine:
    """The requirement the workflow installs xharness with: ``--install``, else how it is
    installed here; a usage error when a CI runner could not install it."""
    if given is not None:
        try:
            return install_source.given(given, OWN_DISTRIBUTION)
        except ValueError as exc:
            raise UsageError(f"--install {given!r}: {exc} (nothing was written)") from None
    here = install_source.installed(OWN_DISTRIBUTION)
    if here.local_only:
        raise UsageError(
            f"xharness is installed here as {here.requirement!r}, which a CI runner cannot install: "
            f"{here.local_only}. Name what the workflow installs with --install, e.g. --install "
            "'xharness @ git+https://HOST/OWNER/xharness@COMMIT' (nothing was written)")
    return here


def existing_section(root: Path) -> tuple[Path | None, str | None]:
    """The file of the repository's ``[tool.xharness]`` (None when it has none) and the runtime
    it names: a section that exists is kept, and the workflow tests its runtime."""
    own, pyproject = root / OWN_FILE, root / PYPROJECT
    path = own if own.exists() else (pyproject if pyproject.exists() else None)
    if path is None:
        return None, None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc} (nothing was written)") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{project.toml_error(path, exc)} (nothing was written)") from None
    if path == own:
        table: object = data
    elif _SECTION.search(text) is None:
        return None, None
    else:
        table = data.get("tool", {}).get("xharness", {})
    runtime = table.get("runtime") if isinstance(table, dict) else None
    return path, runtime if isinstance(runtime, str) else None


def registered_runtimes(root: Path) -> list[str]:
    """The runtimes the repository's own ``pyproject.toml`` registers (``xharness.runtimes``), in
    the file's order; none when it has no such file or it does not parse (``xharness run`` then
    reports the file with its line)."""
    try:
        data = tomllib.loads((root / PYPROJECT).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return []
    group = data.get("project", {}).get("entry-points", {}).get(RUNTIMES, {})
    return [str(name) for name in group] if isinstance(group, dict) else []


def choose_runtime(registered: list[str], named: str | None, interactive: bool) -> str | None:
    """The runtime ``runtime`` is set to: ``--runtime``, else the one the repository registers,
    else (several) the user's answer on a terminal or the first, named on stderr; None when the
    repository registers none (the reference runtime, left commented out)."""
    from harness import adapters

    if named is not None:
        known = [*registered, *(n for n in adapters.names() if n not in registered)]
        if named not in known:
            raise UsageError(f"--runtime: unknown runtime {named!r} (registered: {', '.join(known)}; a "
                             "runtime of this repository must be installed: pip install -e .)")
        return named
    if len(registered) <= 1:
        return registered[0] if registered else None
    if interactive:
        answer = input(f"xharness init: this repository registers {', '.join(registered)}; which is "
                       f"under test? [{registered[0]}] ").strip()
        if answer and answer not in registered:
            raise UsageError(f"{answer!r} is not one of {', '.join(registered)} (nothing was written)")
        return answer or registered[0]
    print(f"xharness init: this repository registers runtimes {', '.join(registered)}; chose "
          f"{registered[0]} (--runtime NAME chooses another)", file=sys.stderr)
    return registered[0]


#: where ``init`` looks for an expected-outcomes table: the usual names, then any TOML file at the
#: root or one directory down whose top level has ``[[expect]]`` rows
EXPECTED_NAMES = ("expected.toml", "xharness-expected.toml")


def find_expected(root: Path) -> str | None:
    """The repository's expected-outcomes table, relative to the root, or None."""
    named = [root / n for n in EXPECTED_NAMES]
    rest = sorted(p for pattern in ("*.toml", "*/*.toml") for p in root.glob(pattern) if p not in named)
    for path in [*named, *rest]:
        if path.name in (PYPROJECT, OWN_FILE) or not path.is_file():
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        if isinstance(data.get("expect"), list):
            return path.relative_to(root).as_posix()
    return None


#: the lines of a .gitignore that already keep the reports out of git
_IGNORED = {"reports", "reports/", "/reports", "/reports/", "reports/*", "/reports/*"}


def gitignore_plan(root: Path) -> list[Planned]:
    """``reports/`` added to ``.gitignore`` (made when missing), unless it is there already."""
    path = root / ".gitignore"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc} (nothing was written)") from None
    if text is not None and _IGNORED & {line.strip() for line in text.splitlines()}:
        return []
    entry = "# what xharness run writes (xharness init)\nreports/\n"
    if text is None:  # a repository without one: Python's own leftovers too
        return [Planned(path, f"{entry}__pycache__/\n*.egg-info/\n", "write")]
    joined = text if text.endswith("\n") or not text else text + "\n"
    return [Planned(path, joined + entry, "append reports/ to")]


def starter_cells() -> dict[str, dict[str, object]]:
    """The starter cells, as ``harness/matrix/starter.toml`` declares them."""
    cells = tomllib.loads(STARTER.read_text(encoding="utf-8"))["cells"]
    return {str(name): dict(body) for name, body in cells.items()}


def file_plan(path: Path, text: str, force: bool) -> Planned:
    if path.exists() and not force:
        raise UsageError(f"{path} exists; run with --force to replace it (nothing was written)")
    return Planned(path, text, "replace" if path.exists() else "write")


def config_plan(root: Path, cells: dict[str, dict[str, object]], runtime: str | None = None,
                expected: str | None = None) -> Planned:
    """The ``[tool.xharness]`` section appended to ``pyproject.toml``, else a new
    ``xharness.toml`` (only where the repository has no section: one that exists is kept)."""
    own = root / OWN_FILE
    pyproject = root / PYPROJECT
    if own.exists() or not pyproject.exists():
        return file_plan(own, config_text(cells, table="", runtime=runtime, expected=expected), False)
    text = pyproject.read_text(encoding="utf-8")
    section = config_text(cells, table="tool.xharness", runtime=runtime, expected=expected)
    joined = text if text.endswith("\n") or not text else text + "\n"
    return Planned(pyproject, f"{joined}\n{section}", "append to")


def config_text(cells: dict[str, dict[str, object]], table: str, runtime: str | None = None,
                expected: str | None = None) -> str:
    """The starter section: under ``[tool.xharness]`` in a pyproject, at the top of xharness.toml."""
    prefix = f"{table}." if table else ""
    head = f"[{table}]\n" if table else ""
    out = [
        "# How xharness runs this repository (xharness documentation: how-to/configure-a-project).\n",
        head,
        'testpaths = ["tests"]\n',
        (f"runtime = {_toml(runtime)}   # the runtime under test: `xharness list runtimes`\n" if runtime
         else '# runtime = "reference"        # the runtime under test: `xharness list runtimes`\n'),
        (f"expected = {_toml(expected)}   # expected outcomes of your scenarios on your releases\n" if expected
         else '# expected = "expected.toml"   # expected outcomes of your scenarios on your releases\n'),
        '# matrix = "ci/matrix.toml"    # a matrix file instead of the cells below\n',
        'reports = "reports"\n',
    ]
    for name, body in cells.items():
        out.append(f"\n[[{prefix}cells]]\n")
        out.append(f'name = "{name}"\n')
        for key, value in body.items():
            out.append(f"{key} = {_toml(value)}\n")
    return "".join(out)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def example_test() -> str:
    return '''"""A first test for xharness: it runs in every cell, against the runtime under test.

The fixtures and markers come with xharness' pytest plugin: `adapter` is the runtime under test
(the cell's, or [tool.xharness] runtime), `devices` the cell's JAX devices, and
`@pytest.mark.devices(n)` skips, with the reason, where the cell has fewer than n devices.
"""

import numpy as np
import pytest


def test_values_round_trip(adapter):
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(adapter.to_host(adapter.tensor(host)), host)


@pytest.mark.devices(2)
def test_split_over_devices(adapter, devices):
    n = len(devices)
    mesh = adapter.mesh(range(n), (n,), ("x",))
    host = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    t = adapter.mark_sharding(adapter.tensor(host), mesh, ("x", None))
    for index, data in adapter.device_shards(t).values():
        np.testing.assert_array_equal(data, host[index])
'''
