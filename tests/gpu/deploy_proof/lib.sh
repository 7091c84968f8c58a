# The GPU proofs' shared settings and steps (sourced by full.sh and candidates.sh): each
# step's output in $L/<step>.txt, its exit status and seconds in $L/steps.txt.
# BIN/PY/MODEL_DIR/BEEKEEPER_SOURCE/BEEKEEPER_PROFILE/MODEL_FILE/VERIFY_SIZES may be set to
# run it elsewhere.
R=${R:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
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
ROOT=/workspace/beekeeper  # the persistent root the kit picks where /workspace is
SNAP='{ find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /var/tmp -o -path /workspace -o -path /var/lib/docker -o -path /var/lib/containerd -o -path '"$R"' -o -path /root/.cache -o -path /root/.nv -o -path "${OUT:-/nonexistent}" \) -prune -o -print | sort; getent passwd | cut -d: -f1; getent group | cut -d: -f1; }'
step() {  # step NAME CMD...: run, log, time (SKIP_STEPS="dry bad ...": those left out)
  local name=$1; shift
  case " ${SKIP_STEPS:-} " in *" $name "*) echo "$(date -u +%T) $name left out (SKIP_STEPS)" >> "$L/steps.txt"; return 0;; esac
  local t0; t0=$(date +%s%N)
  echo "$(date -u +%T) $name start" >> "$L/steps.txt"
  echo "$name" > "$L/phase"
  "$@" > "$L/$name.txt" 2>&1; local rc=$?
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$(date -u +%T) $name rc=$rc $((ms / 1000)).$(( (ms % 1000) / 100 )) s" >> "$L/steps.txt"
  return $rc
}
snap_diff() {  # snap_diff BEFORE AFTER OUT WHAT: the two snapshots' diff, where both were taken
  [ -e "$L/$1.txt" ] && [ -e "$L/$2.txt" ] || return 0
  diff "$L/$1.txt" "$L/$2.txt" > "$L/$3.diff"; echo "$4 rc=$?" >> "$L/steps.txt"
}
deploy() { "$BIN/pyinfra" -y inventories/gpu-container.py deploy.py "$@"; }
# the dry run as a user types it: without -y pyinfra lists every operation it would run
# (with -y it skips that listing: "Skipping change detection") and changes nothing
plan() { "$BIN/pyinfra" inventories/gpu-container.py deploy.py --dry "$@" < /dev/null; }
facts() {
  nvidia-smi; nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv
  nvcc --version || /usr/local/cuda/bin/nvcc --version; cat /proc/1/comm; cat /etc/os-release
  uname -a; nproc; free -g; for t in python3 cmake c++ g++ make git setpriv ss curl useradd; do
    printf '%s: %s\n' "$t" "$(command -v $t)"; done; $PY --version; setpriv --version
  findmnt -n -o TARGET,FSTYPE,SOURCE / ; mkdir -p /workspace; findmnt -n -o TARGET,FSTYPE -T /workspace
}
model() {
  mkdir -p "$MODEL_DIR" && chmod 755 "$MODEL_DIR" /workspace 2>/dev/null
  if [ -n "${MODEL_FILE:-}" ]; then cp "$MODEL_FILE" "$BEEKEEPER_MODEL"; else
    PYTHONPATH=/tmp/gg $PY tests/gpu/qwen35_gguf.py "$BEEKEEPER_MODEL"; fi && chmod 644 "$BEEKEEPER_MODEL" &&
    ls -l "$BEEKEEPER_MODEL" && sha256sum "$BEEKEEPER_MODEL" | tee "$L/model.sha256"
}
health() { $PY -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:8083/health", timeout=2)' 2>/dev/null; }
servers() {  # every llama-server: pid, ppid, user, and supervisord's pid
  ps -eo pid,ppid,user,etime,args | grep -v grep | grep -E 'llama-server|supervisord' | cut -c1-200
  echo "supervisord pid: $(cat /run/beekeeper-supervisord.pid 2>/dev/null)"
  echo "llama-server count: $(pgrep -x llama-server | wc -l)"
}
status() { $CTL status; servers; nvidia-smi --query-gpu=memory.used --format=csv;
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv; ls -l /opt /etc /var/lib /var/log | grep beekeeper; }
after_check() {  # after_check FLAG: the program file, whether FLAG is in it, the health
  $CTL status; grep -H -c -- "$1" /etc/beekeeper/supervisor/programs/*.conf
  health && echo healthy || echo NOT healthy
}
crash() {
  servers; pid=$(pgrep -x llama-server); echo "server pid $pid"; kill -9 "$pid"
  for i in $(seq 1 120); do sleep 1; health && break; done
  echo "healthy again after ${i} s"; servers
}
kill_supervisord() {  # kill -9 of supervisord: its server must die with it
  servers; sup=$(cat /run/beekeeper-supervisord.pid); echo "kill -9 supervisord $sup"; kill -9 "$sup"
  for i in $(seq 1 40); do sleep 0.5; pgrep -x llama-server >/dev/null || break; done
  echo "after $((i / 2)) s:"; servers
  if pgrep -x llama-server >/dev/null; then echo "SERVER LEFT RUNNING UNSUPERVISED"; return 1; fi
  echo "the server died with its supervisord"
}
pod_wipe() {  # what a pod's restart leaves: the volume (its start command not run)
  servers; sup=$(cat /run/beekeeper-supervisord.pid); kill -9 "$sup"; sleep 2; servers
  rm -rf /opt/beekeeper /etc/beekeeper /var/lib/beekeeper /var/log/beekeeper \
    /usr/local/lib/beekeeper /srv/beekeeper /usr/local/sbin/beekeeper-* /run/beekeeper-*
  userdel beekeeper 2>/dev/null; groupdel beekeeper 2>/dev/null
  echo "after the wipe: $(getent passwd beekeeper || echo 'no beekeeper user')"; ls -la /opt /etc | grep beekeeper
  ls -la "$ROOT"
}
pod_restart() {  # the wipe, then the start script
  pod_wipe
  t0=$(date +%s%N)
  "$ROOT/start"; rc=$?
  echo "start script rc=$rc after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  for i in $(seq 1 600); do health && break; sleep 0.2; done
  echo "restart to healthy: $(( ($(date +%s%N) - t0) / 1000000 )) ms"; servers; getent passwd beekeeper; $CTL status
}
build_sizes() {  # what a carried build would weigh (the build is most of a proof's device time)
  for d in /opt/beekeeper/llama-server/*; do
    [ -d "$d" ] && [ ! -L "$d" ] || continue  # the `current` link names one of them
    ls -laL "$d" "$d"/lib 2>/dev/null; du -shL "$d"
    for f in "$d"/* "$d"/lib/*; do
      [ -f "$f" ] || continue
      echo "${f#"$d"/}: $(gzip -1 -c "$f" | wc -c) bytes gzipped"
    done
  done
  return 0
}
first_request() {
  $PY -c 'import json, urllib.request as u
r = u.Request("http://127.0.0.1:8083/v1/chat/completions", headers={"Content-Type": "application/json"},
              data=json.dumps({"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}).encode())
print(u.urlopen(r, timeout=60).read().decode())'
}
verify() {  # verify N (SKIP_VERIFY="2 3": those are left out, to fit a shorter device budget)
  case " ${SKIP_VERIFY:-} " in *" $1 "*) echo "verify $1 left out (SKIP_VERIFY)"; return 0;; esac
  "$BIN/beekeeper" verify --on-host --suite engine,smoke,decode,ttft,vram \
    --quick ${VERIFY_SIZES:---decode-ctx 4096,60000 --ttft-tokens 60000 --ttft-requests 3} \
    --settle-budget-s 0 --out "$L/verify$1"
}
ready() {  # every proof's start: the model written beside the facts, the kit installed (start.sh)
  step model model &
  local mp=$!
  step facts facts
  while [ ! -e "$L/pip.done" ]; do sleep 0.5; done
  wait $mp || { echo model-failed > "$L/done"; exit 1; }
  export BEEKEEPER_MODEL_SHA256=$(cut -d' ' -f1 "$L/model.sha256")
}
# A pod whose CUDA toolkit the kit installed on the container disk: the restart clears it.
# Hidden beside itself (the same file system: a move, not a copy), with the loader's entries.
HIDDEN=/usr/local/.beekeeper-proof-hidden
hide_toolkit() {
  mkdir -p "$HIDDEN/ld"
  for d in /usr/local/cuda /usr/local/cuda-*; do [ -e "$d" ] && mv "$d" "$HIDDEN/"; done
  for f in $(grep -l cuda /etc/ld.so.conf.d/* 2>/dev/null); do mv "$f" "$HIDDEN/ld/"; done
  ldconfig; echo "hidden: $(ls "$HIDDEN" "$HIDDEN/ld" | tr '\n' ' ')"
  hash -r; command -v nvcc && return 1; ldconfig -p | grep -E 'libcudart|libcublas' || echo "the loader's cache holds no cudart or cuBLAS"
}
restore_toolkit() {
  mv "$HIDDEN"/ld/* /etc/ld.so.conf.d/ 2>/dev/null; rmdir "$HIDDEN/ld"
  mv "$HIDDEN"/* /usr/local/ && rmdir "$HIDDEN" && ldconfig && ls -d /usr/local/cuda*
}
kept_libs() {  # what the build keeps beside its binaries, and where its binaries look
  local d=/opt/beekeeper/llama-server/current
  ls -la "$d" "$d/lib"; cat "$d/toolkit-libs.txt"; du -sh "$d/lib"; readelf -d "$d/llama-server" | grep -i path
  ldd "$d/llama-server" | grep -E 'cuda|cublas|nvrtc|not found'
}
bench_without_toolkit() {  # llama-bench (verify's engine baseline) from the kept libraries
  local d=/opt/beekeeper/llama-server/current
  ldd "$d/llama-bench" | grep -E 'cuda|cublas|nvrtc|not found'
  "$d/llama-bench" -m "$BEEKEEPER_MODEL" -p 0 -n 32 -r 1 -ngl 99
}
