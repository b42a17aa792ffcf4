#!/usr/bin/env bash
# The test job, from a fresh machine: system packages, a virtual environment with the project and
# its test extra, lint, then every suite. The README's test command is `bash ci/test.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Chromium renders the dashboard in the browser test.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

.venv/bin/ruff check .
# pytest's exit 5 (no tests collected) fails the job like any other non-zero code.
.venv/bin/python -m pytest suites -q -p xdist -n 2 "$@"
