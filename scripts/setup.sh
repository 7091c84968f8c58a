#!/usr/bin/env bash
# Set up this machine as a beekeeper controller (Debian/Ubuntu, as root or with sudo). Safe to
# run again; installs with apt only what is missing. On macOS, or a Linux without apt, the
# controller mode installs nothing: it names what is missing in one line (Python >= 3.11 with
# its venv module: stop, naming a python3.11 to python3.14 found here that would do; an SSH
# client: a note) and makes .venv. It runs under macOS's bash 3.2 (no empty array expanded
# under `set -u`, no ${x,,}, mapfile or declare -A) and with the BSD tools macOS has
# (sha256sum, else shasum, else Python; no GNU-only option of any tool).
#
#   scripts/setup.sh          the controller, all a user who deploys to a GPU box needs:
#                             Python >= 3.11 (PYTHON=python3.11 picks another interpreter), its
#                             venv module, an SSH client, and .venv with the kit
#   scripts/setup.sh demo     also Docker (engine started) and debootstrap, for the local sandbox
#                             host (scripts/demo.sh runs this)
#   scripts/setup.sh test     the demo's parts, the test tools in .venv, and headless Chromium
#                             where apt has a package for it (scripts/test.sh runs this)
#
# demo and test need Linux: on macOS they stop at once, in one line.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-controller}
case $mode in
  controller|demo|test) ;;
  *) echo "usage: scripts/setup.sh [controller|demo|test]" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] %s\n' "$*" >&2; exit 1; }
# demo and test on macOS: the sandbox host is Linux's (a container with its own Docker engine,
# built by debootstrap); stop at once, before anything is checked or made
[ "$mode" = controller ] || [ "$(uname -s 2>/dev/null)" != Darwin ] ||
  die "setup.sh $mode: the sandbox host (demo and tests) needs a Linux machine with Docker and debootstrap; on a Mac run ./scripts/setup.sh (the controller) and deploy to a GPU box"
# the sha256 of file $1: GNU coreutils' sha256sum, else shasum (macOS, Perl's), else Python's
# hashlib (after check_python, so $PYTHON runs)
file_sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$1"
  elif command -v shasum >/dev/null; then shasum -a 256 "$1"
  else "$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
  fi | cut -d' ' -f1
}
# Arrays: bash 3.2 (macOS) calls an empty "${a[@]}" unbound under `set -u`, so every expansion
# is ${a[@]+"${a[@]}"} or comes after a test that the array is not empty.

updated=""
apt_update() {
  command -v apt-get >/dev/null || die "no apt-get here: install $* yourself, then run this again"
  [ -z "$SUDO" ] || command -v sudo >/dev/null ||
    die "installing $* needs root, and this user has no sudo: run this as root, or install sudo and let this user use it"
  [ -n "$updated" ] || { $SUDO apt-get update -qq || die "apt-get update failed"; updated=1; }
}
apt_install() {
  apt_update "$@"
  say "installing $*"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
# true when apt can install $1 (a known package with a candidate version)
has_candidate() {
  apt_update "$1"
  local c; c=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
  [ -n "$c" ] && [ "$c" != "(none)" ]
}
# Python >= 3.11, or one line saying what to do
check_python() {
  local v
  v=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) ||
    die "$PYTHON does not run: install Python >= 3.11, or name one with PYTHON=python3.11"
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' && return
  command -v apt-get >/dev/null ||
    die "beekeeper needs Python >= 3.11 and $PYTHON is $v: $(no_apt_python)"
  die "beekeeper needs Python >= 3.11 and $PYTHON is $v: install python3.11 and" \
      "python3.11-venv (Ubuntu 22.04: apt install python3.11 python3.11-venv, from universe)," \
      "then run this again with PYTHON=python3.11 (e.g. PYTHON=python3.11 scripts/setup.sh)"
}
# Where there is no apt: another interpreter here that would do (python3.14 down to python3.11,
# >= 3.11 with venv and ensurepip, not $PYTHON), printed; none: nothing, and false. It is only
# named, never used in place of $PYTHON: .venv is made with the interpreter the user names.
other_python() {
  local p
  for p in python3.14 python3.13 python3.12 python3.11; do
    [ "$p" != "$PYTHON" ] && command -v "$p" >/dev/null || continue
    "$p" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || continue
    "$p" -c 'import venv, ensurepip' 2>/dev/null || continue
    echo "$p"; return 0
  done
  return 1
}
# what to do where there is no apt: run again naming the interpreter found here, else install one
# (macOS: Homebrew's python@3.12 has venv and ensurepip; python.org's installer gives its newest
# release, such as python3.13, and no python3.12)
no_apt_python() {
  local p
  if p=$(other_python); then
    echo "$p is here, with its venv module: run this again as PYTHON=$p ./scripts/setup.sh"
  else
    echo "install Python >= 3.11 with its venv module (macOS: brew install python@3.12, or the installer from python.org), then run this again naming it: PYTHON=python3.12 ./scripts/setup.sh for Homebrew's, PYTHON=python3.13 for a 3.13 from python.org"
  fi
}

# --- the controller: Python, its venv module, an SSH client
! command -v "$PYTHON" >/dev/null || check_python
# a Python named that is not here (a path as well as a name), with no apt to bring one
command -v "$PYTHON" >/dev/null || command -v apt-get >/dev/null ||
  die "no apt-get here, and no $PYTHON: $(no_apt_python)"
pkgs=()
command -v ssh >/dev/null || pkgs+=(openssh-client)
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
  # python3 -> python3-venv, python3.11 -> python3.11-venv (each depends on its interpreter)
  [[ $PYTHON =~ ^python3(\.[0-9]+)?$ ]] ||
    die "$PYTHON lacks the venv or ensurepip module: install its venv package, then run this again"
  pkgs+=("$PYTHON-venv")
fi
if ((${#pkgs[@]} > 0)) && ! command -v apt-get >/dev/null; then
  # macOS, or a Linux without apt: nothing is installed here; one line says what to install
  case " ${pkgs[*]} " in
    *-venv\ *)
      command -v "$PYTHON" >/dev/null || die "no apt-get here, and no $PYTHON: $(no_apt_python)"
      die "no apt-get here, and $PYTHON lacks its venv module: $(no_apt_python)" ;;
  esac
  say "note: no ssh client here: install OpenSSH to deploy over SSH (a deploy to @local, on this machine, needs none); going on"
  pkgs=()
fi
((${#pkgs[@]} == 0)) || apt_install "${pkgs[@]}"
check_python

# --- the demo's and the tests' parts: Docker engine and debootstrap for the sandbox hosts
if [ "$mode" != controller ]; then
  pkgs=()
  command -v dockerd >/dev/null || pkgs+=(docker.io)
  command -v debootstrap >/dev/null || pkgs+=(debootstrap)
  for p in ${pkgs[@]+"${pkgs[@]}"}; do
    has_candidate "$p" || die "apt has no $p here: install it (Docker: docs.docker.com/engine/install), then run this again"
  done
  ((${#pkgs[@]} == 0)) || apt_install "${pkgs[@]}"
  if ! $SUDO docker info >/dev/null 2>&1; then
    if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then
      say "starting docker.service"; $SUDO systemctl start docker
    else
      say "starting dockerd (log: /var/log/beekeeper-dockerd.log)"
      $SUDO sh -c 'nohup dockerd >/var/log/beekeeper-dockerd.log 2>&1 &'
    fi
    for _ in $(seq 60); do $SUDO docker info >/dev/null 2>&1 && break; sleep 1; done
    $SUDO docker info >/dev/null 2>&1 || die "dockerd did not start; see the log"
  fi
fi

# --- the tests only: objdump reads the server image's instructions, QEMU runs its llama-bench
# on an emulated x86-64-v3 CPU, cc builds that check's two one-instruction programs
# (test_deploy.py)
if [ "$mode" = test ]; then
  pkgs=()
  command -v objdump >/dev/null || pkgs+=(binutils)
  command -v qemu-x86_64 >/dev/null || pkgs+=(qemu-user)
  command -v cc >/dev/null || pkgs+=(gcc libc6-dev)
  ((${#pkgs[@]} == 0)) || apt_install "${pkgs[@]}"
fi

# --- the tests only: headless Chromium renders report.html offline (tests/unit/test_report.py).
# Debian has an apt package; Ubuntu's chromium is a snap (chromium-browser installs the snap).
if [ "$mode" = test ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
  chromium=""
  if has_candidate chromium; then chromium=chromium
  elif has_candidate chromium-browser && [[ $(apt-cache show chromium-browser 2>/dev/null) != *[Ss]nap* ]]; then
    chromium=chromium-browser
  fi
  if [ -z "$chromium" ]; then
    say "note: no apt package for Chromium here (Ubuntu's is a snap): not installed, so the report-rendering test skips"
  else
    apt_install "$chromium" || say "note: $chromium did not install, so the report-rendering test skips"
  fi
fi

# --- .venv with the kit (and the test tools for the tests), rebuilt only when pyproject.toml,
# the extras or the Python version change
extras=""; [ "$mode" != test ] || extras=test
pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
sha=$(file_sha256 pyproject.toml)
stamp=".venv/.pyproject.sha256"
have=$(cat "$stamp" 2>/dev/null || true)
venvver=$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
if [ "$venvver" != "$pyver" ] || { [ "$have" != "$sha${extras:+ $extras}" ] && [ "$have" != "$sha test" ]; }; then
  clear=(); [ -z "$venvver" ] || [ "$venvver" = "$pyver" ] || clear=(--clear)
  say "creating .venv (Python $pyver)"
  "$PYTHON" -m venv ${clear[@]+"${clear[@]}"} .venv
  .venv/bin/pip install -q --upgrade pip >/dev/null
  .venv/bin/pip install -q -e ".${extras:+[$extras]}"
  echo "$sha${extras:+ $extras}" > "$stamp"
fi
say "ready: $(.venv/bin/beekeeper --help | head -1)"
