#!/usr/bin/env python3
"""
The CPU server image's build, with and without the unity sources of core/build.py's UNITY,
side by side on this machine's Docker: the Dockerfile the sandbox host's deploy renders
(cpu-tiny, the pinned llama.cpp tree of the llama-cpp-python sdist, the sandbox's build and
runtime bases), built from nothing (`--no-cache`) one after the other, each run's wall
seconds and the machine's busy CPU seconds over it (/proc/stat: run it on a quiet machine).

    .venv/bin/python benchmarks/cpu_image_build.py [--jobs 2] [--runs 1]

Needs what the sandbox makes first (`beekeeper sandbox up`, or the demo): Docker, the
images beekeeper/debian-build and beekeeper/debian (sandbox.py's tags) and the source
tarball in .cache/src. Prints one line per build and a table; builds no image it keeps
(each is tagged beekeeper-bench/cpu-image:<variant> and removed after).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from beekeeper import sandbox  # noqa: E402
from beekeeper.core import build  # noqa: E402
from beekeeper.core.cache import cpu_source_tarball  # noqa: E402
from beekeeper.core.config import load_host_config  # noqa: E402


def busy_cpu_s() -> float:
    """The machine's CPU seconds spent outside idle and iowait since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def dockerfile(unity: bool) -> str:
    cfg = load_host_config({"profile": "cpu-tiny", "source": {"path": "/x.tar.gz",
                                                                "ref": "lcp0.3.36"},
                            "base_images": {"build": sandbox.BUILD_BASE,
                                            "runtime": sandbox.BASE}})
    spec = build.build_spec(cfg, None, cuda_version=cfg.data.cuda_version,
                            cuda_arch=cfg.data.cuda_arch)
    saved = dict(build.UNITY)
    try:
        if not unity:
            build.UNITY.clear()
        return spec.dockerfile()
    finally:
        build.UNITY.clear()
        build.UNITY.update(saved)


def build_once(context: Path, text: str, tag: str, jobs: int) -> tuple[float, float]:
    (context / "Dockerfile").write_text(text)
    cpu0, t0 = busy_cpu_s(), time.monotonic()
    r = subprocess.run(["docker", "build", "--no-cache", "-q", "--build-arg",
                        f"BUILD_JOBS={jobs}", "-t", tag, str(context)],
                       capture_output=True, text=True)
    wall, cpu = time.monotonic() - t0, busy_cpu_s() - cpu0
    if r.returncode != 0:
        sys.exit(f"docker build {tag} failed:\n{r.stderr[-3000:]}")
    subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="BUILD_JOBS (default 2)")
    ap.add_argument("--runs", type=int, default=1, help="builds of each variant, in turn")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="beekeeper-bench-") as tmp:
        with tarfile.open(cpu_source_tarball()) as tar:
            tar.extractall(tmp, filter="tar")
        context = Path(tmp) / "src"  # the tree, as the host unpacks it
        results: dict[str, list[tuple[float, float]]] = {"one by one": [], "unity": []}
        for run in range(args.runs):
            for name, unity in (("one by one", False), ("unity", True)):
                wall, cpu = build_once(context, dockerfile(unity),
                                       f"beekeeper-bench/cpu-image:{'unity' if unity else 'tus'}",
                                       args.jobs)
                results[name].append((wall, cpu))
                print(f"[bench] run {run + 1}, {name}: {wall:.1f} s wall, {cpu:.1f} CPU s",
                      flush=True)
    print(f"\n{os.cpu_count()} cores, BUILD_JOBS={args.jobs}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| cold targets | wall s | busy CPU s |\n| --- | --- | --- |")
    for name, rows in results.items():
        print(f"| {name} | {' / '.join(f'{w:.1f}' for w, _ in rows)} | "
              f"{' / '.join(f'{c:.1f}' for _, c in rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
