"""
GPU tier: build llama-server with the kit's native-build code, make a Qwen3.5-9B-shaped
Q8_0 model, serve it with the kit's server settings, and measure it with the kit's verify
suites, NVML sampler and VRAM planner. Runs on the GPU machine in two invocations:

    python tests/gpu/gpu_tier.py build   --src carry/llama.cpp-SRC.tar.gz --work build/gpu
    python tests/gpu/gpu_tier.py measure --work build/gpu --out $OUT

Answers of the random-weight model are noise, so NIAH is not run here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()  # the kit from this checkout, installed or not

from local_build import run_build  # noqa: E402

from beekeeper.core.build import BuildSpec  # noqa: E402
from beekeeper.core.planner import kv_cache_bytes, predict  # noqa: E402
from beekeeper.core.profiles import PROFILES, Profile, ServerSettings  # noqa: E402

MODEL_NAME = "qwen35-9b-shaped-q8_0.gguf"


def nvcc_version() -> str:
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
        m = re.search(r"release (\d+\.\d+)", out)
        return m.group(1) if m else "unknown"
    except FileNotFoundError:
        return "none"


def cmd_build(args: argparse.Namespace) -> int:
    work = Path(args.work)
    src = work / "src"
    if not (src / "CMakeLists.txt").exists():
        with tarfile.open(args.src) as tar:
            tar.extractall(work, filter="data")  # the tarball's top folder is src/
    ref = Path(args.src).name.removeprefix("llama.cpp-").removesuffix(".tar.gz")
    spec = BuildSpec(ref=ref,
                     backend=args.backend, cuda_version=nvcc_version(),
                     cuda_arch=args.arch if args.backend == "cuda" else None,
                     fa_all_quants=False, build_base="-", runtime_base="-",
                     jobs=0, image_repo="beekeeper/llama-server")
    info: dict = {"tag_equivalent": spec.tag(), "cmake_flags": spec.cmake_flags,
                  "nvcc": spec.cuda_version, "nproc": os.cpu_count()}
    binary = work / "build" / "bin" / "llama-server"
    if binary.exists() and not args.rebuild:
        print(f"{binary} exists; skipping build")
    else:
        _, secs = run_build(spec, src, work / "build", work / "build.log", jobs=args.jobs)
        info["build_s"] = round(secs, 1)
        print(f"build done in {secs:.0f} s")
    model = work / MODEL_NAME
    if not model.exists():
        import qwen35_gguf

        t0 = time.monotonic()
        qwen35_gguf.write(model, qwen35_gguf.TINY if args.tiny else qwen35_gguf.QWEN35_9B)
        info["model_write_s"] = round(time.monotonic() - t0, 1)
    info["model_bytes"] = model.stat().st_size
    (work / "build_info.json").write_text(json.dumps(info, indent=2))
    print(json.dumps(info, indent=2))
    return 0


def measure_bandwidth_gb_s() -> dict:
    """Device-to-device copy: bytes read + written per second (the decode roofline input)."""
    try:
        import torch
    except ImportError:
        return {"skipped": "no torch"}
    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device"}
    n = 2 * 2**30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        b.copy_(a)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    del a, b
    torch.cuda.empty_cache()
    return {"copy_gb_s": 2 * n * reps / dt / 1e9, "buffer_gib": 2, "reps": reps,
            "device": torch.cuda.get_device_name(0)}


def _tier_profile(kv: str, ctx: int, parallel: int = 1) -> Profile:
    base = PROFILES["q8-f16-4k"]
    return replace(base, name=f"qwen35-9b-shaped-q8-{kv}-{ctx // 1024}k-np{parallel}",
                   server=ServerSettings(ctx_size=ctx, cache_type_k=kv, cache_type_v=kv,
                                         parallel=parallel, jinja=False,
                                         chat_template="chatml", reasoning_off=False))


def _start(binary: Path, model: Path, settings: ServerSettings, port: int, log: Path):
    args = [str(binary), *settings.args(str(model)), "--host", "127.0.0.1", "--port",
            str(port), "-lv", "4", "--no-warmup"]
    print("$ " + " ".join(args), flush=True)
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT), args


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server started for a measurement: SIGTERM, then SIGKILL after 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _memory_lines(log: Path) -> list[str]:
    keep = ("memory breakdown", "CUDA0", "llama_kv_cache", "llama_memory_recurrent",
            "model buffer size", "compute buffer size", "KV buffer size", "RS buffer size")
    return [ln.strip() for ln in log.read_text(errors="replace").splitlines()
            if any(k in ln for k in keep)][:60]


def cmd_measure(args: argparse.Namespace) -> int:
    from beekeeper.verify import metrics
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.smoke import wait_healthy
    from beekeeper.verify.suites import run_decode, settled_ttft
    from beekeeper.verify.vram import VramSampler

    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    binary = Path(args.server_bin) if args.server_bin else work / "build" / "bin" / "llama-server"
    model = Path(args.model) if args.model else work / MODEL_NAME
    result: dict = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "command": " ".join(sys.argv), "host": platform.node(),
                    "build": json.loads((work / "build_info.json").read_text())
                    if (work / "build_info.json").exists() else None,
                    "model_bytes": model.stat().st_size,
                    "niah": "not run: random weights give noise answers",
                    "bandwidth": measure_bandwidth_gb_s(), "configs": []}
    bw = result["bandwidth"].get("copy_gb_s")
    from beekeeper.core.planner import layout_from_gguf

    layout, gpu_weight_bytes = layout_from_gguf(model)
    result["gpu_weight_bytes"] = gpu_weight_bytes
    for spec in args.kv.split(","):
        # "kv" or "kv@ctx" or "kv@ctx@parallel": several shapes in one run
        parts = spec.split("@")
        kv = parts[0]
        ctx_s = parts[1] if len(parts) > 1 else str(args.ctx)
        par_s = parts[2] if len(parts) > 2 else "1"
        prof = _tier_profile(kv, int(ctx_s), int(par_s))
        log = out / f"server-{kv}-{ctx_s}-{par_s}.log"
        port = 18100
        with VramSampler(interval_s=0.05) as sampler:
            proc, argv = _start(binary, model, prof.server, port, log)
            cfg: dict = {"kv": kv, "ctx_size": int(ctx_s), "parallel": int(par_s),
                         "server_args": argv[1:]}
            try:
                with ServerClient(f"http://127.0.0.1:{port}") as client:
                    ok, why = wait_healthy(client, 300)
                    if not ok:
                        raise RuntimeError(f"server not healthy: {why}")
                    sampler.pid = proc.pid
                    for ctx in [int(c) for c in args.decode_ctx.split(",")]:
                        run = run_decode(client, ctx, args.out_tokens, seed=ctx)
                        kv_k, kv_v = kv_cache_bytes(ctx, layout, kv, kv)
                        bytes_per_tok = gpu_weight_bytes + kv_k + kv_v
                        roof = bw * 1e9 / bytes_per_tok if bw else None
                        cfg.setdefault("decode", []).append({
                            "ctx_tokens": run.ctx_tokens, "out_tokens":
                                run.record.completion_tokens,
                            "decode_tok_s": run.decode_tok_s,
                            "server_predicted_per_second": run.server_predicted_per_second,
                            "client_over_server": (run.decode_tok_s or 0) /
                                (run.server_predicted_per_second or 1),
                            "windowed_tok_s_min_max": [min(run.windowed_tok_s, default=0),
                                                       max(run.windowed_tok_s, default=0)],
                            "bytes_read_per_token": bytes_per_tok,
                            "roofline_tok_s": roof,
                            "roofline_fraction": (run.decode_tok_s or 0) / roof if roof else None,
                            "ok": run.record.ok, "error": run.record.error,
                        })
                        print(json.dumps(cfg["decode"][-1]), flush=True)
                    if args.ttft_requests:
                        res = settled_ttft(client, args.ttft_tokens, args.ttft_requests)
                        recs, ns = res.records, res.prompt_tokens
                        ttfts = [r.ttft_s for r in recs if r.ttft_s is not None]
                        cfg["ttft"] = {
                            "n_tokens": ns, "ttft_s": ttfts,
                            "median_s": metrics.median(ttfts) if ttfts else None,
                            "p95_s": metrics.percentile(ttfts, 95) if ttfts else None,
                            "p95_method": metrics.PERCENTILE_METHOD,
                            "cache_n": [(r.timings or {}).get("cache_n") for r in recs],
                            "server_prompt_ms": [(r.timings or {}).get("prompt_ms")
                                                 for r in recs]}
                        print(json.dumps({k: v for k, v in cfg["ttft"].items()}), flush=True)
            except Exception as e:
                cfg["error"] = f"{type(e).__name__}: {e}"
                print(cfg["error"], flush=True)
            finally:
                stop_server(proc)
        vr = sampler.result
        pred = predict(prof, model)
        # the sampler started before the server here: its rise is over the idle card
        measured = (vr.server_peak_mib if vr.server_peak_mib is not None
                    else vr.peak_delta_mib)
        cfg["vram"] = {k: v for k, v in asdict(vr).items() if k != "samples"}
        cfg["vram"]["samples_n"] = len(vr.samples)
        step = max(1, len(vr.samples) // 400)
        cfg["vram_series_mib"] = [round(s.used_mib) for s in vr.samples[::step]]
        cfg["planner"] = pred.to_json()
        cfg["planner_error_pct"] = ((pred.total_mib - measured) / measured * 100
                                    if measured else None)
        cfg["server_memory_log"] = _memory_lines(log)
        result["configs"].append(cfg)
        (out / "gpu_tier.json").write_text(json.dumps(result, indent=2))  # partial results
        print(json.dumps({"kv": kv, "peak_mib": measured, "predicted_mib": pred.total_mib}),
              flush=True)
    (out / "gpu_tier.json").write_text(json.dumps(result, indent=2))
    (out / "gpu_tier.md").write_text(markdown(result))
    print((out / "gpu_tier.md").read_text())
    return 0


def markdown(r: dict) -> str:
    from beekeeper.verify.vram import server_peak_mib

    bw = r["bandwidth"]
    lines = [f"# GPU tier: Qwen3.5-9B-shaped Q8_0 (random weights) on {bw.get('device', '?')}",
             "", f"- date (UTC): {r['date_utc']}", f"- command: `{r['command']}`",
             f"- build: {json.dumps(r['build'])}" if r["build"] else "- build: (given binary)",
             f"- model file: {r['model_bytes']} bytes; weights on GPU "
             f"{r['gpu_weight_bytes']} bytes",
             f"- measured copy bandwidth: {bw.get('copy_gb_s', 0):.0f} GB/s "
             "(device-to-device copy, read + write)",
             f"- NIAH: {r['niah']}", "",
             "| KV | ctx | decode tok/s | server tok/s | roofline tok/s | fraction |",
             "|---|---|---|---|---|---|"]
    for c in r["configs"]:
        for d in c.get("decode", []):
            lines.append(f"| {c['kv']} | {d['ctx_tokens']} | {d['decode_tok_s'] or 0:.1f} | "
                         f"{d['server_predicted_per_second'] or 0:.1f} | "
                         f"{d['roofline_tok_s'] or 0:.0f} | {d['roofline_fraction'] or 0:.2f} |")
    lines += ["", "| KV | server ctx x slots | TTFT median s | TTFT p95 s (nearest-rank) | n "
              "| peak VRAM MiB | predicted MiB | planner error | sampler Hz / CPU s |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in r["configs"]:
        t = c.get("ttft") or {}
        v = c["vram"]
        peak = server_peak_mib(v)  # else the rise over the idle card this tier sampled first
        peak = (v.get("peak_delta_mib") or 0) if peak is None else peak
        lines.append(f"| {c['kv']} | {c['ctx_size']} x {c.get('parallel', 1)} | "
                     f"{t.get('median_s') or 0:.2f} | {t.get('p95_s') or 0:.2f} |"
                     f" {len(t.get('ttft_s', []))} | {peak:.0f} | "
                     f"{c['planner']['total_mib']:.0f} | {c['planner_error_pct'] or 0:+.1f}% | "
                     f"{v.get('achieved_hz') or 0:.0f} / {v.get('sampler_cpu_s') or 0:.2f} |")
    for c in r["configs"]:
        if c.get("error"):
            lines.append(f"\nerror ({c['kv']}): {c['error']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--src", required=True)
    b.add_argument("--work", default="build/gpu")
    b.add_argument("--arch", default="90")
    b.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    b.add_argument("--tiny", action="store_true")
    b.add_argument("--rebuild", action="store_true")
    # The GPU machine's VM reports a small MemTotal until memory is touched, so the kit's
    # memory-bounded job count would under-use its 16 cores: give the count here.
    b.add_argument("--jobs", type=int)
    m = sub.add_parser("measure")
    m.add_argument("--work", default="build/gpu")
    m.add_argument("--out", required=True)
    m.add_argument("--server-bin")
    m.add_argument("--model")
    m.add_argument("--kv", default="f16,q8_0")
    m.add_argument("--ctx", type=int, default=65536)
    m.add_argument("--decode-ctx", default="4096,60000")
    m.add_argument("--out-tokens", type=int, default=512)
    m.add_argument("--ttft-tokens", type=int, default=60000)
    m.add_argument("--ttft-requests", type=int, default=5)
    args = ap.parse_args(argv)
    return cmd_build(args) if args.cmd == "build" else cmd_measure(args)


if __name__ == "__main__":
    sys.exit(main())
