#!/usr/bin/env bash
# The upstream job: every suite against the newest JAX and jaxlib (pre-releases included), past the
# ceiling pyproject.toml declares, so that the next JAX's breakage shows here before users meet it.
# The project installs as usual, then jax and jaxlib are upgraded over it (pip warns that the
# result is outside the declared range; that is the point). A hang becomes a failed test with the
# thread stacks (--xharness-timeout), not a job killed by its time limit.
#
# Results under $XHARNESS_UPSTREAM_OUT (default reports/upstream): versions.txt (the jax and
# jaxlib that ran), junit/jax-upstream.xml, and the merged junit.xml, index.html and summary.md.
#
# Usage: ci/upstream.sh [PYTEST_ARGS...]
# Exit: pytest's (0 every suite passed).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${XHARNESS_UPSTREAM_OUT:-reports/upstream}"

# Chromium and .venv/ as for the tests (ci/setup.sh), then the newest JAX over the declared range.
source ci/setup.sh
.venv/bin/python -m pip install -q -U --pre jax jaxlib

mkdir -p "$out/junit"
.venv/bin/python -c 'import jax, jaxlib
print(f"jax {jax.__version__}")
print(f"jaxlib {jaxlib.__version__}")' | tee "$out/versions.txt"

# pytest writes its JUnit file in place: it goes to a hidden name the merge does not read and is
# renamed when pytest is done, so a job killed mid-write leaves no half file under junit/
status=0
.venv/bin/python -m pytest suites -q -p xdist -n 2 --xharness-timeout 900 \
  -o junit_suite_name=jax-upstream --junitxml="$out/junit/.jax-upstream.xml.tmp" "$@" || status=$?
if [ -f "$out/junit/.jax-upstream.xml.tmp" ]; then
  mv "$out/junit/.jax-upstream.xml.tmp" "$out/junit/jax-upstream.xml"
fi

if [ -f "$out/junit/jax-upstream.xml" ]; then
  .venv/bin/xharness report merge "$out/junit" --out "$out/junit.xml"
  .venv/bin/xharness report html "$out/junit.xml" --out "$out/index.html" --no-history
  .venv/bin/xharness report summary "$out/junit.xml" --out "$out/summary.md"
  { echo; echo "Ran against $(paste -sd ' ' "$out/versions.txt")."; } >> "$out/summary.md"
fi
exit "$status"
