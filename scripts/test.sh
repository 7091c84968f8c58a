#!/usr/bin/env bash
# One command on a fresh machine: set up (the demo's parts, the test tools, Chromium where apt
# has it), lint, type-check, then every test (unit and the sandbox integration tests, which
# build the CPU server image: ~15 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
setup_s=$SECONDS  # the phases' seconds: the timeline, the last lines
# what the sandbox tests start from (Debian images by debootstrap, the PyPI files: mostly
# downloads) is made in the background while lint and the unit tests use the CPU
mkdir -p .cache
rm -f .cache/prepare.first-done
prep_log=.cache/prepare.log
integ_log=.cache/integration.log side_log=.cache/integration-side.log
.venv/bin/python -m tests.integration.prepare >"$prep_log" 2>&1 &
prep=$!
tier() {  # a selection that names no test of this tier (exit 5) is not a failure
  # shellcheck disable=SC2086  # $prio: empty, or the lower priority's words
  ${prio:-} .venv/bin/python -m pytest -v -s -p no:cacheprovider --durations=15 -m "$@" ||
    { rc=$?; [ "$rc" -eq 5 ] || exit "$rc"; }
}
# the integration tier (the sandbox hosts; the slow tier, marked `slow`: the native build,
# the lifecycle, long benchmarks, runs in scripts/test-slow.sh) starts once what the first
# deploy needs is made, beside lint and the unit tier: its first deploy downloads, loads
# images and builds llama.cpp (5-8 min), the unit tier is done long before the first
# judged figure. Its output comes after the unit tier's; stopped if they fail.
# It runs as two lanes side by side, each with a set of sandbox hosts of its own (its tests
# mostly wait on deploys, restarts and servers: one lane kept 2 cores 30-40 % busy): the
# main lane builds the server image from nothing and runs the modules below; the side lane
# waits for that build, makes its hosts, takes the image (same inputs, same tag) and runs
# every other module (tests/integration/helpers.py, LANE). A test that judges speed (marked
# `quiet`) runs alone: the other lane waits at its next test (tests/integration/conftest.py).
# (test_real_path, about 60 s, in the main lane since 7890535's CI: the side lane had ended 118 s
# after the main one)
MAIN_LANE="test_deploy.py test_gateway.py test_real_path.py test_sandboxes.py test_trixie_compose.py"
lane_files() {  # lane_files main|side: the lane's modules
  local f
  for f in tests/integration/test_*.py; do
    case " $MAIN_LANE " in *" ${f##*/} "*) [ "$1" = main ] && echo "$f";;
      *) [ "$1" = side ] && echo "$f";; esac
  done
}
integration() {  # integration main|side [pytest args]
  local lane=$1; shift
  while [ ! -e .cache/prepare.first-done ] && kill -0 "$prep" 2>/dev/null; do sleep 1; done
  if [ "$lane" = main ]; then
    [ -e .cache/prepare.first-done ] && grep -m1 "^\[prepare\]" "$prep_log" ||
      echo "[test] making the sandbox images ahead failed (the tests make them): $prep_log"
  else  # the side lane's hosts start from images the making ahead is still finishing
    while kill -0 "$prep" 2>/dev/null; do sleep 1; done
  fi
  # shellcheck disable=SC2046  # one word per module path
  BEEKEEPER_TEST_LANE=$lane tier "integration and not gpu and not slow" \
    --basetemp=".cache/pytest-$lane" $(lane_files "$lane") "$@"
}
# the main lane's build (its tag) and its end, for the side lane: made anew
rm -f .cache/integration-main.built .cache/integration-main.done
# the side lane's hosts: named and numbered after the main lane's (sandbox.py's
# BEEKEEPER_SANDBOX_* variables), not under the main name's prefix (its `sandbox down` set)
main_host=${BEEKEEPER_SANDBOX_NAME:-beekeeper-sandbox}
side_env=(BEEKEEPER_SANDBOX_NAME="side-$main_host"
          BEEKEEPER_SANDBOX_PORT=$(( ${BEEKEEPER_SANDBOX_PORT:-2222} + 20 ))
          BEEKEEPER_SANDBOX_DIR="${BEEKEEPER_SANDBOX_DIR:-$PWD/.sandbox}/side"
          BEEKEEPER_TEST_MAIN_HOST="$main_host")
set -m  # job control: each lane runs in a process group of its own, stopped as one; its
# stdin is not the terminal (an ssh of a background group that reads it would be stopped)
{ if (integration main "$@"); then rc=0; else rc=$?; fi; touch .cache/integration-main.done; exit "$rc"; } \
  </dev/null >"$integ_log" 2>&1 &
integ=$!
( export "${side_env[@]}"; integration side "$@" ) </dev/null >"$side_log" 2>&1 &
side=$!
set +m
# stopped as Ctrl-C would stop them: pytest tears its sandbox hosts' fixtures down; and
# follow()'s sentinel and tail (background jobs without job control ignore SIGINT)
sentinel="" tailer=""
trap 'kill ${sentinel:+"$sentinel"} ${tailer:+"$tailer"} 2>/dev/null || true
      kill -INT -- -"$integ" -"$side" 2>/dev/null || true' EXIT
# Lint, types and the unit tier are off the critical path (the integration tier's first
# deploy builds llama.cpp in a sandbox container meanwhile): they run at a lower priority.
# Where Docker's containers are one CPU group beside the processes outside it (cgroup v1's
# `cpu` controller, as on this project's 2-core machines: /docker with cpu.shares 1024), the
# scheduler weighs that whole group, the build's `make -j2` with it, as much as one nice-0
# process: against two xdist workers the build gets about a third of 2 cores (CFS weights;
# not measured side by side). Niced (weight 110 each), they leave it about 80 %, and the unit
# tier takes what the build and the tests leave.
prio="nice -n 10"
$prio .venv/bin/ruff check .
$prio bash scripts/mypy.sh
lint_s=$SECONDS
# the unit tests on both cores (pytest-xdist): each test makes its own state (tmp_path,
# its own controller cache), so they need no order
tier "not gpu and not slow and not integration" -n 2 "$@"
unit_s=$SECONDS
follow() {  # follow PID LOG: LOG printed as it grows until the lane PID ends; its status
  # tail's --pid is given a process of ours that lives until `wait` says the lane ended: a
  # lane that ended before it is followed has a process id the kernel may have given to
  # another process or thread since (2 ** 15 of them here), which tail would wait on
  # (sentinel and tailer: the script's, for its EXIT trap)
  local rc
  sleep 86400 & sentinel=$!
  tail -n +1 -f --pid="$sentinel" "$2" & tailer=$!
  if wait "$1"; then rc=0; else rc=$?; fi
  kill "$sentinel" 2>/dev/null || true
  wait "$tailer" || true
  sentinel="" tailer=""
  return "$rc"
}
echo "[test] the unit tier passed at ${SECONDS} s; the integration tier's main lane, running" \
     "since the set-up ($integ_log):"
if follow "$integ" "$integ_log"; then integ_rc=0; else integ_rc=$?; fi
main_s=$SECONDS
if [ "$integ_rc" -ne 0 ]; then
  kill -INT -- -"$side" 2>/dev/null || true; wait "$side" 2>/dev/null || true
  echo "[test] the integration tier's main lane failed (exit $integ_rc)"; exit "$integ_rc"
fi
echo "[test] the main lane passed at ${SECONDS} s; the side lane ($side_log):"
if follow "$side" "$side_log"; then side_rc=0; else side_rc=$?; fi
trap - EXIT
# the side lane's hosts go (the main lane's stay for scripts/test-slow.sh to reuse)
env "${side_env[@]}" .venv/bin/python -c "from beekeeper import sandbox
for name in sandbox.names(): sandbox.down(name=name)" >/dev/null 2>&1 || true
[ "$side_rc" -eq 0 ] || { echo "[test] the integration tier's side lane failed (exit $side_rc)"; exit "$side_rc"; }
integ_s=$SECONDS
if wait "$prep"; then tail -1 "$prep_log"; else
  echo "[test] making the GPU-container host's image ahead failed (its tests made it): $prep_log"; fi
# the images and PyPI files the first deploy needs, made beside lint and the unit tier
ready=$(sed -n 's/^\[prepare\] the first host.* ready in \([0-9]*\) s$/\1/p' "$prep_log" | head -1)
echo "[test] timeline: set-up ${setup_s} s | lint and types $((lint_s - setup_s)) s |" \
     "unit tier $((unit_s - lint_s)) s (done at ${unit_s} s) | integration tier" \
     "$((integ_s - setup_s)) s from the set-up (its images and PyPI files ready after" \
     "${ready:-?} s; main lane done at ${main_s} s, side lane at ${integ_s} s) |" \
     "total ${SECONDS} s"
echo "[test] passed in ${SECONDS} s"
