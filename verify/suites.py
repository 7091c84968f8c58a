"""
Run verification suites against a server, check them against the profile, write reports.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from beekeeper.core.profiles import Profile

from . import metrics, prompts
from .client import RequestRecord, ServerClient
from .engine import EngineBaseline, EngineError, Shell, measure as measure_engine
from .judge import (
    DECODE_FLOOR,
    DECODE_FLOOR_CPU,
    VramFigures,
    judge_decode,
    judge_reference_decode,
    judge_reference_ttft,
    judge_ttft,
    judge_vram,
)
from .smoke import Check, run_smoke, wait_healthy
from .vram import VramResult, VramSampler

ALL_SUITES = ["engine", "smoke", "decode", "ttft", "niah", "vram", "load"]
NEEDLE_RE = r"(?<!\d)\d{7}(?!\d)"
NIAH_OUT_TOKENS = 24
CTX_MARGIN_TOKENS = 16  # room for the template's end tokens beyond the fitted prompt


@dataclass
class Sizes:
    """How big each suite runs; `quick` sizes suit a CPU server and CI. Every size fits one
    slot of the profile's context (-c / -np), so no request is refused for its length."""

    decode_ctx_tokens: list[int]
    decode_out_tokens: int
    ttft_tokens: int
    ttft_requests: int
    niah_tokens: int
    niah_cases: int = 10
    load_clients: int = 4
    load_seconds: float = 20.0
    load_out_tokens: int = 16

    @classmethod
    def for_profile(cls, profile: Profile, quick: bool) -> Sizes:
        e = profile.expected
        slot = profile.server.ctx_size // max(profile.server.parallel, 1)
        out = 160 if quick else 512
        room = slot - out - CTX_MARGIN_TOKENS
        wanted = [e.decode_ctx_tokens] if quick else sorted({4096, e.decode_ctx_tokens})
        depths = [d for d in wanted if 0 < d <= room] or [max(room, 1)]
        ttft = min(512 if quick else depths[-1], slot - CTX_MARGIN_TOKENS)
        niah = min(e.niah_tokens, slot - NIAH_OUT_TOKENS - CTX_MARGIN_TOKENS)
        return cls(decode_ctx_tokens=depths, decode_out_tokens=out, ttft_tokens=ttft,
                   ttft_requests=5 if quick else 20, niah_tokens=niah)


@dataclass
class DecodeRun:
    ctx_tokens: int
    out_tokens_requested: int
    decode_tok_s: float | None
    server_predicted_per_second: float | None
    windowed_tok_s: list[float]
    record: RequestRecord


@dataclass
class NiahCase:
    seed: int
    depth: float
    prompt_tokens: int | None  # as the server counted them (usage.prompt_tokens)
    fitted_tokens: int  # as the prompt builder counted them (/apply-template + /tokenize)
    expected: str
    answer: str
    found: list[str]
    passed: bool
    error: str | None = None  # the request's failure (HTTP status, timeout), if it failed


@dataclass
class Report:
    """A verify run: config echo, every check, raw records per suite."""

    profile: str
    url: str
    started_utc: str
    host: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    suites: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    planner: dict[str, Any] | None = None
    engine: EngineBaseline | None = None
    out_dir: str | None = None
    budget_mib: float | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def run_decode(client: ServerClient, ctx: int, out_tokens: int, seed: int) -> DecodeRun:
    msgs, n = prompts.long_prompt(client, ctx, seed=seed)
    rec = client.stream_chat(msgs, max_tokens=out_tokens, ignore_eos=True, seed=seed)
    return DecodeRun(ctx_tokens=n, out_tokens_requested=out_tokens,
                     decode_tok_s=metrics.decode_tok_s(rec),
                     server_predicted_per_second=(rec.timings or {}).get("predicted_per_second"),
                     windowed_tok_s=metrics.windowed_tok_s(rec), record=rec)


def run_ttft(client: ServerClient, n_tokens: int, k: int, seed: int = 1000
             ) -> tuple[list[RequestRecord], list[int]]:
    """K requests, each with its own prefix and cache_prompt false; one warm-up first."""
    warm, _ = prompts.long_prompt(client, n_tokens, seed=seed - 1)
    client.stream_chat(warm, max_tokens=1)
    records, sizes = [], []
    for i in range(k):
        msgs, n = prompts.long_prompt(client, n_tokens, seed=seed + i)
        records.append(client.stream_chat(msgs, max_tokens=1, cache_prompt=False))
        sizes.append(n)
    return records, sizes


def run_niah(client: ServerClient, n_tokens: int, cases: int, prefill: str | None,
             seed_base: int = 42) -> list[NiahCase]:
    import re

    out = []
    for i in range(cases):
        rng = random.Random(seed_base + i)
        value = f"{rng.randrange(10**6, 10**7)}"
        depth = 0.05 + 0.9 * i / max(cases - 1, 1)
        msgs, n = prompts.needle_prompt(client, n_tokens, depth, value, prefill)
        rec = client.stream_chat(msgs, max_tokens=NIAH_OUT_TOKENS, cache_prompt=False)
        found = re.findall(NEEDLE_RE, rec.text)
        out.append(NiahCase(seed=seed_base + i, depth=round(depth, 3),
                            prompt_tokens=rec.prompt_tokens, fitted_tokens=n,
                            expected=value, answer=rec.text.strip(), found=found,
                            passed=bool(found) and found[0] == value, error=rec.error))
    return out


def run_load(client: ServerClient, clients: int, seconds: float, out_tokens: int
             ) -> dict[str, Any]:
    """C closed-loop streaming clients for a bounded time; every request is recorded."""
    records: list[RequestRecord] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker(idx: int) -> None:
        j = 0
        while time.monotonic() < deadline:
            msg = [{"role": "user", "content": f"{prompts.nonce(idx * 100000 + j)} "
                    "Write one sentence about bees."}]
            rec = client.stream_chat(msg, max_tokens=out_tokens, ignore_eos=True)
            with lock:
                records.append(rec)
            j += 1

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    ok = [r for r in records if r.ok]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    toks = sum(r.completion_tokens or 0 for r in ok)
    return {
        "clients": clients, "seconds": round(wall, 2), "requests": len(records),
        "failed": len(records) - len(ok), "errors": [r.error for r in records if not r.ok][:5],
        "aggregate_tok_s": toks / wall if wall else None,
        "ttft_s_median": metrics.median(ttfts) if ttfts else None,
        "ttft_s_p95": metrics.percentile(ttfts, 95) if ttfts else None,
        "per_request_decode_tok_s": [metrics.decode_tok_s(r) for r in ok],
        "records": [r.to_json() for r in records],
    }


def _gateway_suite(report: Report, client: ServerClient, direct: ServerClient | None,
                   model: str, log: Any) -> None:
    if direct is None:
        report.checks.append(Check("gateway.overhead", "SKIP", "no server to compare with: "
                                   "give --direct-url, the server behind the gateway"))
        return
    from .gateway import run_gateway

    log(f"gateway: {model}, pairs of requests direct and through the gateway")
    checks, figures = run_gateway(client, direct, model)
    report.checks += checks
    report.suites["gateway"] = figures


def _errors(records: list[RequestRecord]) -> str:
    """The causes of failed requests, for the console line of the check that used them."""
    errs = [r.error for r in records if not r.ok and r.error]
    if not errs:
        return ""
    return f"; {len(errs)} request(s) failed: {errs[0][:160]}"


def _vram_figures(vr: VramResult, engine: EngineBaseline | None, budget_mib: float,
                  predicted_mib: float | None) -> VramFigures:
    if vr.skipped:
        return VramFigures(None, None, predicted_mib, budget_mib, "", why_not=vr.skipped)
    idle = engine.idle_used_mib if engine else None
    rise = (vr.peak_mib - idle) if idle is not None and vr.peak_mib is not None else None
    kind = ("idle (memory.used with the service stopped, before llama-bench)"
            if idle is not None else
            "none: the server was already loaded when sampling began; the idle baseline is "
            "read with the service stopped, add --suite engine")
    return VramFigures(rise, vr.peak_process_mib, predicted_mib, budget_mib, kind)


def run_suites(client: ServerClient, profile: Profile, names: list[str], *,
               out_dir: str | None = None, quick: bool = False, host_label: str = "local",
               card: str | None = None, host_facts: dict[str, Any] | None = None,
               sizes: Sizes | None = None, shell: Shell | None = None,
               engine_gpu: str | None = None, service: str = "llm",
               direct: ServerClient | None = None) -> Report:
    """Run the named suites. `shell` runs commands on the serving host (the engine
    baseline, the idle VRAM baseline); without it those say why they were not measured."""
    names = [n for n in ALL_SUITES] if names == ["all"] else names
    unknown = set(names) - set(ALL_SUITES) - {"gateway"}  # gateway: not in "all"
    if unknown:
        raise ValueError(f"unknown suite(s) {sorted(unknown)}; known: {ALL_SUITES + ['gateway']}")
    sizes = sizes or Sizes.for_profile(profile, quick)
    now = datetime.now(UTC)
    report = Report(profile=profile.name, url=str(client.http.base_url),
                    started_utc=now.isoformat(timespec="seconds"), host=host_facts or {})
    e = profile.expected
    report.budget_mib = e.vram_budget_gib * 1024

    def log(msg: str) -> None:
        print(f"  {msg}", flush=True)

    engine: EngineBaseline | None = None
    engine_why_not: str | None = "the engine suite was not run (add --suite engine)"
    if "engine" in names:
        if shell is None:
            engine_why_not = ("no shell on the serving host (give --sandbox, --ssh, or run "
                              "--on-host)")
            report.checks.append(Check("engine.baseline", "SKIP", engine_why_not))
        else:
            log(f"engine: llama-bench on {shell.label}, decode at "
                f"{','.join(map(str, sizes.decode_ctx_tokens))} ctx x "
                f"{sizes.decode_out_tokens} out, prefill {sizes.ttft_tokens} tokens")
            try:
                engine = measure_engine(
                    shell, profile, depths_tokens=sizes.decode_ctx_tokens,
                    out_tokens=sizes.decode_out_tokens, prompt_tokens=sizes.ttft_tokens,
                    engine_gpu=engine_gpu, service=service,
                    wait_ready=lambda: wait_healthy(client, 600))
                engine_why_not = None
                parts = [f"decode {t.avg_tok_s:.1f} +/- {t.stddev_tok_s:.1f} tok/s at "
                         f"{t.n_depth} ctx" for t in engine.decode]
                if engine.prefill:
                    parts.append(f"prefill {engine.prefill.n_prompt} tokens in "
                                 f"{engine.prefill.avg_s:.3f} s "
                                 f"({engine.prefill.avg_tok_s:.0f} tok/s)")
                threads = engine.decode[0].n_threads if engine.decode else "?"
                report.checks.append(Check(
                    "engine.baseline", "INFO",
                    "llama-bench, " + "; ".join(parts) + f"; {threads} threads; "
                    + engine.placement))
                report.engine = engine
            except EngineError as ex:
                engine_why_not = f"engine baseline failed: {ex}"
                report.checks.append(Check("engine.baseline", "FAIL", str(ex)))

    with VramSampler() as sampler:
        card = card or sampler.result.gpu_name
        smoke = run_smoke(client)
        report.checks += [Check(f"smoke.{c.name}", c.status, c.detail) for c in smoke.checks]
        report.suites["smoke"] = {"record": smoke.record.to_json() if smoke.record else None}
        if smoke.passed:
            try:
                report.server = client.props()
            except Exception as ex:  # /props may be off; the report says so
                report.server = {"error": str(ex)}
        if smoke.passed and "decode" in names:
            runs = []
            for i, ctx in enumerate(sizes.decode_ctx_tokens):
                log(f"decode: {ctx} context tokens, {sizes.decode_out_tokens} out")
                runs.append(run_decode(client, ctx, sizes.decode_out_tokens, seed=7 + i))
            decode_json = []
            for r in runs:
                eng = engine.decode_tok_s_at(r.ctx_tokens) if engine else None
                decode_json.append({**asdict(r), "record": r.record.to_json(),
                                    "engine_tok_s": eng,
                                    "served_over_engine": (r.decode_tok_s / eng
                                                           if r.decode_tok_s and eng else None)})
            report.suites["decode"] = decode_json
            consistent = all(
                r.record.ok and r.record.usage is not None and r.record.timings is not None
                and r.record.usage["completion_tokens"] == r.record.timings["predicted_n"]
                and r.record.timings.get("cache_n") == 0 for r in runs)
            report.checks.append(Check.of(
                "decode.records_consistent", consistent,
                "usage.completion_tokens == timings.predicted_n, cache_n == 0 on every "
                "request" + _errors([r.record for r in runs])))
            for r in runs:
                v = judge_decode(r.decode_tok_s,
                                 engine.decode_tok_s_at(r.ctx_tokens) if engine else None,
                                 r.ctx_tokens, served_error=r.record.error,
                                 engine_why_not=engine_why_not,
                                 floor=DECODE_FLOOR_CPU if profile.backend == "cpu"
                                 else DECODE_FLOOR)
                report.checks.append(Check(f"decode.vs_engine@{r.ctx_tokens}", v.status,
                                           v.detail))
            ref = judge_reference_decode(runs[-1].decode_tok_s, e, card)
            report.checks.append(Check("decode.reference_card", ref.status, ref.detail))
        if smoke.passed and "ttft" in names:
            log(f"ttft: {sizes.ttft_requests} x {sizes.ttft_tokens} tokens, cache_prompt false")
            recs, ns = run_ttft(client, sizes.ttft_tokens, sizes.ttft_requests)
            ttfts = [r.ttft_s for r in recs if r.ok and r.ttft_s is not None]
            cache_zero = all((r.timings or {}).get("cache_n") == 0 for r in recs)
            eng_ttft = engine.ttft_s(sizes.ttft_tokens) if engine else None
            summary: dict[str, Any] = {
                "n_tokens": ns, "ttft_s": ttfts,
                "median_s": metrics.median(ttfts) if ttfts else None,
                "p95_s": metrics.percentile(ttfts, 95) if ttfts else None,
                "p95_method": metrics.PERCENTILE_METHOD,
                "median_ci95_s": metrics.bootstrap_ci(ttfts, metrics.median) if ttfts else None,
                "server_prompt_ms": [(r.timings or {}).get("prompt_ms") for r in recs],
                "engine_ttft_s": eng_ttft,
                "engine_prefill_s": engine.prefill_s if engine else None,
                "records": [r.to_json() for r in recs],
            }
            report.suites["ttft"] = summary
            report.checks.append(Check.of(
                "ttft.no_prompt_reuse", cache_zero and len(ttfts) == len(recs),
                f"timings.cache_n == 0 on all {len(recs)} requests" + _errors(recs)))
            med: float | None = summary["median_s"]
            v = judge_ttft(med, eng_ttft, sizes.ttft_tokens,
                           served_error=next((r.error for r in recs if r.error), None),
                           engine_why_not=engine_why_not)
            p95 = summary["p95_s"]
            report.checks.append(Check(
                "ttft.vs_engine", v.status,
                v.detail + (f"; p95 {p95:.3f} s ({metrics.PERCENTILE_METHOD}) over "
                            f"{len(ttfts)} requests" if p95 is not None else "")
                + _errors(recs)))
            ref = judge_reference_ttft(med, e, card)
            report.checks.append(Check("ttft.reference_card", ref.status, ref.detail))
        if smoke.passed and "niah" in names:
            log(f"niah: {sizes.niah_cases} cases at {sizes.niah_tokens} tokens")
            cases = run_niah(client, sizes.niah_tokens, sizes.niah_cases, profile.niah_prefill)
            k = sum(c.passed for c in cases)
            lo, hi = metrics.clopper_pearson(k, len(cases))
            report.suites["niah"] = {"cases": [asdict(c) for c in cases], "passed": k,
                                     "n": len(cases), "clopper_pearson_95": [lo, hi]}
            errs = [c.error for c in cases if c.error]
            err_note = f"; {len(errs)} request(s) failed: {errs[0][:160]}" if errs else ""
            exact = all(c.prompt_tokens == sizes.niah_tokens for c in cases)
            report.checks.append(Check.of("niah.prompt_tokens_exact", exact,
                                          f"every prompt exactly {sizes.niah_tokens} tokens "
                                          "(server usage.prompt_tokens)" + err_note))
            report.checks.append(Check.of(
                "niah.pass", k >= e.niah_min_pass,
                f"{k}/{len(cases)} (95% Clopper-Pearson recall {lo:.0%}-{hi:.0%}); "
                f"needs >= {e.niah_min_pass}" + err_note))
        if smoke.passed and "load" in names:
            log(f"load: {sizes.load_clients} clients for {sizes.load_seconds:.0f} s")
            load = run_load(client, sizes.load_clients, sizes.load_seconds,
                            sizes.load_out_tokens)
            report.suites["load"] = load
            report.checks.append(Check.of(
                "load.no_failures", load["failed"] == 0 and load["requests"] > 0,
                f"{load['requests']} requests, {load['failed']} failed, "
                f"{(load['aggregate_tok_s'] or 0):.1f} tok/s aggregate, "
                f"p95 TTFT {(load['ttft_s_p95'] or 0):.2f} s"
                + (f"; first error: {load['errors'][0][:160]}" if load["errors"] else "")))
        if "gateway" in names:  # --url is the gateway, `direct` the server behind it
            _gateway_suite(report, client, direct, profile.name, log)
    vr = sampler.result
    if profile.backend == "cuda":
        from beekeeper.core.planner import PlanError, predict

        try:  # predicted beside measured
            report.planner = predict(profile, card=vr.gpu_name or card).to_json()
        except PlanError as ex:
            report.planner = {"error": str(ex)}
    if "vram" in names or vr.skipped is None:
        report.suites["vram"] = {**asdict(vr),
                                 "idle_used_mib": engine.idle_used_mib if engine else None}
        predicted = (report.planner or {}).get("total_rise_mib")
        v = judge_vram(_vram_figures(vr, engine, report.budget_mib, predicted))
        report.checks.append(Check("vram.rise_vs_budget", v.status,
                                   v.detail + (f"; {vr.achieved_hz:.0f} Hz sampling"
                                               if vr.achieved_hz else "")))
    for c in report.checks:
        print(f"  {c.line()}", flush=True)
    if out_dir:
        from .report import write_reports

        folder = Path(out_dir) / host_label / now.strftime("%Y%m%dT%H%M%SZ")
        write_reports(report, folder, budget_mib=report.budget_mib)
        report.out_dir = str(folder)
        print(f"report: {folder}/report.md (also report.json, report.html)", flush=True)
    counts = {s: sum(c.status == s for c in report.checks)
              for s in ("PASS", "FAIL", "SKIP", "INFO")}
    print(f"verify {'PASSED' if report.passed else 'FAILED'} ("
          + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")",
          file=sys.stdout, flush=True)
    return report
