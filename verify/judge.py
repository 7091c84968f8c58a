"""
Judging rules, pure functions on typed inputs: served figures against the engine on the same
host, the reference card's figures as information elsewhere, VRAM against the budget. Why each
factor is what it is: docs/verify.md, "The rules" and "Enough repeats, and a busy host".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from beekeeper.core.profiles import Expected

from .client import RequestRecord
from .engine import EngineBaseline, bench_key
from .metrics import PERCENTILE_METHOD, spread
from .results import DecodeResult, EngineRun, LoadResult, NiahResult, TtftResult
from .settle import HostLoad, Settled
from .vram import VramResult

Status = Literal["PASS", "FAIL", "SKIP", "INFO"]

DECODE_FLOOR = 0.95
DECODE_FLOOR_CPU = 0.70
CPU_SAMPLER_MS = 2.0
TTFT_CEILING = 1.25
TTFT_CEILING_CPU = 1.5
NOISE_MAX = 0.06


@dataclass(frozen=True)
class Verdict:
    status: Status
    detail: str
    ratio: float | None = None  # served / engine (decode) or served / engine (TTFT)


@dataclass
class Check:
    """One named check with what was seen (SKIP and INFO never pass or fail a run)."""

    name: str
    status: Status
    detail: str

    @classmethod
    def of(cls, name: str, ok: bool, detail: str) -> Check:
        return cls(name, "PASS" if ok else "FAIL", detail)

    @property
    def passed(self) -> bool:
        """True for PASS, SKIP and INFO; a misspelt status counts as failed."""
        return self.status in ("PASS", "SKIP", "INFO")

    def line(self) -> str:
        return f"[{self.status}] {self.name}: {self.detail}"


@dataclass(frozen=True)
class Spread:
    """A figure's spread over its repeats (llama-bench's runs of one test, or the served
    requests of one measurement), with its rounds (verify/settle.py) when known."""

    what: str  # "llama-bench", "served decode", "served TTFT"
    mean: float
    stddev: float
    unit: str  # "tok/s" | "s"
    n_requests: int | None = None  # served figures: how many requests
    n_repeats: int | None = None  # llama-bench: how many runs of the test (-r)
    settled: Settled | None = None  # its rounds, the host's load, why they stopped

    @property
    def relative(self) -> float:
        return self.stddev / self.mean if self.mean else 0.0

    @property
    def error(self) -> float:
        """The judged figure's own relative error: the spread over sqrt(repeats) (the
        standard error of an average; a median's is of the same order)."""
        n = self.n_requests or self.n_repeats or 1
        return self.relative / math.sqrt(n)

    @property
    def busy(self) -> HostLoad | None:
        """The host's load, when a busy round left the figure unjudged."""
        return self.settled.busy_load if self.settled else None

    def text(self) -> str:
        f = ".1f" if self.unit == "tok/s" else ".3f"
        n = self.n_requests or self.n_repeats
        over = (f" over {n} {'requests' if self.n_requests else 'runs'}" if n else "")
        return (f"{self.what} {self.mean:{f}} +/- {self.stddev:{f}} {self.unit}{over}, "
                f"{self.relative:.0%}; error of the figure {self.error:.1%}")

    def repeats_text(self) -> str | None:
        return f"{self.what} {self.settled.text()}" if self.settled else None


def engine_spreads(engine: EngineBaseline | None) -> list[Spread]:
    """Every llama-bench test of the engine's run (avg_ts, stddev_ts), with its repeats."""
    if engine is None:
        return []
    tests = [*engine.decode, *([engine.prefill] if engine.prefill else [])]
    out = []
    for t in tests:
        key = bench_key(t)
        got = engine.settle.get(key)
        out.append(Spread(f"llama-bench {key}" if got else "llama-bench", t.avg_tok_s,
                          t.stddev_tok_s, "tok/s", n_repeats=len(t.samples_s) or None,
                          settled=Settled.from_json(got) if got else None))
    return out


def served_spread(what: str, values: Sequence[float], unit: str,
                  settled: Settled | None = None) -> Spread | None:
    """The spread of a served figure's requests; None with fewer than two."""
    ms = spread(values)
    return Spread(what, ms[0], ms[1], unit, len(values), settled=settled) if ms else None


def too_noisy(spreads: Sequence[Spread]) -> Spread | None:
    """The figure with the largest own error over NOISE_MAX, if any: then the figures
    cannot judge."""
    worst = max(spreads, key=lambda s: s.error, default=None)
    return worst if worst is not None and worst.error > NOISE_MAX else None


BUSY = "the host was busy ("  # how a check not judged on load begins (coverage reads it)
UNSETTLED = "the figures did not settle ("  # not judged on spread, the host quiet or unknown
NOT_JUDGED = (BUSY, UNSETTLED)
NO_BASELINE = "no engine baseline ("  # a served figure without llama-bench's (report reads it)
ENGINE_NOT_RUN = "llama-bench could not run ("  # an engine suite asked for, no baseline
REFERENCE_SIZE = "not the reference's size ("  # a reference check at another depth or prompt
# ends a decode depth's no-baseline SKIP whose figure the reference card judged (coverage)
BY_REFERENCE = "; judged against the reference card instead (decode.reference_card)"


def _judged(spreads: Sequence[Spread], figures: str, ratio: float, ok: bool,
            needs: str) -> Verdict:
    """PASS when `ok`, else FAIL; not judged (SKIP) when the host was busy while a figure was
    measured, or a figure's error stayed over NOISE_MAX."""
    busy = next((s for s in spreads if s.busy is not None), None)
    tail = f"{figures}: ratio {ratio:.3f} not judged"
    if busy is not None and busy.busy is not None and busy.settled is not None:
        return Verdict("SKIP", f"{BUSY}{busy.busy.text()} while {busy.what} was measured, "
                       f"{busy.settled.text()}; {busy.text()}): run again on a quiet host; "
                       f"{tail}", ratio)
    noisy = too_noisy(spreads)
    if noisy is None:
        return Verdict("PASS" if ok else "FAIL", f"{figures}: ratio {ratio:.3f}, needs {needs}",
                       ratio)
    st = noisy.settled
    if st is None:
        how = "its repeats and the host's load not recorded"
    else:
        loads = [r["load_share"] for r in st.rounds if r.get("load_share") is not None]
        quiet = (f"the host quiet: other processes at most {max(loads):.0%} of its CPU time"
                 if loads else "the host's load not measured (no way onto the host)")
        why = {"budget": f"the {st.budget_s:g} s budget spent", "cap": "the repeats' cap",
               "failed": "a round gave no figure"}.get(st.stop, st.stop)
        how = f"{st.text()}, {why}; {quiet}"
    return Verdict("SKIP", f"{UNSETTLED}{noisy.text()}; {how}): run again, or give "
                   f"--settle-budget-s more time; {tail} (a figure whose own error is over "
                   f"{NOISE_MAX:.0%} cannot judge it)", ratio)


def repeats_line(spreads: Sequence[Spread]) -> str:
    """`; repeats: llama-bench decode@1024 6 repeats (3, then 3 more) in 31 s, ...`."""
    parts = [t for t in (s.repeats_text() for s in spreads) if t]
    return f"; repeats: {', '.join(parts)}" if parts else ""


def _ratio(served: float | None, engine: float | None, where: str, what: str,
           served_error: str | None, engine_why_not: str | None) -> float | Verdict:
    """served / engine, or the verdict without one: FAIL with no served figure, SKIP with
    no engine baseline."""
    if served is None:
        why = f"no served figure: {served_error}" if served_error else "no served figure"
        return Verdict("FAIL", f"{why} at {where}")
    if engine is None:
        return Verdict("SKIP", f"{what} at {where}; {NO_BASELINE}"
                       f"{engine_why_not or 'add --suite engine'}), so no expectation")
    return served / engine


def judge_decode(served_tok_s: float | None, engine_tok_s: float | None, depth_tokens: int,
                 *, served_error: str | None = None, engine_why_not: str | None = None,
                 floor: float = DECODE_FLOOR, sampler_ms: float = 0.0,
                 spreads: Sequence[Spread] = ()) -> Verdict:
    """Served decode >= floor x the engine's at the same depth: the served time per token may
    be the engine's / floor + `sampler_ms` (sampling on the CPU, which llama-bench skips)."""
    ratio = _ratio(served_tok_s, engine_tok_s, f"{depth_tokens} ctx",
                   f"served {served_tok_s or 0:.1f} tok/s", served_error, engine_why_not)
    if isinstance(ratio, Verdict):
        return ratio
    figures = (f"served {served_tok_s:.1f} tok/s vs engine {engine_tok_s:.1f} tok/s "
               f"(llama-bench) at {depth_tokens} ctx")
    needs = 1 / (1 / floor + sampler_ms * (engine_tok_s or 0.0) / 1000)
    rule = (f"{needs:.3f} ({floor} with {sampler_ms:g} ms a token for sampling on the CPU, "
            "which llama-bench does not do)" if sampler_ms else f"{floor}")
    return _judged(spreads, figures, ratio, ratio >= needs, f">= {rule}")


def judge_ttft(served_median_s: float | None, engine_ttft_s: float | None, prompt_tokens: int,
               *, served_error: str | None = None, engine_why_not: str | None = None,
               ceiling: float = TTFT_CEILING, spreads: Sequence[Spread] = ()) -> Verdict:
    """Served median TTFT <= ceiling x (engine prefill time + first token)."""
    ratio = _ratio(served_median_s, engine_ttft_s, f"{prompt_tokens} tokens",
                   f"median {served_median_s or 0:.3f} s", served_error, engine_why_not)
    if isinstance(ratio, Verdict):
        return ratio
    figures = (f"median {served_median_s:.3f} s vs engine {engine_ttft_s:.3f} s "
               f"(prefill + first token, llama-bench) at {prompt_tokens} tokens")
    return _judged(spreads, figures, ratio, ratio <= ceiling, f"<= {ceiling}")


def _reference(text: str, expected: Expected, card: str | None, ok: bool, needs: str,
               ratio: float | None = None, elsewhere: str = "", *, tokens: int,
               flag: str) -> Verdict:
    """The seed study's absolute figure: a check on the reference card for a figure measured
    at the reference's size (`tokens`: the run's decode depth or TTFT prompt; `flag` sets
    it), else information (another card) or not judged (another size)."""
    at = expected.reference_tokens
    differs = (None if tokens == at else f"measured at {tokens} tokens, the reference's figure "
               f"at {at if at is not None else 'a size the profile does not record'}")
    if not card or expected.reference_card.lower() not in card.lower():
        return Verdict("INFO", f"{text}; information only on {card or 'an unknown card'}"
                       f"{elsewhere}" + (f" ({differs})" if differs else ""), ratio)
    if differs:
        return Verdict("SKIP", f"{text}; {REFERENCE_SIZE}{differs}): not compared on this "
                       "card" + (f"; run at {at} tokens ({flag} {at})" if at else ""))
    return Verdict("PASS" if ok else "FAIL", f"{text}; needs {needs} on this card", ratio)


def judge_reference_decode(served_tok_s: float | None, expected: Expected,
                           card: str | None, *, depth_tokens: int) -> Verdict:
    """The seed's decode figure: served >= tolerance x it on the reference card, for a
    decode measured at the reference's depth."""
    want = expected.decode_tok_s
    if want is None:
        return Verdict("SKIP", "the profile records no reference-card figure")
    if served_tok_s is None:
        return Verdict("SKIP", f"reference {expected.reference_card}: {want:.0f} tok/s; "
                       "no served figure")
    floor = want * expected.decode_tolerance
    return _reference(f"served {served_tok_s:.1f} tok/s; {expected.reference_card} (seed "
                      f"study) {want:.0f} tok/s", expected, card, served_tok_s >= floor,
                      f">= {floor:.1f}", served_tok_s / want,
                      " (judged against the engine on this host instead)",
                      tokens=depth_tokens, flag="--decode-ctx")


def judge_reference_ttft(served_median_s: float | None, expected: Expected,
                         card: str | None, *, prompt_tokens: int) -> Verdict:
    """The seed's median TTFT: served <= 1.25 x it on the reference card, for prompts of the
    reference's size."""
    want = expected.ttft_s_median
    if want is None:
        return Verdict("SKIP", "the profile records no reference-card TTFT")
    if served_median_s is None:
        return Verdict("SKIP", f"reference {expected.reference_card}: {want:.2f} s; "
                       "no served figure")
    ceiling = want * 1.25
    return _reference(f"median {served_median_s:.3f} s; {expected.reference_card} (seed "
                      f"study) {want:.2f} s", expected, card, served_median_s <= ceiling,
                      f"<= {ceiling:.2f}", tokens=prompt_tokens, flag="--ttft-tokens")


@dataclass(frozen=True)
class VramFigures:
    """The two measures of a run's VRAM and the planner's prediction, MiB."""

    rise_mib: float | None  # peak card memory.used minus the idle baseline (seed's measure)
    process_peak_mib: float | None  # the server process's own peak (NVML per process)
    predicted_mib: float | None
    budget_mib: float
    baseline_kind: str  # what the rise is over: "idle (service stopped)" or why not idle
    why_not: str | None = None  # no measurement at all, and why
    process_is_server: bool = False  # the process peak is the server's alone (vram.py)


def judge_vram(v: VramFigures) -> Verdict:
    """The budget is checked against the rise over idle; the process peak and the planner's
    prediction are stated beside it."""
    if v.why_not:
        return Verdict("SKIP", v.why_not)
    parts = [f"process peak {v.process_peak_mib:.0f} MiB" if v.process_peak_mib is not None
             else "process peak not reported by the driver"]
    if v.predicted_mib is not None:
        parts.append(f"planner predicted {v.predicted_mib:.0f} MiB")
    if v.rise_mib is None and v.process_peak_mib is not None and v.process_is_server:
        ok = v.process_peak_mib <= v.budget_mib
        return Verdict("PASS" if ok else "FAIL",
                       f"process peak {v.process_peak_mib:.0f} MiB (the server's own, NVML), "
                       f"budget {v.budget_mib:.0f} MiB: judged on the process peak, as no rise "
                       f"over idle could be read ({v.baseline_kind})"
                       + "".join(f", {x}" for x in parts[1:]))
    if v.rise_mib is None:
        return Verdict("SKIP", "no rise over an idle baseline (" + v.baseline_kind + "); "
                       + ", ".join(parts))
    ok = v.rise_mib <= v.budget_mib
    return Verdict("PASS" if ok else "FAIL",
                   f"rise of memory.used over {v.baseline_kind} {v.rise_mib:.0f} MiB, budget "
                   f"{v.budget_mib:.0f} MiB; " + ", ".join(parts))


def vram_budget_mib(expected: Expected, budget_gib: float | None = None) -> float:
    """The VRAM budget in MiB: the user's (host data `vram_budget_gib`), else the profile's."""
    return (budget_gib if budget_gib is not None else expected.vram_budget_gib) * 1024


def _errors(records: list[RequestRecord]) -> str:
    """The causes of failed requests, for the console line of the check that used them."""
    return _failed([r.error for r in records if not r.ok and r.error])


def _failed(errs: list[str]) -> str:
    if not errs:
        return ""
    return f"; {len(errs)} request(s) failed: {errs[0][:160]}"


def engine_checks(run: EngineRun) -> list[Check]:
    if not run.requested:
        return []
    if run.error is not None and run.failed:  # llama-bench ran and failed on the model
        return [Check("engine.baseline", "FAIL", run.error)]
    if run.error is not None:  # no figure of the engine's: nothing of the server judged
        return [Check("engine.baseline", "SKIP", f"{ENGINE_NOT_RUN}{run.error}): no engine "
                      "baseline, so the served figures are not judged against one (not a sign "
                      "the server is broken); see to it (the path --llama-bench names, "
                      "llama-bench in the server's image, sudo without a password on the "
                      "host), then run again")]
    engine = run.baseline
    if engine is None:
        return [Check("engine.baseline", "SKIP", run.why_not or "")]
    parts = [f"decode {t.avg_tok_s:.1f} +/- {t.stddev_tok_s:.1f} tok/s at {t.n_depth} ctx"
             + (f" ({len(t.samples_s)} repeats)" if t.samples_s else "")
             for t in engine.decode]
    if engine.prefill:
        parts.append(f"prefill {engine.prefill.n_prompt} tokens in {engine.prefill.avg_s:.3f} s "
                     f"({engine.prefill.avg_tok_s:.0f} tok/s"
                     + (f", {len(engine.prefill.samples_s)} repeats"
                        if engine.prefill.samples_s else "") + ")")
    threads = engine.decode[0].n_threads if engine.decode else "?"
    return [Check("engine.baseline", "INFO", "llama-bench, " + "; ".join(parts)
                  + f"; {threads} threads; " + engine.placement)]


def clock_checks(vr: VramResult) -> list[Check]:
    """The card's SM clock while it was busy during the served suites (information: beside
    a decode below its engine, whether the card was held down, and why); a decode measured
    again after them (suites.decode_again) is not in it."""
    lo, hi = vr.sm_clock_min_mhz, vr.sm_clock_max_mhz
    if lo is None or hi is None:
        return []
    clock = f"{hi:,.0f} MHz throughout" if lo == hi else f"{lo:,.0f} to {hi:,.0f} MHz"
    why = ("NVML's reasons for holding it down could not be read" if vr.clock_reasons is None
           else f"held down by: {', '.join(vr.clock_reasons)}" if vr.clock_reasons
           else "NVML named no reason it was held down")
    return [Check("gpu.clocks", "INFO", f"SM clock {clock} while the card was busy in the "
                  f"served suites; {why}")]


def vs_engine_name(ctx_tokens: int) -> str:
    """The name of the check of the served decode at a depth against its engine's."""
    return f"decode.vs_engine@{ctx_tokens}"


def _first_pair_said(first: dict[str, float] | None) -> str:
    """What a decode figure measured again as a pair (suites.decode_again) first measured."""
    if first is None:
        return ""
    return (f"; measured again as a pair, llama-bench then the server, after the first pair "
            f"was below the bar (served {first['served_tok_s']:.1f} tok/s vs engine "
            f"{first['engine_tok_s']:.1f} tok/s: ratio {first['ratio']:.3f})")


def decode_checks(runs: list[DecodeResult], engine: EngineRun, expected: Expected,
                  card: str | None, cpu: bool, sampler_on_cpu: bool = False) -> list[Check]:
    """`cpu`: a CPU build (its own floor); `sampler_on_cpu`: a GPU server without backend
    sampling (CPU_SAMPLER_MS allowed a token)."""
    base = engine.baseline
    failed = [e for r in runs for e in r.failed_repeats]  # a repeat the server failed
    out = [Check.of("decode.records_consistent",
                    all(r.records_consistent for r in runs) and not failed,
                    "usage.completion_tokens == timings.predicted_n, cache_n == 0 on every "
                    "request" + _errors([r.record for r in runs])
                    + (f"; {len(failed)} repeat(s) failed: {failed[0][:160]}" if failed else ""))]
    for r in runs:
        mine = served_spread("served decode", r.samples_tok_s, "tok/s",
                             Settled.from_json(r.settle) if r.settle else None)
        spreads = [*engine_spreads(r.again_engine or base), *([mine] if mine else [])]
        v = judge_decode(r.decode_tok_s, r.engine_tok_s(base),
                         r.ctx_tokens, served_error=r.record.error,
                         engine_why_not=engine.why_not,
                         floor=DECODE_FLOOR_CPU if cpu else DECODE_FLOOR,
                         sampler_ms=CPU_SAMPLER_MS if sampler_on_cpu and not cpu else 0.0,
                         spreads=spreads)
        out.append(Check(vs_engine_name(r.ctx_tokens), v.status,
                         v.detail + repeats_line(spreads) + _first_pair_said(r.first_pair)))
    # the run at the reference's depth, if one was measured (else the deepest, not compared)
    at = next((r for r in runs if r.ctx_tokens == expected.reference_tokens), runs[-1])
    ref = judge_reference_decode(at.decode_tok_s, expected, card, depth_tokens=at.ctx_tokens)
    if ref.status in ("PASS", "FAIL"):  # it judged that depth's figure: its check says so
        out = [Check(c.name, c.status, c.detail + BY_REFERENCE)
               if c.name == vs_engine_name(at.ctx_tokens) and NO_BASELINE in c.detail
               else c for c in out]
    return out + [Check("decode.reference_card", ref.status, ref.detail)]


def ttft_checks(res: TtftResult, engine: EngineRun, expected: Expected,
                card: str | None, cpu: bool = False) -> list[Check]:
    recs, med, p95 = res.records, res.median_s, res.p95_s
    base = engine.baseline
    mine = served_spread("served TTFT", res.ttft_s, "s",
                         Settled.from_json(res.settle) if res.settle else None)
    spreads = [*engine_spreads(base), *([mine] if mine else [])]
    v = judge_ttft(med, res.engine_ttft_s(base), res.target_tokens,
                   served_error=next((r.error for r in recs if r.error), None),
                   engine_why_not=engine.why_not,
                   ceiling=TTFT_CEILING_CPU if cpu else TTFT_CEILING, spreads=spreads)
    ref = judge_reference_ttft(med, expected, card, prompt_tokens=res.target_tokens)
    return [
        Check.of("ttft.no_prompt_reuse", res.no_prompt_reuse,
                 f"timings.cache_n == 0 on all {len(recs)} requests" + _errors(recs)),
        Check("ttft.vs_engine", v.status,
              v.detail + (f"; p95 {p95:.3f} s ({PERCENTILE_METHOD}) over "
                          f"{len(res.ttft_s)} requests" if p95 is not None else "")
              + repeats_line(spreads) + _errors(recs)),
        Check("ttft.reference_card", ref.status, ref.detail)]


def yield_reference_ttft(checks: list[Check]) -> list[Check]:
    """A `ttft.reference_card` FAIL becomes INFO when `ttft.vs_engine` and every
    `decode.vs_engine@<depth>` passed (docs/verify.md, "What to expect per card"); without
    the decode checks it stays FAIL and says what to add."""
    ttft = next((c for c in checks if c.name == "ttft.vs_engine"), None)
    ref = next((c for c in checks if c.name == "ttft.reference_card"), None)
    if ref is None or ref.status != "FAIL" or ttft is None or ttft.status != "PASS":
        return checks
    decode = [c for c in checks if c.name.startswith("decode.vs_engine@")]
    if not decode:
        why = (f"{ref.detail}; it yields to the engine-relative checks when those pass: "
               "ttft.vs_engine passed, the decode ones did not run (add --suite decode)")
        return [Check(c.name, c.status, why) if c is ref else c for c in checks]
    if any(c.status != "PASS" for c in decode):
        return checks
    depths = ", @".join(c.name.split("@", 1)[1] for c in decode)
    why = (f"{ref.detail}; the engine-relative checks decide (ttft.vs_engine and "
           f"decode.vs_engine@{depths} passed): the server matches its own llama-bench on "
           "this card, so the gap to the seed's figure is the build or the card, not the "
           "server (information)")
    return [Check(c.name, "INFO", why) if c is ref else c for c in checks]


def niah_checks(res: NiahResult, expected: Expected) -> list[Check]:
    cases, k = res.cases, res.passed
    lo, hi = res.clopper_pearson_95
    err_note = _failed([c.error for c in cases if c.error])
    exact = all(c.prompt_tokens == res.target_tokens for c in cases)
    return [
        Check.of("niah.prompt_tokens_exact", exact,
                 f"every prompt exactly {res.target_tokens} tokens "
                 "(server usage.prompt_tokens)" + err_note),
        Check.of("niah.pass", k >= expected.niah_min_pass,
                 f"{k}/{len(cases)} (95% Clopper-Pearson recall {lo:.0%}-{hi:.0%}); "
                 f"needs >= {expected.niah_min_pass}" + err_note)]


def as_measured(value: float | None, unit: str, fmt: str) -> str:
    """`1.40 s`, or `not measured` for a figure the run has not got (never a made-up 0)."""
    return "not measured" if value is None else f"{value:{fmt}} {unit}"


def load_checks(res: LoadResult) -> list[Check]:
    errors = res.errors
    agg, p95 = res.aggregate_tok_s, res.ttft_s_p95
    return [Check.of(
        "load.no_failures", res.failed == 0 and res.requests > 0,
        f"{res.requests} requests, {res.failed} failed, "
        + (f"{agg:.1f} tok/s aggregate" if agg is not None else "aggregate tok/s not measured")
        + f", p95 TTFT {as_measured(p95, 's', '.2f')}"
        + (f"; first error: {(errors[0] or '')[:160]}" if errors else ""))]


def vram_figures(vr: VramResult, engine: EngineBaseline | None, budget_mib: float,
                 predicted_mib: float | None) -> VramFigures:
    if vr.skipped:
        return VramFigures(None, None, predicted_mib, budget_mib, "", why_not=vr.skipped)
    idle = engine.idle_used_mib if engine else None
    rise = (vr.peak_mib - idle) if idle is not None and vr.peak_mib is not None else None
    kind = ("idle (memory.used with the service stopped, before llama-bench)"
            if idle is not None else
            "none: the server was already loaded when sampling began; the idle baseline is "
            "read with the service stopped, add --suite engine")
    return VramFigures(rise, vr.peak_process_mib, predicted_mib, budget_mib, kind,
                       process_is_server=vr.process_is_the_server)


def vram_checks(vr: VramResult, engine: EngineBaseline | None, budget_mib: float,
                predicted_mib: float | None, *, asked: bool = True) -> list[Check]:
    """`asked`: the vram suite was named; else a card sampled anyway is shown as INFO, never
    judged (a run that asked for no VRAM check neither passes nor fails on one)."""
    v = judge_vram(vram_figures(vr, engine, budget_mib, predicted_mib))
    detail = v.detail + (f"; {vr.achieved_hz:.0f} Hz sampling" if vr.achieved_hz else "")
    if not asked:
        return [Check("vram.rise_vs_budget", "INFO", "not judged, as the vram suite was not "
                      f"asked for (add --suite vram): {detail}")]
    return [Check("vram.rise_vs_budget", v.status, detail)]


EXIT_PASSED = 0  # no check failed and every requested decode/TTFT/NIAH/VRAM check was judged
EXIT_FAILED = 1  # a check failed
EXIT_NOT_JUDGED = 3  # nothing failed, but a requested one of them was not judged (SKIP/INFO)
AREAS = {"decode": "decode", "ttft": "TTFT", "niah": "NIAH", "vram": "VRAM",
         "gateway": "the gateway",
         "engine": "engine baseline"}  # engine: only when it was asked for and not measured
# the checks that judge each area's figure (consistency checks such as
# decode.records_consistent judge the measurement, not the speed)
VERDICT_CHECKS = {"decode": ("decode.vs_engine@", "decode.reference_card"),
                  "ttft": ("ttft.vs_engine", "ttft.reference_card"),
                  "niah": ("niah.pass",), "vram": ("vram.rise_vs_budget",),
                  "gateway": ("gateway.requests_ok", "gateway.same_tokens", "gateway.overhead")}


@dataclass(frozen=True)
class Coverage:
    """Which requested areas (decode, TTFT, NIAH, VRAM) a PASS or FAIL judged, and why the
    others were not; the run's word and exit status follow from it."""

    judged: list[str]
    not_judged: list[tuple[str, str]]  # (area, why)
    failed: bool

    @property
    def exit_status(self) -> int:
        if self.failed:
            return EXIT_FAILED
        return EXIT_NOT_JUDGED if self.not_judged else EXIT_PASSED

    @property
    def word(self) -> str:
        return {EXIT_FAILED: "FAILED", EXIT_NOT_JUDGED: "INCOMPLETE"}.get(self.exit_status,
                                                                         "PASSED")

    def line(self) -> str:
        """What was judged, in the summary's words."""
        judged = ", ".join(AREAS[a] for a in self.judged) or "none"
        if not self.not_judged:
            return f"judged: {judged}" if self.judged else "no speed, NIAH or VRAM check requested"
        missing = ", ".join(AREAS[a] for a, _ in self.not_judged)
        lead = "" if self.failed else "nothing failed, but "
        return f"{lead}not judged: {missing}; judged: {judged}"


# the check a request of the served suites that failed fails: the server stopped answering,
# or answered it with an error (suites.stopped; report.py's sentence names the server's log
# for it, as for a failed smoke check)
STOPPED = "server.answered"


def _area_not_judged(mine: list[Check], none_ran: str) -> str | None:
    """Why an area was not judged, from its verdict checks (`mine`); None: judged. Each decode
    depth judges its own figure: against the engine, or, at the reference's depth without an
    engine baseline, against the reference card (BY_REFERENCE); one depth does not stand for
    another, nor a quiet figure for a noisy one."""
    busy = next((c for c in mine if c.status == "SKIP" and c.detail.startswith(NOT_JUDGED)),
                None)
    if busy is not None:
        return busy.detail
    depths = [c for c in mine if c.name.startswith("decode.vs_engine@")]
    gap = next((c for c in depths if c.status not in ("PASS", "FAIL")
                and not c.detail.endswith(BY_REFERENCE)), None)
    if gap is not None:
        return gap.detail
    if depths or any(c.status in ("PASS", "FAIL") for c in mine):
        return None
    return next((c.detail for c in mine if c.status == "SKIP"), None) or next(
        (c.detail for c in mine), none_ran)


def coverage(checks: list[Check], requested: list[str]) -> Coverage:
    """`requested`: the suites the user named. An area is judged when one of its verdict
    checks is PASS or FAIL, and every decode depth judged its figure (`_area_not_judged`). A
    requested engine suite that gave no baseline (engine.baseline SKIP) is not judged
    either."""
    judged, missing = [], []
    none_ran = ("not measured: the served suites ended at a failed request (server.answered)"
                if any(c.name == STOPPED and not c.passed for c in checks)
                else "no check ran (the smoke check failed first?)")
    for area in VERDICT_CHECKS:
        if area not in requested:
            continue
        why = _area_not_judged([c for c in checks if c.name.startswith(VERDICT_CHECKS[area])],
                               none_ran)
        if why is None:
            judged.append(area)
        else:
            missing.append((area, why))
    # an engine suite asked for and not measured, when no area says so already
    eng = next((c for c in checks if c.name == "engine.baseline" and c.status == "SKIP"), None)
    if "engine" in requested and eng and not any(NO_BASELINE in why for _, why in missing):
        missing.append(("engine", eng.detail))
    return Coverage(judged, missing, failed=any(not c.passed for c in checks))
