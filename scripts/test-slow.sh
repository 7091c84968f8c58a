#!/usr/bin/env bash
# The slow tier: what proves the native build and the long benchmarks (a second llama.cpp
# build on the sandbox host, ~6-13 min on 2 cores). It reuses the sandbox host that
# scripts/test.sh left (same inputs, same image tag: nothing is built twice), or makes one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export BEEKEEPER_TEST_REUSE_SANDBOX="${BEEKEEPER_TEST_REUSE_SANDBOX:-1}"
.venv/bin/python -m pytest -v -s -p no:cacheprovider -m "slow and not gpu" "$@"
# mutation testing of the deciding modules the change touched (docs/testing.md, "Mutation
# testing"; one worker: planner or driver_preflight 4-6 min with the cache, preflight and
# hostdata 20-75 min): a survivor neither killed nor listed as equivalent fails the tier, and
# the run prints each module's row for the score table. BEEKEEPER_MUTATION=0 leaves it out.
base="${BEEKEEPER_MUTATION_BASE:-HEAD~1}"
if [ "${BEEKEEPER_MUTATION:-1}" = 0 ]; then
  echo "[slow] mutation testing left out (BEEKEEPER_MUTATION=0)"
elif git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  .venv/bin/python scripts/mutation.py --rev HEAD --base "$base"
else
  echo "[slow] mutation testing not run: $base is not in this clone; name the change's base" \
       "with BEEKEEPER_MUTATION_BASE"
fi
