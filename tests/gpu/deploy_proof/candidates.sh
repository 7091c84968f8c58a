#!/bin/bash
# Profiles side by side on a GPU box (benchmarks/h200/<date>-candidates/), each through the
# kit's own deploy.py and `beekeeper verify` (lib.sh's verify: engine, smoke, decode at 4K
# and 60K, the 60,000-token TTFT, VRAM): the first deploy builds beellama, each later one
# only changes the server's flags. After each verify, the server's own log lines on the
# prompt cache and context checkpoints (cand_<profile>_log.txt). Started by
# `PROOF=candidates bash tests/gpu/deploy_proof/start.sh`; CANDIDATES may list other profiles.
set -u
source "$(dirname "$0")/lib.sh"
# (2026-12-04 the four candidates were profiles of that commit; now: the three named ones)
CANDIDATES=${CANDIDATES:-q8-turbo4-64k q8-turbo4-64k-bs q8-turbo4-64k-cache}
ready
server_log() {  # the server's lines on what it did around each prompt
  grep -h -E "prompt cache update took|saving prompt with length|prompt eval time|context checkpoint|compute buffer size|prompt processing done" \
    /var/log/beekeeper/*llm*.log /var/log/beekeeper/*.log 2>/dev/null | tail -n 80
  ls -l /var/log/beekeeper/
}
n=0
for p in $CANDIDATES; do
  n=$((n + 1))
  export BEEKEEPER_PROFILE=$p
  step "deploy_$p" deploy || { echo "deploy-$p-failed" >> "$L/failed"; continue; }
  step "verify_$p" verify "_$p"
  step "log_$p" server_log
done
echo ok > "$L/done"
