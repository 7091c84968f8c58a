#!/usr/bin/env bash
# One command on a fresh machine: set up (the demo's parts, the test tools, Chromium where apt
# has it), lint, type-check, then every test (unit and the sandbox integration tests, which
# build the CPU server image: ~15 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# what the sandbox tests start from (Debian images by debootstrap, the PyPI files: mostly
# downloads) is made in the background while lint and the unit tests use the CPU; the
# tests make whatever it did not
mkdir -p .cache
prep_log=.cache/prepare.log
.venv/bin/python -m tests.integration.prepare >"$prep_log" 2>&1 &
prep=$!
.venv/bin/ruff check .
bash scripts/mypy.sh
# the slow tier (marked `slow`: the native build, the lifecycle, long benchmarks) runs in
# scripts/test-slow.sh
tier() {  # a selection that names no test of this tier (exit 5) is not a failure
  .venv/bin/python -m pytest -v -s -p no:cacheprovider --durations=15 -m "$@" || { rc=$?; [ "$rc" -eq 5 ] || exit "$rc"; }
}
# the unit tests on both cores (pytest-xdist): each test makes its own state (tmp_path,
# its own controller cache), so they need no order
tier "not gpu and not slow and not integration" -n 2 "$@"
# the integration tier starts once what the first deploy needs is made; the GPU-container
# host's image (needed by a later module) goes on being made beside it
while [ ! -e .cache/prepare.first-done ] && kill -0 "$prep" 2>/dev/null; do sleep 1; done
[ -e .cache/prepare.first-done ] && grep -m1 "^\[prepare\]" "$prep_log" ||
  echo "[test] making the sandbox images ahead failed (the tests make them): $prep_log"
tier "integration and not gpu and not slow" "$@"
if wait "$prep"; then tail -1 "$prep_log"; else
  echo "[test] making the GPU-container host's image ahead failed (its tests made it): $prep_log"; fi
