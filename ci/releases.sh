#!/usr/bin/env bash
# The release job: the catalog against releases of a runtime under test, each release in its own
# cached virtual environment, and the checks that belong with the release inside that environment.
#
#   torch_xla  the catalog (xharness releases torch_xla), then suites/adapters (less the tests marked
#              release_independent, whose outcome no torch or torch_xla decides: the main suites run
#              them) and the invariants (HARNESS_RUNTIME=torch_xla) with the release's python
#   jax        xharness releases jax alone: per release the cells jax-<V> (the catalog),
#              jax-<V>-invariants (HARNESS_RUNTIME=jax) and jax-<V>-suites (the harness's suites,
#              the reference runtime riding on that JAX), each supervised, each its own JUnit file
#
# Environments live in $XHARNESS_ENV_DIR (default ~/.cache/xharness/envs). The first run of a
# release builds its environment (torch, torch-xla and the harness: about 5 minutes and 6 GB with
# the CUDA build of torch from PyPI; jax, jaxlib and the harness: under a minute and 0.7 GB);
# later runs reuse it. Results: $XHARNESS_RELEASES_OUT (default reports/releases):
# junit/<runtime>-<V>*.xml, junit.xml, index.html, summary.md.
#
# Usage: ci/releases.sh [--prepare] [RUNTIME] [VERSION...]   RUNTIME torch_xla (default) or jax
#   --prepare                           only build (or reuse) each release's environment and run
#                                       nothing: ci/test.sh starts it first, beside the main suites,
#                                       so that the release leg later finds it ready (the build is
#                                       mostly pip, which waits on the network and the disk);
#                                       ci/newest.sh --prepare runs it for the newest JAX
#   ci/releases.sh                      torch_xla 2.9.0
#   ci/releases.sh 2.9.0                torch_xla 2.9.0 (the old form; ci/test.sh uses it)
#   ci/releases.sh torch_xla 2.5.1      as the workflow's releases job calls it
#   ci/releases.sh jax 0.10.0           as the workflow's releases job calls it (the lowest JAX
#                                       pyproject.toml declares); default release 0.10.0
# Exit: 0 every verdict as expected and the suites passed; 1 a verdict or a test failed; 2 usage;
# 3 a release could not be installed (the other releases still ran).
set -euo pipefail
cd "$(dirname "$0")/.."
prepare=""
if [ "${1:-}" = --prepare ]; then prepare=1; shift; fi
runtime=torch_xla
case "${1:-}" in
  torch_xla|jax) runtime="$1"; shift ;;
  [A-Za-z]*) echo "ci/releases.sh: unknown runtime '$1' (torch_xla or jax)" >&2; exit 2 ;;
esac
if [ "$#" -eq 0 ]; then
  case "$runtime" in
    jax) set -- 0.10.0 ;;
    *) set -- 2.9.0 ;;
  esac
fi
out="${XHARNESS_RELEASES_OUT:-reports/releases}"

if [ ! -x .venv/bin/xharness ]; then
  python3 -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e .
fi

if [ -n "$prepare" ]; then
  exec .venv/bin/python - "$runtime" "$@" <<'EOF'
import sys

from harness.releases import envs

runtime, *versions = sys.argv[1:]
failed = 0
for version in versions:
    try:
        env = envs.ensure_env(runtime, version, progress=print)
    except envs.ReleaseInstallError as exc:
        # said here; the release leg after says it again as its own install error (exit 3)
        print(f"ci/releases.sh --prepare: {exc}", file=sys.stderr)
        failed = 3
        continue
    print(f"ci/releases.sh --prepare: {'built' if env.built else 'reused'} {env.path} in {env.seconds:.0f} s")
sys.exit(failed)
EOF
fi

if [ "$runtime" = jax ]; then
  # the suites and the invariants are cells of the releases run itself
  exec .venv/bin/xharness releases jax "$@" --out "$out"
fi

status=0
.venv/bin/xharness releases torch_xla "$@" --out "$out" || status=$?
for version in "$@"; do
  python="$(.venv/bin/python -c 'import sys
from harness.releases.envs import find_env
env = find_env("torch_xla", sys.argv[1])
print(env.python if env else "")' "$version")"
  if [ -z "$python" ]; then
    echo "ci/releases.sh: torch_xla $version has no environment, its adapter tests did not run" >&2
    continue
  fi
  echo "ci/releases.sh: suites/adapters in the torch_xla $version environment"
  "$python" -m pytest suites/adapters -m "not release_independent" -q -p no:cacheprovider -p xdist -n 2 || {
    code=$?
    if [ "$status" -eq 0 ]; then status=$code; fi
  }
  # the invariants with torch_xla as the runtime under test: each holds, is skipped naming the
  # capability the release lacks, or fails as a known finding (harness.properties.base)
  # An invariant whose known failure breaks the release's process for later tests runs alone.
  echo "ci/releases.sh: suites/properties/test_invariants.py against torch_xla $version"
  isolated="$(HARNESS_RUNTIME=torch_xla "$python" -c 'import sys
from harness.scenarios.known_findings import isolated_invariants
print(" ".join(isolated_invariants("torch_xla", sys.argv[1])))' "$version")"
  deselect=()
  for id in $isolated; do deselect+=(--deselect "suites/properties/test_invariants.py::test_${id//-/_}"); done
  HARNESS_RUNTIME=torch_xla TF_CPP_MIN_LOG_LEVEL=2 "$python" -m pytest suites/properties/test_invariants.py \
    "${deselect[@]}" -q -rxs -p no:cacheprovider -p xdist -n 2 || {
    code=$?
    if [ "$status" -eq 0 ]; then status=$code; fi
  }
  for id in $isolated; do
    HARNESS_RUNTIME=torch_xla TF_CPP_MIN_LOG_LEVEL=2 "$python" -m pytest \
      "suites/properties/test_invariants.py::test_${id//-/_}" -q -rxs -p no:cacheprovider || {
      code=$?
      if [ "$status" -eq 0 ]; then status=$code; fi
    }
  done
done
exit "$status"
