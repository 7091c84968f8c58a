#!/bin/bash
# A pod's restart that clears the CUDA toolkit with the container disk (a toolkit the kit
# installed there): the deploy from nothing, what the build keeps beside its binaries, then
# the pod's restart (lib.sh pod_restart) with the toolkit and its loader entries hidden first:
# the start script must bring the server back healthy, llama-bench must run and verify must
# pass, from the volume alone; the toolkit back, a deploy after it changes nothing. Started by
# `PROOF=toolkit bash tests/gpu/deploy_proof/start.sh`.
set -u
source "$(dirname "$0")/lib.sh"
ready
step deploy1 deploy || { echo deploy1-failed > "$L/done"; exit 1; }
step kept kept_libs
step hide hide_toolkit || { restore_toolkit; echo hide-failed > "$L/done"; exit 1; }
step pod_restart pod_restart
step request first_request
step bench bench_without_toolkit
step verify5 verify 5
step restore restore_toolkit
step deploy2 deploy
step status status
echo ok > "$L/done"
