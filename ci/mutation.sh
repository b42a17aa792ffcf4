#!/usr/bin/env bash
# Mutation testing of the harness's own logic (ci/mutation.py): mutmut over the rooms that judge,
# count, split, schedule, parse or write, scored per room against the floors in ci/mutation.toml.
# Not the runtime's mutant patches: those are ci/mutants.sh.
#
# The scratch copy under .mutation/ is mutmut's cache: keep it between runs (the weekly job caches
# it) and only the functions that changed run again.
#
# Usage: ci/mutation.sh [--profile main|cluster|smoke] [--since REF] [MUTANT...]
#   --profile cluster needs the one-machine cluster: bash ci/cluster.sh start, then
#   eval "$(bash ci/cluster.sh env)".
# Writes reports/mutation/score.md (the table) and prints it.
# Exit: 0 every room at or above its floor, 1 a room below, 2 usage, 3 mutmut's clean run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/setup.sh
mkdir -p reports/mutation
status=0
.venv/bin/python ci/mutation.py run --check --max-children "${XHARNESS_MUTATION_JOBS:-2}" "$@" || status=$?
profile=main
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = --profile ]; then j=$((i + 1)); profile="${!j}"; fi
done
if [ -d ".mutation/$profile/mutants" ]; then
  .venv/bin/python ci/mutation.py score --profile "$profile" --markdown >"reports/mutation/score-$profile.md" || true
fi
exit "$status"
