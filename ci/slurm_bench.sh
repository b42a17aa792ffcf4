#!/usr/bin/env bash
# The default matrix through the local supervisor and through the one-machine SLURM cluster
# (xharness run --on slurm), side by side, with the same cells at once (-j, default this machine's
# cores) and a warm compile cache: a first local run warms it, then the SLURM run and the local
# run each run once. Prints each wall, the overhead ratio (slurm / local; the goal is 1.15 or
# less on 2 cores), the seconds sbatch took per job and the seconds from submission until a job
# was seen running, and whether the two merged reports agree test for test.
#
#   bash ci/slurm_bench.sh [-j N]     needs the cluster (bash ci/cluster.sh start; as root)
#
# Results: $XHARNESS_BENCH_OUT (default reports/slurm-bench): warm/, local/, slurm/, bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
[ "${1:-}" = "-j" ] && jobs="$2"
out="${XHARNESS_BENCH_OUT:-reports/slurm-bench}"
eval "$(bash ci/cluster.sh env)"
bash ci/cluster.sh status >/dev/null || { echo "ci/slurm_bench.sh: no cluster: bash ci/cluster.sh start" >&2; exit 3; }
rm -rf "$out"; mkdir -p "$out"

run() {  # NAME ARGS...: one whole xharness run, its wall in seconds on stdout
  local name=$1; shift
  local started ended
  started=$(date +%s.%N)
  .venv/bin/xharness run -j "$jobs" --out "$out/$name" "$@" >"$out/$name.log" 2>&1 || true
  ended=$(date +%s.%N)
  echo "$started $ended" | awk '{printf "%.1f", $2 - $1}'
}

echo "ci/slurm_bench.sh: warming the compile cache (a local run)" >&2
run warm >/dev/null
slurm_wall=$(run slurm --on slurm)
local_wall=$(run local)
.venv/bin/python - "$out" "$local_wall" "$slurm_wall" "$jobs" <<'EOF'
import json
import sys
from pathlib import Path

from harness.report.junit import read_records

out, local_wall, slurm_wall, jobs = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])


def outcomes(name: str) -> dict[tuple[str, str], str]:
    return {(r.cell, r.nodeid): r.classification for r in read_records(out / name / "junit.xml")}


local, slurm = outcomes("local"), outcomes("slurm")
stats = json.loads((out / "slurm" / "matrix.json").read_text())["executor"]
differ = sorted(k for k in local.keys() | slurm.keys() if local.get(k) != slurm.get(k))
result = {"jobs_at_once": jobs, "local_wall": local_wall, "slurm_wall": slurm_wall,
          "ratio": round(slurm_wall / local_wall, 3), "tests": len(local), "differ": differ, **stats}
(out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
print(f"local {local_wall:.1f} s, slurm {slurm_wall:.1f} s: ratio {result['ratio']:.2f} (goal <= 1.15)")
print(f"{stats['jobs']} jobs: sbatch {stats['submit_mean']} s each (max {stats['submit_max']}); "
      f"submitted to running {stats['start_mean']} s (max {stats['start_max']}, poll {stats['poll']} s)")
print(f"{len(local)} tests; the two reports agree test for test: {not differ}" + (f" (differ: {differ[:5]})" if differ else ""))
sys.exit(1 if differ else 0)
EOF
