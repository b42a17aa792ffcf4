"""The GitHub Actions workflow ``xharness init`` writes, as one template of data.

It is read as it will be written, so it stays one piece. What it must do on a hosted runner, and
why each part is there:

* the cells are the project's when the workflow runs: a first job asks ``xharness cells --github``
  and the cell jobs' matrix is ``fromJSON`` of its answer, so a cell added to ``[tool.xharness]``
  runs in CI with no workflow to write again. Each cell job runs on the runner that answer names
  (``harness.matrix.hosted``): a hosted one, or the labels ``[tool.xharness.runners]`` gives a
  cell that needs a GPU, a TPU or a cluster; a cell no runner serves is a note, with the reason,
  at the top of the summary and the dashboard;
* pip is upgraded before anything is installed (the pip of an older Python rejects requirements
  a newer one accepts), and its cache and JAX's compilation cache are kept between runs with
  ``actions/cache``, so a run compiles and downloads what changed only (JAX's under a key with the
  JAX and jaxlib versions installed, since a program compiled by one is of no use to another);
* every action is pinned to a commit (the ones the harness' own workflow pins), no job keeps the
  checkout's credentials, every job reads the repository only, and no expression is expanded into
  a script (what ``zizmor`` asks of a workflow).
"""

from __future__ import annotations

from harness import install_source
from harness.entrypoints import OWN_DISTRIBUTION

#: the actions the workflow uses, each pinned to the commit of a release (the tag in the comment);
#: the harness' own workflow pins the same ones (a selftest keeps the two in step)
ACTIONS = {
    "actions/checkout": ("11d5960a326750d5838078e36cf38b85af677262", "v4.4.0"),
    "actions/setup-python": ("a26af69be951a213d495a4c3e4e4022e16d87065", "v5.6.0"),
    "actions/cache": ("0057852bfaa89a56745cba8c7296529d2fc39830", "v4.3.0"),
    "actions/upload-artifact": ("ea165f8d65b6e75b540449e92b4886f43607fa02", "v4.6.2"),
    "actions/download-artifact": ("d3f86a106a0bac45b974a628896c90dbdf5c8093", "v4.3.0"),
}
#: where ``xharness run`` keeps JAX's compilation cache by default (``harness.compile_cache``)
JAX_CACHE = "~/.cache/xharness/jax"
#: the job whose output names the cells
PLAN_JOB = "plan"


def _uses(action: str) -> str:
    sha, tag = ACTIONS[action]
    return f"{action}@{sha} # {tag}"


#: the install line as the pip just upgraded reads it: an older pip rejects lines a newer one
#: takes, and this says which line and why before pip's own resolver errors
_CHECK_LINE = """          python - <<'EOF'
          import os, sys
          from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
          line = os.environ["XHARNESS"]
          try:
              Requirement(line)
          except InvalidRequirement as exc:
              sys.exit(f"the install line {line!r} does not parse with this pip: {exc}")
          EOF
"""


def _setup_steps(python: str) -> str:
    """The steps every job that runs the project starts with: the checkout, Python, pip's cache,
    a current pip, the same xharness as where ``init`` ran, and the repository's own
    distribution (its plugin) when it has one."""
    return f"""      - uses: {_uses("actions/checkout")}
        with:
          persist-credentials: false
      - uses: {_uses("actions/setup-python")}
        with:
          python-version: "{python}"
      - name: Restore pip's cache
        uses: {_uses("actions/cache")}
        with:
          path: ~/.cache/pip
          key: pip-${{{{ runner.os }}}}-py{python}-${{{{ hashFiles('pyproject.toml', '.github/workflows/xharness.yml') }}}}
          restore-keys: |
            pip-${{{{ runner.os }}}}-py{python}-
      - name: Install
        run: |
          python -m pip install --upgrade pip
{_CHECK_LINE}          python -m pip install "$XHARNESS"
          if [ -f pyproject.toml ] && grep -q '^\\[project\\]' pyproject.toml; then python -m pip install -e .; fi"""


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


def workflow(python: str, install: install_source.InstallLine | None = None, runtime: str | None = None) -> str:
    """The workflow: ``python`` is the version every job sets up, ``install`` how xharness is
    installed (the workflow installs the same), and a project's own ``runtime`` gets a ``teeth``
    job, whose JUnit joins the report."""
    install = install or install_source.InstallLine(OWN_DISTRIBUTION, "index")
    where = {"index": "the version installed where `xharness init` ran, from the package index",
             "vcs": "the commit installed where `xharness init` ran",
             "directory": "the directory xharness was installed from where `xharness init` ran",
             "archive": "the archive xharness was installed from where `xharness init` ran"}[install.source]
    teeth = _teeth_job(python, runtime) if runtime and runtime != "reference" else ""
    needs = f"[{PLAN_JOB}, cells, teeth]" if teeth else f"[{PLAN_JOB}, cells]"
    return _header(install, where) + _plan_job(python) + _cells_job(python) + teeth + _report_job(python, needs)


def _header(install: install_source.InstallLine, where: str) -> str:
    return f"""# xharness across the cells of [tool.xharness]: the cells read from the project, one job per
# cell, then one report. Written by `xharness init` (`xharness init --workflow-only` writes it
# again); every action is pinned to a commit, no job keeps the checkout's credentials, and every
# job only reads the repository.
name: xharness

on:
  push:
  pull_request:

permissions: {{}}

env:
  # where pip gets xharness from: {where}
  XHARNESS: "{install.requirement}"

jobs:
"""


def _plan_job(python: str) -> str:
    """The first job: the project's cells, read when the workflow runs."""
    return f"""  {PLAN_JOB}:
    permissions:
      contents: read
    runs-on: ubuntu-latest
    timeout-minutes: 15
    outputs:
      matrix: ${{{{ steps.cells.outputs.matrix }}}}
      any: ${{{{ steps.cells.outputs.any }}}}
      not_run: ${{{{ steps.cells.outputs.not_run }}}}
    steps:
{_setup_steps(python)}
      # each cell and its runner: a hosted one, or the labels [tool.xharness.runners] names for a
      # cell that needs a GPU, a TPU or a cluster; the cells none serves, with the reason
      - name: The cells of [tool.xharness] and their runners
        id: cells
        run: xharness cells --github >> "$GITHUB_OUTPUT"

"""


def _cells_job(python: str) -> str:
    """One job per cell, with JAX's compilation cache of that cell kept between runs."""
    return f"""  cells:
    permissions:
      contents: read
    needs: {PLAN_JOB}
    if: needs.{PLAN_JOB}.outputs.any == 'true'
    runs-on: ${{{{ matrix.runs-on }}}}
    timeout-minutes: 60
    strategy:
      fail-fast: false
      matrix: ${{{{ fromJSON(needs.{PLAN_JOB}.outputs.matrix) }}}}
    name: cell ${{{{ matrix.cell }}}}
    steps:
{_setup_steps(python)}
      # the JAX and jaxlib installed: programs one compiled are of no use to another
      - name: The JAX and jaxlib versions
        id: jax
        run: echo "versions=$(python -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, sep="-")')" >> "$GITHUB_OUTPUT"
      # JAX's persistent compilation cache, one per cell and JAX: restored from the latest run of
      # any ref with the same JAX and jaxlib, saved under this run's key when the job ends
      - name: Restore the JAX compilation cache
        uses: {_uses("actions/cache")}
        with:
          path: {JAX_CACHE}
          key: xharness-jax-${{{{ matrix.cell }}}}-py{python}-${{{{ steps.jax.outputs.versions }}}}-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}
          restore-keys: |
            xharness-jax-${{{{ matrix.cell }}}}-py{python}-${{{{ steps.jax.outputs.versions }}}}-
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
"""


def _report_job(python: str, needs: str) -> str:
    """The last job: every cell's JUnit merged, the dashboard and the step summary."""
    return f"""
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
        run: |
          python -m pip install --upgrade pip
{_CHECK_LINE}          python -m pip install "$XHARNESS"
      - name: Download every cell's JUnit
        uses: {_uses("actions/download-artifact")}
        with:
          pattern: junit-*
          path: artifacts/junit
          merge-multiple: true
      - name: Merge, dashboard and summary
        env:
          NOT_RUN: ${{{{ needs.{PLAN_JOB}.outputs.not_run }}}}
        run: |
          mkdir -p reports
          if ls artifacts/junit/*.xml >/dev/null 2>&1; then
            xharness report merge artifacts/junit --out reports/junit.xml
          else  # no cell ran (none had a runner): the pages say so, with each cell's reason
            echo '<testsuites/>' > reports/junit.xml
          fi
          xharness report html reports/junit.xml --out reports/index.html --not-run "$NOT_RUN"
          xharness report summary reports/junit.xml --out reports/summary.md --not-run "$NOT_RUN"
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
