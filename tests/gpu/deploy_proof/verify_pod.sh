#!/bin/bash
# verify, again and again, on a GPU box, for a short device budget (full.sh's steps that
# bear on it, verify first): deploy from nothing, a second run, verify (1); kill -9 of the
# server, verify (2); what the build weighs (build_sizes); sampling on the CPU against the
# GPU (sampling_ab.py); the pod's restart (everything outside its volume removed, then the
# start script), verify (3) of the restarted pod, the deploy after it (no change); the
# uninstall. The VRAM tracer (vram_trace.py: memory, clocks, power, CPU time) runs from the
# second run to the uninstall.
# Started by `PROOF=verify_pod bash tests/gpu/deploy_proof/start.sh`.
set -u
source "$(dirname "$0")/lib.sh"
ready
step deploy1 deploy || { echo deploy1-failed > "$L/done"; exit 1; }
$PY tests/gpu/deploy_proof/vram_trace.py --out "$L/vram_trace.csv" \
  --stop-file "$L/vram_trace.stop" --duration 1500 --step-file "$L/phase" \
  > "$L/vram_trace.log" 2>&1 &
tp=$!
step deploy2 deploy
step verify1 verify 1
step crash crash
step verify2 verify 2
step build_sizes build_sizes
step sampling_ab $PY tests/gpu/sampling_ab.py
step pod_restart pod_restart
step verify3 verify 3
step deploy4 deploy
touch "$L/vram_trace.stop"; wait $tp
$PY tests/gpu/deploy_proof/vram_trace.py --summary "$L/vram_trace.csv" > "$L/vram_summary.txt" 2>&1
$PY tests/gpu/deploy_proof/vram_trace.py --load "$L/vram_trace.csv" > "$L/vram_load.txt" 2>&1
step uninstall "$BIN/pyinfra" -y inventories/gpu-container.py uninstall.py
echo ok > "$L/done"
