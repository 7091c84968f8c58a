#!/bin/bash
# Pods restarted, on a GPU box: deploy from nothing; the pod's restart and its start script
# (which checks supervisord's Python before it starts it); deployed.json (with the VRAM
# budget verify judges by); then a restart whose start command does not run the kit's
# script (the kit's links, launchers and user gone, its root kept on the volume), and the
# uninstall, which must find that root by its marks: the file system and accounts as
# before, /workspace holding only the model placed for the proof. Started by
# `PROOF=restart_uninstall bash tests/gpu/deploy_proof/start.sh`.
set -u
source "$(dirname "$0")/lib.sh"
ready
step before sh -c "$SNAP | grep -v /__pycache__ > $L/before.txt"
step deploy1 deploy || { echo deploy1-failed > "$L/done"; exit 1; }
step record cat /etc/beekeeper/llm/deployed.json
step pod_restart pod_restart
step wipe pod_wipe
step uninstall "$BIN/pyinfra" -y inventories/gpu-container.py uninstall.py
step after sh -c "$SNAP | grep -v /__pycache__ > $L/after.txt"
diff "$L/before.txt" "$L/after.txt" > "$L/snapshot.diff"; echo "snapshot diff rc=$?" >> "$L/steps.txt"
ls -la /workspace "$BEEKEEPER_MODEL" >> "$L/steps.txt" 2>&1
echo ok > "$L/done"
