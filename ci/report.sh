#!/usr/bin/env bash
# The merge job in CI: every cell's JUnit into one report, then the dashboard (its trend reads and
# extends OUT/history/) and the Markdown step summary.
# Usage: ci/report.sh JUNIT_DIR [OUT_DIR]      OUT_DIR defaults to reports
set -euo pipefail
cd "$(dirname "$0")/.."
in="${1:?usage: ci/report.sh JUNIT_DIR [OUT_DIR]}"
out="${2:-reports}"

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .

mkdir -p "$out"
.venv/bin/xharness report merge "$in" --out "$out/junit.xml"
.venv/bin/xharness report html "$out/junit.xml" --out "$out/index.html" --history "$out/history"
.venv/bin/xharness report summary "$out/junit.xml" --out "$out/summary.md"
