"""
Run verification suites against a server: each suite returns a typed result (results.py),
the judge step turns them into checks (judge.py), report.py prints and writes them.
"""

from __future__ import annotations

import random
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from beekeeper.core.profiles import SUITES, Profile

from . import judge, metrics, prompts
from .client import (
    CHAT_PATH,
    FailedRequest,
    RequestRecord,
    ServerClient,
    health_text,
    ttfts_s,
)
from .engine import (
    EngineError,
    EngineFailed,
    LocalShell,
    Shell,
    deployed_engine,
    host_gpus,
    measure as measure_engine,
    user_engine,
)
from .gateway import run_gateway
from .judge import STOPPED, Check
from .report import Report, folder_stamp, print_checks, print_summary, write_reports
from .results import DecodeResult, EngineRun, LoadResult, NiahCase, NiahResult, TtftResult
from .settle import (
    LOAD_SNAPSHOT,
    SETTLE_BUDGET_S,
    HostLoad,
    Round,
    Rule,
    Settled,
    Snapshot,
    parse_snapshots,
    settle,
)
from .smoke import run_smoke, wait_healthy
from .vram import Locality, VramSampler, locate_server

NEEDLE_RE = r"(?<!\d)\d{7}(?!\d)"
NIAH_OUT_TOKENS = 24
CTX_MARGIN_TOKENS = 16  # room for the template's end tokens beyond the fitted prompt
# decode requests at each depth, so the served figure's spread is known as llama-bench's is
DECODE_REPEATS = 3


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
    decode_repeats: int = DECODE_REPEATS
    settle_budget_s: float = SETTLE_BUDGET_S

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


def host_snapshot(shell: Shell | None) -> Snapshot | None:
    if shell is None:
        return None
    try:
        p = shell.run(LOAD_SNAPSHOT, timeout_s=60)
    except (OSError, subprocess.SubprocessError):
        return None
    snaps = parse_snapshots(p.stdout)
    return snaps[-1] if snaps else None


def timed_round(shell: Shell | None, requests: Callable[[], list[float]]) -> Round:
    """One round of served requests' figures, with the host's load over it."""
    a = host_snapshot(shell)
    t0 = time.monotonic()
    samples = requests()
    wall = time.monotonic() - t0
    b = host_snapshot(shell)
    return Round(samples, wall, HostLoad.between(a, b) if a and b else None)


def _rule(repeats: int, budget_s: float) -> Rule:
    return Rule(max(repeats, 1), judge.NOISE_MAX, budget_s if repeats >= 2 else 0.0)


def run_decode(client: ServerClient, ctx: int, out_tokens: int, seed: int,
               repeats: int = DECODE_REPEATS, *, budget_s: float = 0.0,
               shell: Shell | None = None) -> DecodeResult:
    """The timed request on a fresh prompt (cache_prompt false: cache_n 0), then `repeats`
    - 1 more of the same prompt (cached: only the rate from the first token is timed); the
    figure is the median rate. With a `budget_s`, more rounds while it has not settled."""
    msgs, n = prompts.long_prompt(client, ctx, seed=seed)
    first: list[RequestRecord] = []
    failed: list[str] = []  # a repeat that got no rate fails the run (decode_checks)

    def requests(k: int) -> list[float]:
        out: list[float] = []
        for _ in range(k):
            rec = client.stream_chat(msgs, max_tokens=out_tokens, ignore_eos=True, seed=seed,
                                     cache_prompt=bool(first))
            rate = metrics.decode_tok_s(rec)
            if not first:
                first.append(rec)
                if rate is None:  # the first request failed: no repeats
                    return out
            elif rate is None:
                failed.append(rec.error or "no decode rate in its answer")
            out += [rate] if rate is not None else []
        return out

    got = settle(lambda k: timed_round(shell, lambda: requests(k)), _rule(repeats, budget_s))
    rec = first[0]
    samples = got.figure_samples
    return DecodeResult(ctx_tokens=n, out_tokens_requested=out_tokens,
                        decode_tok_s=metrics.median(samples) if samples else None,
                        server_predicted_per_second=(rec.timings or {}).get(
                            "predicted_per_second"),
                        windowed_tok_s=metrics.windowed_tok_s(rec), record=rec,
                        samples_tok_s=samples, settle=got.to_json(), failed_repeats=failed)


def settled_ttft(client: ServerClient, n_tokens: int, k: int, *, budget_s: float = 0.0,
                 shell: Shell | None = None, seed: int = 1000) -> TtftResult:
    """K requests after one warm-up, each with its own prefix and cache_prompt false, then
    more rounds while the median has not settled (settle.py); a busy round's requests are
    set aside, not judged."""
    warm, _ = prompts.long_prompt(client, n_tokens, seed=seed - 1)
    client.stream_chat(warm, max_tokens=1)
    rounds: list[tuple[list[RequestRecord], list[int]]] = []

    def requests(m: int) -> list[float]:
        recs: list[RequestRecord] = []
        sizes: list[int] = []
        for _ in range(m):
            i = sum(len(r) for r, _ in rounds) + len(recs)
            msgs, n = prompts.long_prompt(client, n_tokens, seed=seed + i)
            recs.append(client.stream_chat(msgs, max_tokens=1, cache_prompt=False))
            sizes.append(n)
        rounds.append((recs, sizes))
        return ttfts_s(recs)

    got = settle(lambda m: timed_round(shell, lambda: requests(m)), _rule(k, budget_s))
    used = [bool(r.get("used")) for r in got.rounds]
    if not any(used):  # every round busy: the figure from them, not judged
        used = [True] * len(rounds)
    keep = [x for x, u in zip(rounds, used, strict=True) if u]
    aside = [r for (recs, _), u in zip(rounds, used, strict=True) if not u for r in recs]
    return TtftResult(target_tokens=n_tokens, prompt_tokens=[n for _, ns in keep for n in ns],
                      records=[r for recs, _ in keep for r in recs], settle=got.to_json(),
                      set_aside=aside)


def run_niah(client: ServerClient, n_tokens: int, cases: int, prefill: str | None,
             seed_base: int = 42) -> NiahResult:
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
    return NiahResult(target_tokens=n_tokens, cases=out)


def run_load(client: ServerClient, clients: int, seconds: float, out_tokens: int
             ) -> LoadResult:
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
    return LoadResult(clients=clients, seconds=time.monotonic() - t0, records=records)


def _log(msg: str) -> None:
    print(f"  {msg}", flush=True)


@dataclass(frozen=True)
class HandStarted:
    """A server the user started (no deployed.json): its llama-bench, as a binary or inside
    an image, and its model (default: the model_path the server's /props reports)."""

    llama_bench: str | None = None
    image: str | None = None
    model: str | None = None


def _engine_target(client: ServerClient, profile: Profile, shell: Shell | None,
                   hand: HandStarted | None, engine_gpu: str | None, service: str) -> Any:
    if hand is None:
        return deployed_engine(shell, profile, engine_gpu, service) if shell else None
    model = hand.model
    if not model:
        try:
            model = str(client.props()["model_path"])
        except Exception as ex:  # an older server, /props off
            raise EngineError(f"give --model: the server's /props has no model_path ({ex})"
                              ) from ex
    return user_engine(shell or LocalShell(), profile, model, llama_bench=hand.llama_bench,
                       image=hand.image, engine_gpu=engine_gpu)


def run_engine(client: ServerClient, profile: Profile, sizes: Sizes, shell: Shell | None,
               engine_gpu: str | None, service: str, hand: HandStarted | None = None,
               prefill: bool = True) -> EngineRun:
    """llama-bench where the server runs: the kit's service through `shell`, or a
    hand-started server's llama-bench (`hand`) beside it. `prefill`: also time the prompt
    (only when TTFT is asked for: it is the engine suite's longest test)."""
    try:
        engine = _engine_target(client, profile, shell, hand, engine_gpu, service)
        if engine is None:
            return EngineRun(requested=True)
        _log(f"engine: llama-bench on {engine.shell.label}, decode at "
             f"{','.join(map(str, sizes.decode_ctx_tokens))} ctx x "
             f"{sizes.decode_out_tokens} out"
             + (f", prefill {sizes.ttft_tokens} tokens" if prefill else ""))
        common: dict[str, Any] = {
            "out_tokens": sizes.decode_out_tokens, "limit": judge.NOISE_MAX,
            "wait_ready": (lambda: wait_healthy(client, 600)) if engine.start else None,
            "budget_s": sizes.settle_budget_s}
        base = measure_engine(engine, profile, depths_tokens=sizes.decode_ctx_tokens,
                              prompt_tokens=sizes.ttft_tokens if prefill else None, **common)
        for key, got in base.settle.items():
            _log(f"engine: {key} {_repeats_said(got)}")
        return EngineRun(requested=True, baseline=base, again=lambda depths: measure_engine(
            engine, profile, depths_tokens=depths, prompt_tokens=None, **common))
    except EngineError as ex:
        return EngineRun(requested=True, error=str(ex), failed=isinstance(ex, EngineFailed))
    except subprocess.TimeoutExpired as ex:  # the host did not answer (ssh, llama-bench)
        return EngineRun(requested=True, error=f"no answer from the host in {ex.timeout:g} s")


@dataclass
class _Run:
    profile: Profile
    names: list[str]
    sizes: Sizes
    engine: EngineRun
    card: str | None
    where: Locality
    shell: Shell | None  # the serving host, where its load is read (settle.py)
    stopped: bool = False  # the server stopped answering during a served suite


HEALTH_PROBE_S = 10.0  # how long /health may take to say whether the server is still up


class ServerStopped(Exception):
    """The server stopped answering during a step whose failed requests are data (the
    decode requests): the detail of its `server.answered` check."""


def health_now(client: ServerClient) -> str | None:
    """None where the server's /health answers 200 now (it is up), else what it got."""
    import httpx

    try:
        code = client.health(HEALTH_PROBE_S)
    except httpx.HTTPError as ex:  # its text may hold the URL's secrets
        return f"no answer ({type(ex).__name__})"
    return None if code == 200 else health_text(code)


def stop_said(step: str, what: str, health: str) -> str:
    """A stop's words: the step, what its request got, what /health said after it."""
    return f"stopped answering during {step}: {what}; GET /health then got {health}"


def answered(client: ServerClient, step: str, failed: FailedRequest) -> tuple[Check, bool]:
    """The FAIL check of a request of `step` that got no answer or an HTTP 5xx, and whether
    the server stopped (the suites after it are not run). An HTTP 5xx
    while /health answers 200 after it is an error on that request, not a stop; any other
    is a stop: /health not 200 (gone, or loading again after a restart), or no answer at
    all (a server that answers /health but not a request within the client's timeout would
    make every suite after it wait that timeout out)."""
    health = health_now(client)
    if health is None and failed.status is not None:
        return Check(STOPPED, "FAIL", f"failed a request during {step}: {failed.request} got "
                     f"{failed.got}, while GET /health answered 200: an error on that "
                     "request, not a stop"), False
    return Check(STOPPED, "FAIL", stop_said(step, f"{failed.request} got {failed.got}",
                                            health or "HTTP 200")), True


def stopped(ex: Exception, step: str, client: ServerClient) -> tuple[Check, bool]:
    """The FAIL check of a request of `step` that raised `ex`, and whether the server
    stopped: no answer, or an HTTP 5xx (`answered`), or a stop seen in the step's data
    (ServerStopped); any other error (a refusal, 4xx: the caller's one line; a bug) goes
    on up."""
    if isinstance(ex, ServerStopped):
        return Check(STOPPED, "FAIL", str(ex)), True
    failed = FailedRequest.of(ex)
    if failed is None or (failed.status is not None and failed.status < 500):
        raise ex
    return answered(client, step, failed)


def _stop_in(client: ServerClient, res: DecodeResult, step: str = "decode") -> None:
    """ServerStopped where a request of this depth failed and the server's /health does not
    answer 200 after it: a stop, named in its step (the failed requests stay data, judged
    by decode_checks; a server that is up failed only them)."""
    errors = [e for e in (None if res.record.ok else res.record.error or "no answer",
                          *res.failed_repeats) if e]
    health = health_now(client) if errors else None
    if health is not None:
        raise ServerStopped(stop_said(step, f"POST {CHAT_PATH} failed "
                                      f"({errors[-1].split(': ', 1)[0][:80]})", health))


def _repeats_said(settled: dict[str, Any] | None) -> str:
    """`6 repeats (rounds of 3, then 3) in 41 s, error 2.1% (settled)` for the console."""
    if not settled:
        return "no repeats"
    st = Settled.from_json(settled)
    err = settled.get("error")
    return st.text() + (f", error {err:.1%}" if err is not None else "") + f" ({st.stop})"


def _decode(client: ServerClient, run: _Run, report: Report) -> None:
    """Decode at each depth; what was measured is judged also where a request failed and
    ended the suite (the depths not reached: SKIP, not measured)."""
    sizes, res = run.sizes, report.suites
    res.decode = done = []
    try:
        for i, ctx in enumerate(sizes.decode_ctx_tokens):
            _log(f"decode: {ctx} context tokens, {sizes.decode_out_tokens} out, "
                 f"{sizes.decode_repeats} requests, more while the figure's error is over "
                 f"{judge.NOISE_MAX:.0%} (at most {sizes.settle_budget_s:g} s more)")
            done.append(run_decode(client, ctx, sizes.decode_out_tokens, seed=7 + i,
                                   repeats=sizes.decode_repeats,
                                   budget_s=sizes.settle_budget_s, shell=run.shell))
            _log(f"decode: {ctx} context tokens, {_repeats_said(done[-1].settle)}")
            _stop_in(client, done[-1])
    finally:
        if done:
            report.checks += judge.decode_checks(
                done, run.engine, run.profile.expected, run.card,
                cpu=run.profile.backend == "cpu", sampler_on_cpu=run.profile.samples_on_cpu)
        report.checks += [Check(judge.vs_engine_name(d), "SKIP", f"not measured: the decode "
                                f"suite ended at a failed request before it ({STOPPED})")
                          for d in sizes.decode_ctx_tokens[len(done):]]


def _ttft(client: ServerClient, run: _Run, report: Report) -> None:
    sizes = run.sizes
    _log(f"ttft: {sizes.ttft_requests} x {sizes.ttft_tokens} tokens, cache_prompt false")
    res = report.suites.ttft = settled_ttft(client, sizes.ttft_tokens, sizes.ttft_requests,
                                            budget_s=sizes.settle_budget_s, shell=run.shell)
    _log(f"ttft: {_repeats_said(res.settle)}")
    report.checks += judge.ttft_checks(res, run.engine, run.profile.expected, run.card,
                                       cpu=run.profile.backend == "cpu")
    report.checks = judge.yield_reference_ttft(report.checks)


def _niah(client: ServerClient, run: _Run, report: Report) -> None:
    sizes = run.sizes
    _log(f"niah: {sizes.niah_cases} cases at {sizes.niah_tokens} tokens")
    res = report.suites.niah = run_niah(client, sizes.niah_tokens, sizes.niah_cases,
                                        run.profile.niah_prefill)
    report.checks += judge.niah_checks(res, run.profile.expected)


def _load(client: ServerClient, run: _Run, report: Report) -> None:
    sizes = run.sizes
    _log(f"load: {sizes.load_clients} clients for {sizes.load_seconds:.0f} s")
    res = report.suites.load = run_load(client, sizes.load_clients, sizes.load_seconds,
                                        sizes.load_out_tokens)
    report.checks += judge.load_checks(res)


AGAIN = "decode, measured again"  # the step a stop there is said in


def _first_pair(report: Report, r: DecodeResult) -> dict[str, float] | None:
    """The figures of a decode whose decode.vs_engine check FAILed on the ratio alone (both
    figures there, every request answered, its records consistent); None: any other."""
    check = {c.name: c for c in report.checks}.get(judge.vs_engine_name(r.ctx_tokens))
    # no served figure: its first request failed (the check says so); no engine figure:
    # nothing to judge against (SKIP)
    served, engine = r.decode_tok_s, r.engine_tok_s(report.engine)
    if check is None or check.status != "FAIL" or r.failed_repeats \
            or not r.records_consistent or not (served and engine):
        return None
    return {"served_tok_s": served, "engine_tok_s": engine, "ratio": served / engine}


def decode_again(client: ServerClient, run: _Run, report: Report) -> None:
    """A served decode below its bar, measured again once as a pair: llama-bench at that
    depth, then the server. The engine suite runs before every served one, a minute or more
    earlier, and a figure measured then may not hold when the server is measured (on an
    H100, 2026-12-07, a server decoded 18% below a llama-bench run minutes before, steady,
    no other load; cause not found). The second pair is judged where it can be (else the
    first stands), the first said in its check; a server slower than its engine fails
    both. Not after the server stopped answering: the engine's run would start it again."""
    runs, sizes = report.suites.decode or [], run.sizes
    firsts = {i: first for i, r in enumerate(runs) if (first := _first_pair(report, r))}
    if not firsts or run.engine.again is None or run.stopped:
        return
    depths = [sizes.decode_ctx_tokens[i] for i in firsts]
    _log(f"decode: below the bar at {', '.join(map(str, depths))} ctx: measured again as a "
         "pair, llama-bench then the server, in case the host's pace changed between them")
    again: dict[int, DecodeResult] = {}
    try:
        base = run.engine.again(depths)
        for i in firsts:
            again[i] = run_decode(client, sizes.decode_ctx_tokens[i], sizes.decode_out_tokens,
                                  seed=7 + i, repeats=sizes.decode_repeats,
                                  budget_s=sizes.settle_budget_s, shell=run.shell)
            _stop_in(client, again[i], AGAIN)
    except (EngineError, subprocess.TimeoutExpired) as ex:
        _engine_again_failed(client, report, ex)
        return
    except Exception as ex:  # a request failed: stopped raises again what is not that
        report.checks.append(stopped(ex, AGAIN, client)[0])
        return
    _judge_again(run, report, {i: replace(second, again_engine=base, first_pair=firsts[i])
                               for i, second in again.items()})


def _engine_again_failed(client: ServerClient, report: Report, ex: Exception) -> None:
    """llama-bench could not run again: the first pair stands (INFO, why), and where the
    server does not answer after it (not started again), a `server.answered` FAIL."""
    why = (f"no answer from the host in {ex.timeout:g} s"
           if isinstance(ex, subprocess.TimeoutExpired) else str(ex))
    report.checks.append(Check("decode.again", "INFO", f"not measured again as a pair: "
                               f"llama-bench could not run again ({why}); the first pair "
                               "is judged"))
    health = health_now(client)
    if health is not None:
        report.checks.append(Check(STOPPED, "FAIL", stop_said(
            AGAIN, "after llama-bench ran again (the server stopped for it)", health)))


def _judge_again(run: _Run, report: Report, seconds: dict[int, DecodeResult]) -> None:
    """The decode checks again with the second pairs where judged; a second pair not judged
    (noisy, or the host busy) leaves its first, with a word of why."""
    runs = report.suites.decode or []
    firsts = {i: runs[i] for i in seconds}

    def checks() -> dict[str, Check]:
        return {c.name: c for c in judge.decode_checks(
            runs, run.engine, run.profile.expected, run.card,
            cpu=run.profile.backend == "cpu", sampler_on_cpu=run.profile.samples_on_cpu)}

    runs[:] = [seconds.get(i, r) for i, r in enumerate(runs)]
    fresh = checks()
    judged = {i: fresh[judge.vs_engine_name(r.ctx_tokens)] for i, r in seconds.items()}
    unjudged = {i: c for i, c in judged.items() if c.status not in ("PASS", "FAIL")}
    if unjudged:
        runs[:] = [firsts[i] if i in unjudged else r for i, r in enumerate(runs)]
        fresh = checks()
        for i, second in unjudged.items():
            name = judge.vs_engine_name(firsts[i].ctx_tokens)
            fresh[name] = replace(fresh[name], detail=fresh[name].detail + "; measured "
                                  f"again as a pair, not judged ({second.detail})")
    report.checks = judge.yield_reference_ttft([fresh.get(c.name, c) for c in report.checks])


# the suites that need a healthy server, in the report's order: (suite, step, measure)
SERVED = (("decode", "decode", _decode), ("ttft", "TTFT", _ttft), ("niah", "NIAH", _niah),
          ("load", "load", _load))


def _served_suites(client: ServerClient, run: _Run, report: Report) -> None:
    """The suites that need a healthy server, each run then judged. A request that failed
    ends its suite with a `server.answered` FAIL (`stopped`); the next suite runs unless the
    server stopped answering."""
    for name, step, measure in SERVED:
        if name not in run.names:
            continue
        try:
            measure(client, run, report)
        except Exception as ex:  # stopped raises again what is not the server's failure
            check, run.stopped = stopped(ex, step, client)
            report.checks.append(check)
            if run.stopped:
                return


def _gateway_suite(report: Report, client: ServerClient, direct: ServerClient | None,
                   model: str) -> None:
    if direct is None:
        report.checks.append(Check("gateway.overhead", "SKIP", "no server to compare with: "
                                   "give --direct-url, the server behind the gateway"))
        return
    _log(f"gateway: {model}, pairs of requests direct and through the gateway")
    checks, figures = run_gateway(client, direct, model)
    report.checks += checks
    report.suites.gateway = figures


def _sampled_suites(client: ServerClient, run: _Run, report: Report,
                    direct: ServerClient | None) -> None:
    """Smoke, the served suites and the gateway, with the VRAM sampler running throughout;
    then the planner's prediction and the VRAM check (judged only when vram was named; a
    card sampled anyway is shown as INFO)."""
    no_gpu = (f"{run.profile.name} runs on the CPU: no GPU memory to judge"
              if run.profile.backend != "cuda" else None)
    with VramSampler(pid=run.where.pid, not_here=None if run.where.local else run.where.why,
                     no_gpu=no_gpu) as sampler:
        run.card = run.card or sampler.result.gpu_name  # None when not on this machine
        smoke = report.suites.smoke = run_smoke(client)
        report.checks += [Check(f"smoke.{c.name}", c.status, c.detail) for c in smoke.checks]
        if smoke.passed:
            try:
                report.server = client.props()
            except Exception as ex:  # /props may be off; the report says so
                report.server = {"error": str(ex)}
            _served_suites(client, run, report)  # a server that stopped: FAIL, the rest kept
        if "gateway" in run.names:  # --url is the gateway, `direct` the server behind it
            _gateway_suite(report, client, direct, run.profile.name)
    vr = sampler.result
    report.checks += judge.clock_checks(vr)
    if run.profile.backend == "cuda":
        from beekeeper.core.planner import PlanError, predict

        try:  # predicted beside measured
            report.planner = predict(run.profile, card=vr.gpu_name or run.card).to_json()
        except PlanError as ex:
            report.planner = {"error": str(ex)}
    if "vram" in run.names or vr.skipped is None:
        report.suites.vram = vr
        predicted = (report.planner or {}).get("total_rise_mib")
        report.checks += judge.vram_checks(vr, report.engine, report.budget_mib, predicted,
                                           asked="vram" in run.names)


def _suite_names(names: list[str]) -> list[str]:
    """`all` as its suites (gateway is not in it); the names are verify_main.suite_names'."""
    return list(SUITES) if names == ["all"] else names


def _card(card: str | None, engine: EngineRun, shell: Shell | None, profile: Profile
          ) -> str | None:
    """The card the reference checks judge: the user's --card, else the one where the server
    runs (the engine's nvidia-smi, or the host's through `shell`); None leaves it to the
    sampler, for a server on this machine."""
    if card or profile.backend != "cuda":
        return card
    if engine.baseline is not None and engine.baseline.gpu_name:
        return engine.baseline.gpu_name
    gpus = host_gpus(shell) if shell is not None else []
    return gpus[0][0] if gpus else None


def judgeable(names: list[str], profile: Profile) -> list[str]:
    """The suites named (`all` included) whose verdict the run owes: VRAM only for a profile
    that uses a GPU (a CPU profile has none to judge, and is not INCOMPLETE for it)."""
    return [n for n in _suite_names(names) if n != "vram" or profile.backend == "cuda"]


def server_after_engine(where: Locality, url: str, engine: EngineRun) -> Locality:
    """Where the server is once the engine suite ran: it restarted the kit's service, so a
    pid read before names a process that has gone (seen on the H200, 2026-12-03)."""
    if not engine.requested or not where.local or where.pid is None:
        return where
    return locate_server(url)


def run_suites(client: ServerClient, profile: Profile, names: list[str], *,
               out_dir: str | None = None, quick: bool = False, host_label: str = "local",
               card: str | None = None, sizes: Sizes | None = None, shell: Shell | None = None,
               engine_gpu: str | None = None, service: str = "llm",
               direct: ServerClient | None = None, budget_gib: float | None = None,
               hand: HandStarted | None = None, where: Locality | None = None) -> Report:
    """Run the named suites. `shell` runs commands on the serving host (the engine and idle
    VRAM baselines, the card's name). `hand`: a server the user started (the engine suite is
    then run). `where`: whether the server is on this machine (default: `locate_server` of
    the client's URL)."""
    names = _suite_names(names)
    if hand is not None and "engine" not in names:
        names = ["engine", *names]
    sizes = sizes or Sizes.for_profile(profile, quick)
    url = str(client.http.base_url)
    where = where or locate_server(url)
    now = datetime.now(timezone.utc)  # not datetime.UTC: hosts may have Python 3.10
    report = Report(profile=profile.name, url=url,
                    started_utc=now.isoformat(timespec="seconds"),
                    budget_mib=judge.vram_budget_mib(profile.expected, budget_gib),
                    requested=judgeable(names, profile))
    engine = (run_engine(client, profile, sizes, shell, engine_gpu, service, hand,
                         prefill="ttft" in names) if "engine" in names
              else EngineRun(requested=False))
    report.engine = engine.baseline
    report.checks += judge.engine_checks(engine)
    where = server_after_engine(where, url, engine)
    run = _Run(profile, names, sizes, engine, _card(card, engine, shell, profile), where,
               shell=shell)
    _sampled_suites(client, run, report, direct)
    decode_again(client, run, report)
    print_checks(report)
    if out_dir:
        folder = Path(out_dir) / host_label / folder_stamp(now)
        report.out_dir = str(folder)
        write_reports(report, folder)
        print(f"report: {folder}/report.md (also report.json, report.html)", flush=True)
    print_summary(report)
    return report
