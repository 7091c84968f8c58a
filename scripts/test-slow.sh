#!/usr/bin/env bash
# The slow tier: what proves the native build and the long benchmarks (a second llama.cpp
# build on the sandbox host, ~6-13 min on 2 cores). It reuses the sandbox host that
# scripts/test.sh left (same inputs, same image tag: nothing is built twice), or makes one.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export BEEKEEPER_TEST_REUSE_SANDBOX="${BEEKEEPER_TEST_REUSE_SANDBOX:-1}"
.venv/bin/python -m pytest -v -s -p no:cacheprovider -m "slow and not gpu" "$@"
