#!/usr/bin/env bash
# The test job, from a fresh machine: system packages, a virtual environment with the project and
# its test extra, lint, the documentation site, then every suite. The README's test command is
# `bash ci/test.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Chromium (the browser test renders the dashboard), then .venv/ with the project's test extra.
source ci/setup.sh

# The environments of the job's last legs, built beside the checks and suites below rather than
# on the job's critical path at its end, where those legs wait for them: the newest JAX's
# interpreter and environment (ci/newest.sh --prepare: a minute or two from nothing) and the
# PyTorch/XLA release's (ci/releases.sh --prepare: about 5 minutes from nothing, most of it pip
# waiting on the network and the disk). Each log is printed with its leg's.
prepare_pid="" prepare_log="" release_prepare_pid="" release_prepare_log=""
if [ -z "${XHARNESS_SKIP_NEWEST:-}" ]; then
  prepare_log="$(mktemp)"
  bash ci/newest.sh --prepare >"$prepare_log" 2>&1 &
  prepare_pid=$!
fi
if [ -z "${XHARNESS_SKIP_RELEASES:-}" ]; then
  release_prepare_log="$(mktemp)"
  bash ci/releases.sh --prepare 2.9.0 >"$release_prepare_log" 2>&1 &
  release_prepare_pid=$!
fi

.venv/bin/ruff check .
# the rooms import only downwards ([tool.importlinter] in pyproject.toml)
.venv/bin/lint-imports
# the documentation site, strictly: a broken link, a missing anchor or a reference to a name that
# does not exist fails it; built into a temporary directory, so nothing is left in the tree
docs_site="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$docs_site"
rm -rf "$docs_site"
# the workflows as a security reviewer reads them (offline: no network lookups), and dependabot's file
.venv/bin/zizmor --offline .github/workflows/
# the workflows' expressions, contexts, action inputs and runner labels (self-hosted ones in
# .github/actionlint.yaml), and every `run:` script through shellcheck
.venv/bin/actionlint .github/workflows/*.yml
.venv/bin/check-jsonschema --builtin-schema vendor.dependabot .github/dependabot.yml
# The eager PyTorch the semantics oracle asks (suites/properties/test_oracle.py): torch 2.13.0's CPU
# build in an environment of its own under $XHARNESS_ENV_DIR (about a minute the first time, from
# this kind of machine's disk; reused after), so that .venv never needs torch.
.venv/bin/xharness eager
# The network-fault suites (suites/network) make hosts of their own in network namespaces, as
# root, with nftables and iproute2 from the OS packages; not root, they are skipped with the reason.
if [ "$(id -u)" = 0 ]; then bash ci/network.sh install; fi
# The cluster suites (suites/cluster) spend most of their time waiting on the scheduler (time
# limits, a node's timeout, heartbeats), so they run beside the main suites instead of after them:
# the launcher cells, the host faults, and the cells run as jobs (xharness run --on slurm, part of
# the default matrix against the local run, and every way a job dies) on a real SLURM cluster of
# two nodes on this machine (ci/cluster.sh installs slurm-wlm, munge and openmpi-bin from the OS
# packages when missing, and stops every daemon it started when this script ends): about 11
# minutes here. Only their subshell sees the cluster's environment (SLURM_CONF, the wrappers on
# PATH): the main suites test a machine with no cluster, as before. One test at a time; their
# output is printed when they are done.
cluster_status=0 cluster_pid="" cluster_log="$(mktemp)"
if [ "$(id -u)" = 0 ]; then
  bash ci/cluster.sh start
  trap 'bash ci/cluster.sh stop' EXIT
  # XHARNESS_CLUSTER_REQUIRED: this run started the cluster, so a cluster test that finds none
  # answering fails instead of skipping (suites/cluster/cluster_helpers.py, needs)
  ( eval "$(bash ci/cluster.sh env)"; export XHARNESS_CLUSTER_REQUIRED=1
    exec .venv/bin/python -m pytest suites/cluster -q -p no:cacheprovider ) \
    >"$cluster_log" 2>&1 &
  cluster_pid=$!
else
  echo "ci/test.sh: not root: the one-machine SLURM cluster needs root; suites/cluster not run" >"$cluster_log"
fi

# pytest's exit 5 (no tests collected) fails the job like any other non-zero code. The network
# suites run after the cluster's: the cluster rewrites /etc/hosts for its nodes (and its namespace
# test makes and removes a fabric of its own), which a rank of theirs resolving its own hostname
# at that moment does not survive. --dist loadgroup: the tests of a module that builds something
# dear once for all of them (the workflow replay's environment and wheel, 35 s; the crash points'
# explorations) are marked xdist_group and run in one process, which builds it once; split
# between the two processes, as plain `load` distribution often left them, each built its own.
main_status=0
.venv/bin/python -m pytest suites -q -p xdist -n 2 --dist loadgroup --ignore=suites/cluster --ignore=suites/network "$@" \
  || main_status=$?

# The legs of the job's end, each writing its own log, printed when all are done. They start as
# soon as the main suites pass, beside the end of the cluster suites (mostly waiting on the
# scheduler: on a fresh machine, whose environment builds had slowed them, both cores were about
# nine-tenths idle for their last 100 s) and then beside the network suites:
# - the example plugin as a maintainer uses it (examples/tinyjax): a fresh environment with
#   xharness and the plugin, then list, repro, run over its two cells, teeth and init, each
#   checked (about a minute and a half here, most of it pip);
# - the catalog and the adapter tests against a real PyTorch/XLA release, in that release's own
#   cached environment (~/.cache/xharness/envs, or XHARNESS_ENV_DIR): about 5 minutes when the
#   environment has to be built (most of it pip, which waits on the disk), under 2 minutes of set-up
#   when it is reused. XHARNESS_SKIP_RELEASES=1 skips it where a job of its own runs the releases
#   (the workflow's releases job);
# - the same suites on the newest JAX the project declares, where .venv's Python resolves an older
#   one (JAX 0.11 and later need Python 3.12 or newer): that release's own environment, prepared
#   above, on an interpreter it supports (ci/python.sh), its suites split over two processes by
#   test file, about 8 minutes here and the longest leg of the job's end, so it does not wait for
#   the network suites (their namespaces and the harness's suites share nothing; the main suites,
#   the same tests, already run beside the cluster suites). XHARNESS_SKIP_NEWEST=1 skips it where another job runs on that Python (the
#   workflow's Python 3.13 leg).
pids=() logs=() names=()
if [ "$main_status" = 0 ]; then
  logs+=("$(mktemp)"); names+=(ci/example.sh)
  bash ci/example.sh >"${logs[-1]}" 2>&1 &
  pids+=($!)
  if [ -z "${XHARNESS_SKIP_RELEASES:-}" ]; then
    # its preparation's failure is said again by the leg itself (an install error, exit 3)
    wait "$release_prepare_pid" || true
    logs+=("$release_prepare_log"); names+=("ci/releases.sh --prepare 2.9.0"); pids+=("")
    logs+=("$(mktemp)"); names+=("ci/releases.sh 2.9.0")
    bash ci/releases.sh 2.9.0 >"${logs[-1]}" 2>&1 &
    pids+=($!)
  fi
  if [ -z "${XHARNESS_SKIP_NEWEST:-}" ]; then
    # its preparation's failure is said again by the run itself (an install error, exit 3)
    wait "$prepare_pid" || true
    logs+=("$prepare_log"); names+=("ci/newest.sh --prepare"); pids+=("")
    logs+=("$(mktemp)"); names+=(ci/newest.sh)
    bash ci/newest.sh >"${logs[-1]}" 2>&1 &
    pids+=($!)
  fi
fi

# Every leg that started is waited for and its log printed, whatever failed beside it.
failed=0
finish_legs() {
  for i in "${!pids[@]}"; do
    status=0
    [ -z "${pids[$i]}" ] || wait "${pids[$i]}" || status=$?
    cat "${logs[$i]}"
    rm -f "${logs[$i]}"
    if [ "$status" != 0 ]; then
      echo "ci/test.sh: ${names[$i]} failed (exit $status)" >&2
      failed=$status
    fi
  done
}

[ -z "$cluster_pid" ] || wait "$cluster_pid" || cluster_status=$?
cat "$cluster_log"
rm -f "$cluster_log"
if [ "$(id -u)" = 0 ]; then
  bash ci/cluster.sh stop
  trap - EXIT
fi
[ "$main_status" = 0 ] || { echo "ci/test.sh: the suites failed (exit $main_status)" >&2; exit "$main_status"; }
if [ "$cluster_status" != 0 ]; then
  echo "ci/test.sh: suites/cluster failed (exit $cluster_status)" >&2
  finish_legs
  exit "$cluster_status"
fi

# The network-fault suites (suites/network): hosts of their own in network namespaces, as root,
# with nftables and iproute2 from the OS packages; not root, they are skipped with the reason.
network_status=0
.venv/bin/python -m pytest suites/network -q -p xdist -n 2 "$@" || network_status=$?
# nothing of the network suites or the cluster is left: no namespace, /etc/netns entry, link or
# nftables table
if [ "$(id -u)" = 0 ]; then bash ci/network.sh check; fi
[ "$network_status" = 0 ] || { echo "ci/test.sh: suites/network failed (exit $network_status)" >&2; failed=$network_status; }
finish_legs
exit "$failed"
