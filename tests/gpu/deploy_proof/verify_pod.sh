#!/bin/bash
# full.sh's steps that bear on verify, for a short device budget, most important first:
# deploy from nothing, a second run, verify (1); kill -9 of the server, verify (2); what the
# build weighs; sampling on the CPU against the GPU; the pod's restart, verify (5) of the
# restarted pod, the deploy after it; the uninstall. The VRAM tracer runs beside it.
# Started by `PROOF=verify_pod bash tests/gpu/deploy_proof/start.sh`.
SKIP_STEPS="before dry dry_over after_dry status request kill_supervisord deploy3 status3 \
verify3 bad after_bad verify4 changed rollback_cli after_rollback deploy5 after ${SKIP_STEPS:-}" \
  exec bash "$(dirname "$0")/full.sh"
