#!/usr/bin/env bash
# One matrix job in CI: install the harness, run the given cell(s), leave reports/junit/<cell>.xml
# for the merge job. The run's exit code is the job's (0 passed, 1 failures, 2 configuration).
# Usage: ci/cell.sh CELL[,CELL...] [EXTRAS]     EXTRAS: pip extras to install, default "test"
# (the gpu and tpu extras pin JAX's plugin to the JAX range pyproject.toml declares). A template
# cell such as gpu-all runs as the cell of every device the probe finds (gpu-N).
set -euo pipefail
cd "$(dirname "$0")/.."
cells="${1:?usage: ci/cell.sh CELL[,CELL...] [EXTRAS]}"
extras="${2:-test}"

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[${extras}]"
# On an accelerator runner, log what the probe finds first: which cells run, which are skipped
# and why (gpu-all shows as gpu-N, N the GPUs this runner has), and the JAX the extra installed.
case ",${extras}," in
  *,gpu,*|*,tpu,*)
    .venv/bin/python -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__)'
    .venv/bin/xharness cells
    ;;
esac
exec .venv/bin/xharness run --cells "$cells" --out reports
