"""``xharness init``: what a maintainer's repository needs to run the harness, written for them.

It reads the repository first: the runtime its ``pyproject.toml`` registers (``--runtime``, or a
question on a terminal, where it registers several), its expected-outcomes table (a TOML file
with ``[[expect]]`` rows), and how xharness itself is installed here (``harness.install_source``).
Then three files, each refused when it exists unless ``--force`` says to replace it:

* the ``[tool.xharness]`` section, appended to the repository's ``pyproject.toml`` (or an
  ``xharness.toml`` where there is none): the test paths, the runtime and the table it found, and
  the starter cells (``harness/matrix/starter.toml``), with the other keys shown commented out;
* an example test that uses the pytest plugin's fixtures and markers, so that the first
  ``xharness run`` has something green to show across the cells;
* a GitHub Actions workflow that installs the same xharness: one job per cell (``xharness run
  --cells``, whose items include the project's own scenarios and invariants), each uploading its
  JUnit file, a ``teeth`` job for the project's own runtime, then one job that merges them into
  the report, the dashboard and the step summary. Every
  action is pinned to a commit, no job keeps the checkout's credentials, and every job reads the
  repository only (what ``zizmor`` asks of a workflow).

``reports/`` is added to ``.gitignore`` once. It says what it wrote, and writes nothing when it
refuses: an error leaves the repository as it was.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from harness import install_source
from harness.entrypoints import OWN_DISTRIBUTION, RUNTIMES
from harness.errors import UsageError
from harness.exits import EXIT_OK
from harness.matrix.config import STARTER
from harness.project import OWN_FILE, PYPROJECT
from harness.project import SECTION as _SECTION

#: the actions the workflow uses, each pinned to the commit of a release (the tag in the comment);
#: the harness' own workflow pins the same ones (a selftest keeps the two in step)
ACTIONS = {
    "actions/checkout": ("11d5960a326750d5838078e36cf38b85af677262", "v4.4.0"),
    "actions/setup-python": ("a26af69be951a213d495a4c3e4e4022e16d87065", "v5.6.0"),
    "actions/upload-artifact": ("ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"),
    "actions/download-artifact": ("d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"),
}
TEST_FILE = Path("tests") / "test_xharness_example.py"
WORKFLOW_FILE = Path(".github") / "workflows" / "xharness.yml"
_HEADER = re.compile(r"^\s*\[")


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        help="write a starter [tool.xharness], an example test and a CI workflow for your repository",
        description="Write the [tool.xharness] section (pyproject.toml, or xharness.toml where there "
        "is none), tests/test_xharness_example.py and .github/workflows/xharness.yml. A file that "
        "exists is left alone and the command fails, unless --force.",
    )
    p.add_argument("--dir", type=Path, default=Path("."), help="the repository's root (default: .)")
    p.add_argument("--force", action="store_true", help="replace what exists (the section, the files)")
    p.add_argument("--python", default="3.12", metavar="X.Y", help="the Python the workflow sets up (default 3.12)")
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
    if not re.fullmatch(r"3\.\d+", args.python):
        raise UsageError(f"--python must be a version like 3.12, got {args.python!r}")
    cells = starter_cells()
    runtime = choose_runtime(registered_runtimes(root), args.runtime, sys.stdin.isatty())
    table = find_expected(root)
    install = install_source.installed(OWN_DISTRIBUTION)
    if install.local_only:
        print(f"xharness init: note: the workflow installs {install.requirement}: {install.local_only}",
              file=sys.stderr)
    plans = [
        config_plan(root, cells, args.force, runtime, table),
        file_plan(root / TEST_FILE, example_test(), args.force),
        file_plan(root / WORKFLOW_FILE, workflow(cells, args.python, install, runtime), args.force),
        *gitignore_plan(root),
    ]
    for plan in plans:  # every check first: a refusal writes nothing at all
        plan.path.parent.mkdir(parents=True, exist_ok=True)
        plan.path.write_text(plan.text, encoding="utf-8")
        print(f"xharness init: {plan.action} {plan.path}")
    print("next: xharness cells (what runs here), then xharness run", file=sys.stderr)
    return EXIT_OK


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


def config_plan(root: Path, cells: dict[str, dict[str, object]], force: bool, runtime: str | None = None,
                expected: str | None = None) -> Planned:
    """The ``[tool.xharness]`` section in ``pyproject.toml`` (appended, or replacing the one there
    with ``--force``), else a new ``xharness.toml``."""
    own = root / OWN_FILE
    pyproject = root / PYPROJECT
    if own.exists() or not pyproject.exists():
        return file_plan(own, config_text(cells, table="", runtime=runtime, expected=expected), force)
    text = pyproject.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
    section = config_text(cells, table="tool.xharness", runtime=runtime, expected=expected)
    if start is None:
        joined = text if text.endswith("\n") or not text else text + "\n"
        return Planned(pyproject, f"{joined}\n{section}", "append to")
    if not force:
        raise UsageError(f"{pyproject} has [tool.xharness] already; run with --force to replace it "
                         "(nothing was written)")
    kept = [line for i, line in enumerate(lines) if i < start or not _in_section(lines, start, i)]
    return Planned(pyproject, "".join(kept).rstrip("\n") + "\n\n" + section, "replace [tool.xharness] in")


def _in_section(lines: list[str], start: int, index: int) -> bool:
    """Whether line ``index`` belongs to the ``[tool.xharness...]`` tables from ``start`` on."""
    owner = start
    for i in range(start, index + 1):
        if _HEADER.match(lines[i]):
            owner = i
    return _SECTION.match(lines[owner]) is not None


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


def _teeth_job(python: str, runtime: str) -> str:
    """The job that checks the runtime's fault switches are caught by the checks that declare
    them (``xharness teeth``): a scenario or invariant that lost its teeth fails CI."""
    return f"""
  teeth:
    permissions:
      contents: read
    runs-on: ubuntu-latest
    timeout-minutes: 30
    steps:
{_setup_steps(python)}
      - name: Every declared fault switch of {runtime} caught
        run: xharness teeth --runtime {runtime}
      - name: Upload the teeth JUnit
        if: always()
        uses: {_uses("actions/upload-artifact")}
        with:
          name: junit-teeth
          path: reports/junit/teeth.xml
          if-no-files-found: warn
"""


def _setup_steps(python: str) -> str:
    """The steps every job that runs the project starts with: the checkout, Python, the same
    xharness as here, and the repository's own distribution (its plugin) when it has one."""
    return f"""      - uses: {_uses("actions/checkout")}
        with:
          persist-credentials: false
      - uses: {_uses("actions/setup-python")}
        with:
          python-version: "{python}"
      - name: Install
        run: |
          python -m pip install "$XHARNESS"
          if [ -f pyproject.toml ] && grep -q '^\\[project\\]' pyproject.toml; then python -m pip install -e .; fi"""


def _uses(action: str) -> str:
    sha, tag = ACTIONS[action]
    return f"{action}@{sha} # {tag}"


def workflow(cells: dict[str, dict[str, object]], python: str,
             install: install_source.InstallLine | None = None, runtime: str | None = None) -> str:
    """A template of data: the GitHub Actions workflow ``init`` writes, read as it will be
    written, so it stays one piece. ``install`` is how xharness is installed here (the workflow
    installs the same); a project's own runtime gets a ``teeth`` job, whose JUnit joins the
    report."""
    names = ", ".join(cells)
    install = install or install_source.InstallLine(OWN_DISTRIBUTION, "index")
    where = {"index": "the version installed where `xharness init` ran, from the package index",
             "vcs": "the commit installed where `xharness init` ran",
             "directory": "the directory xharness was installed from where `xharness init` ran",
             "archive": "the archive xharness was installed from where `xharness init` ran"}[install.source]
    caveat = f"\n  # NOTE: {install.local_only}" if install.local_only else ""
    teeth = _teeth_job(python, runtime) if runtime and runtime != "reference" else ""
    needs = "[cells, teeth]" if teeth else "[cells]"
    return f"""# xharness across the cells of [tool.xharness]: one job per cell, then one report.
# Written by `xharness init`; every action is pinned to a commit, no job keeps the checkout's
# credentials, and every job only reads the repository.
name: xharness

on:
  push:
  pull_request:

permissions: {{}}

env:
  # where pip gets xharness from: {where}{caveat}
  XHARNESS: "{install.requirement}"

jobs:
  cells:
    permissions:
      contents: read
    runs-on: ubuntu-latest
    timeout-minutes: 60
    strategy:
      fail-fast: false
      matrix:
        cell: [{names}]
    name: cell ${{{{ matrix.cell }}}}
    steps:
{_setup_steps(python)}
      - name: Run the cell
        env:
          CELL: ${{{{ matrix.cell }}}}
        run: xharness run --cells "$CELL"
      - name: Upload the cell's JUnit
        if: always()
        uses: {_uses("actions/upload-artifact")}
        with:
          name: junit-${{{{ matrix.cell }}}}
          path: reports/junit/*.xml
          if-no-files-found: warn
{teeth}
  report:
    permissions:
      contents: read
    needs: {needs}
    if: always()
    runs-on: ubuntu-latest
    timeout-minutes: 15
    steps:
      - uses: {_uses("actions/setup-python")}
        with:
          python-version: "{python}"
      - name: Install
        run: python -m pip install "$XHARNESS"
      - name: Download every cell's JUnit
        uses: {_uses("actions/download-artifact")}
        with:
          pattern: junit-*
          path: artifacts/junit
          merge-multiple: true
      - name: Merge, dashboard and summary
        run: |
          xharness report merge artifacts/junit --out reports/junit.xml
          xharness report html reports/junit.xml --out reports/index.html
          xharness report summary reports/junit.xml --out reports/summary.md
          cat reports/summary.md >> "$GITHUB_STEP_SUMMARY"
      - name: Upload the dashboard
        if: always()
        uses: {_uses("actions/upload-artifact")}
        with:
          name: dashboard
          path: |
            reports/index.html
            reports/junit.xml
            reports/summary.md
          if-no-files-found: warn
"""
