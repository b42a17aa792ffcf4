#!/usr/bin/env bash
# The weekly mutation job: every runtime mutant in suites/properties/mutants/ against the default
# suites (ci/mutants.py), so that a check which stops seeing a bug it used to catch shows up as a
# red job naming the survivor, not as a number nobody reads.
#
# Results under $XHARNESS_MUTANTS_OUT (default reports/mutants): mutants.json, junit/mutants.xml
# (one test case per mutant: failed when it survived), and the merged junit.xml, index.html (the
# dashboard, with the kill table) and summary.md.
#
# Usage: ci/mutants.sh [ci/mutants.py ARGS...]
# Exit: ci/mutants.py's (0 every mutant killed, 1 one survived or could not be judged, 2 usage or
# a failing baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${XHARNESS_MUTANTS_OUT:-reports/mutants}"

source ci/setup.sh

mkdir -p "$out/junit"
status=0
.venv/bin/python ci/mutants.py --jobs "${XHARNESS_MUTANT_JOBS:-2}" \
  --json "$out/mutants.json" --junit "$out/junit/mutants.xml" "$@" || status=$?

if [ -f "$out/junit/mutants.xml" ]; then
  .venv/bin/xharness report merge "$out/junit" --out "$out/junit.xml"
  .venv/bin/xharness report html "$out/junit.xml" --out "$out/index.html" --no-history
  .venv/bin/xharness report summary "$out/junit.xml" --out "$out/summary.md"
fi
exit "$status"
