#!/bin/bash
# The pod proof on a GPU box (benchmarks/h200/<date>-pods/), run by pyinfra with the kit's own
# deploy.py: each step's output in $L/<step>.txt, its exit status and seconds in
# $L/steps.txt. Started detached (setsid) by start.sh; BIN/PY/MODEL_DIR/BEEKEEPER_SOURCE/
# BEEKEEPER_PROFILE/MODEL_FILE/VERIFY_SIZES may be set to run it elsewhere.
#
# the dry run (and one over the VRAM budget) changing nothing; deploy from nothing, a second
# run, verify (1) right after it; kill -9 of the server, verify (2); what the build weighs
# (build_sizes); sampling on the CPU against the GPU (tests/gpu/sampling_ab.py); kill -9 of
# supervisord (the server must die with it), the next deploy (one server, supervised), verify
# (3); a bad flag rolled back, verify (4); the pod's restart simulated (everything the kit
# wrote outside its persistent root removed, its user and group too, then the start script
# the docs give), verify (5) of the restarted pod, a deploy after it; a working change undone
# by `beekeeper rollback --local`, and a deploy after that; the uninstall. A VRAM tracer
# (vram_trace.py: memory, clocks, power, CPU time) runs beside it from the second run.
# SKIP_STEPS / SKIP_VERIFY leave steps out (verify_pod.sh: the verify steps alone).
set -u
source "$(dirname "$0")/lib.sh"
ready
step before sh -c "$SNAP | grep -v /__pycache__ > $L/before.txt"
step dry plan  # the dry run on the fresh box: facts, refusals, the plan; nothing changed
step dry_over plan --data vram_budget_gib=6  # over the budget: one line naming the file
step after_dry sh -c "$SNAP | grep -v /__pycache__ > $L/after_dry.txt"
snap_diff before after_dry dry_snapshot "dry snapshot diff"
step deploy1 deploy || { echo deploy1-failed > "$L/done"; exit 1; }
$PY tests/gpu/deploy_proof/vram_trace.py --out "$L/vram_trace.csv" --stop-file "$L/vram_trace.stop" \
  --duration 1500 --step-file "$L/phase" > "$L/vram_trace.log" 2>&1 &
tp=$!
step deploy2 deploy
step status status
step request first_request
step verify1 verify 1
step crash crash
step verify2 verify 2
step build_sizes build_sizes
step sampling_ab $PY tests/gpu/sampling_ab.py
step kill_supervisord kill_supervisord
step deploy3 deploy
step status3 status
step verify3 verify 3
step bad deploy --data 'server_extra_args=["--no-such-flag"]' --data health_timeout_s=120
step after_bad after_check --no-such-flag
step verify4 verify 4
step pod_restart pod_restart
step verify5 verify 5  # the restarted pod
step deploy4 deploy
# `beekeeper rollback` (the script on stdin) after a working change: back to the unit before,
# which is what host data says, so the next deploy changes nothing
step changed deploy --data 'server_extra_args=["--no-warmup"]'
step rollback_cli "$BIN/beekeeper" rollback --local
step after_rollback after_check --no-warmup
step deploy5 deploy
touch "$L/vram_trace.stop"; wait $tp
$PY tests/gpu/deploy_proof/vram_trace.py --summary "$L/vram_trace.csv" > "$L/vram_summary.txt" 2>&1
$PY tests/gpu/deploy_proof/vram_trace.py --load "$L/vram_trace.csv" > "$L/vram_load.txt" 2>&1
step uninstall "$BIN/pyinfra" -y inventories/gpu-container.py uninstall.py
step after sh -c "$SNAP | grep -v /__pycache__ > $L/after.txt"
snap_diff before after snapshot "snapshot diff"
ls -la /workspace "$BEEKEEPER_MODEL" >> "$L/steps.txt" 2>&1
echo ok > "$L/done"
