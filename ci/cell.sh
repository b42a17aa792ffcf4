#!/usr/bin/env bash
# One matrix job in CI: install the harness, run the given cell(s), leave reports/junit/<cell>.xml
# for the merge job. The run's exit code is the job's (0 passed, 1 failures, 2 configuration).
# Usage: ci/cell.sh CELL[,CELL...] [EXTRAS]     EXTRAS: pip extras to install, default "test"
set -euo pipefail
cd "$(dirname "$0")/.."
cells="${1:?usage: ci/cell.sh CELL[,CELL...] [EXTRAS]}"
extras="${2:-test}"

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[${extras}]"
exec .venv/bin/xharness run --cells "$cells" --out reports
