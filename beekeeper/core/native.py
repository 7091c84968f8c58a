"""
Native mode: build llama-server (and llama-bench beside it) on the host with its CUDA
toolkit (or CPU), install both in a versioned folder with a `current` link, and run the
server under a hardened systemd unit.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from .build import TARGETS, BuildSpec, build_jobs


def build_commands(spec: BuildSpec, src_dir: str, build_dir: str, jobs: int) -> list[list[str]]:
    return [
        ["cmake", "-S", src_dir, "-B", build_dir, *spec.cmake_flags],
        # one build, both targets (they share every object but their own main)
        ["cmake", "--build", build_dir, "-j", str(jobs), "--target", *TARGETS],
    ]


def install_dir(prefix: str, name: str) -> str:
    """Versioned install folder: one per build (BuildSpec.name: ref, CUDA, arch, flags)."""
    return f"{prefix}/{name}"


def shell_script(spec: BuildSpec, src_dir: str, build_dir: str, jobs: int, dest: str,
                 prefix: str, cuda_bin: str = "/usr/local/cuda/bin") -> str:
    """The host-side build: compile, install into `dest`, then move `current` atomically;
    a CUDA build finds nvcc in `cuda_bin` (the host's own toolkit, or the one the kit
    installed)."""
    q = shlex.quote
    cmds = [" ".join(q(a) for a in c) for c in build_commands(spec, src_dir, build_dir, jobs)]
    if spec.backend == "cuda":
        cmds.insert(0, f"export PATH={q(cuda_bin)}:$PATH")
    cmds += [
        f"install -d -m 0755 {q(dest)}",
        *(f"install -m 0755 {q(build_dir)}/bin/{t} {q(dest)}/{t}" for t in TARGETS),
        f"ln -sfn {q(dest)} {q(prefix)}/current.new && mv -T {q(prefix)}/current.new "
        f"{q(prefix)}/current",
    ]
    return " && ".join(cmds)


def run_build(spec: BuildSpec, src_dir: Path, build_dir: Path, log: Path,
              jobs: int | None = None) -> tuple[Path, float]:
    """Build locally (the GPU tier uses this); prints a line every 30 s. Returns (binary, s)."""
    if jobs is None:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        jobs = build_jobs(mem, os.cpu_count() or 1, spec.backend == "cuda")
    t0 = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        for cmd in build_commands(spec, str(src_dir), str(build_dir), jobs):
            print(f"[beekeeper] $ {' '.join(cmd)}  (log: {log})", flush=True)
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            while proc.poll() is None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    print(f"[beekeeper] building: {time.monotonic() - t0:.0f} s", flush=True)
            if proc.returncode != 0:
                tail = log.read_text().splitlines()[-30:]
                print("\n".join(tail), file=sys.stderr)
                raise RuntimeError(f"build step failed (exit {proc.returncode}); see {log}")
    return build_dir / "bin" / "llama-server", time.monotonic() - t0
