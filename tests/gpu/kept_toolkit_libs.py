#!/usr/bin/env python3
"""
On a GPU box: the kit's own native build script (core/native.shell_script, with the kit's
cmake flags, the run path and the kept toolkit libraries of a pod's build) builds, with the
box's CUDA toolkit, a stand-in source tree in place of beellama's (named as one: two targets
named like the server's, linking CUDA::cudart and CUDA::cublas as ggml-cuda does, running one
SGEMM on the card), because the real build takes 8-10 minutes of device time.

    kept_toolkit_libs.py BASE PERSISTENT_ROOT|none   # build into BASE/opt/<build name>/

tests/gpu/deploy_proof/toolkit_libs.sh runs it, then hides the toolkit and runs the targets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from beekeeper.core.build import BuildSpec
from beekeeper.core.native import KEPT_LIBS_DIR, KEPT_LIBS_LIST, install_dir, shell_script

CMAKE = """cmake_minimum_required(VERSION 3.18)
project(stand_in C)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
foreach(t llama-server llama-bench)
  add_executable(${t} main.c)
  target_link_libraries(${t} PRIVATE CUDA::cudart CUDA::cublas)
endforeach()
"""
MAIN = r"""#include <stdio.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
int main(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) { printf("no card\n"); return 2; }
  float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {0}, one = 1, zero = 0;
  float *da, *db, *dc;
  cudaMalloc((void **)&da, sizeof a); cudaMalloc((void **)&db, sizeof b);
  cudaMalloc((void **)&dc, sizeof c);
  cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { printf("cublasCreate failed\n"); return 3; }
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, da, 2, db, 2, &zero, dc, 2);
  cudaMemcpy(c, dc, sizeof c, cudaMemcpyDeviceToHost);
  printf("sgemm on %d card(s): %g %g %g %g (want 23 34 31 46)\n", n, c[0], c[1], c[2], c[3]);
  return (c[0] == 23 && c[1] == 34 && c[2] == 31 && c[3] == 46) ? 0 : 4;
}
"""


def main(base: Path, root: str | None) -> int:
    src = base / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "CMakeLists.txt").write_text(CMAKE)
    (src / "main.c").write_text(MAIN)
    spec = BuildSpec(ref="stand-in", backend="cuda", cuda_version="13.0", cuda_arch="90",
                     fa_all_quants=False, build_base="-", runtime_base="-", jobs=16,
                     image_repo="stand-in")
    dest = install_dir(str(base / "opt"), spec.name())
    script = shell_script(spec, str(src), str(base / "build"), 16, dest, str(base / "opt"),
                          persistent_root=root)
    print(f"$ bash -c {script!r}", flush=True)
    rc = subprocess.run(["bash", "-c", script]).returncode
    print(f"build script rc={rc}; {dest}", flush=True)
    listed = Path(dest) / KEPT_LIBS_LIST
    print(f"{KEPT_LIBS_LIST}: {listed.read_text() if listed.exists() else '(none)'}")
    subprocess.run(f"du -sh {dest}/{KEPT_LIBS_DIR} 2>&1; ls -la {dest} {dest}/{KEPT_LIBS_DIR} "
                   f"2>&1; readelf -d {dest}/llama-server | grep -i path", shell=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), None if sys.argv[2] == "none" else sys.argv[2]))
