#!/usr/bin/env bash
# One command on a fresh machine: set up (the controller, Docker, debootstrap), create the
# sandbox host, deploy the CPU profile into it over SSH, and print the verification summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo
# the set-up's seconds go to the demo's timeline (its last line)
BEEKEEPER_DEMO_SETUP_S=$SECONDS exec .venv/bin/beekeeper demo --suite "${BEEKEEPER_DEMO_SUITES:-engine,smoke,decode,ttft,niah}"
