"""
GPU tier on the real engine: beellama built with the kit's build code, each profile served
with exactly `PROFILES[name].server.args(...)` (plus the unit's --host/--port/--alias), and
measured with the kit's verify code (prompts, client, metrics, settled_ttft, the NVML sampler)
beside the engine baseline (`llama-bench` of the same build, verify/engine.py's commands).

On the GPU machine, three steps (the build runs in the background across calls):

    python tests/gpu/beellama_tier.py build  --src carry/beellama-src.tar.gz --work W --jobs 16
    python tests/gpu/beellama_tier.py models --work W
    python tests/gpu/beellama_tier.py measure --work W --out $OUT --items ITEMS --budget-s 540

ITEMS is a comma list of `profile[+variant]`; variants (one change at a time):
  (none)   the profile's exact command line
  bs       + `--backend-sampling` (beellama: the sampler chain runs on the GPU)
  greedy   + `--samplers top_k --top-k 1` (a diagnostic only: it changes the server's
           default sampling, so it is no candidate default)
  ubN      the profile with ubatch N (and batch max(2048, N)): served TTFT, engine prefill,
           VRAM; decode is not re-run (a decode step is one token, under any ubatch)
  ctxN     the profile with -c N (is the context allocated a cost for decode?): decode at
           the depths that fit in N only
  bsctxN   backend sampling as a setting (ubatch unchanged) with -c N, likewise
  bsubN    backend sampling as a setting (`ServerSettings.backend_sampling`, so the planner
           counts its buffer) with ubatch N and batch max(2048, N): the full set (decode at
           both depths, TTFT, llama-bench decode and prefill at that ubatch, whose figures
           are this item's engine baseline): can a smaller ubatch pay for the sampler buffer?

Served decode is repeated (--decode-reps, same prompt, `cache_prompt` on so only the first
repeat pays the prefill); the spread is reported. Answers of random weights are noise, so
NIAH is not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()  # the kit from this checkout, installed or not

from gpu_tier import nvcc_version, stop_server  # noqa: E402

from beekeeper.core.build import BuildSpec  # noqa: E402
from beekeeper.core.profiles import PROFILES, Profile  # noqa: E402

COMMIT = "ba1fdce591f5a845cdbf6642767ecc1f8238519d"
MODELS = {"q8_0": "qwen35-9b-shaped-q8_0.gguf", "q4_k_m": "qwen35-9b-shaped-q4_k_m.gguf"}
# rough seconds per item kind, to skip what cannot finish inside the call's budget
EST_S = {"full": 190, "decode": 55, "ub": 110, "ctx": 45}


def model_quant(profile: Profile) -> str:
    return "q4_k_m" if "q4_k_m" in profile.model.filename.lower() else "q8_0"


def build_spec(arch: str, profiles: list[str], jobs: int) -> BuildSpec:
    return BuildSpec(ref=COMMIT, backend="cuda",
                     cuda_version=nvcc_version(), cuda_arch=arch,
                     fa_all_quants=any(PROFILES[p].server.needs_fa_all_quants
                                       for p in profiles),
                     build_base="-", runtime_base="-", jobs=jobs,
                     image_repo="beekeeper/llama-server", webui=False)


def cmd_build(a: argparse.Namespace) -> int:
    from local_build import run_build

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "src" / "CMakeLists.txt").exists():
        with tarfile.open(a.src) as tar:
            tar.extractall(work, filter="data")  # the packer's top folder is src/
    spec = build_spec(a.arch, a.profiles.split(","), a.jobs or 0)
    info: dict[str, Any] = {"commit": COMMIT, "tag_equivalent": spec.tag(),
                            "cmake_flags": spec.cmake_flags, "fa_all_quants":
                            spec.fa_all_quants, "nvcc": spec.cuda_version,
                            "nproc": os.cpu_count(), "jobs": a.jobs,
                            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (work / "build_info.json").write_text(json.dumps(info, indent=2))
    try:
        _, secs = run_build(spec, work / "src", work / "build", work / "build.log", jobs=a.jobs)
        info["build_s"] = round(secs, 1)
    except Exception as e:  # recorded for the measuring call, which waits on this file
        info["error"] = f"{type(e).__name__}: {e}"
    info["binary_bytes"] = {t: (work / "build" / "bin" / t).stat().st_size
                            for t in ("llama-server", "llama-bench")
                            if (work / "build" / "bin" / t).exists()}
    (work / "build_info.json").write_text(json.dumps(info, indent=2))
    print(json.dumps(info, indent=2))
    return 0 if "build_s" in info else 1


def cmd_models(a: argparse.Namespace) -> int:
    import qwen35_gguf

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    info = {}
    for quant in a.quants.split(","):
        path = work / MODELS[quant]
        t0 = time.monotonic()
        if not path.exists():
            qwen35_gguf.write(path.with_suffix(".tmp"),
                              qwen35_gguf.TINY if a.tiny else qwen35_gguf.QWEN35_9B, quant)
            path.with_suffix(".tmp").rename(path)
        info[quant] = {"bytes": path.stat().st_size, "write_s": round(time.monotonic() - t0, 1)}
        print(quant, info[quant], flush=True)
    (work / "models_info.json").write_text(json.dumps(info, indent=2))
    return 0


def variant_profile(profile: Profile, variant: str) -> tuple[Profile, list[str], str]:
    """(profile as served, extra args beyond it, kind of item)."""
    if not variant:
        return profile, [], "full"
    if variant == "bs":
        return profile, ["--backend-sampling"], "decode"
    if variant == "greedy":
        return profile, ["--samplers", "top_k", "--top-k", "1"], "decode"
    m = re.fullmatch(r"bsub(\d+)", variant)
    if m:
        ub = int(m.group(1))
        return replace(profile, server=replace(profile.server, ubatch_size=ub,
                                               batch_size=max(2048, ub),
                                               backend_sampling=True)), [], "full"
    m = re.fullmatch(r"ub(\d+)", variant)
    if m:
        ub = int(m.group(1))
        return replace(profile, server=replace(profile.server, ubatch_size=ub,
                                               batch_size=max(2048, ub))), [], "ub"
    m = re.fullmatch(r"(bs)?ctx(\d+)", variant)
    if m:
        return replace(profile, server=replace(profile.server, ctx_size=int(m.group(2)),
                                               backend_sampling=bool(m.group(1)) or
                                               profile.server.backend_sampling)), [], "ctx"
    raise SystemExit(f"unknown variant {variant!r}")


def spread(xs: list[float]) -> dict[str, Any]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "spread_pct": (max(xs) - min(xs)) / statistics.median(xs) * 100, "values": xs}


def _memory_lines(log: Path) -> list[str]:
    keep = ("memory breakdown", "CUDA0", "llama_kv_cache", "llama_memory_recurrent",
            "model buffer size", "compute buffer size", "KV buffer size", "RS buffer size",
            "sampler chain", "n_batch", "n_ubatch", "system_info", "build:")
    return [ln.strip()[:300] for ln in log.read_text(errors="replace").splitlines()
            if any(k in ln for k in keep)][:80]


def run_bench(binary: Path, args: list[str], log: Path) -> dict[str, Any]:
    from beekeeper.verify.engine import parse_bench_json
    from beekeeper.verify.vram import VramSampler

    cmd = [str(binary), *args]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    with VramSampler(interval_s=0.05) as sampler:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log.open("a"), text=True)
        sampler.pid = proc.pid
        out, _ = proc.communicate(timeout=400)
    vr = sampler.result
    res: dict[str, Any] = {"command": cmd, "wall_s": round(time.monotonic() - t0, 1),
                           "rc": proc.returncode, "peak_process_mib": vr.peak_process_mib,
                           "peak_delta_mib": vr.peak_delta_mib}
    try:
        res["tests"] = [asdict(t) for t in parse_bench_json(out)]
    except Exception as e:
        res["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps({k: v for k, v in res.items() if k != "command"})[:1500], flush=True)
    return res


def measure_item(item: str, idx: int, a: argparse.Namespace, work: Path, out: Path,
                 binaries: dict[str, Path]) -> dict[str, Any]:
    from beekeeper.core.planner import predict
    from beekeeper.verify import metrics, prompts
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.engine import bench_commands
    from beekeeper.verify.smoke import wait_healthy
    from beekeeper.verify.suites import Sizes, settled_ttft
    from beekeeper.verify.vram import VramSampler

    name, _, variant = item.partition("+")
    base = PROFILES[name]
    prof, extra, kind = variant_profile(base, variant)
    model = work / MODELS[model_quant(base)]
    sizes = Sizes.for_profile(base, quick=False)
    if a.max_tokens:  # a dry run on a CPU build
        sizes = replace(sizes, ttft_tokens=min(sizes.ttft_tokens, a.max_tokens),
                        decode_out_tokens=min(sizes.decode_out_tokens, 32),
                        decode_ctx_tokens=[min(d, a.max_tokens)
                                           for d in sizes.decode_ctx_tokens])
    if kind == "ctx":  # only the depths whose prompt and answer fit the smaller context
        sizes = replace(sizes, decode_ctx_tokens=[
            d for d in sizes.decode_ctx_tokens
            if d + sizes.decode_out_tokens + 256 <= prof.server.ctx_size])
    port = 18200 + idx
    argv = [str(binaries["llama-server"]), "--host", "127.0.0.1", "--port", str(port),
            *prof.server.args(str(model)), "--alias", base.name, *extra]
    log = out / f"server-{idx:02d}-{item.replace('+', '_')}.log"
    rec: dict[str, Any] = {"item": item, "profile": name, "variant": variant or "exact",
                           "kind": kind, "model": model.name, "server_argv": argv[1:],
                           "sizes": asdict(sizes)}
    t_item = time.monotonic()
    print(f"\n=== {item}\n$ {' '.join(argv)}", flush=True)
    with VramSampler(interval_s=0.05) as sampler:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=log.open("w"), stderr=subprocess.STDOUT)
        sampler.pid = proc.pid
        try:
            with ServerClient(f"http://127.0.0.1:{port}") as client:
                ok, why = False, "not started"
                while not ok and proc.poll() is None and time.monotonic() - t0 < 240:
                    ok, why = wait_healthy(client, 2)
                if not ok:
                    raise RuntimeError(f"server not healthy (exit {proc.poll()}): {why}")
                rec["ready_s"] = round(time.monotonic() - t0, 1)
                # one short request first: the first one after start pays one-time costs
                client.stream_chat([{"role": "user", "content": "Warm up."}], max_tokens=16,
                                   ignore_eos=True)
                if kind in ("full", "decode", "ctx"):
                    rec["decode"] = []
                    for depth in sizes.decode_ctx_tokens:
                        msgs, n = prompts.long_prompt(client, depth, seed=depth)
                        runs = [client.stream_chat(msgs, max_tokens=sizes.decode_out_tokens,
                                                   ignore_eos=True, seed=depth,
                                                   cache_prompt=True)
                                for _ in range(a.decode_reps)]
                        d = {"ctx_tokens": n, "out_tokens": [r.completion_tokens for r in runs],
                             "client_tok_s": spread([metrics.decode_tok_s(r) for r in runs]),
                             "server_tok_s": spread([(r.timings or {}).get(
                                 "predicted_per_second") for r in runs]),
                             "cache_n": [(r.timings or {}).get("cache_n") for r in runs],
                             "errors": [r.error for r in runs if not r.ok]}
                        rec["decode"].append(d)
                        print(json.dumps({k: v for k, v in d.items()})[:600], flush=True)
                if kind in ("full", "ub") and a.ttft_requests:
                    res = settled_ttft(client, sizes.ttft_tokens, a.ttft_requests)
                    recs, ns = res.records, res.prompt_tokens
                    rec["ttft"] = {"n_tokens": ns, "ttft_s": spread([r.ttft_s for r in recs]),
                                   "p95_s": metrics.percentile(
                                       [r.ttft_s for r in recs if r.ttft_s], 95)
                                   if any(r.ttft_s for r in recs) else None,
                                   "server_prompt_ms": [(r.timings or {}).get("prompt_ms")
                                                        for r in recs],
                                   "cache_n": [(r.timings or {}).get("cache_n") for r in recs],
                                   "errors": [r.error for r in recs if not r.ok]}
                    print(json.dumps(rec["ttft"])[:600], flush=True)
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"
            print(rec["error"], flush=True)
        finally:
            stop_server(proc)
    vr = sampler.result
    rec["vram"] = {k: v for k, v in asdict(vr).items() if k != "samples"}
    rec["vram"]["samples_n"] = len(vr.samples)
    pred = predict(prof, model, card="NVIDIA H200")
    rec["planner"] = pred.to_json()
    if vr.peak_process_mib:
        rec["planner_process_error_pct"] = (pred.total_mib - vr.peak_process_mib) \
            / vr.peak_process_mib * 100
    if vr.peak_delta_mib:
        rec["planner_rise_error_pct"] = (pred.total_rise_mib - vr.peak_delta_mib) \
            / vr.peak_delta_mib * 100
    rec["server_log_lines"] = _memory_lines(log)
    # the engine baseline of the same build, with the service stopped (verify/engine.py)
    if kind in ("full", "ub") and a.bench_reps and "error" not in rec:
        cmds = bench_commands(prof, str(model), depths_tokens=sizes.decode_ctx_tokens,
                              out_tokens=sizes.decode_out_tokens,
                              prompt_tokens=sizes.ttft_tokens, reps=a.bench_reps)
        if kind == "ub":
            cmds = cmds[1:]  # prefill only
        blog = out / f"bench-{idx:02d}.log"
        rec["engine"] = [run_bench(binaries["llama-bench"], c, blog) for c in cmds]
    rec["item_s"] = round(time.monotonic() - t_item, 1)
    return rec


def ratios(rec: dict[str, Any], engine_rec: dict[str, Any] | None) -> None:
    """Served / engine at each depth and for TTFT (engine prefill + one decode step)."""
    if not engine_rec:
        return
    tests = [t for b in engine_rec.get("engine", []) for t in b.get("tests", [])]
    dec = [t for t in tests if t["n_gen"] > 0]
    pre = [t for t in tests if t["n_prompt"] > 0 and t["n_gen"] == 0]
    out = {}
    for d in rec.get("decode", []):
        if not dec or not d["client_tok_s"].get("n"):
            continue
        best = min(dec, key=lambda t: abs(t["n_depth"] - d["ctx_tokens"]))
        out[f"decode_{d['ctx_tokens']}"] = {
            "engine_tok_s": best["avg_tok_s"], "engine_stddev_tok_s": best["stddev_tok_s"],
            "engine_depth": best["n_depth"],
            "served_client_over_engine": d["client_tok_s"]["median"] / best["avg_tok_s"],
            "served_client_over_engine_min_max": [d["client_tok_s"]["min"] / best["avg_tok_s"],
                                                  d["client_tok_s"]["max"] / best["avg_tok_s"]],
            "served_server_over_engine": (d["server_tok_s"].get("median") or 0)
            / best["avg_tok_s"]}
    t = rec.get("ttft", {}).get("ttft_s", {})
    if pre and t.get("n"):
        p = pre[-1]
        first = min(dec, key=lambda x: abs(x["n_depth"] - p["n_prompt"])) if dec else None
        eng = p["avg_s"] + (1 / first["avg_tok_s"] if first else 0)
        out["ttft"] = {"engine_prefill_s": p["avg_s"], "engine_prefill_tok_s": p["avg_tok_s"],
                       "engine_ttft_s": eng, "served_over_engine": t["median"] / eng}
    rec["served_vs_engine"] = out


def _smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                               "clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        return "no nvidia-smi"


def cmd_measure(a: argparse.Namespace) -> int:
    t_start = time.monotonic()
    work, out = Path(a.work), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    info_path = work / "build_info.json"
    binaries = {t: work / "build" / "bin" / t for t in ("llama-server", "llama-bench")}
    while True:  # the build runs in the background, started by an earlier call
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
        if "build_s" in info or "error" in info:
            break
        if time.monotonic() - t_start > a.wait_build_s:
            print("build not finished", flush=True)
            break
        time.sleep(5)
    waited = round(time.monotonic() - t_start, 1)
    print(f"waited {waited} s for the build: {json.dumps(info)}", flush=True)
    if "error" in info or not all(b.exists() for b in binaries.values()):
        log = work / "build.log"
        if log.exists():
            print("\n".join(log.read_text(errors="replace").splitlines()[-40:]))
        return 1
    from gpu_tier import measure_bandwidth_gb_s

    result: dict[str, Any] = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(sys.argv), "build": info, "waited_for_build_s": waited,
        "models": json.loads((work / "models_info.json").read_text())
        if (work / "models_info.json").exists() else None,
        "gpu": _smi(),
        "niah": "not run: random weights give noise answers",
        "bandwidth": measure_bandwidth_gb_s() if a.bandwidth else None,
        "items": [], "skipped": []}
    dest = out / a.name
    engine_by_profile: dict[str, dict[str, Any]] = {}
    for idx, item in enumerate(a.items.split(",")):
        kind = variant_profile(PROFILES[item.partition("+")[0]], item.partition("+")[2])[2]
        left = a.budget_s - (time.monotonic() - t_start)
        if left < EST_S[kind]:
            result["skipped"].append({"item": item, "left_s": round(left)})
            print(f"skip {item}: {left:.0f} s left", flush=True)
            continue
        rec = measure_item(item, idx, a, work, out, binaries)
        if rec["variant"] == "exact" and rec.get("engine"):
            engine_by_profile[rec["profile"]] = rec
        ratios(rec, rec if rec.get("engine") and rec["kind"] == "full"
               else engine_by_profile.get(rec["profile"]))
        if rec["kind"] == "ub":  # served TTFT against its own ubatch's engine prefill
            ratios(rec, {"engine": rec.get("engine", []) + [
                b for b in (engine_by_profile.get(rec["profile"]) or {}).get("engine", [])
                if any(t["n_gen"] > 0 for t in b.get("tests", []))]})
        print(json.dumps(rec.get("served_vs_engine")), flush=True)
        result["items"].append(rec)
        dest.write_text(json.dumps(result, indent=2))
    result["total_s"] = round(time.monotonic() - t_start, 1)
    dest.write_text(json.dumps(result, indent=2))
    return 0


def _f(x: Any, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def _dec(rec: dict[str, Any], i: int) -> tuple[str, str]:
    """('median (min-max)', 'served/engine') for the i-th decode depth of an item."""
    ds = rec.get("decode") or []
    if i >= len(ds) or not ds[i]["client_tok_s"].get("n"):
        return "-", "-"
    d = ds[i]["client_tok_s"]
    r = (rec.get("served_vs_engine") or {}).get(f"decode_{ds[i]['ctx_tokens']}")
    if not r:
        return f"{d['median']:.1f} ({d['min']:.1f}-{d['max']:.1f}) @{ds[i]['ctx_tokens']}", "-"
    lo, hi = r["served_client_over_engine_min_max"]
    ratio = f"{r['served_client_over_engine']:.3f} ({lo:.3f}-{hi:.3f}) of {r['engine_tok_s']:.1f}"
    return f"{d['median']:.1f} ({d['min']:.1f}-{d['max']:.1f}) @{ds[i]['ctx_tokens']}", ratio


def cmd_report(a: argparse.Namespace) -> int:
    """Markdown tables from one or more measure JSONs (the recorded run's README body)."""
    items = [it for path in a.json for it in json.loads(Path(path).read_text())["items"]]
    lines = ["| profile | variant | decode tok/s, depth 1 (median, min-max) | served/engine "
             "| decode tok/s, depth 2 | served/engine | TTFT s (median, min-max) @ tokens "
             "| served/engine TTFT | peak MiB process / rise | planner MiB process / rise "
             "| planner error process / rise |", "|" + "---|" * 11]
    for r in items:
        d1, r1 = _dec(r, 0)
        d2, r2 = _dec(r, 1)
        t = (r.get("ttft") or {}).get("ttft_s") or {}
        ttft = (f"{t['median']:.2f} ({t['min']:.2f}-{t['max']:.2f}) @{r['ttft']['n_tokens'][0]}"
                if t.get("n") else "-")
        te = (r.get("served_vs_engine") or {}).get("ttft")
        te_s = f"{te['served_over_engine']:.3f} of {te['engine_ttft_s']:.2f} s" if te else "-"
        v, p = r.get("vram") or {}, r.get("planner") or {}
        lines.append(
            f"| {r['profile']} | {r['variant']} | {d1} | {r1} | {d2} | {r2} | {ttft} | {te_s} | "
            f"{_f(v.get('peak_process_mib'), '.0f')} / {_f(v.get('peak_delta_mib'), '.0f')} | "
            f"{_f(p.get('total_mib'), '.0f')} / {_f(p.get('total_rise_mib'), '.0f')} | "
            f"{_f(r.get('planner_process_error_pct'), '+.1f')}% / "
            f"{_f(r.get('planner_rise_error_pct'), '+.1f')}% |"
            + (f" error: {r['error']}" if r.get("error") else ""))
    lines += ["", "| profile | variant | engine prefill (llama-bench pp) tok/s | s | "
              "peak MiB of llama-bench | server compute buffer (log) |", "|" + "---|" * 6]
    for r in items:
        pre = [t for b in r.get("engine", []) for t in b.get("tests", []) if t["n_gen"] == 0]
        peaks = [b.get("peak_process_mib") for b in r.get("engine", []) if any(
            t["n_gen"] == 0 for t in b.get("tests", []))]
        cb = list(dict.fromkeys(  # once each: the server reserves again per request
            ln.split("compute buffer size =")[-1].strip() for ln in r.get("server_log_lines", [])
            if "CUDA0 compute buffer size" in ln))
        for t in pre:
            lines.append(f"| {r['profile']} | {r['variant']} | {t['avg_tok_s']:.0f} "
                         f"(sd {t['stddev_tok_s']:.0f}) @{t['n_prompt']} | {t['avg_s']:.2f} | "
                         f"{_f(peaks[0] if peaks else None, '.0f')} | {', '.join(cb) or '-'} |")
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--src", required=True)
    b.add_argument("--work", required=True)
    b.add_argument("--arch", default="90")
    b.add_argument("--jobs", type=int, default=16)
    b.add_argument("--profiles", default="q8-turbo4-64k,q8-turbo3-64k,q8-turbo3tcq-64k,"
                   "q4km-f16-32k,q8-f16-4k", help="FA_ALL_QUANTS only if one needs it")
    mo = sub.add_parser("models")
    mo.add_argument("--work", required=True)
    mo.add_argument("--quants", default="q8_0,q4_k_m")
    mo.add_argument("--tiny", action="store_true", help="small models of the same layout "
                    "(a dry run of the script on a CPU build)")
    m = sub.add_parser("measure")
    m.add_argument("--work", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--name", default="beellama_tier.json")
    m.add_argument("--items", required=True)
    m.add_argument("--budget-s", type=float, default=540)
    m.add_argument("--wait-build-s", type=float, default=200)
    m.add_argument("--decode-reps", type=int, default=3)
    m.add_argument("--ttft-requests", type=int, default=3)
    m.add_argument("--bench-reps", type=int, default=3)
    m.add_argument("--bandwidth", action="store_true")
    m.add_argument("--max-tokens", type=int, help="cap prompt sizes (dry runs on a CPU build)")
    r = sub.add_parser("report")
    r.add_argument("json", nargs="+")
    a = ap.parse_args(argv)
    return {"build": cmd_build, "models": cmd_models, "measure": cmd_measure,
            "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
