#!/usr/bin/env bash
# The set-up every test job shares, from a fresh machine: Chromium for the browser test and
# shellcheck for actionlint (with apt, as root), then .venv/ with the project and its test extra.
# Sourced by ci/test.sh and ci/upstream.sh from the project root.
# (a hosted Ubuntu runner has it as chromium-browser already: apt there has no `chromium`)
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
# shellcheck, which actionlint runs on every `run:` script of the workflows (ci/test.sh)
if ! command -v shellcheck >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
