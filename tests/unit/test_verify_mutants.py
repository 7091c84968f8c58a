"""verify's rules that a mutation review left with no test failing when they change, each held
here on inputs either side of it:

- the reference card's TTFT (judge.yield_reference_ttft, and suites.py calling it): a FAIL
  yields to information only when ttft.vs_engine and every decode.vs_engine@<depth> PASSED;
  a check left unjudged (a busy host) is no pass, and a reference figure that passed, or was
  not compared, is left as it was;
- the CPU sampling allowance (judge.CPU_SAMPLER_MS, 2 ms a token) in a GPU server's decode
  floor, to a hundredth of a tok/s at an engine rate where 0.01 ms moves the floor by 1 tok/s;
- TTFT on a busy host (suites.settled_ttft): with every round busy the figure is made of the
  busy rounds' requests and not judged ("the host was busy (", judge.BUSY); with a quiet round
  the busy ones are set aside and the quiet ones judged;
- NIAH (suites.run_niah): the first seven-digit number of the answer is its answer; the
  needle's value later in the answer, after a wrong one, does not pass.

The served requests come from a stand-in client (the server's tokenizer counts words) and the
host's load from a stand-in shell printing settle.LOAD_SNAPSHOT's line; the judging, the
settle loop and the prompts are verify's own.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from typing import Any

import pytest

from beekeeper.core.profiles import PROFILES
from beekeeper.verify import suites
from beekeeper.verify.client import RequestRecord, StreamEvent
from beekeeper.verify.engine import EngineBaseline
from beekeeper.verify.judge import (
    BUSY,
    EXIT_NOT_JUDGED,
    Check,
    coverage,
    decode_checks,
    ttft_checks,
    yield_reference_ttft,
)
from beekeeper.verify.report import Report
from beekeeper.verify.results import EngineRun, TtftResult
from beekeeper.verify.suites import Sizes, _Run, _served_suites, run_niah, settled_ttft
from beekeeper.verify.vram import Locality

from .harness import CPU_EXPECTED, bench, busy_settle, decode_run, engine, record

CARD = "NVIDIA GeForce RTX 4090"  # the reference card of q8-turbo4-64k's figures
TURBO4 = PROFILES["q8-turbo4-64k"]  # reference TTFT 8.96 s at 60,000 tokens: needs <= 11.20


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


# --- the reference card's TTFT: judged, yielding, or left as it is ----------------------------

def turbo4_engine() -> EngineRun:
    """llama-bench on the 4090 at the reference's size: decode 165.5 / 128.2 tok/s at 4K / 60K,
    60,000 tokens prefilled with a TTFT of 10.97 s (benchmarks/h200/2026-12-01-verify's
    figures)."""
    return EngineRun(requested=True, baseline=EngineBaseline(
        placement="recorded", commands=[],
        decode=[bench(0, 512, 4096, 165.5), bench(0, 512, 60000, 128.2)],
        prefill=bench(60000, 0, 0, 60000 / (10.97 - 1 / 128.2))))


def turbo4_checks(ttft_s: float, *, ttft_settle: dict | None = None,
                  decode_settle: dict | None = None) -> list[Check]:
    """q8-turbo4-64k on the 4090 as verify judges it: decode 152.3 / 124.0 tok/s (each a
    pass), TTFT `ttft_s` at 60,000 tokens, then the reference TTFT rule; a `*_settle` marks
    that figure's rounds (a busy host's: not judged)."""
    decode = [replace(decode_run([152.3] * 3), ctx_tokens=4096),
              replace(decode_run([124.0] * 3, settle=decode_settle), ctx_tokens=60000)]
    ttft = TtftResult(60000, [60000] * 5, [record(ttft_s=ttft_s) for _ in range(5)],
                      settle=ttft_settle)
    run = turbo4_engine()
    return yield_reference_ttft(
        decode_checks(decode, run, TURBO4.expected, CARD, cpu=False,
                      sampler_on_cpu=TURBO4.samples_on_cpu)
        + ttft_checks(ttft, run, TURBO4.expected, CARD))


def test_the_reference_ttft_fail_stands_beside_an_engine_check_a_busy_host_left_unjudged():
    """11.86 s against the seed's 8.96 s x 1.25 = 11.20 s fails the reference card; it yields
    to information when the server matched its engine (ttft.vs_engine 1.081, both decode
    depths passed), and not when the host was busy while the TTFT or a decode depth was
    measured: not judged is not passed.
    Mutant: `ttft.status != "PASS"` read as `ttft.status == "FAIL"` (a SKIP counted as a
    pass); `any(c.status != "PASS" ...)` read as `any(c.status == "FAIL" ...)` over the decode
    checks."""
    healthy = by_name(turbo4_checks(11.86))
    assert healthy["ttft.vs_engine"].status == "PASS"
    assert healthy["ttft.reference_card"].status == "INFO"  # the baseline: it yields
    fail = ("median 11.860 s; RTX 4090 (seed study) 8.96 s; needs <= 11.20 on this card")

    busy_ttft = by_name(turbo4_checks(11.86, ttft_settle=busy_settle([11.86] * 5)))
    assert busy_ttft["ttft.vs_engine"].status == "SKIP"
    assert busy_ttft["ttft.vs_engine"].detail.startswith(BUSY)
    ref = busy_ttft["ttft.reference_card"]
    assert (ref.status, ref.detail) == ("FAIL", fail), ref.detail

    busy_depth = by_name(turbo4_checks(11.86, decode_settle=busy_settle([124.0] * 3)))
    assert busy_depth["decode.vs_engine@4096"].status == "PASS"
    assert busy_depth["decode.vs_engine@60000"].status == "SKIP"
    assert busy_depth["decode.vs_engine@60000"].detail.startswith(BUSY)
    assert busy_depth["ttft.vs_engine"].status == "PASS"
    ref = busy_depth["ttft.reference_card"]
    assert (ref.status, ref.detail) == ("FAIL", fail), ref.detail


def test_a_reference_ttft_that_passed_or_was_not_compared_is_left_as_it_was():
    """Only a FAIL yields: a reference TTFT that passed on the card (11.0 s <= 11.20 s) stays
    PASS, one measured at another size stays SKIP, word for word, beside engine checks that
    all passed.
    Mutant: the `ref.status != "FAIL"` condition dropped (every reference TTFT beside passing
    engine checks made INFO, "the gap to the seed's figure is the build or the card")."""
    passed = by_name(turbo4_checks(11.0))
    assert passed["ttft.vs_engine"].status == "PASS"
    assert all(c.status == "PASS" for n, c in passed.items() if n.startswith("decode.vs_engine"))
    assert (passed["ttft.reference_card"].status, passed["ttft.reference_card"].detail) == (
        "PASS", "median 11.000 s; RTX 4090 (seed study) 8.96 s; needs <= 11.20 on this card")
    other_size = [Check("decode.vs_engine@4096", "PASS", "d"),
                  Check("ttft.vs_engine", "PASS", "t"),
                  Check("ttft.reference_card", "SKIP", "median 0.300 s; not the reference's "
                        "size (measured at 4096 tokens, the reference's figure at 60000)")]
    assert yield_reference_ttft(other_size) == other_size


def test_the_served_suites_yield_the_reference_ttft_to_a_server_that_matches_its_engine(
        monkeypatch):
    """suites.py's wiring: the 4090 run of the reference's size with decode and TTFT both
    matching llama-bench, the TTFT 11.86 s over the seed's 11.20 s: the reference TTFT is
    information and the run PASSED, as docs/verify.md ("What to expect per card") says.
    Mutant: `report.checks = judge.yield_reference_ttft(report.checks)` dropped from
    _served_suites (the reference TTFT FAILs the healthy server)."""
    monkeypatch.setattr(suites, "run_decode", lambda client, ctx, *a, **k: replace(
        decode_run([124.0] * 3), ctx_tokens=ctx))
    monkeypatch.setattr(suites, "settled_ttft", lambda client, n, k, **kw: TtftResult(
        n, [n] * k, [record(ttft_s=11.86) for _ in range(k)]))
    sizes = Sizes(decode_ctx_tokens=[60000], decode_out_tokens=512, ttft_tokens=60000,
                  ttft_requests=5, niah_tokens=512, settle_budget_s=0)
    run = _Run(profile=TURBO4, names=["decode", "ttft"], sizes=sizes, engine=turbo4_engine(),
               card=CARD, where=Locality(False, "elsewhere"), shell=None)
    report = Report(profile=TURBO4.name, url="http://127.0.0.1:9", started_utc="t",
                    budget_mib=10240.0)
    _served_suites(None, run, report)  # type: ignore[arg-type]  # the measurements are set
    got = by_name(report.checks)
    assert got["decode.vs_engine@60000"].status == "PASS"
    assert got["ttft.vs_engine"].status == "PASS"
    ref = got["ttft.reference_card"]
    assert ref.status == "INFO", ref.detail
    assert ref.detail.startswith("median 11.860 s; RTX 4090 (seed study) 8.96 s; needs <= "
                                 "11.20 on this card; the engine-relative checks decide "
                                 "(ttft.vs_engine and decode.vs_engine@60000 passed)")
    assert coverage(report.checks, ["decode", "ttft"]).word == "PASSED"


# --- the CPU sampling allowance in a GPU server's decode floor -------------------------------

def gpu_decode(served_tok_s: float, engine_tok_s: float) -> Check:
    """decode.vs_engine@1024 of a GPU server sampling on the CPU, as decode_checks judges it,
    against a quiet llama-bench at `engine_tok_s`."""
    run = EngineRun(requested=True, baseline=EngineBaseline(
        placement="recorded", commands=[], decode=[bench(0, 160, 1024, engine_tok_s)]))
    checks = decode_checks([decode_run([served_tok_s] * 3)], run, TURBO4.expected, None,
                           cpu=False, sampler_on_cpu=True)
    return by_name(checks)["decode.vs_engine@1024"]


@pytest.mark.parametrize("engine_tok_s", [1000.0, 400.0])
def test_the_sampling_allowance_is_2_ms_a_token_to_a_hundredth_of_a_tok_s(engine_tok_s):
    """At 1,000 tok/s llama-bench takes 1 ms a token; the server may take 1 / 0.95 ms plus
    2 ms for sampling on the CPU: 3.0526 ms, a floor of 327.586 tok/s (at 400 tok/s:
    2.5 / 0.95 + 2 = 4.6316 ms, 215.909 tok/s). 0.01 ms more or less moves the floor by
    about 1.07 tok/s (0.47 at 400); the served figure 0.02 tok/s either side passes or fails.
    Mutant: CPU_SAMPLER_MS 2.0 as 2.01, 1.99, 3.0, 1.0 or 0.0."""
    floor_tok_s = 1000 / (1000 / engine_tok_s / 0.95 + 2.0)  # the rule, from the engine's rate
    assert floor_tok_s == pytest.approx({1000.0: 327.586, 400.0: 215.909}[engine_tok_s],
                                        abs=5e-4)
    above = gpu_decode(floor_tok_s + 0.02, engine_tok_s)
    below = gpu_decode(floor_tok_s - 0.02, engine_tok_s)
    assert above.status == "PASS", above.detail
    assert below.status == "FAIL", below.detail
    needs = floor_tok_s / engine_tok_s
    assert f"needs >= {needs:.3f} (0.95 with 2 ms a token for sampling on the CPU" in above.detail


# --- TTFT on a busy host ----------------------------------------------------------------------

class Server:
    """A llama-server stand-in: one token a word (its template and tokenizer for the prompts'
    fit), each chat request answered with the next of `ttfts_s` as its first token's time
    (the warm-up request first), or with `answer(i, needle)` as its text (i counts the
    requests, `needle` the value the prompt hides, if any)."""

    def __init__(self, ttfts_s: list[float] | None = None, answer: Any = None):
        self.ttfts_s = list(ttfts_s or [])
        self.answer = answer
        self.chats = 0

    def count_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        return len(" ".join(m["content"] for m in messages).split())

    def stream_chat(self, messages: list[dict[str, str]], max_tokens: int,
                    **kw: Any) -> RequestRecord:
        prompt = self.count_prompt_tokens(messages)
        needle = re.search(r"magic number is: (\d+)\.", messages[0]["content"])
        text = self.answer(self.chats, needle[1] if needle else None) if self.answer else "w"
        ttft = self.ttfts_s.pop(0) if self.ttfts_s else 0.1
        self.chats += 1
        return RequestRecord(ok=True, status_code=200, error=None, t_send_s=0.0,
                             events=[StreamEvent(ttft, "content", 1)], text=text,
                             usage={"prompt_tokens": prompt, "completion_tokens": 1},
                             timings={"cache_n": 0, "predicted_n": 1})


class Host:
    """The serving host's /proc/stat as settle.LOAD_SNAPSHOT prints it, read before and after
    each round: 2 CPUs at 100 ticks a second, 1 s a round; other processes use 1.6 CPUs over
    a busy round (80% of its CPU time, busy over 10%) and none over a quiet one."""

    label = "gpu-box"

    def __init__(self, busy_rounds: list[bool]):
        self.busy_rounds = list(busy_rounds)
        self.readings = 0
        self.busy = self.total = 0

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        assert script == suites.LOAD_SNAPSHOT
        if self.readings % 2:  # the reading after a round
            self.total += 200
            self.busy += 160 if self.busy_rounds[self.readings // 2] else 0
        self.readings += 1
        return subprocess.CompletedProcess(["bash"], 0, f"beekeeper-load {self.busy} "
                                           f"{self.total} 100 2 0\n", "")


def test_ttft_measured_on_a_host_busy_every_round_is_the_busy_figure_not_judged():
    """Both rounds busy (the first, and the one measurement again a busy round gets): the
    figure is made of their six requests (median 1.0 s, 0.980 of the engine's 1.02 s) and the
    check says the host was busy, not judged; the run is INCOMPLETE.
    Mutant: settled_ttft's fallback `if not any(used): used = [True] * len(rounds)` dropped
    (no request kept: "no served figure", a FAIL blaming the server for a busy host)."""
    res = settled_ttft(Server([0.5] + [1.0] * 6), 512, 3,  # type: ignore[arg-type]
                       budget_s=60.0, shell=Host([True, True]))
    checks = by_name(ttft_checks(res, engine(), CPU_EXPECTED, None, cpu=True))
    c = checks["ttft.vs_engine"]
    assert c.status == "SKIP", c.detail
    assert res.settle is not None and res.settle["stop"] == "busy"
    assert [r["busy"] for r in res.settle["rounds"]] == [True, True]
    assert len(res.records) == 6 and res.set_aside == [] and res.median_s == 1.0
    assert c.detail.startswith("the host was busy (other processes used 1.60 of 2 CPUs, 80% of "
                               "the host's CPU time (busy over 10%) while served TTFT was "
                               "measured, 0 repeats (rounds of 3 set aside: the host busy, "
                               "then 3 set aside: the host busy)")
    assert "ratio 0.980 not judged" in c.detail
    assert checks["ttft.no_prompt_reuse"].status == "PASS"
    cov = coverage(list(checks.values()), ["ttft"])
    assert cov.exit_status == EXIT_NOT_JUDGED
    assert dict(cov.not_judged)["ttft"].startswith(BUSY)


def test_ttft_after_a_busy_round_is_judged_on_the_quiet_rounds_requests_alone():
    """A busy round (three requests at 3.0 s) measured again on a quiet host (three at 1.0 s):
    the quiet three are the figure and it PASSES (0.980 of the engine); the busy three are
    set aside, kept for the prompt-cache check only.
    Mutant: `if not any(used)` read as `if not all(used)` (the busy round's requests judged
    beside the quiet ones: median 2.0 s, spread 55%), or `keep` without its `if u`."""
    res = settled_ttft(Server([0.5] + [3.0] * 3 + [1.0] * 3), 512, 3,  # type: ignore[arg-type]
                       budget_s=60.0, shell=Host([True, False]))
    c = by_name(ttft_checks(res, engine(), CPU_EXPECTED, None, cpu=True))["ttft.vs_engine"]
    assert c.status == "PASS", c.detail
    assert res.settle is not None and res.settle["stop"] == "settled"
    assert [r["used"] for r in res.settle["rounds"]] == [False, True]
    assert res.ttft_s == [1.0] * 3, res.ttft_s
    assert [r.ttft_s for r in res.set_aside] == [3.0] * 3
    assert c.detail.startswith("median 1.000 s vs engine 1.020 s (prefill + first token, "
                               "llama-bench) at 512 tokens: ratio 0.980, needs <= 1.5")


# --- NIAH: the answer's first seven-digit number is its answer --------------------------------

OTHER = "1111111"  # a wrong seven-digit answer


def test_niah_reads_the_first_number_of_the_answer_not_any_or_the_last():
    """Three cases: the needle's value first, then a wrong number (pass); a wrong number
    first, then the value (fail: the model answered the wrong number, and repeated the
    haystack's after); no number at all (fail).
    Mutant: `found[0] == value` read as `value in found` (the second case passes) or as
    `found[-1] == value` (the first case fails); `bool(found) and` dropped (IndexError)."""
    answers = {0: lambda v: f"{v}. Not {OTHER}.", 1: lambda v: f"{OTHER}; the text also says {v}",
               2: lambda v: "I could not find it."}
    server = Server(answer=lambda i, needle: answers[i](needle))
    res = run_niah(server, 300, 3, None)  # type: ignore[arg-type]
    values = [c.expected for c in res.cases]
    assert OTHER not in values and all(re.fullmatch(r"\d{7}", v) for v in values)
    assert [c.found for c in res.cases] == [[values[0], OTHER], [OTHER, values[1]], []]
    assert [c.passed for c in res.cases] == [True, False, False], [c.answer for c in res.cases]
    assert res.passed == 1
    assert all(c.prompt_tokens == c.fitted_tokens == 300 for c in res.cases)


def test_niah_does_not_read_the_value_inside_a_longer_number():
    """The answer `<value>9` (eight digits) or `9<value>` is not the value: the needle is a
    number of exactly seven digits.
    Mutant: NEEDLE_RE without its lookahead `(?!\\d)` or its lookbehind `(?<!\\d)`."""
    answers = {0: lambda v: f"{v}9", 1: lambda v: f"9{v}", 2: lambda v: f"({v})"}
    server = Server(answer=lambda i, needle: answers[i](needle))
    res = run_niah(server, 300, 3, None)  # type: ignore[arg-type]
    assert [c.found for c in res.cases] == [[], [], [res.cases[2].expected]]
    assert [c.passed for c in res.cases] == [False, False, True]
