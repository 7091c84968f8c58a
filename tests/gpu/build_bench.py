#!/usr/bin/env python3
"""
Build benchmark for issue 11 (points 6 and 7): time beellama's llama-server build with and
without GGML_CUDA_FA_ALL_QUANTS, and sample the peak resident memory of each compile job.

It uses the kit's own build code: BuildSpec.cmake_flags (beekeeper/build.py) and
build_commands (beekeeper/core/native.py), run by local_build.py; the source tree is packed with
beekeeper.core.cache.pack_source_tree. Not a test: run it by hand on a GPU machine.

  # on the controller: export the pinned tree from a (possibly partial) bare git dir and pack it
  python3 tests/gpu/build_bench.py pack --git-dir DIR --ref COMMIT --out carry/beellama-src.tar.gz
  # on the GPU machine: unpack, build both variants in sequence, sample memory, write JSON
  python3 tests/gpu/build_bench.py run --src carry/beellama-src.tar.gz --work /tmp/bb --jobs 16
  # copy the results (JSON, progress, compressed logs) somewhere
  python3 tests/gpu/build_bench.py collect --work /tmp/bb --out DIR

Memory sampling: every 0.5 s it reads /proc, and for each `nvcc` process sums the RSS of the
process and all its descendants (cicc, ptxas, cudafe++, gcc/cc1plus, fatbinary): one CUDA
compile job. A C++ job is a compiler driver (c++/g++/gcc/cc) whose child is cc1plus/cc1,
outside any nvcc tree: driver + cc1plus + as. Link steps (ld/collect2) are kept apart.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()  # the kit from this checkout, installed or not

from local_build import run_build  # noqa: E402

from beekeeper.core.build import GIB_PER_CUDA_JOB, BuildSpec  # noqa: E402
from beekeeper.core.cache import pack_source_tree  # noqa: E402
from beekeeper.core.native import build_commands  # noqa: E402

PINNED_REF = "ba1fdce591f5a845cdbf6642767ecc1f8238519d"
PAGE = os.sysconf("SC_PAGE_SIZE")
GIB = 2**30

# Flags this benchmark adds to the kit's configure command. LLAMA_BUILD_WEBUI: beellama's
# option defaults ON and needs tools/server/public/bundle.js, which the snapshot lacks.
# GGML_CCACHE=OFF: a ccache on the build machine would make the second build faster.
EXTRA_FLAGS = ("-DLLAMA_BUILD_WEBUI=OFF", "-DGGML_CCACHE=OFF")


@dataclass(frozen=True)
class BenchSpec(BuildSpec):
    """The kit's BuildSpec with extra configure flags appended (those it lacks today)."""

    extra_flags: tuple[str, ...] = ()

    @property
    def cmake_flags(self) -> list[str]:
        base = list(super().cmake_flags)
        have = {f.split("=", 1)[0] for f in base}
        return base + [f for f in self.extra_flags if f.split("=", 1)[0] not in have]


def make_spec(fa_all_quants: bool, jobs: int, arch: str, cuda_version: str) -> BenchSpec:
    return BenchSpec(
        ref=PINNED_REF,
        backend="cuda", cuda_version=cuda_version, cuda_arch=arch,
        fa_all_quants=fa_all_quants, build_base="", runtime_base="", jobs=jobs,
        image_repo="beekeeper/bench", extra_flags=EXTRA_FLAGS,
    )


# ---------------------------------------------------------------- pack (controller side)

def export_tree(git_dir: str, ref: str, dest: Path) -> list[str]:
    """Write the tree at `ref` into `dest`, skipping blobs the snapshot lacks. Returns them."""
    listing = subprocess.run(["git", "-C", git_dir, "ls-tree", "-r", "-z", ref],
                             capture_output=True, check=True).stdout.split(b"\0")
    missing = []
    for ent in filter(None, listing):
        meta, raw = ent.split(b"\t", 1)
        mode, typ, sha = meta.split()
        path = raw.decode()
        if typ != b"blob":
            continue
        blob = subprocess.run(["git", "-C", git_dir, "cat-file", "blob", sha.decode()],
                              capture_output=True)
        if blob.returncode != 0:
            missing.append(path)
            continue
        p = dest / path
        p.parent.mkdir(parents=True, exist_ok=True)
        if mode == b"120000":
            os.symlink(blob.stdout.decode(), p)
        else:
            p.write_bytes(blob.stdout)
            if mode == b"100755":
                p.chmod(0o755)
    return missing


def cmd_pack(args: argparse.Namespace) -> None:
    tmp = Path(args.tmp)
    if tmp.exists():
        shutil.rmtree(tmp)
    tree = tmp / "src"
    tree.mkdir(parents=True)
    missing = export_tree(args.git_dir, args.ref, tree)
    out = pack_source_tree(tree, Path(args.out))
    print(json.dumps({"ref": args.ref, "missing_blobs": missing, "tarball": str(out),
                      "bytes": out.stat().st_size}, indent=1))


# ---------------------------------------------------------------- memory sampler

def _procs() -> dict[int, tuple[int, str, int]]:
    """pid -> (ppid, comm, rss bytes) for every readable process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            with open(f"/proc/{d}/statm") as f:
                rss = int(f.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
        lp, rp = stat.find("("), stat.rfind(")")
        comm = stat[lp + 1:rp]
        ppid = int(stat[rp + 2:].split()[1])
        out[int(d)] = (ppid, comm, rss)
    return out


def _cmd_out(pid: int) -> str:
    """The -o argument (object file) of a compile command, for naming a job."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "?"
    for i, a in enumerate(argv):
        if a == b"-o" and i + 1 < len(argv):
            return argv[i + 1].decode(errors="replace").rsplit("/", 1)[-1]
    return "?"


CXX_DRIVERS = {"c++", "g++", "gcc", "cc", "x86_64-linux-gnu-g++", "x86_64-linux-gnu-gcc"}
CXX_PROPER = {"cc1plus", "cc1"}
LINKERS = {"ld", "collect2", "ld.bfd", "ld.gold", "ld.lld"}


class Sampler(threading.Thread):
    def __init__(self, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.stop_evt = threading.Event()
        self.reset()

    def reset(self) -> None:
        self.cuda_jobs: dict[int, dict] = {}   # nvcc pid -> {name, peak, parts{comm: peak}}
        self.cxx_jobs: dict[int, dict] = {}
        self.link_peak = 0
        self.link_name = ""
        self.max_total_jobs = 0          # sum of all CUDA + C++ job trees at one sample
        self.max_concurrent_cuda = 0
        self.max_used = 0                # MemTotal - MemAvailable
        self.samples = 0

    def run(self) -> None:
        while not self.stop_evt.wait(self.interval):
            try:
                self.sample()
            except Exception as e:  # never let the sampler kill the benchmark
                print(f"[bench] sampler: {e!r}", file=sys.stderr, flush=True)

    def sample(self) -> None:
        procs = _procs()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)

        def tree(root: int) -> list[int]:
            seen, stack = [], [root]
            while stack:
                p = stack.pop()
                seen.append(p)
                stack.extend(children.get(p, []))
            return seen

        in_nvcc: set[int] = set()
        total = 0
        n_cuda = 0
        for pid, (_, comm, _) in procs.items():
            if comm != "nvcc":
                continue
            members = tree(pid)
            in_nvcc.update(members)
            rss = sum(procs[m][2] for m in members)
            total += rss
            n_cuda += 1
            job = self.cuda_jobs.get(pid)
            if job is None:
                job = self.cuda_jobs[pid] = {"name": _cmd_out(pid), "peak": 0, "parts": {}}
            job["peak"] = max(job["peak"], rss)
            for m in members:
                c, r = procs[m][1], procs[m][2]
                job["parts"][c] = max(job["parts"].get(c, 0), r)
        for pid, (ppid, comm, rss) in procs.items():
            if pid in in_nvcc:
                continue
            if comm in CXX_PROPER:
                root = ppid if procs.get(ppid, (0, "", 0))[1] in CXX_DRIVERS else pid
                members = tree(root)
                r = sum(procs[m][2] for m in members)
                total += r
                job = self.cxx_jobs.get(root)
                if job is None:
                    job = self.cxx_jobs[root] = {"name": _cmd_out(root), "peak": 0}
                job["peak"] = max(job["peak"], r)
            elif comm in LINKERS and rss > self.link_peak:
                self.link_peak, self.link_name = rss, _cmd_out(pid)
        self.max_total_jobs = max(self.max_total_jobs, total)
        self.max_concurrent_cuda = max(self.max_concurrent_cuda, n_cuda)
        self.max_used = max(self.max_used, _mem_used())
        self.samples += 1

    def summary(self) -> dict:
        def top(jobs: dict[int, dict], n: int = 10) -> list[dict]:
            rows = sorted(jobs.values(), key=lambda j: -j["peak"])[:n]
            return [{**j, "peak_gib": round(j["peak"] / GIB, 3),
                     **({"parts_gib": {k: round(v / GIB, 3) for k, v in j["parts"].items()}}
                        if "parts" in j else {})} for j in rows]

        def stats(jobs: dict[int, dict]) -> dict:
            peaks = sorted(j["peak"] for j in jobs.values())
            if not peaks:
                return {"jobs_seen": 0}
            return {"jobs_seen": len(peaks), "max_gib": round(peaks[-1] / GIB, 3),
                    "median_gib": round(peaks[len(peaks) // 2] / GIB, 3),
                    "p90_gib": round(peaks[int(len(peaks) * 0.9)] / GIB, 3)}

        part_max: dict[str, int] = {}
        for j in self.cuda_jobs.values():
            for c, r in j["parts"].items():
                part_max[c] = max(part_max.get(c, 0), r)
        return {
            "samples": self.samples, "interval_s": self.interval,
            "cuda_job": stats(self.cuda_jobs), "cxx_job": stats(self.cxx_jobs),
            "cuda_job_part_max_gib": {c: round(r / GIB, 3) for c, r in part_max.items()},
            "link_peak_gib": round(self.link_peak / GIB, 3), "link_peak_output": self.link_name,
            "max_total_compile_rss_gib": round(self.max_total_jobs / GIB, 3),
            "max_concurrent_nvcc": self.max_concurrent_cuda,
            "max_system_used_gib": round(self.max_used / GIB, 3),
            "top_cuda_jobs": top(self.cuda_jobs), "top_cxx_jobs": top(self.cxx_jobs, 5),
        }


def _mem_used() -> int:
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            info[k] = int(v.split()[0]) * 1024
    return info.get("MemTotal", 0) - info.get("MemAvailable", 0)


# ---------------------------------------------------------------- run (GPU machine side)

def _sh(cmd: list[str] | str, **kw) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, shell=isinstance(cmd, str),
                           timeout=120, **kw)
        return (r.stdout + r.stderr).strip()
    except Exception as e:  # noqa: BLE001
        return f"error: {e!r}"


def fattn_vec_objects(build: Path) -> list[str]:
    names = sorted(p.name for p in build.rglob("fattn-vec*.o"))
    return [n.replace("fattn-vec-instance-", "").replace(".cu.o", "") for n in names]


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def cmd_run(args: argparse.Namespace) -> None:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results_path = work / "build_bench.json"
    progress = work / "progress.txt"

    def note(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        with progress.open("a") as f:
            f.write(line + "\n")

    src = work / "src"
    if not src.exists():
        with tarfile.open(args.src) as tar:
            tar.extractall(work, filter="data")
    note(f"unpacked {args.src}")

    env_info = {
        "nvcc": _sh(["nvcc", "--version"]).splitlines()[-2:],
        "cmake": _sh(["cmake", "--version"]).splitlines()[:1],
        "gcc": _sh(["c++", "--version"]).splitlines()[:1],
        "ccache_on_path": shutil.which("ccache"),
        "nproc": os.cpu_count(),
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "gpu": _sh("nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader"),
        "cmake_generator": os.environ.get("CMAKE_GENERATOR", "default (Unix Makefiles)"),
    }
    cuda_version = next((w.strip(",") for line in env_info["nvcc"] for w in line.split()
                         if w[:1].isdigit() and "." in w), "13.0")
    results = {"ref": PINNED_REF, "jobs": args.jobs, "arch": args.arch,
               "kit_GIB_PER_CUDA_JOB": GIB_PER_CUDA_JOB, "env": env_info, "builds": []}
    write_json(results_path, results)

    sampler = Sampler(0.5)
    sampler.start()
    order = [False, True] if args.order == "off-first" else [True, False]
    for fa in order:
        label = "fa_all_quants" if fa else "default"
        spec = make_spec(fa, args.jobs, args.arch, cuda_version)
        build = work / f"build-{label}"
        if build.exists():
            shutil.rmtree(build)
        log = work / f"build-{label}.log"
        entry = {"label": label, "fa_all_quants": fa, "status": "running",
                 "commands": [" ".join(c) for c in build_commands(spec, "src", str(build.name),
                                                                 args.jobs)],
                 "cmake_flags": spec.cmake_flags,
                 "extra_flags_not_in_kit": [f for f in spec.cmake_flags
                                            if f not in BuildSpec.cmake_flags.fget(spec)]}
        results["builds"].append(entry)
        write_json(results_path, results)
        sampler.reset()
        note(f"{label}: configure + build llama-server (-j{args.jobs})")
        t0 = time.monotonic()
        stop_progress = threading.Event()

        def progress_loop(entry=entry, t0=t0, stop_progress=stop_progress, log=log) -> None:
            while not stop_progress.wait(20):
                entry["elapsed_s"] = round(time.monotonic() - t0, 1)
                entry["memory_so_far"] = sampler.summary()
                try:
                    entry["log_tail"] = log.read_text(errors="replace").splitlines()[-3:]
                except OSError:
                    pass
                write_json(results_path, results)

        pl = threading.Thread(target=progress_loop, daemon=True)
        pl.start()
        try:
            binary, secs = run_build(spec, src, build, log, jobs=args.jobs)
            entry["llama_server_s"] = round(secs, 1)
            entry["status"] = "llama-server built"
            note(f"{label}: llama-server built in {secs:.0f} s")
        except Exception as e:  # noqa: BLE001
            entry["status"] = f"failed: {e}"
            entry["log_tail"] = log.read_text(errors="replace").splitlines()[-40:]
            stop_progress.set()
            write_json(results_path, results)
            note(f"{label}: FAILED {e}")
            continue
        entry["memory_llama_server"] = sampler.summary()
        if args.bench:
            t1 = time.monotonic()
            with log.open("a") as out:
                rc = subprocess.call(["cmake", "--build", str(build), "-j", str(args.jobs),
                                      "--target", "llama-bench"], stdout=out,
                                     stderr=subprocess.STDOUT)
            entry["llama_bench_incremental_s"] = round(time.monotonic() - t1, 1)
            entry["llama_bench_rc"] = rc
            note(f"{label}: llama-bench (incremental) rc={rc} "
                 f"in {entry['llama_bench_incremental_s']} s")
        stop_progress.set()
        entry["memory"] = sampler.summary()
        entry.pop("memory_so_far", None)
        entry["status"] = "done"
        entry["total_s"] = round(time.monotonic() - t0, 1)
        entry["fattn_vec_objects"] = fattn_vec_objects(build)
        entry["fattn_vec_object_count"] = len(entry["fattn_vec_objects"])
        entry["binary_bytes"] = binary.stat().st_size if binary.exists() else None
        entry["binary_has_FA_ALL_QUANTS_feature_string"] = bool(
            _sh(f"strings {binary} | grep -x FA_ALL_QUANTS | head -1"))
        cubins = _sh(f"cuobjdump -lelf {binary} | wc -l")
        entry["cuobjdump_lelf_count"] = cubins
        turbo_syms = _sh(f"cuobjdump -symbols {binary} 2>/dev/null | grep -c flash_attn_ext_vec")
        entry["cuobjdump_flash_attn_ext_vec_symbols"] = turbo_syms
        write_json(results_path, results)
        note(f"{label}: done, total {entry['total_s']} s, "
             f"{entry['fattn_vec_object_count']} fattn-vec objects")
    sampler.stop_evt.set()
    results["finished"] = True
    write_json(results_path, results)
    note("all done")


def cmd_collect(args: argparse.Namespace) -> None:
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("build_bench.json", "progress.txt"):
        if (work / name).exists():
            shutil.copy(work / name, out / name)
    for log in work.glob("build-*.log"):
        with log.open("rb") as f, gzip.open(out / (log.name + ".gz"), "wb") as g:
            shutil.copyfileobj(f, g)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--git-dir", required=True)
    p.add_argument("--ref", default=PINNED_REF)
    p.add_argument("--out", required=True)
    p.add_argument("--tmp", default=str(Path(tempfile.gettempdir()) / "build-bench-export"))
    r = sub.add_parser("run")
    r.add_argument("--src", required=True)
    r.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "bb"))
    r.add_argument("--jobs", type=int, default=16)
    r.add_argument("--arch", default="90")
    r.add_argument("--order", choices=["off-first", "on-first"], default="off-first")
    r.add_argument("--no-bench", dest="bench", action="store_false",
                   help="skip the incremental llama-bench build after llama-server")
    c = sub.add_parser("collect")
    c.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "bb"))
    c.add_argument("--out", required=True)
    a = ap.parse_args()
    {"pack": cmd_pack, "run": cmd_run, "collect": cmd_collect}[a.cmd](a)


if __name__ == "__main__":
    main()
