#!/usr/bin/env bash
# The suites on the newest JAX the project declares, where .venv holds an older one: JAX 0.11 and
# later need Python 3.12 or newer, so on a Python 3.11 machine .venv resolves JAX 0.10.x, and the
# newest declared release would go untested. That release runs in its own cached environment on
# an interpreter it supports (ci/python.sh provides one), as `xharness releases jax V`: its catalog,
# its invariants and the harness's suites with the reference runtime on it, each a supervised cell.
#
# Results: $XHARNESS_NEWEST_OUT (default reports/newest): junit/, junit.xml, index.html, summary.md.
# Usage: ci/newest.sh [--prepare] [PYTHON_MINOR]   the interpreter to provide when none fits
#   (default 3.13); --prepare only provides the interpreter and builds (or reuses) the release's
#   environment, and runs nothing: ci/test.sh starts it first, beside the main suites, so that
#   the run itself later finds both ready (the build is mostly downloads and the disk)
# Exit: xharness releases' (0 every verdict as expected and the suites green; 1 not; 3 the release
# or an interpreter for it could not be had); 0 at once when .venv's JAX is already the newest.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${XHARNESS_NEWEST_OUT:-reports/newest}"
prepare=""
if [ "${1:-}" = --prepare ]; then prepare=1; shift; fi
minor="${1:-3.13}"

# a failure to list the index stops here (set -e), never reads as "nothing newer"
info="$(.venv/bin/python - <<'EOF'
import importlib.metadata

from harness.releases.bisect_run import index_releases, supported

declared = supported("jax")
newest = [v for v in index_releases("jax") if declared.contains(v)][-1]
print(newest, importlib.metadata.version("jax"))
EOF
)"
read -r newest held <<<"$info"
if [ "$newest" = "$held" ]; then
  echo "ci/newest.sh: .venv already holds JAX $newest, the newest the project declares: the suites ran on it"
  exit 0
fi
python="$(bash ci/python.sh "$minor")"
if [ -n "$prepare" ]; then
  echo "ci/newest.sh --prepare: the environment of JAX $newest, with $python"
  XHARNESS_PYTHONS="$python" exec bash ci/releases.sh --prepare jax "$newest"
fi
echo "ci/newest.sh: .venv holds JAX $held; the suites on JAX $newest, the newest declared, with $python"
exec .venv/bin/xharness releases jax "$newest" --python "$python" --out "$out"
