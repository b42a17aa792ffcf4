#!/usr/bin/env bash
# The main job, from a fresh machine: install the harness and run the default CPU matrix.
# Results land in reports/ (junit/, junit.xml, index.html, summary.md).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
exec .venv/bin/xharness run "$@"
