#!/usr/bin/env bash
# The example plugins (examples/tinyjax, a runtime over JAX, and examples/numpyrt, a runtime over
# numpy alone) as a maintainer would use them: a copy of each one's repository, one fresh virtual
# environment with xharness and both plugins installed (nothing of .venv), and in each repository
# the commands its README walks through, each checked:
#   xharness list / list runtimes / list invariants   the plugin's items, with their distribution
#   xharness cells                                     both cells test the plugin's runtime
#   xharness repro (fixed, then --inject)              passes as its expected row says; reproduces
#   xharness run                                       its suite over its two cells, JUnit checked
#                                                      (numpyrt: its device count is the cell's)
#   xharness teeth --runtime RUNTIME                   its invariant and scenario catch its switch
#   xharness report upstream (tinyjax)                its registered trigger's report, whose
#                                                      script runs to the end on tinyjax 0.1.0
#   xharness init in an empty directory, then run      a fresh repository is green at once; the
#                                                      workflow reads the cells from the project
# init is given the install line CI would use (--install): a checkout of xharness without a
# remote is a path a runner cannot install, which init refuses.
# Usage: ci/example.sh [WORKDIR]   (default: a temporary directory, removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
project="$PWD"
work="${1:-$(mktemp -d)}"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
python="${XHARNESS_EXAMPLE_PYTHON:-$project/.venv/bin/python}"
python="$("$python" -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')"
install="xharness @ git+https://github.com/OWNER/xharness@$(git rev-parse HEAD)"

echo "ci/example.sh: a fresh environment in $work/env"
"$python" -m venv "$work/env"
env="$work/env/bin"
"$env/python" -m pip install -q --upgrade pip
"$env/python" -m pip install -q -e "$project"
export PATH="$env:$PATH"
unset XHARNESS_PROJECT HARNESS_FAULTS HARNESS_RUNTIME

capture() {  # capture COMMAND...: its stdout into `out`; a non-zero exit is a failure, said so
  "$@" > "$work/out" \
    || { echo "ci/example.sh: FAILED: \`$*\` exited $? (in $PWD)" >&2; cat "$work/out" >&2; exit 1; }
}
check() {  # check DESCRIPTION PYTHON-EXPRESSION-ON-`out` (the last command's stdout)
  "$env/python" -c "import json, sys; out = open('$work/out').read(); assert $2, out" \
    || { echo "ci/example.sh: FAILED: $1" >&2; cat "$work/out" >&2; exit 1; }
  echo "ci/example.sh: ok: $1"
}

# example_checks EXAMPLE DISTRIBUTION VERSION SCENARIO SIGNATURE INVARIANT [MUST-PASS-TEST]
# A copy of examples/EXAMPLE installed into the environment, then its README's commands in it.
# The runtime is the example's own name. MUST-PASS-TEST names a test of its suite that must pass
# (not skip) in every cell: a check that only holds where the cell's shape reached the runtime.
example_checks() {
  local example="$1" dist="$2" version="$3" scenario="$4" signature="$5" invariant="$6"
  local must_pass="${7:-}" runtime="$1" repo="$work/$1"
  echo "ci/example.sh: example $example ($dist $version)"
  rm -rf "$repo"
  cp -r "$project/examples/$example" "$repo"
  "$env/python" -m pip install -q -e "$repo"
  cd "$repo"

  capture xharness list --json
  check "$example: list shows the plugin's scenario with its distribution" \
    "[(r['distribution'], r['version']) for r in json.loads(out) if r['id'] == '$scenario'] == [('$dist', '$version')]"
  capture xharness list runtimes
  check "$example: list runtimes shows $runtime from the plugin" "'(from $dist $version)' in out"
  capture xharness list invariants
  check "$example: list invariants shows the plugin's invariant" "'$invariant' in out"
  capture xharness cells --json
  check "$example: cells: both cells test $runtime, from the plugin" \
    "[(c['name'], c['runtime_under_test'], c['plugin']) for c in json.loads(out)['cells']] == [('cpu-1', '$runtime', '$dist $version'), ('cpu-4', '$runtime', '$dist $version')]"
  capture xharness repro "$scenario" --json
  check "$example: repro (fixed) passes, as the expected row says" \
    "json.loads(out)['outcome'] == 'passed' and json.loads(out)['verdict']['verdict'] == 'as-expected'"
  capture xharness repro "$scenario" --inject --json
  check "$example: repro --inject reproduces with the scenario's signature" \
    "json.loads(out)['outcome'] == 'reproduced' and json.loads(out)['signature'] == '$signature'"

  rm -rf reports
  capture xharness run
  EXAMPLE="$example" MUST_PASS="$must_pass" SCENARIO="$scenario" INVARIANT="$invariant" "$env/python" - <<'PY'
import os
from junitparser import JUnitXml
example, must_pass = os.environ["EXAMPLE"], os.environ["MUST_PASS"]
own = {f"{os.environ['SCENARIO']}[fixed]", f"{os.environ['SCENARIO']}[injected]", os.environ["INVARIANT"]}
for cell in ("cpu-1", "cpu-4"):
    xml = JUnitXml.fromfile(f"reports/junit/{cell}.xml")
    cases = [case for suite in xml for case in suite]
    # the suite's tests (tests/), and whatever items the harness adds to a project's run
    suite = [c for c in cases if c.classname.startswith("tests.")]
    assert suite, f"{cell}: no test of the plugin's suite ran: {[c.classname for c in cases]}"
    failed = [c.name for c in cases for r in c.result if r._tag in ("failure", "error")]
    assert not failed, f"{cell}: failed: {failed}"
    # the plugin's own scenario (both modes) and invariant are items of the run, at its own files
    items = {c.name: c for c in cases if c.name in own}
    assert set(items) == own, f"{cell}: the plugin's items missing: {own - set(items)}"
    files = {c._elem.get("file") for c in items.values()}
    assert all(f.startswith(f"xharness_{example}/") for f in files), f"{cell}: items not at the plugin's files: {files}"
    ran = f"{len(suite)} tests of the plugin's suite and its scenario (both modes) and invariant"
    ran += f" at {', '.join(sorted(files))}"
    ran += f" ({sum(1 for c in items.values() if c.is_skipped)} skipped by the cell)"
    ran += ", none failed"
    if must_pass:
        found = [c for c in suite if c.name == must_pass]
        assert found and not found[0].result, f"{cell}: {must_pass} did not pass: {found and found[0].result}"
        ran += f", {must_pass} passed"
    print(f"ci/example.sh: ok: {example}: run, cell {cell}: {ran}")
PY

  capture xharness teeth --runtime "$runtime" --json
  check "$example: teeth: every declared pair of $runtime's switch caught" \
    "sorted((r['check'], r['status']) for r in json.loads(out)['pairs']) == sorted([('$scenario', 'caught'), ('$invariant', 'caught')])"
  EXAMPLE="$example" "$env/python" - <<'PY'
import os
from junitparser import JUnitXml
cases = [c for s in JUnitXml.fromfile("reports/junit/teeth.xml") for c in s]
assert len(cases) == 2 and not any(r._tag in ("failure", "error") for c in cases for r in c.result), cases
print(f"ci/example.sh: ok: {os.environ['EXAMPLE']}: teeth wrote its JUnit (2 pairs, none failed)")
PY
  cd "$project"
}

# a runtime over JAX: it sees the cell's devices through jax.devices()
example_checks tinyjax xharness-tinyjax 0.1.0 tinyjax-dropped-axis layout-lost tinyjax-spec-round-trip
# tinyjax registers its runtime's upstream trigger (xharness.upstream): report upstream writes the
# report to file against tinyjax as installed, and the report's script runs there to the end
cd "$work/tinyjax"
capture xharness report upstream tinyjax-dropped-axis --runtime tinyjax
report=reports/upstream/tinyjax-dropped-axis-tinyjax-0.1.0.md
check "tinyjax: report upstream wrote $report, judged by the expected row" \
  "'wrote $report (passed on tinyjax 0.1.0: as-expected)' in out"
"$env/python" -c "import sys; sys.stdout.write(open('$report').read().split('\`\`\`python\n')[1].split('\`\`\`')[0])" > "$work/repro.py"
capture env JAX_PLATFORMS=cpu JAX_NUM_CPU_DEVICES=4 "$env/python" "$work/repro.py"
check "tinyjax: the report's script runs to the end on tinyjax 0.1.0" "'no bug here' in out"
cd "$project"
# a runtime over numpy alone: it learns the cell's devices from api.cell_shape(), and its suite's
# test_device_count_is_the_cells passes only where that count is the one pyproject.toml promises
example_checks numpyrt xharness-numpyrt 0.1.0 numpyrt-transposed-placement misplaced-shard \
  numpyrt-block-placement test_device_count_is_the_cells

# The tutorial ("Your runtime in thirty minutes"), from its page alone: the files it has the reader
# write, installed, then `xharness init` and `xharness run` as it says; the runtime's scenario must
# be in the JUnit in both modes at the reader's own file, and an import error planted in one of its
# modules must stop the run (exit 2), naming the entry point.
tutorial="$work/tutorial"
rm -rf "$tutorial" && mkdir "$tutorial"
"$env/python" ci/tutorial_files.py docs/tutorials/your-runtime.md "$tutorial"
"$env/python" -m pip install -q -e "$tutorial"
cd "$tutorial"
capture xharness init --install "$install"
capture xharness run
"$env/python" - <<'PY'
import tomllib
from junitparser import JUnitXml
groups = tomllib.load(open("pyproject.toml", "rb"))["project"]["entry-points"]
(scenario, where), = groups["xharness.scenarios"].items()
(invariant, inv_where), = groups["xharness.invariants"].items()
file_of = lambda value: value.split(":")[0].replace(".", "/") + ".py"
wanted = {f"{scenario}[fixed]": file_of(where), f"{scenario}[injected]": file_of(where), invariant: file_of(inv_where)}
ran = {}
for cell in ("cpu-1", "cpu-8"):
    cases = {c.name: c for s in JUnitXml.fromfile(f"reports/junit/{cell}.xml") for c in s}
    failed = [n for n, c in cases.items() if any(r._tag in ("failure", "error") for r in c.result)]
    assert not failed, f"{cell}: failed: {failed}"
    for name, path in wanted.items():
        assert name in cases and cases[name]._elem.get("file") == path, (cell, name, path, sorted(cases))
        if not cases[name].is_skipped:
            ran.setdefault(name, []).append(cell)
assert set(ran) == set(wanted), f"never ran in any cell: {set(wanted) - set(ran)}"
print(f"ci/example.sh: ok: the tutorial's repository: {', '.join(sorted(wanted))} ran ({ran}), none failed")
PY
planted="$(ls "$tutorial"/*/invariants.py)"
cp "$planted" "$work/invariants.py.orig"
echo "import myrt_missing_dependency" >> "$planted"
status=0
xharness run > "$work/out" 2>&1 || status=$?
cp "$work/invariants.py.orig" "$planted"  # the environment is shared with what follows
check "the tutorial's repository with a planted import error: run exits 2 naming the entry point" \
  "$status == 2 and 'cannot import' in out and \"No module named 'myrt_missing_dependency'\" in out and 'xharness.invariants' in out"
cd "$project"

rm -rf "$work/fresh" && mkdir "$work/fresh" && cd "$work/fresh"
capture xharness init --install "$install"
check "init wrote the section, the example test, the workflow and .gitignore" "out.count('xharness init: write') == 4"
check "the workflow's cell jobs take the cells and runners xharness cells --github gives" \
  "'fromJSON(needs.plan.outputs.matrix)' in open('.github/workflows/xharness.yml').read()"
capture xharness cells --names
check "cells --names: the project's cells as one JSON array" "json.loads(out) == ['cpu-1', 'cpu-8']"
capture xharness cells --github
check "cells --github: each cell on a hosted runner, none left out" \
  "dict(l.split('=', 1) for l in out.splitlines()) == {'matrix': json.dumps({'include': [{'cell': c, 'runs-on': ['ubuntu-latest']} for c in ('cpu-1', 'cpu-8')]}, separators=(',', ':')), 'any': 'true', 'not_run': '[]'}"
capture xharness run
echo "ci/example.sh: ok: a fresh repository after xharness init runs green ($(tail -1 "$work/out"))"
