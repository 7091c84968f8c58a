#!/usr/bin/env bash
# One command on a fresh machine: set up (the demo's parts, the test tools, Chromium where apt
# has it), lint, type-check, then every test (unit and the sandbox integration tests, which
# build the CPU server image: ~15 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/ruff check .
bash scripts/mypy.sh
# the slow tier (marked `slow`: the native build) runs in scripts/test-slow.sh
.venv/bin/python -m pytest -v -s -p no:cacheprovider -m "not gpu and not slow" "$@"
