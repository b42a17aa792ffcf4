#!/usr/bin/env bash
# The example plugin (examples/tinyjax) as a maintainer would use it: a copy of its repository, a
# fresh virtual environment with xharness and the plugin installed (nothing of .venv), and in
# that repository the commands its README walks through, each checked:
#   xharness list / list runtimes / list invariants   the plugin's items, with their distribution
#   xharness repro (fixed, then --inject)              passes as its expected row says; reproduces
#   xharness run                                       its suite over its two cells, JUnit checked
#   xharness teeth --runtime tinyjax                   its invariant and scenario catch its switch
#   xharness init in an empty directory, then run      a fresh repository is green at once
# Usage: ci/example.sh [WORKDIR]   (default: a temporary directory, removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
project="$PWD"
work="${1:-$(mktemp -d)}"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
python="${XHARNESS_EXAMPLE_PYTHON:-$project/.venv/bin/python}"
python="$("$python" -c 'import sys; print(getattr(sys, "_base_executable", sys.executable))')"

echo "ci/example.sh: a fresh environment in $work/env"
"$python" -m venv "$work/env"
env="$work/env/bin"
"$env/python" -m pip install -q --upgrade pip
"$env/python" -m pip install -q -e "$project"
rm -rf "$work/repo"
cp -r examples/tinyjax "$work/repo"
"$env/python" -m pip install -q -e "$work/repo"
export PATH="$env:$PATH"
unset XHARNESS_PROJECT HARNESS_FAULTS HARNESS_RUNTIME

cd "$work/repo"
check() {  # check DESCRIPTION PYTHON-EXPRESSION-ON-`out` (the last command's stdout)
  "$env/python" -c "import json, sys; out = open('$work/out').read(); assert $2, out" \
    || { echo "ci/example.sh: FAILED: $1" >&2; cat "$work/out" >&2; exit 1; }
  echo "ci/example.sh: ok: $1"
}
xharness list --json > "$work/out"
check "list shows the plugin's scenario with its distribution" \
  "[(r['distribution'], r['version']) for r in json.loads(out) if r['id'] == 'tinyjax-dropped-axis'] == [('xharness-tinyjax', '0.1.0')]"
xharness list runtimes > "$work/out"
check "list runtimes shows tinyjax from the plugin" "'(from xharness-tinyjax 0.1.0)' in out"
xharness list invariants > "$work/out"
check "list invariants shows the plugin's invariant" "'tinyjax-spec-round-trip' in out"
xharness cells --json > "$work/out"
check "cells: both cells test tinyjax, from the plugin" \
  "[(c['name'], c['runtime_under_test'], c['plugin']) for c in json.loads(out)['cells']] == [('cpu-1', 'tinyjax', 'xharness-tinyjax 0.1.0'), ('cpu-4', 'tinyjax', 'xharness-tinyjax 0.1.0')]"
xharness repro tinyjax-dropped-axis --json > "$work/out"
check "repro (fixed) passes, as the expected row says" \
  "json.loads(out)['outcome'] == 'passed' and json.loads(out)['verdict']['verdict'] == 'as-expected'"
xharness repro tinyjax-dropped-axis --inject --json > "$work/out"
check "repro --inject reproduces with the scenario's signature" \
  "json.loads(out)['outcome'] == 'reproduced' and json.loads(out)['signature'] == 'layout-lost'"
xharness run > "$work/out"
"$env/python" - <<'PY'
from junitparser import JUnitXml
for cell, devices in (("cpu-1", 1), ("cpu-4", 4)):
    xml = JUnitXml.fromfile(f"reports/junit/{cell}.xml")
    cases = [case for suite in xml for case in suite]
    assert cases and all(c.classname.startswith("tests.") for c in cases), cell
    assert not any(r._tag in ("failure", "error") for c in cases for r in c.result), cell
    print(f"ci/example.sh: ok: run, cell {cell}: {len(cases)} tests of the plugin's suite, none failed")
PY
xharness teeth --runtime tinyjax --json > "$work/out"
check "teeth: every declared pair of tinyjax's switch caught" \
  "sorted((r['check'], r['status']) for r in json.loads(out)['pairs']) == [('tinyjax-dropped-axis', 'caught'), ('tinyjax-spec-round-trip', 'caught')]"
"$env/python" -c "
from junitparser import JUnitXml
cases = [c for s in JUnitXml.fromfile('reports/junit/teeth.xml') for c in s]
assert len(cases) == 2 and not any(r._tag in ('failure', 'error') for c in cases for r in c.result), cases
print('ci/example.sh: ok: teeth wrote its JUnit (2 pairs, none failed)')"

mkdir "$work/fresh" && cd "$work/fresh"
xharness init > "$work/out"
check "init wrote the section, the example test and the workflow" "out.count('xharness init: write') == 3"
xharness run > "$work/out"
echo "ci/example.sh: ok: a fresh repository after xharness init runs green ($(tail -1 "$work/out"))"
