#!/bin/bash
# On the GPU box (the device's working tree, .whl/ and carry/ carried): install the kit from
# the carried wheels (pip, offline), start full.sh (or $PROOF.sh) detached, and wait inside this call.
# A second call, at once: `bash tests/gpu/deploy_proof/wait.sh SECONDS`.
# .whl/: the kit's runtime dependencies as cp312 manylinux wheels (`pip download --no-deps
# --only-binary=:all: --python-version 3.12 ...`) and setuptools, which `pip install -e .`
# needs offline when the box's Python has none.
ls .whl/setuptools-*.whl > /dev/null 2>&1 || { echo "start.sh: .whl/ holds no setuptools wheel: pip download setuptools into it"; exit 2; }
export R=$PWD L=/tmp/h200; mkdir -p $L
python3 -m zipfile -e .whl/gguf-*.whl /tmp/gg
setsid nohup bash tests/gpu/deploy_proof/${PROOF:-full}.sh > $L/full.out 2>&1 < /dev/null &
t0=$(date +%s%N)
python3 -m pip install -q --no-index --no-deps --find-links .whl \
  $(ls .whl/*.whl | grep -v -e setuptools -e typing_extensions) -e . > $L/pip.txt 2>&1
rc=$?
python3 -c "import pyinfra, pydantic, gguf, supervisor, testinfra, beekeeper.cli" >> $L/pip.txt 2>&1 ||
  { python3 -m pip install -q --no-index --no-deps .whl/typing_extensions-*.whl >> $L/pip.txt 2>&1; rc=9; }
echo "$(date -u +%T) pip rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" >> $L/steps.txt
touch $L/pip.done
bash tests/gpu/deploy_proof/wait.sh ${1:-570}
