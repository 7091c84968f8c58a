"""verify's second pair (suites.decode_again): a served decode below its bar is measured again
once as a pair, llama-bench at that depth and then the server, and the second pair judged,
its check saying the first; a decode that passed, one whose request failed, or one with no
engine verify can run again is left as it was; a server verify could not start again fails.

The served figures come from a stand-in for the server's decode requests (suites.run_decode)
and llama-bench's from canned baselines; the judging, the pairing and the report are
verify's own.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from typing import Any

import pytest

from beekeeper.core.profiles import PROFILES
from beekeeper.verify import suites
from beekeeper.verify.engine import EngineBaseline, EngineError, EngineFailed
from beekeeper.verify.judge import Check, coverage
from beekeeper.verify.report import Report, verdict_sentence
from beekeeper.verify.results import EngineRun, TtftResult
from beekeeper.verify.suites import Sizes, _Run, _served_suites, decode_again
from beekeeper.verify.vram import Locality

from .harness import bench, decode_run, record

TURBO4 = PROFILES["q8-turbo4-64k"]  # a GPU profile sampling on the CPU: 2 ms a token allowed
CARD = "NVIDIA H100 80GB HBM3"  # not the reference card: the engine-relative checks decide
RTX4090 = "NVIDIA GeForce RTX 4090"


def baseline(**tok_s: float) -> EngineBaseline:
    """llama-bench's decode at each depth (`d4096=150.0`), a 60,000-token prefill in 10.8 s."""
    return EngineBaseline(placement="recorded", commands=[],
                          decode=[bench(0, 160, int(k[1:]), v) for k, v in tok_s.items()],
                          prefill=bench(60000, 0, 0, 60000 / 10.8))


class Again:
    """The engine's `again`: the depths it was asked for, llama-bench's figures then."""

    def __init__(self, raises: Exception | None = None, **tok_s: float) -> None:
        self.asked: list[list[int]] = []
        self.tok_s, self.raises = tok_s, raises

    def __call__(self, depths: list[int]) -> EngineBaseline:
        self.asked.append(depths)
        if self.raises is not None:
            raise self.raises
        return baseline(**{f"d{d}": self.tok_s[f"d{d}"] for d in depths})


class Client:
    """What run_suites asks of the client beside the requests (stand-ins): its URL, /props."""

    class http:  # noqa: N801  # httpx.Client's attribute
        base_url = "http://127.0.0.1:9"

    def props(self) -> dict[str, Any]:
        return {}


class Shell:
    label = "the host"


CLIENT, SHELL = Client(), Shell()  # what verify passes on: the client, the host's shell


class Asked(list):
    """The depths the server's decode was measured at, in order; `calls`: each call's
    arguments after the client."""

    calls: list[tuple[Any, ...]]


def served(monkeypatch: pytest.MonkeyPatch, **rates: list[float]) -> Asked:
    """The server's decode: at each depth (`d4096=[100.0, 140.0]`), the next figure of its
    list each time that depth is measured."""
    asked = Asked()
    asked.calls = []

    def run_decode(client: Any, ctx: int, *a: Any, **k: Any) -> Any:
        assert client is CLIENT
        asked.append(ctx)
        asked.calls.append((ctx, *a, sorted(k.items())))
        rate = rates[f"d{ctx}"].pop(0)
        return replace(decode_run([rate] * 3), ctx_tokens=ctx)

    monkeypatch.setattr(suites, "run_decode", run_decode)
    return asked


def verified(engine: EngineRun, depths: list[int], names: tuple[str, ...] = ("decode",),
             card: str = CARD, profile: Any = TURBO4) -> Report:
    """The served suites, then decode_again, as run_suites runs them."""
    sizes = Sizes(decode_ctx_tokens=depths, decode_out_tokens=160, ttft_tokens=60000,
                  ttft_requests=3, niah_tokens=512, decode_repeats=4, settle_budget_s=7.0)
    run = _Run(profile=profile, names=list(names), sizes=sizes, engine=engine, card=card,
               where=Locality(False, "elsewhere"), shell=SHELL)  # type: ignore[arg-type]
    report = Report(profile=profile.name, url="http://127.0.0.1:9", started_utc="t",
                    budget_mib=10240.0, requested=list(names), engine=engine.baseline)
    _served_suites(CLIENT, run, report)  # type: ignore[arg-type]  # the requests: stand-ins
    decode_again(CLIENT, run, report)  # type: ignore[arg-type]
    return report


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_a_decode_below_its_bar_is_measured_again_and_the_second_pair_judged(monkeypatch,
                                                                              capsys):
    """verify 2 on the H100 (2026-12-07): 107.8 tok/s served against 152.3 of llama-bench at
    4096 (0.708, the bar 0.737). Measured again, llama-bench 120.0 then the server 115.0
    (0.958): the check PASSES on the second pair and says the first; the figures the report
    states are the second pair's.
    Mutant: decode_again not called from run_suites (the first pair's FAIL stands); the
    second pair judged against the first engine figure (115 / 152.3 = 0.755: its ratio)."""
    again = Again(d4096=120.0)
    asked = served(monkeypatch, d4096=[107.8, 115.0])
    report = verified(EngineRun(True, baseline(d4096=152.3), again=again), [4096])
    check = by_name(report.checks)["decode.vs_engine@4096"]
    assert check.status == "PASS", check.detail
    assert check.detail.startswith("served 115.0 tok/s vs engine 120.0 tok/s (llama-bench) at "
                                   "4096 ctx: ratio 0.958, needs >= "), check.detail
    assert check.detail.endswith(
        "; measured again as a pair, llama-bench then the server, after the first pair was "
        "below the bar (served 107.8 tok/s vs engine 152.3 tok/s: ratio 0.708)")
    assert again.asked == [[4096]] and asked == [4096, 4096]
    first, second = asked.calls  # the same request: out tokens, seed, repeats, budget
    assert first == second == (4096, 160, [("budget_s", 7.0), ("repeats", 4), ("seed", 7),
                                           ("shell", SHELL)])
    assert "  decode: below the bar at 4096 ctx: measured again as a pair, llama-bench then " \
        "the server, in case the host's pace changed between them\n" in capsys.readouterr().out
    # the reference figure is the second pair's too (information on this card)
    ref = by_name(report.checks)["decode.reference_card"]
    assert ref.detail.startswith("served 115.0 tok/s; RTX 4090 (seed study) 71 tok/s; "
                                 f"information only on {CARD}"), ref.detail
    assert coverage(report.checks, ["decode"]).word == "PASSED"
    assert "ran at 0.96 of its engine's decode speed at 4,096 tokens" in verdict_sentence(report)
    row = report.to_json()["suites"]["decode"][0]
    assert (row["decode_tok_s"], row["engine_tok_s"]) == (115.0, 120.0)
    assert row["first_pair"] == pytest.approx(
        {"served_tok_s": 107.8, "engine_tok_s": 152.3, "ratio": 107.8 / 152.3})


def test_a_server_slower_than_its_engine_fails_both_pairs(monkeypatch, capsys):
    """llama-bench at 152 / 115 tok/s both times, the server at 107.8 / 80 then 108.5 / 81:
    both depths measured again, each with its first request's arguments, FAIL on the second
    pair (0.714), the first said; the run FAILED."""
    asked = served(monkeypatch, d4096=[107.8, 108.5], d60000=[80.0, 81.0])
    report = verified(EngineRun(True, baseline(d4096=152.3, d60000=115.3),
                                again=Again(d4096=152.0, d60000=115.0)), [4096, 60000])
    assert asked == [4096, 60000, 4096, 60000] and asked.calls[:2] == asked.calls[2:]
    assert "  decode: below the bar at 4096, 60000 ctx: measured again" in capsys.readouterr().out
    check = by_name(report.checks)["decode.vs_engine@4096"]
    assert check.status == "FAIL"
    assert check.detail.startswith("served 108.5 tok/s vs engine 152.0 tok/s (llama-bench) at "
                                   "4096 ctx: ratio 0.714, needs >= 0.7")
    assert "after the first pair was below the bar (served 107.8 tok/s vs engine 152.3 tok/s: "\
        "ratio 0.708)" in check.detail
    assert coverage(report.checks, ["decode"]).word == "FAILED"


def test_only_the_depth_below_its_bar_is_measured_again(monkeypatch):
    """4096 passes (145 of 152.3), 60000 does not (85 of 115.3, bar 0.779): llama-bench and
    the server again at 60000 alone; the 4096 check word for word as before.
    Mutant: every depth measured again (the `low` filter dropped)."""
    asked = served(monkeypatch, d4096=[145.0], d60000=[85.0, 112.0])
    again = Again(d60000=115.0)
    report = verified(EngineRun(True, baseline(d4096=152.3, d60000=115.3), again=again),
                      [4096, 60000])
    got = by_name(report.checks)
    assert again.asked == [[60000]] and asked == [4096, 60000, 60000]
    assert got["decode.vs_engine@4096"].status == "PASS"
    assert "measured again" not in got["decode.vs_engine@4096"].detail
    assert got["decode.vs_engine@60000"].status == "PASS", got["decode.vs_engine@60000"].detail
    assert "(served 85.0 tok/s vs engine 115.3 tok/s: ratio 0.737)" in \
        got["decode.vs_engine@60000"].detail


@pytest.mark.parametrize("why", ["passed", "failed request", "no engine to run again"])
def test_a_decode_is_not_measured_again_unless_its_ratio_alone_failed(monkeypatch, why):
    """A decode that passed (150 of 152.3), one whose request failed (no figure: judged on
    that), and one with no llama-bench verify can run again (the engine from a recorded
    baseline: `again` None) keep their first verdict; nothing is measured again."""
    again = Again(d4096=152.3)
    rate = 150.0 if why == "passed" else 100.0
    asked: list[int] = []

    def run_decode(client: Any, ctx: int, *a: Any, **k: Any) -> Any:
        asked.append(ctx)
        if why == "failed request":
            return replace(decode_run([1.0], rec=record(ok=False, error="HTTP 500")),
                           decode_tok_s=None, samples_tok_s=[], ctx_tokens=ctx)
        return replace(decode_run([rate] * 3), ctx_tokens=ctx)

    monkeypatch.setattr(suites, "run_decode", run_decode)
    monkeypatch.setattr(suites, "health_now", lambda client: None)  # up after the failure
    engine = EngineRun(True, baseline(d4096=152.3),
                       again=None if why == "no engine to run again" else again)
    before = verified(replace(engine, again=None), [4096]).checks
    asked.clear()
    report = verified(engine, [4096])
    assert again.asked == [] and asked == [4096]
    assert report.checks == before
    assert all("measured again" not in c.detail for c in report.checks)


@pytest.mark.parametrize(("failure", "health", "why"), [
    (EngineFailed("could not start the server again (x, exit 1): y"),
     "no answer (ConnectError)", "could not start the server again (x, exit 1): y"),
    (EngineFailed("llama-bench failed: z"), None, "llama-bench failed: z"),
    (EngineError("could not stop the server (x): y"), None, "could not stop the server (x): y"),
    (subprocess.TimeoutExpired(["ssh", "host", "secret script"], 120), None,
     "no answer from the host in 120 s")])
def test_an_engine_that_could_not_run_again_leaves_the_first_pair(monkeypatch, failure,
                                                                    health, why):
    """llama-bench could not run again: the first pair's FAIL stands and `decode.again` says
    why (INFO: the engine's failure, not the server's; a timeout in the words run_engine uses,
    not the command line); where the server does not answer after it (not started again), a
    `server.answered` FAIL too."""
    served(monkeypatch, d4096=[107.8])
    monkeypatch.setattr(suites, "health_now", lambda client: client is CLIENT and health)
    report = verified(EngineRun(True, baseline(d4096=152.3), again=Again(raises=failure)),
                      [4096])
    got = by_name(report.checks)
    assert got["decode.vs_engine@4096"].status == "FAIL"
    assert (got["decode.again"].status, got["decode.again"].detail) == (
        "INFO", f"not measured again as a pair: llama-bench could not run again ({why}); "
        "the first pair is judged")
    if health is None:
        assert "server.answered" not in got
    else:
        assert (got["server.answered"].status, got["server.answered"].detail) == (
            "FAIL", "stopped answering during decode, measured again: after llama-bench ran "
            "again (the server stopped for it); GET /health then got no answer (ConnectError)")
    assert coverage(report.checks, ["decode"]).word == "FAILED"


def test_a_second_pair_not_judged_leaves_the_first_pairs_fail(monkeypatch):
    """The second served figure too noisy to judge (80 to 150 tok/s over its repeats): the
    first pair's FAIL stands, saying the second was not judged; the run FAILED, not
    INCOMPLETE, and the report's figures are the first pair's.
    Mutant (as it was): the unjudged second pair replaced the FAIL (INCOMPLETE)."""
    rates = iter([[107.8] * 3, [80.0, 120.0, 150.0]])

    def run_decode(client: Any, ctx: int, *a: Any, **k: Any) -> Any:
        return replace(decode_run(next(rates)), ctx_tokens=ctx)

    monkeypatch.setattr(suites, "run_decode", run_decode)
    report = verified(EngineRun(True, baseline(d4096=152.3), again=Again(d4096=150.0)),
                      [4096])
    check = by_name(report.checks)["decode.vs_engine@4096"]
    assert check.status == "FAIL"
    assert check.detail.startswith("served 107.8 tok/s vs engine 152.3 tok/s"), check.detail
    assert "; measured again as a pair, not judged (" in check.detail
    assert coverage(report.checks, ["decode"]).word == "FAILED"
    assert report.suites.decode is not None and report.suites.decode[0].decode_tok_s == 107.8


def test_a_server_that_stopped_answering_is_not_measured_again(monkeypatch):
    """Decode below its bar, then the server stopped answering during TTFT: not measured
    again (the engine's run would stop and start the server, hiding the stop).
    Mutant: `run.stopped` not read (or not set by _served_suites)."""
    served(monkeypatch, d60000=[85.0])

    def gone(*a: Any, **k: Any) -> Any:
        raise suites.ServerStopped("stopped answering during TTFT: gone")

    monkeypatch.setattr(suites, "settled_ttft", gone)
    again = Again(d60000=115.0)
    report = verified(EngineRun(True, baseline(d60000=115.3), again=again), [60000],
                      names=("decode", "ttft"))
    assert again.asked == []
    got = by_name(report.checks)
    assert got["decode.vs_engine@60000"].status == "FAIL"
    assert got["server.answered"].detail == "stopped answering during TTFT: gone"


def test_a_decode_whose_records_are_not_consistent_is_not_measured_again(monkeypatch):
    """A first request that reused the prompt cache (cache_n 16): its records check FAILs,
    and measuring again would replace it with a consistent one; not measured again."""
    def run_decode(client: Any, ctx: int, *a: Any, **k: Any) -> Any:
        return replace(decode_run([100.0] * 3, rec=record(cache_n=16)), ctx_tokens=ctx)

    monkeypatch.setattr(suites, "run_decode", run_decode)
    again = Again(d4096=152.3)
    report = verified(EngineRun(True, baseline(d4096=152.3), again=again), [4096])
    assert again.asked == []
    assert by_name(report.checks)["decode.records_consistent"].status == "FAIL"


def test_the_engine_suite_runs_llama_bench_again_as_it_ran_it_at_the_depths_asked(
        monkeypatch):
    """run_engine's `again`: llama-bench on the same engine and profile, decode only (no
    prefill) at the depths asked, with the first run's out tokens, noise limit, budget and
    wait for the server's health.
    Mutants: every depth run again; the prefill run again; the wait dropped."""
    from beekeeper.verify.engine import Engine

    engine = Engine(shell=SHELL, prefix=[], model_arg="m", check="true",  # type: ignore[arg-type]
                    missing="", placement="p", stop="stop", start="start")
    calls: list[dict[str, Any]] = []

    def measure(eng: Any, profile: Any, **kw: Any) -> EngineBaseline:
        assert eng is engine and profile is TURBO4
        calls.append(kw)
        return baseline(d4096=150.0)

    monkeypatch.setattr(suites, "_engine_target", lambda *a: engine)
    monkeypatch.setattr(suites, "measure_engine", measure)
    sizes = Sizes(decode_ctx_tokens=[4096, 60000], decode_out_tokens=160, ttft_tokens=60000,
                  ttft_requests=3, niah_tokens=512, settle_budget_s=7.0)
    run = suites.run_engine(CLIENT, TURBO4, sizes, SHELL, None, "llm")  # type: ignore[arg-type]
    assert run.again is not None
    run.again([60000])
    first, second = calls
    assert (first["depths_tokens"], first["prompt_tokens"]) == ([4096, 60000], 60000)
    assert (second["depths_tokens"], second["prompt_tokens"]) == ([60000], None)
    for kw in calls:
        assert (kw["out_tokens"], kw["limit"], kw["budget_s"]) == (160, 0.06, 7.0)
        assert callable(kw["wait_ready"])


def test_the_reference_ttft_yields_once_the_second_pair_passed(monkeypatch):
    """On a 4090 the reference TTFT (11.86 s against the seed's 8.96 s x 1.25) FAILs while a
    decode check does; once the second pair passes, every engine-relative check passed and
    it is information, as docs/verify.md says, and the run PASSED.
    Mutant: `judge.yield_reference_ttft` dropped from decode_again."""
    served(monkeypatch, d60000=[85.0, 112.0])
    monkeypatch.setattr(suites, "settled_ttft", lambda client, n, k, **kw: TtftResult(
        n, [n] * k, [record(ttft_s=11.86) for _ in range(k)]))
    engine = EngineRun(True, baseline(d60000=115.3), again=Again(d60000=115.0))
    report = verified(engine, [60000], names=("decode", "ttft"), card=RTX4090)
    got = by_name(report.checks)
    assert got["decode.vs_engine@60000"].status == "PASS"
    assert got["ttft.vs_engine"].status == "PASS"
    assert got["ttft.reference_card"].status == "INFO", got["ttft.reference_card"].detail
    assert coverage(report.checks, ["decode", "ttft"]).word == "PASSED"


def test_run_suites_measures_a_decode_below_its_bar_again(monkeypatch, tmp_path):
    """run_suites' wiring: the engine suite's `again`, then the second pair judged in the
    report it writes.
    Mutant: decode_again not called from run_suites (the first pair's FAIL stands)."""
    from beekeeper.verify.smoke import SmokeResult

    again = Again(d4096=120.0)
    monkeypatch.setattr(suites, "run_engine", lambda *a, **k: EngineRun(
        True, baseline(d4096=152.3), again=again))
    monkeypatch.setattr(suites, "run_smoke", lambda client: SmokeResult())
    served(monkeypatch, d4096=[107.8, 115.0])
    sizes = Sizes(decode_ctx_tokens=[4096], decode_out_tokens=160, ttft_tokens=60000,
                  ttft_requests=3, niah_tokens=512, settle_budget_s=0)
    report = suites.run_suites(CLIENT, TURBO4, ["engine", "decode"],  # type: ignore[arg-type]
                               sizes=sizes, card=CARD, where=Locality(False, "elsewhere"),
                               out_dir=str(tmp_path))
    assert again.asked == [[4096]]
    assert by_name(report.checks)["decode.vs_engine@4096"].status == "PASS"
    assert coverage(report.checks, report.requested or []).word == "PASSED"


def test_a_cpu_build_is_judged_against_its_own_floor_on_the_second_pair(monkeypatch):
    """cpu-tiny (a CPU build: 0.70 of llama-bench): 30 then 40 tok/s served against 50 of
    llama-bench both times; the second pair (0.800) PASSES on the CPU floor.
    Mutant: the second pair judged as a GPU build (0.95: FAIL)."""
    served(monkeypatch, d1024=[30.0, 40.0])
    report = verified(EngineRun(True, baseline(d1024=50.0), again=Again(d1024=50.0)), [1024],
                      profile=PROFILES["cpu-tiny"])
    check = by_name(report.checks)["decode.vs_engine@1024"]
    assert (check.status, check.detail.split("; ")[0]) == (
        "PASS", "served 40.0 tok/s vs engine 50.0 tok/s (llama-bench) at 1024 ctx: ratio "
        "0.800, needs >= 0.7"), check.detail


@pytest.mark.parametrize(("how", "said"), [
    ("a failed record", "POST /v1/chat/completions failed (no answer)"),
    ("httpx's error", "POST /v1/chat/completions got no answer (ConnectError)")])
def test_a_server_that_stops_answering_when_measured_again_fails(monkeypatch, how, said):
    """The server's decode request fails when measured again (a failed record, or httpx's
    error raised) and /health then gets no answer: a `server.answered` FAIL naming the step
    and the request; the first pair's FAIL stands."""
    import httpx

    rates = iter([107.8, None])

    def run_decode(client: Any, ctx: int, *a: Any, **k: Any) -> Any:
        rate = next(rates)
        if rate is None and how == "httpx's error":
            raise httpx.ConnectError("refused", request=httpx.Request(
                "POST", "http://127.0.0.1:9/v1/chat/completions"))
        if rate is None:
            return replace(decode_run([1.0], rec=record(ok=False, error="no answer")),
                           decode_tok_s=None, samples_tok_s=[], ctx_tokens=ctx)
        return replace(decode_run([rate] * 3), ctx_tokens=ctx)

    monkeypatch.setattr(suites, "run_decode", run_decode)
    monkeypatch.setattr(suites, "health_now", lambda client: client is CLIENT and
                        "no answer (ConnectError)")
    report = verified(EngineRun(True, baseline(d4096=152.3), again=Again(d4096=120.0)),
                      [4096])
    got = by_name(report.checks)
    assert got["decode.vs_engine@4096"].status == "FAIL"
    assert "measured again" not in got["decode.vs_engine@4096"].detail
    assert (got["server.answered"].status, got["server.answered"].detail) == (
        "FAIL", f"stopped answering during decode, measured again: {said}; GET /health then "
        "got no answer (ConnectError)")


def test_a_decode_with_a_failed_repeat_is_not_measured_again(monkeypatch):
    """A figure below the bar whose repeats did not all answer is judged as it was (its
    records check FAILs for them): not measured again."""
    def run_decode(client: Any, ctx: int, *a: Any, **k: Any) -> Any:
        return replace(decode_run([100.0] * 2), ctx_tokens=ctx, failed_repeats=["HTTP 500"])

    monkeypatch.setattr(suites, "run_decode", run_decode)
    monkeypatch.setattr(suites, "health_now", lambda client: None)
    again = Again(d4096=152.3)
    report = verified(EngineRun(True, baseline(d4096=152.3), again=again), [4096])
    assert again.asked == []
    assert by_name(report.checks)["decode.vs_engine@4096"].status == "FAIL"


def test_each_depth_keeps_its_own_judged_pair(monkeypatch):
    """Both depths below their bars: at 4096 the second pair is judged (PASS), at 60000 it
    is too noisy to judge, so 60000 keeps its first pair's FAIL while 4096 keeps its second.
    Mutant: every depth given back its first pair when one second pair was not judged."""
    rates = {4096: iter([[107.8] * 3, [140.0] * 3]),
             60000: iter([[80.0] * 3, [60.0, 100.0, 115.0]])}

    def run_decode(client: Any, ctx: int, *a: Any, **k: Any) -> Any:
        return replace(decode_run(next(rates[ctx])), ctx_tokens=ctx)

    monkeypatch.setattr(suites, "run_decode", run_decode)
    report = verified(EngineRun(True, baseline(d4096=152.3, d60000=115.3),
                                again=Again(d4096=150.0, d60000=115.0)), [4096, 60000])
    got = by_name(report.checks)
    assert got["decode.vs_engine@4096"].status == "PASS"
    assert got["decode.vs_engine@4096"].detail.startswith("served 140.0 tok/s vs engine 150.0")
    assert got["decode.vs_engine@60000"].status == "FAIL"
    assert "; measured again as a pair, not judged (" in got["decode.vs_engine@60000"].detail
    assert [r.decode_tok_s for r in report.suites.decode or []] == [140.0, 80.0]


def test_a_suite_not_asked_for_leaves_the_next_one_to_run(monkeypatch):
    """TTFT alone: decode, not asked for, is passed over and TTFT still runs.
    Mutant: `continue` read as `break` in _served_suites (nothing after it ran)."""
    monkeypatch.setattr(suites, "settled_ttft", lambda client, n, k, **kw: TtftResult(
        n, [n] * k, [record(ttft_s=11.0) for _ in range(k)]))
    report = verified(EngineRun(True, baseline(d60000=115.3)), [60000], names=("ttft",))
    assert by_name(report.checks)["ttft.vs_engine"].status == "PASS"
