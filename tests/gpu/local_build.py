"""
The GPU scripts' local build: the kit's build_commands run here, with no pyinfra (the deploy
runs the same commands on the host, inside its build script). Import after
checkout.use_checkout().
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from beekeeper.core.build import BuildSpec, build_jobs
from beekeeper.core.native import build_commands


def run_build(spec: BuildSpec, src_dir: Path, build_dir: Path, log: Path,
              jobs: int | None = None) -> tuple[Path, float]:
    """Build with the kit's build_commands on this machine, no pyinfra (the GPU tiers' and
    benchmarks' builds); prints a line every 30 s. Returns (binary, s)."""
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
