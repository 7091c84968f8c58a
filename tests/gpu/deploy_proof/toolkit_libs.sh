#!/bin/bash
# The kept toolkit libraries on a GPU box, cheaply (tests/gpu/kept_toolkit_libs.py: the kit's
# build script on a stand-in source tree): a pod's build (persistent root) and a build off a
# pod, both run with the toolkit; then the toolkit and its loader entries hidden, as a pod's
# restart clears a toolkit the kit installed: the pod's build must still run its SGEMM, the
# other must fail to load. Started by `PROOF=toolkit_libs bash tests/gpu/deploy_proof/start.sh`.
set -u
source "$(dirname "$0")/lib.sh"
while [ ! -e "$L/pip.done" ]; do sleep 0.5; done
T=/workspace/kept-libs-proof  # on the box's disk, like a pod's volume
step facts facts
step build_pod $PY tests/gpu/kept_toolkit_libs.py "$T/pod" /workspace/beekeeper
step build_box $PY tests/gpu/kept_toolkit_libs.py "$T/box" none
step with_toolkit sh -c "$T/pod/opt/*/llama-server && $T/box/opt/*/llama-server"
step hide hide_toolkit || { restore_toolkit; echo hide-failed > "$L/done"; exit 1; }
step pod_run sh -c "for t in llama-server llama-bench; do $T/pod/opt/*/\$t || exit 1; done; ldd $T/pod/opt/*/llama-server"
step box_run sh -c "$T/box/opt/*/llama-server; rc=\$?; echo rc=\$rc; [ \$rc = 127 ]"
step restore restore_toolkit
echo ok > "$L/done"
