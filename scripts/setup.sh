#!/usr/bin/env bash
# Set up this machine as a beekeeper controller: Docker engine (started if it is not
# running), debootstrap, an SSH client, and .venv with the kit. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
say() { printf '[setup] %s\n' "$*"; }

pkgs=()
command -v dockerd >/dev/null || pkgs+=(docker.io)
command -v debootstrap >/dev/null || pkgs+=(debootstrap)
command -v ssh >/dev/null || pkgs+=(openssh-client)
python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
# headless Chromium: the report test renders report.html offline (tests/unit/test_report.py)
command -v chromium >/dev/null || pkgs+=(chromium)
if ((${#pkgs[@]})); then
  say "installing ${pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

if ! $SUDO docker info >/dev/null 2>&1; then
  if [ "$(ps -p 1 -o comm=)" = systemd ]; then
    say "starting docker.service"; $SUDO systemctl start docker
  else
    say "starting dockerd (log: /var/log/beekeeper-dockerd.log)"
    $SUDO sh -c 'nohup dockerd >/var/log/beekeeper-dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do $SUDO docker info >/dev/null 2>&1 && break; sleep 1; done
  $SUDO docker info >/dev/null 2>&1 || { echo "dockerd did not start; see the log" >&2; exit 1; }
fi

# the venv is rebuilt only when pyproject.toml changes
stamp=".venv/.pyproject.sha256"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "creating .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e '.[test]'
  echo "$want" > "$stamp"
fi
say "ready: $(.venv/bin/beekeeper --help | head -1)"
