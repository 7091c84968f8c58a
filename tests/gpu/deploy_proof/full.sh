#!/bin/bash
# The deploy proof on a GPU box (benchmarks/h200/2026-12-03-deploy/), run by pyinfra with the
# kit's own deploy.py: each step's output in $L/<step>.txt, its exit status and seconds in
# $L/steps.txt. Started detached (setsid) by start.sh; BIN/PY/MODEL_DIR/BEEKEEPER_SOURCE/
# BEEKEEPER_PROFILE/MODEL_FILE/VERIFY_SIZES may be set to run it elsewhere.
set -u
R=${R:-$(cd "$(dirname "$0")/../../.." && pwd)}
L=${L:-/tmp/h200}
mkdir -p "$L"; cd "$R"
export PYTHONUNBUFFERED=1
MODEL_DIR=${MODEL_DIR:-/workspace/models}
# MODEL_FILE: a GGUF to serve (copied into MODEL_DIR); else a Qwen3.5-9B-shaped one is written
export BEEKEEPER_MODEL=$MODEL_DIR/$(basename "${MODEL_FILE:-Qwen3.5-9B-Q8_0.gguf}")
export BEEKEEPER_SOURCE=${BEEKEEPER_SOURCE:-$R/carry/beellama-src.tar.gz} BEEKEEPER_SOURCE_REF=ba1fdce591f5
export BEEKEEPER_PROFILE=${BEEKEEPER_PROFILE:-q8-turbo4-64k}
PY=${PY:-python3}
BIN=${BIN:-$(dirname "$(command -v $PY)")}
CTL=/usr/local/sbin/beekeeper-supervisorctl
SNAP='{ find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /var/tmp -o -path /workspace -o -path /var/lib/docker -o -path /var/lib/containerd -o -path '"$R"' -o -path /root/.cache \) -prune -o -print | sort; getent passwd | cut -d: -f1; getent group | cut -d: -f1; }'
step() {  # step NAME CMD...: run, log, time
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  echo "$(date -u +%T) $name start" >> "$L/steps.txt"
  "$@" > "$L/$name.txt" 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$(date -u +%T) $name rc=$rc $((ms / 1000)).$(( (ms % 1000) / 100 )) s" >> "$L/steps.txt"
  return $rc
}
deploy() { "$BIN/pyinfra" -y inventories/gpu-container.py deploy.py "$@"; }
facts() {
  nvidia-smi; nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
  nvcc --version || /usr/local/cuda/bin/nvcc --version; cat /proc/1/comm; cat /etc/os-release
  uname -a; nproc; free -g; for t in python3 cmake c++ g++ make git setpriv ss curl; do
    printf '%s: %s\n' "$t" "$(command -v $t)"; done; $PY --version
}
model() {
  mkdir -p "$MODEL_DIR" && chmod 755 "$MODEL_DIR" /workspace 2>/dev/null
  if [ -n "${MODEL_FILE:-}" ]; then cp "$MODEL_FILE" "$BEEKEEPER_MODEL"; else
    PYTHONPATH=/tmp/gg $PY tests/gpu/qwen35_gguf.py "$BEEKEEPER_MODEL"; fi && chmod 644 "$BEEKEEPER_MODEL" &&
    ls -l "$BEEKEEPER_MODEL" && sha256sum "$BEEKEEPER_MODEL" | tee "$L/model.sha256"
}
health() { $PY -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8083/health", timeout=2)' 2>/dev/null; }
after_check() {  # after_check FLAG: the program file, whether FLAG is in it, the health
  $CTL status; grep -H -c -- "$1" /etc/beekeeper/supervisor/programs/*.conf
  health && echo healthy || echo NOT healthy
}
crash() {
  $CTL status; pid=$(pgrep -x llama-server); echo "server pid $pid"; kill -9 "$pid"
  for i in $(seq 1 120); do
    sleep 1; health && break; done
  echo "healthy again after ${i} s; new pid $(pgrep -x llama-server)"; $CTL status
}
first_request() {
  $PY -c 'import json, urllib.request as u
r = u.Request("http://127.0.0.1:8083/v1/chat/completions", headers={"Content-Type": "application/json"},
              data=json.dumps({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}).encode())
print(u.urlopen(r, timeout=60).read().decode())'
}
step model model &
mp=$!
step facts facts
while [ ! -e "$L/pip.done" ]; do sleep 0.5; done
step before sh -c "$SNAP | grep -v /__pycache__ > $L/before.txt"
wait $mp || { echo model-failed > "$L/done"; exit 1; }
export BEEKEEPER_MODEL_SHA256=$(cut -d' ' -f1 "$L/model.sha256")
step deploy1 deploy || { echo deploy1-failed > "$L/done"; exit 1; }
step deploy2 deploy
step status sh -c "$CTL status; ps -eo pid,user,etime,args | grep -v grep | grep -E 'supervisord|llama-server'; nvidia-smi"
step request first_request
step crash crash
step verify "$BIN/beekeeper" verify --on-host --suite engine,smoke,decode,ttft,vram \
  --quick ${VERIFY_SIZES:---decode-ctx 4096,60000 --ttft-tokens 60000 --ttft-requests 3} \
  --settle-budget-s 0 --out "$L/verify"
step bad deploy --data 'server_extra_args=["--no-such-flag"]'
step after_bad after_check --no-such-flag
step change deploy --data 'server_extra_args=["--metrics"]'
step rollback "$BIN/beekeeper" rollback --local
step after_rollback after_check --metrics
step uninstall "$BIN/pyinfra" -y inventories/gpu-container.py uninstall.py
step after sh -c "$SNAP | grep -v /__pycache__ > $L/after.txt"
diff "$L/before.txt" "$L/after.txt" > "$L/snapshot.diff"; echo "snapshot diff rc=$?" >> "$L/steps.txt"
ls -l "$BEEKEEPER_MODEL" >> "$L/steps.txt" 2>&1
echo ok > "$L/done"
