#!/bin/bash
# The dry run on a GPU box: the host's facts read, preflight's refusals and its VRAM plan
# (of the model file actually served, model_host_path), every operation listed, nothing
# changed; then the same with a profile over the VRAM budget, which must be refused in one
# line naming the file, and with a cuda_arch the CUDA release cannot build (sm_61: CUDA 13
# dropped it), refused naming cuda_arch. Started by `PROOF=dry bash tests/gpu/deploy_proof/start.sh`.
set -u
source "$(dirname "$0")/lib.sh"
ready
step before sh -c "$SNAP | grep -v /__pycache__ > $L/before.txt"
step dry plan
step dry_over plan --data vram_budget_gib=6
step dry_arch plan --data 'cuda_arch=61;90'
# refused by this rule, not by another that names cuda_arch (an arch the card cannot run)
grep -q "host data \`cuda_arch\`: '61;90' asks for sm_61" "$L/dry_arch.txt"
echo "dry_arch refused by the CUDA release rule: rc=$?" >> "$L/steps.txt"
step after sh -c "$SNAP | grep -v /__pycache__ > $L/after.txt"
diff "$L/before.txt" "$L/after.txt" > "$L/snapshot.diff"; echo "snapshot diff rc=$?" >> "$L/steps.txt"
echo ok > "$L/done"
