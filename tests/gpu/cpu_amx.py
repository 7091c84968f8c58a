"""
The CPU server on an AMX Xeon (the GPU machine's CPU is one): the old build
(`GGML_NATIVE=ON`, what the kit built before) against the kit's x86-64-v3 build, both from the
CPU profile's llama.cpp tree with the kit's own flags and build code, each serving a small
Q4_K model (tests/gpu/qwen35_gguf.py --tiny --quant q4_k_m) with and without `--no-repack`.
Records whether each served, the load lines that name the buffer types, llama-bench of each,
and how many AVX-512 (zmm) and AMX (tile) instructions each binary holds.

    python tests/gpu/cpu_amx.py --src carry/llama.cpp-lcp0.3.36.tar.gz --work build/cpu \
        --out $OUT
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()

from local_build import run_build  # noqa: E402

from beekeeper.core.build import BuildSpec  # noqa: E402
from beekeeper.core.cpu import X86_64_V3, CpuBaseline  # noqa: E402

# What the kit built before: the builder's own CPU, AVX-512 and AMX included where it has them.
NATIVE = CpuBaseline(name="native", machine="x86_64", needs_flags=(),
                     cmake_flags=("-DGGML_NATIVE=ON",))
LOAD_LINES = re.compile(r"AMX|REPACK|buffer size|system_info|AVX512|Segmentation|signal|"
                        r"threadpool")


def spec(cpu: CpuBaseline) -> BuildSpec:
    return BuildSpec(ref="lcp0.3.36",
                     backend="cpu", cuda_version="-", cuda_arch=None, fa_all_quants=False,
                     build_base="-", runtime_base="-", jobs=0,
                     image_repo="beekeeper/llama-server", cpu=cpu)


def serve(binary: Path, model: Path, port: int, extra: list[str], log: Path) -> dict:
    """Start the server, wait for /health or its exit, ask for 8 tokens, stop it."""
    cmd = [str(binary), "-m", str(model), "-c", "512", "--host", "127.0.0.1",
           "--port", str(port), *extra]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    result: dict = {"cmd": cmd[1:], "served": False}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                r = httpx.post(f"http://127.0.0.1:{port}/completion", timeout=60,
                               json={"prompt": "Hello", "n_predict": 8})
                result["served"] = r.status_code == 200
                result["tokens"] = r.json().get("tokens_predicted") if r.is_success else None
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    time.sleep(1)  # a crash in the first compute after /health shows here
    result["exit"] = proc.poll()  # None: still serving; -11: SIGSEGV
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text(errors="replace").splitlines()
    result["log"] = [line for line in text if LOAD_LINES.search(line)][:20]
    return result


def bench(binary: Path, model: Path, extra: list[str]) -> dict:
    cmd = [str(binary.parent / "llama-bench"), "-m", str(model), "-p", "256", "-n", "32",
           "-r", "3", "-o", "json", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"cmd": cmd[1:], "exit": r.returncode, "tail": r.stderr[-800:]}
    return {"cmd": cmd[1:], "tests": [{k: t.get(k) for k in ("n_prompt", "n_gen", "avg_ts",
                                                             "stddev_ts", "n_threads")}
                                      for t in json.loads(r.stdout)]}


def isa_counts(binary: Path) -> dict[str, int]:
    """Instructions that use AVX-512 registers (zmm) and AMX tiles (tmm), from objdump."""
    if not shutil.which("objdump"):
        return {}
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(binary)],
                          capture_output=True, text=True).stdout
    return {"zmm": len(re.findall(r"%zmm\d", text)), "tmm": len(re.findall(r"%tmm\d", text)),
            "ymm": len(re.findall(r"%ymm\d", text))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", required=True, action="append")
    ap.add_argument("--builds", default="native,x86-64-v3")
    ap.add_argument("--threads", default="0", help="comma list; 0: the server's default")
    a = ap.parse_args()
    work, out = Path(a.work), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not (work / "src" / "CMakeLists.txt").exists():
        with tarfile.open(a.src) as tar:
            tar.extractall(work, filter="data")
    results: dict = {"cpu": Path("/proc/cpuinfo").read_text().split("\n\n")[0]}
    port = 8200
    for cpu in (c for c in (NATIVE, X86_64_V3) if c.name in a.builds.split(",")):
        s = replace(spec(cpu))
        binary, secs = run_build(s, work / "src", work / f"build-{cpu.name}",
                                 out / f"build-{cpu.name}.log", jobs=16)
        r: dict = {"cmake_flags": s.cmake_flags, "build_s": round(secs, 1),
                   "isa": isa_counts(binary)}
        for model in map(Path, a.model):
            for t in a.threads.split(","):
                threads = ["-t", t] if t != "0" else []
                for extra in ([], ["--no-repack"]):
                    port += 1
                    key = f"serve {model.stem} t{t}{' no-repack' if extra else ''}"
                    r[key] = serve(binary, model, port, ["-lv", "4", *threads, *extra],
                                   out / f"serve-{cpu.name}-{port}.log")
            r[f"bench {model.stem}"] = bench(binary, model, [])
        results[cpu.name] = r
        print(json.dumps({k: v for k, v in r.items() if k != "cmake_flags"}, indent=1),
              flush=True)
    (out / "cpu-amx.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
