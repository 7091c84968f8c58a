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

from beekeeper.profiles import Profile

from . import metrics, prompts
from .client import RequestRecord, ServerClient
from .smoke import Check, run_smoke
from .vram import VramSampler

ALL_SUITES = ["smoke", "decode", "ttft", "niah", "vram", "load"]
NEEDLE_RE = r"(?<!\d)\d{7}(?!\d)"


@dataclass
class Sizes:
    """How big each suite runs; `quick` sizes suit a CPU server and CI."""

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
        if quick:
            return cls(decode_ctx_tokens=[e.decode_ctx_tokens], decode_out_tokens=160,
                       ttft_tokens=512, ttft_requests=5, niah_tokens=e.niah_tokens)
        return cls(decode_ctx_tokens=sorted({4096, e.decode_ctx_tokens}),
                   decode_out_tokens=512, ttft_tokens=e.decode_ctx_tokens, ttft_requests=20,
                   niah_tokens=e.niah_tokens)


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
    out_dir: str | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks if c.required)


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
        rec = client.stream_chat(msgs, max_tokens=24, cache_prompt=False)
        found = re.findall(NEEDLE_RE, rec.text)
        out.append(NiahCase(seed=seed_base + i, depth=round(depth, 3),
                            prompt_tokens=rec.prompt_tokens, fitted_tokens=n,
                            expected=value, answer=rec.text.strip(), found=found,
                            passed=bool(found) and found[0] == value))
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


def run_suites(client: ServerClient, profile: Profile, names: list[str], *,
               out_dir: str | None = None, quick: bool = False, host_label: str = "local",
               card: str | None = None, host_facts: dict[str, Any] | None = None,
               sizes: Sizes | None = None) -> Report:
    names = list(ALL_SUITES) if names == ["all"] else names
    unknown = set(names) - set(ALL_SUITES)
    if unknown:
        raise ValueError(f"unknown suite(s) {sorted(unknown)}; known: {ALL_SUITES}")
    sizes = sizes or Sizes.for_profile(profile, quick)
    now = datetime.now(UTC)
    report = Report(profile=profile.name, url=str(client.http.base_url),
                    started_utc=now.isoformat(timespec="seconds"), host=host_facts or {})
    e = profile.expected

    def log(msg: str) -> None:
        print(f"  {msg}", flush=True)

    with VramSampler() as sampler:
        card = card or sampler.result.gpu_name  # scale expectations to this GPU
        smoke = run_smoke(client)
        report.checks += [Check(f"smoke.{c.name}", c.passed, c.detail) for c in smoke.checks]
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
            report.suites["decode"] = [{**asdict(r), "record": r.record.to_json()}
                                       for r in runs]
            last = runs[-1]
            consistent = all(
                r.record.ok and r.record.usage is not None and r.record.timings is not None
                and r.record.usage["completion_tokens"] == r.record.timings["predicted_n"]
                and r.record.timings.get("cache_n") == 0 for r in runs)
            report.checks.append(Check("decode.records_consistent", consistent,
                                       "usage.completion_tokens == timings.predicted_n, "
                                       "cache_n == 0 on every request"))
            want = e.decode_tok_s_on(card)
            got = last.decode_tok_s
            report.checks.append(Check(
                "decode.tok_s",
                got is not None and (want is None or got >= want * e.decode_tolerance),
                f"{(got or 0):.1f} tok/s at {last.ctx_tokens} ctx (server "
                f"{(last.server_predicted_per_second or 0):.1f})"
                + (f"; expected >= {want * e.decode_tolerance:.1f}" if want else
                   "; no expectation for this profile"),
                required=want is not None or got is None))
        if smoke.passed and "ttft" in names:
            log(f"ttft: {sizes.ttft_requests} x {sizes.ttft_tokens} tokens, cache_prompt false")
            recs, ns = run_ttft(client, sizes.ttft_tokens, sizes.ttft_requests)
            ttfts = [r.ttft_s for r in recs if r.ttft_s is not None]
            cache_zero = all((r.timings or {}).get("cache_n") == 0 for r in recs)
            summary: dict[str, Any] = {
                "n_tokens": ns, "ttft_s": ttfts,
                "median_s": metrics.median(ttfts) if ttfts else None,
                "p95_s": metrics.percentile(ttfts, 95) if ttfts else None,
                "p95_method": metrics.PERCENTILE_METHOD,
                "median_ci95_s": metrics.bootstrap_ci(ttfts, metrics.median) if ttfts else None,
                "server_prompt_ms": [(r.timings or {}).get("prompt_ms") for r in recs],
                "records": [r.to_json() for r in recs],
            }
            report.suites["ttft"] = summary
            report.checks.append(Check("ttft.no_prompt_reuse",
                                       cache_zero and len(ttfts) == len(recs),
                                       f"timings.cache_n == 0 on all {len(recs)} requests"))
            med: float | None = summary["median_s"]
            report.checks.append(Check(
                "ttft.median_s", med is not None and (e.ttft_s_median is None
                                                      or med <= e.ttft_s_median * 1.25),
                f"median {(med or 0):.3f} s, p95 {(summary['p95_s'] or 0):.3f} s "
                f"({metrics.PERCENTILE_METHOD}) over {len(ttfts)} requests"
                + (f"; expected <= {e.ttft_s_median * 1.25:.2f} s" if e.ttft_s_median else ""),
                required=e.ttft_s_median is not None or med is None))
        if smoke.passed and "niah" in names:
            log(f"niah: {sizes.niah_cases} cases at {sizes.niah_tokens} tokens")
            cases = run_niah(client, sizes.niah_tokens, sizes.niah_cases, profile.niah_prefill)
            k = sum(c.passed for c in cases)
            lo, hi = metrics.clopper_pearson(k, len(cases))
            report.suites["niah"] = {"cases": [asdict(c) for c in cases], "passed": k,
                                     "n": len(cases), "clopper_pearson_95": [lo, hi]}
            exact = all(c.prompt_tokens == sizes.niah_tokens for c in cases)
            report.checks.append(Check("niah.prompt_tokens_exact", exact,
                                       f"every prompt exactly {sizes.niah_tokens} tokens "
                                       "(server usage.prompt_tokens)"))
            report.checks.append(Check(
                "niah.pass", k >= e.niah_min_pass,
                f"{k}/{len(cases)} (95% Clopper-Pearson recall {lo:.0%}-{hi:.0%}); "
                f"needs >= {e.niah_min_pass}"))
        if smoke.passed and "load" in names:
            log(f"load: {sizes.load_clients} clients for {sizes.load_seconds:.0f} s")
            load = run_load(client, sizes.load_clients, sizes.load_seconds,
                            sizes.load_out_tokens)
            report.suites["load"] = load
            report.checks.append(Check(
                "load.no_failures", load["failed"] == 0 and load["requests"] > 0,
                f"{load['requests']} requests, {load['failed']} failed, "
                f"{(load['aggregate_tok_s'] or 0):.1f} tok/s aggregate, "
                f"p95 TTFT {(load['ttft_s_p95'] or 0):.2f} s"))
    vr = sampler.result
    if profile.backend == "cuda" and profile.layout is not None:
        from beekeeper.planner import predict

        report.planner = predict(profile).to_json()  # predicted beside measured
    if "vram" in names or vr.skipped is None:
        report.suites["vram"] = asdict(vr)
        if vr.skipped:
            report.checks.append(Check("vram.peak", True, vr.skipped, required=False))
        else:
            budget_mib = e.vram_budget_gib * 1024
            peak = vr.peak_process_mib or vr.peak_delta_mib or 0
            report.checks.append(Check(
                "vram.peak", peak <= budget_mib,
                f"peak {peak:.0f} MiB ({'process' if vr.peak_process_mib else 'device delta'})"
                f", budget {budget_mib:.0f} MiB; {vr.achieved_hz or 0:.0f} Hz sampling"
                + (f"; planner predicted {report.planner['total_mib']:.0f} MiB"
                   if report.planner else "")))
    for c in report.checks:
        print(f"  [{'PASS' if c.passed else 'FAIL'}{'' if c.required else '*'}] {c.name}: "
              f"{c.detail}", flush=True)
    if out_dir:
        from .report import write_reports

        folder = Path(out_dir) / host_label / now.strftime("%Y%m%dT%H%M%SZ")
        write_reports(report, folder, budget_mib=e.vram_budget_gib * 1024)
        report.out_dir = str(folder)
        print(f"report: {folder}/report.md (also report.json, report.html)", flush=True)
    print(f"verify {'PASSED' if report.passed else 'FAILED'} "
          f"({sum(c.passed for c in report.checks)}/{len(report.checks)} checks)",
          file=sys.stdout, flush=True)
    return report
