"""verify's judge step (verify/judge.py), check by check: each suite's result in, the named
checks out, and the run's word and exit status from them. Each test holds one rule a user's
verdict depends on, on inputs either side of it, so a judge that says PASS whatever it is
given, drops a busy host's record or crashes on one failed request fails here.
"""

from __future__ import annotations

import pytest

from beekeeper.verify.engine import EngineBaseline
from beekeeper.verify.judge import (
    EXIT_FAILED,
    EXIT_NOT_JUDGED,
    EXIT_PASSED,
    Check,
    coverage,
    decode_checks,
    engine_checks,
    load_checks,
    niah_checks,
    ttft_checks,
    vram_checks,
    vram_figures,
)
from beekeeper.verify.results import (
    DecodeResult,
    EngineRun,
    LoadResult,
)
from beekeeper.verify.vram import VramResult

from .harness import (
    CPU_EXPECTED as CPU,
    PROD,
    bench,
    busy_settle,
    decode_run,
    engine,
    niah,
    record,
    ttft_run,
)


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


# --- Check.of and the run's exit status ---------------------------------------------------

def test_a_check_made_of_a_false_condition_fails_the_run_with_exit_1():
    bad = Check.of("niah.pass", False, "4/10")
    good = Check.of("niah.pass", True, "10/10")
    assert (bad.status, good.status) == ("FAIL", "PASS")
    assert not bad.passed and good.passed
    assert bad.line() == "[FAIL] niah.pass: 4/10"
    cov = coverage([bad], ["niah"])
    assert cov.failed and cov.exit_status == EXIT_FAILED and cov.word == "FAILED"
    assert coverage([good], ["niah"]).exit_status == EXIT_PASSED


def test_a_status_that_is_none_of_the_four_fails_the_run_rather_than_pass_it():
    """A misspelt status (a typo, or a mutant's "XXFAILXX") is never a pass: the run fails."""
    odd = Check("niah.pass", "XXFAILXX", "4/10")  # type: ignore[arg-type]
    assert not odd.passed
    assert coverage([odd], ["niah"]).exit_status == EXIT_FAILED
    for status in ("PASS", "SKIP", "INFO"):
        assert Check("x", status, "").passed, status  # type: ignore[arg-type]


def test_the_summary_line_of_each_outcome():
    passed = coverage([Check("niah.pass", "PASS", "")], ["niah"])
    assert passed.line() == "judged: NIAH" and passed.word == "PASSED"
    skipped = coverage([Check("niah.pass", "PASS", ""), Check("vram.rise_vs_budget", "SKIP",
                                                                 "no NVIDIA GPU")],
                       ["niah", "vram"])
    assert skipped.word == "INCOMPLETE" and skipped.exit_status == EXIT_NOT_JUDGED
    assert skipped.line() == "nothing failed, but not judged: VRAM; judged: NIAH"
    assert skipped.not_judged == [("vram", "no NVIDIA GPU")]
    failed = coverage([Check("niah.pass", "FAIL", ""), Check("vram.rise_vs_budget", "SKIP",
                                                            "no NVIDIA GPU")], ["niah", "vram"])
    assert failed.line() == "not judged: VRAM; judged: NIAH"
    assert coverage([], []).line() == "no speed, NIAH or VRAM check requested"
    none = coverage([], ["decode"])
    assert none.not_judged == [("decode", "no check ran (the smoke check failed first?)")]
    assert none.line() == "nothing failed, but not judged: decode; judged: none"
    info = coverage([Check("decode.reference_card", "INFO", "information only")], ["decode"])
    assert info.not_judged == [("decode", "information only")]


# --- load ---------------------------------------------------------------------------------

def test_load_without_a_failed_request_passes_with_its_figures():
    recs = [record(ttft_s=0.5 + i / 10, completion_tokens=100) for i in range(10)]
    [c] = load_checks(LoadResult(clients=4, seconds=10.0, records=recs))
    assert c.name == "load.no_failures" and c.status == "PASS"
    assert c.detail == "10 requests, 0 failed, 100.0 tok/s aggregate, p95 TTFT 1.40 s"


def test_one_failed_request_under_load_fails_the_run_naming_its_cause():
    recs = [record(completion_tokens=100)] * 9 + [record(ok=False, error="HTTP 503: busy")]
    [c] = load_checks(LoadResult(clients=4, seconds=10.0, records=recs))
    assert c.status == "FAIL"
    assert c.detail == ("10 requests, 1 failed, 90.0 tok/s aggregate, p95 TTFT 1.00 s; "
                        "first error: HTTP 503: busy")
    assert coverage([c], []).exit_status == EXIT_FAILED


def test_a_failed_request_without_a_cause_and_a_long_one_under_load():
    [c] = load_checks(LoadResult(clients=1, seconds=1.0,
                                 records=[record(ok=False, error=None)]))
    # no first token timed: its p95 is not measured (it read "0.00 s", a figure never seen)
    assert c.status == "FAIL" and c.detail.endswith("1 failed, 0.0 tok/s aggregate, p95 TTFT "
                                                    "not measured; first error: ")
    [c] = load_checks(LoadResult(clients=1, seconds=1.0,
                                 records=[record(ok=False, error="x" * 200)]))
    assert c.detail.endswith("first error: " + "x" * 160)


def test_a_load_run_that_sent_nothing_does_not_pass():
    [c] = load_checks(LoadResult(clients=4, seconds=0.0, records=[]))
    assert c.status == "FAIL"
    assert c.detail == ("0 requests, 0 failed, aggregate tok/s not measured, p95 TTFT not "
                        "measured")


# --- NIAH ---------------------------------------------------------------------------------


def test_niah_passes_at_the_profiles_minimum_and_fails_one_under_it():
    cpu = {c.name: c for c in niah_checks(niah(5, n=5, tokens=60000), CPU)}
    assert cpu["niah.pass"].status == "PASS"  # 5 of 5, needs 5
    at = by_name(niah_checks(niah(10), PROD))["niah.pass"]
    assert at.status == "PASS"
    assert at.detail == "10/10 (95% Clopper-Pearson recall 69%-100%); needs >= 10"
    under = by_name(niah_checks(niah(9), PROD))["niah.pass"]
    assert under.status == "FAIL" and under.detail.startswith("9/10 ")
    assert coverage([under], ["niah"]).exit_status == EXIT_FAILED


def test_niah_prompts_of_another_length_than_asked_fail_the_exactness_check():
    exact = by_name(niah_checks(niah(10), PROD))["niah.prompt_tokens_exact"]
    assert exact.status == "PASS"
    assert exact.detail == "every prompt exactly 60000 tokens (server usage.prompt_tokens)"
    res = niah(10)
    res.cases[3].prompt_tokens = 59999
    assert by_name(niah_checks(res, PROD))["niah.prompt_tokens_exact"].status == "FAIL"


def test_one_failed_niah_request_is_named_on_both_checks():
    checks = by_name(niah_checks(niah(9, error="HTTP 400: context size exceeded"), PROD))
    for name in ("niah.prompt_tokens_exact", "niah.pass"):
        assert checks[name].detail.endswith("; 1 request(s) failed: HTTP 400: context size "
                                            "exceeded"), name


# --- VRAM ---------------------------------------------------------------------------------

IDLE = "idle (memory.used with the service stopped, before llama-bench)"


def sampled(peak_mib: float, process_mib: float | None = 9100.0, pid: int | None = 4242,
            hz: float | None = 19.6) -> VramResult:
    return VramResult(gpu_name="NVIDIA H200", peak_mib=peak_mib, baseline_mib=3900.0,
                      peak_process_mib=process_mib, pid=pid, achieved_hz=hz)


def test_the_vram_rise_is_the_peak_over_the_idle_baseline():
    base = engine(idle_used_mib=3000.0).baseline
    fig = vram_figures(sampled(12000.0), base, 10240.0, 9300.0)
    assert fig.rise_mib == 9000.0  # 12,000 peak - 3,000 idle
    assert fig.process_peak_mib == 9100.0 and fig.process_is_server
    assert fig.predicted_mib == 9300.0 and fig.budget_mib == 10240.0
    assert fig.baseline_kind == IDLE and fig.why_not is None


def test_the_vram_check_passes_under_the_budget_and_fails_over_it():
    base = engine(idle_used_mib=3000.0).baseline
    [ok] = vram_checks(sampled(12000.0), base, 10240.0, 9300.0)
    assert ok.name == "vram.rise_vs_budget" and ok.status == "PASS"
    assert ok.detail == (f"rise of memory.used over {IDLE} 9000 MiB, budget 10240 MiB; "
                         "process peak 9100 MiB, planner predicted 9300 MiB; 20 Hz sampling")
    [over] = vram_checks(sampled(13300.0), base, 10240.0, None)
    assert over.status == "FAIL" and "10300 MiB, budget 10240 MiB" in over.detail
    assert coverage([over], ["vram"]).exit_status == EXIT_FAILED
    [nohz] = vram_checks(sampled(12000.0, hz=None), base, 10240.0, None)
    assert not nohz.detail.endswith("Hz sampling")


def test_without_the_idle_baseline_the_servers_own_peak_is_judged():
    fig = vram_figures(sampled(12000.0), None, 10240.0, None)
    assert fig.rise_mib is None and fig.baseline_kind.startswith("none: the server was already "
                                                                 "loaded")
    [c] = vram_checks(sampled(12000.0), None, 10240.0, None)
    assert c.status == "PASS" and c.detail.startswith("process peak 9100 MiB (the server's own")
    [big] = vram_checks(sampled(12000.0, process_mib=11000.0), None, 10240.0, None)
    assert big.status == "FAIL"
    # a process peak that may be another program's too judges nothing
    [shared] = vram_checks(sampled(12000.0, pid=None), None, 10240.0, None)
    assert shared.status == "SKIP"
    assert coverage([shared], ["vram"]).exit_status == EXIT_NOT_JUDGED


def test_an_unsampled_card_says_why_and_judges_nothing():
    [c] = vram_checks(VramResult(skipped="no NVIDIA GPU on this machine"), None, 10240.0, None)
    assert (c.status, c.detail) == ("SKIP", "no NVIDIA GPU on this machine")


# --- the engine ---------------------------------------------------------------------------

def test_a_llama_bench_that_could_not_run_leaves_the_engine_checks_unjudged():
    """A wrong --llama-bench path, no llama-bench in the image, sudo asking for a password:
    no engine figure, so nothing of the server is judged against it (INCOMPLETE with the
    error and a next step), where it used to FAIL the run and call the server broken."""
    run = EngineRun(requested=True, error="no /opt/lb on gpu-box")
    [c] = engine_checks(run)
    assert (c.name, c.status) == ("engine.baseline", "SKIP")
    assert "llama-bench could not run (no /opt/lb on gpu-box)" in c.detail
    assert "then run again" in c.detail
    checks = [c, *decode_checks([decode_run([47.0, 47.5, 48.0])], run, CPU, None, cpu=True)]
    dec = by_name(checks)["decode.vs_engine@1024"]
    assert dec.status == "SKIP" and "llama-bench could not run: no /opt/lb" in dec.detail
    cov = coverage(checks, ["engine", "decode"])
    assert (cov.word, cov.exit_status) == ("INCOMPLETE", EXIT_NOT_JUDGED)
    assert [a for a, _ in cov.not_judged] == ["decode"]  # said once, by the area that needs it
    # the engine suite alone: not judged, never PASSED on a baseline that was not measured
    alone = coverage([c], ["engine"])
    assert alone.word == "INCOMPLETE" and alone.not_judged == [("engine", c.detail)]
    assert alone.line() == "nothing failed, but not judged: engine baseline; judged: none"
    # the engine measured and the served figure under its floor: still FAILED
    slow = decode_checks([decode_run([20.0, 20.0, 20.0])], engine(), CPU, None, cpu=True)
    assert coverage(slow, ["engine", "decode"]).exit_status == EXIT_FAILED


def test_the_engine_baseline_is_information_or_why_there_is_none():
    assert engine_checks(EngineRun(requested=False)) == []
    [none] = engine_checks(EngineRun(requested=True))
    assert none.status == "SKIP" and none.detail.startswith("no llama-bench to run")
    [info] = engine_checks(engine())
    assert info.status == "INFO"
    assert info.detail == ("llama-bench, decode 50.0 +/- 0.5 tok/s at 1024 ctx (3 repeats); "
                           "prefill 512 tokens in 1.000 s (512 tok/s, 3 repeats); 2 threads; "
                           "recorded")
    bare = EngineRun(requested=True, baseline=EngineBaseline(
        placement="GPU", commands=[], decode=[bench(0, 160, 1024, 50.0, samples=0)]))
    [c] = engine_checks(bare)
    assert c.detail == "llama-bench, decode 50.0 +/- 0.5 tok/s at 1024 ctx; 2 threads; GPU"


# --- decode and TTFT: busy hosts and noisy figures are not judged --------------------------

def test_a_served_decode_figure_measured_on_a_busy_host_is_not_judged():
    """The served repeats agree (48 tok/s, 0.96 of the engine: a pass), but the settle loop
    set them aside as busy: the check says so and the run is INCOMPLETE."""
    quiet = by_name(decode_checks([decode_run([48.0, 48.1, 47.9])], engine(), CPU, None,
                                  cpu=True))
    assert quiet["decode.vs_engine@1024"].status == "PASS"
    busy = by_name(decode_checks([decode_run([48.0, 48.1, 47.9],
                                             settle=busy_settle([48.0, 48.1, 47.9]))],
                                 engine(), CPU, None, cpu=True))
    c = busy["decode.vs_engine@1024"]
    assert c.status == "SKIP"
    assert c.detail.startswith("the host was busy (other processes used 1.60 of 2 CPUs")
    assert "while served decode was measured" in c.detail
    assert coverage(list(busy.values()), ["decode"]).exit_status == EXIT_NOT_JUDGED


def test_a_noisy_served_decode_figure_is_not_judged():
    checks = by_name(decode_checks([decode_run([20.0, 48.0, 70.0])], engine(), CPU, None,
                                   cpu=True))
    c = checks["decode.vs_engine@1024"]
    assert c.status == "SKIP" and c.detail.startswith("the figures did not settle (served "
                                                      "decode")
    assert coverage(list(checks.values()), ["decode"]).word == "INCOMPLETE"


def test_a_served_ttft_measured_on_a_busy_host_is_not_judged():
    ttfts = [1.0, 1.01, 0.99, 1.0, 1.0]
    quiet = by_name(ttft_checks(ttft_run(ttfts), engine(), CPU, None, cpu=True))
    assert quiet["ttft.vs_engine"].status == "PASS"
    busy = by_name(ttft_checks(ttft_run(ttfts, settle=busy_settle(ttfts)), engine(), CPU, None,
                               cpu=True))
    c = busy["ttft.vs_engine"]
    assert c.status == "SKIP" and c.detail.startswith("the host was busy (other processes")
    assert "while served TTFT was measured" in c.detail
    assert coverage(list(busy.values()), ["ttft"]).exit_status == EXIT_NOT_JUDGED


def test_a_noisy_served_ttft_is_not_judged_and_says_the_load_was_not_measured():
    ttfts = [0.5, 1.0, 1.5, 2.0, 1.0]
    unmeasured = {"samples": ttfts, "rounds": [{"repeats": 5, "load_share": None}],
                  "stop": "cap", "wall_s": 6.0}
    c = by_name(ttft_checks(ttft_run(ttfts, settle=unmeasured), engine(), CPU, None,
                            cpu=True))["ttft.vs_engine"]
    assert c.status == "SKIP" and c.detail.startswith("the figures did not settle (served TTFT")
    assert ("5 repeats in 6 s, the repeats' cap; the host's load not measured (no way onto "
            "the host)") in c.detail
    measured = {**unmeasured, "stop": "budget", "budget_s": 90.0,
                "rounds": [{"repeats": 3, "load_share": 0.02},
                           {"repeats": 2, "load_share": 0.04}]}
    c = by_name(ttft_checks(ttft_run(ttfts, settle=measured), engine(), CPU, None,
                            cpu=True))["ttft.vs_engine"]
    assert ("the 90 s budget spent; the host quiet: other processes at most 4% of its CPU "
            "time") in c.detail


def test_one_failed_request_is_named_on_the_decode_and_ttft_checks():
    failed = record(ok=False, error="HTTP 500: slot unavailable")
    dec = by_name(decode_checks([decode_run([48.0], rec=failed)], engine(), CPU, None,
                                cpu=True))
    assert dec["decode.records_consistent"].status == "FAIL"
    assert dec["decode.records_consistent"].detail.endswith(
        "; 1 request(s) failed: HTTP 500: slot unavailable")
    tt = by_name(ttft_checks(ttft_run([1.0] * 4, extra=[failed]), engine(), CPU, None,
                             cpu=True))
    assert tt["ttft.no_prompt_reuse"].status == "FAIL"  # one request untimed
    assert tt["ttft.vs_engine"].detail.endswith("; 1 request(s) failed: HTTP 500: slot "
                                                "unavailable")


def test_prompt_cache_reuse_in_the_ttft_run_fails():
    reused = ttft_run([1.0] * 4, extra=[record(ttft_s=0.1, cache_n=500)])
    c = by_name(ttft_checks(reused, engine(), CPU, None, cpu=True))["ttft.no_prompt_reuse"]
    assert c.status == "FAIL" and c.detail == "timings.cache_n == 0 on all 5 requests"
    clean = by_name(ttft_checks(ttft_run([1.0] * 5), engine(), CPU, None, cpu=True))
    assert clean["ttft.no_prompt_reuse"].status == "PASS"


def test_decode_records_that_disagree_fail_the_consistency_check():
    bad = record(completion_tokens=160)
    assert bad.timings is not None
    bad.timings["predicted_n"] = 150
    c = by_name(decode_checks([decode_run([48.0], rec=bad)], engine(), CPU, None,
                              cpu=True))["decode.records_consistent"]
    assert c.status == "FAIL"
    assert c.detail == ("usage.completion_tokens == timings.predicted_n, cache_n == 0 on every "
                        "request")
    assert coverage([c], ["decode"]).exit_status == EXIT_FAILED


# --- the names users search for and `beekeeper report` compares by -------------------------

def test_a_full_run_makes_the_checks_by_their_names_in_order():
    run = engine(idle_used_mib=3000.0)
    base = run.baseline
    checks = [*engine_checks(run),
              *decode_checks([decode_run([48.0, 48.1, 47.9])], run, CPU, None, cpu=True),
              *ttft_checks(ttft_run([1.0] * 5), run, CPU, None, cpu=True),
              *niah_checks(niah(5, n=5), CPU),
              *load_checks(LoadResult(clients=2, seconds=5.0, records=[record()] * 4)),
              *vram_checks(sampled(12000.0), base, 10240.0, None)]
    assert [c.name for c in checks] == [
        "engine.baseline", "decode.records_consistent", "decode.vs_engine@1024",
        "decode.reference_card", "ttft.no_prompt_reuse", "ttft.vs_engine",
        "ttft.reference_card", "niah.prompt_tokens_exact", "niah.pass", "load.no_failures",
        "vram.rise_vs_budget"]
    assert [c.status for c in checks] == ["INFO", "PASS", "PASS", "SKIP", "PASS", "PASS",
                                          "SKIP", "PASS", "PASS", "PASS", "PASS"]
    assert coverage(checks, ["decode", "ttft", "niah", "vram"]).exit_status == EXIT_PASSED


@pytest.mark.parametrize("drop", ["decode.records_consistent", "ttft.no_prompt_reuse",
                                  "niah.prompt_tokens_exact", "niah.pass", "load.no_failures"])
def test_each_consistency_check_alone_fails_a_run_that_judged_everything_else(drop):
    checks = [Check(n, "PASS", "") for n in ("decode.vs_engine@1024", "ttft.vs_engine",
                                              "niah.pass", "vram.rise_vs_budget")]
    checks = [c for c in checks if c.name != drop] + [Check.of(drop, False, "")]
    cov = coverage(checks, ["decode", "ttft", "niah", "vram"])
    assert cov.exit_status == EXIT_FAILED and cov.word == "FAILED"


# --- the lines a user reads, word for word -------------------------------------------------

def test_a_served_figure_missing_says_so_without_a_cause_too():
    from beekeeper.verify.judge import judge_decode, judge_ttft

    assert judge_decode(None, 40.0, 1024).detail == "no served figure at 1024 ctx"
    assert judge_ttft(None, 1.0, 512, served_error="timed out").detail == (
        "no served figure: timed out at 512 tokens")


def test_a_spread_names_its_repeats_only_when_it_knows_them():
    from beekeeper.verify.judge import Spread

    assert Spread("served TTFT", 1.2, 0.3, "s").text() == (
        "served TTFT 1.200 +/- 0.300 s, 25%; error of the figure 25.0%")
    assert Spread("llama-bench", 50.0, 5.0, "tok/s", n_repeats=4).text() == (
        "llama-bench 50.0 +/- 5.0 tok/s over 4 runs, 10%; error of the figure 5.0%")


def test_a_noisy_ttft_names_its_spread_in_seconds():
    ttfts = [0.5, 1.0, 1.5, 2.0, 1.0]
    c = by_name(ttft_checks(ttft_run(ttfts), engine(), CPU, None, cpu=True))["ttft.vs_engine"]
    assert c.detail.startswith("the figures did not settle (served TTFT 1.200 +/- 0.570 s over "
                               "5 requests, 48%; error of the figure 21.2%; its repeats and "
                               "the host's load not recorded)")


def test_a_ttft_check_without_cpu_said_is_a_gpu_servers():
    """ttft_checks' default is a GPU build's 1.25 ceiling: 1.3 x the engine fails it."""
    slow = ttft_run([1.02 * 1.3] * 5)
    assert by_name(ttft_checks(slow, engine(), CPU, None))["ttft.vs_engine"].status == "FAIL"
    assert by_name(ttft_checks(slow, engine(), CPU, None,
                               cpu=True))["ttft.vs_engine"].status == "PASS"


def test_one_good_request_under_load_passes():
    [c] = load_checks(LoadResult(clients=1, seconds=2.0, records=[record(completion_tokens=50)]))
    assert c.status == "PASS" and c.detail.startswith("1 requests, 0 failed, 25.0 tok/s")


def test_vram_judged_at_exactly_the_budget_passes():
    base = engine(idle_used_mib=3000.0).baseline
    [rise] = vram_checks(sampled(13240.0), base, 10240.0, None)
    assert rise.status == "PASS"  # a rise of 10,240 MiB on a 10,240 MiB budget
    [own] = vram_checks(sampled(20000.0, process_mib=10240.0), None, 10240.0, 9300.0)
    assert own.status == "PASS"
    assert own.detail == ("process peak 10240 MiB (the server's own, NVML), budget 10240 MiB: "
                          "judged on the process peak, as no rise over idle could be read "
                          "(none: the server was already loaded when sampling began; the "
                          "idle baseline is read with the service stopped, add --suite "
                          "engine), planner predicted 9300 MiB; 20 Hz sampling")


def test_vram_without_a_rise_or_the_servers_peak_says_what_it_saw():
    [c] = vram_checks(sampled(12000.0, process_mib=None, pid=None, hz=None), None, 10240.0,
                      9300.0)
    assert (c.status, c.detail) == (
        "SKIP", "no rise over an idle baseline (none: the server was already loaded when "
        "sampling began; the idle baseline is read with the service stopped, add --suite "
        "engine); process peak not reported by the driver, planner predicted 9300 MiB")


def test_an_unsampled_cards_figures_keep_the_budget_and_prediction():
    from beekeeper.verify.judge import VramFigures

    fig = vram_figures(VramResult(skipped="no GPU"), None, 10240.0, 9300.0)
    assert fig == VramFigures(None, None, 9300.0, 10240.0, "", why_not="no GPU")


# --- the reference TTFT yielding to the engine checks ---------------------------------------

def test_the_reference_ttft_rule_leaves_a_run_without_its_checks_as_it_is():
    from beekeeper.verify.judge import yield_reference_ttft

    decode_only = [Check("decode.vs_engine@1024", "PASS", "a"),
                   Check("decode.reference_card", "FAIL", "b")]
    assert yield_reference_ttft(decode_only) == decode_only
    no_ref = [Check("ttft.vs_engine", "PASS", "a")]
    assert yield_reference_ttft(no_ref) == no_ref


def test_the_reference_ttft_yields_with_its_reason_and_touches_no_other_check():
    from beekeeper.verify.judge import yield_reference_ttft

    ttft = [Check("ttft.vs_engine", "PASS", "ratio 1.08"),
            Check("ttft.reference_card", "FAIL", "median 11.86 s; needs <= 11.20")]
    alone = yield_reference_ttft(ttft)
    assert alone[0] == ttft[0]
    assert alone[1] == Check("ttft.reference_card", "FAIL", (
        "median 11.86 s; needs <= 11.20; it yields to the engine-relative checks when those "
        "pass: ttft.vs_engine passed, the decode ones did not run (add --suite decode)"))
    decode = [Check("decode.vs_engine@4096", "PASS", "x"),
              Check("decode.vs_engine@60000", "PASS", "y")]
    both = yield_reference_ttft(decode + ttft)
    assert both[:3] == decode + ttft[:1]
    assert both[3] == Check("ttft.reference_card", "INFO", (
        "median 11.86 s; needs <= 11.20; the engine-relative checks decide (ttft.vs_engine and "
        "decode.vs_engine@4096, @60000 passed): the server matches its own llama-bench on this "
        "card, so the gap to the seed's figure is the build or the card, not the server "
        "(information)"))


# --- decode: the rule's line, its edges, and what it says without a figure ----------------

def test_the_decode_line_says_the_rule_it_applied():
    from beekeeper.verify.judge import judge_decode

    v = judge_decode(45.0, 50.0, 1024, sampler_ms=2.0)
    assert (v.status, v.ratio) == ("PASS", 0.9)
    assert v.detail == ("served 45.0 tok/s vs engine 50.0 tok/s (llama-bench) at 1024 ctx: "
                        "ratio 0.900, needs >= 0.868 (0.95 with 2 ms a token for sampling on "
                        "the CPU, which llama-bench does not do)")
    assert judge_decode(25.0, 50.0, 1024, floor=0.5).status == "PASS"  # exactly at the floor
    stalled = judge_decode(0.0, 50.0, 1024)  # one token: no rate between tokens
    assert stalled.status == "FAIL" and stalled.detail.startswith(
        "served 0.0 tok/s vs engine 50.0 tok/s (llama-bench) at 1024 ctx: ratio 0.000")


def test_decode_without_an_engine_says_why_there_is_no_expectation():
    from beekeeper.verify.judge import judge_decode

    assert judge_decode(0.0, None, 1024).detail == (
        "served 0.0 tok/s at 1024 ctx; no engine baseline (add --suite engine), so no "
        "expectation")
    c = by_name(decode_checks([decode_run([48.0])], EngineRun(requested=False), CPU, None,
                              cpu=True))["decode.vs_engine@1024"]
    assert c.detail == ("served 48.0 tok/s at 1024 ctx; no engine baseline (the engine suite "
                        "was not run (add --suite engine)), so no expectation")


def test_a_failed_decode_request_fails_its_depth_with_the_cause():
    failed = record(ok=False, error="HTTP 500: slot unavailable")
    run = DecodeResult(ctx_tokens=1024, out_tokens_requested=160, decode_tok_s=None,
                       server_predicted_per_second=None, windowed_tok_s=[], record=failed)
    c = by_name(decode_checks([run], engine(), CPU, None, cpu=True))["decode.vs_engine@1024"]
    assert (c.status, c.detail) == ("FAIL", "no served figure: HTTP 500: slot unavailable at "
                                            "1024 ctx")
    quiet = record(ok=False, error=None)  # failed, its cause unknown: nothing to quote
    c = by_name(decode_checks([decode_run([48.0], rec=quiet)], engine(), CPU, None,
                              cpu=True))["decode.records_consistent"]
    assert c.detail == ("usage.completion_tokens == timings.predicted_n, cache_n == 0 on every "
                        "request")


def test_a_noisy_served_decode_names_its_spread_in_tok_s():
    c = by_name(decode_checks([decode_run([20.0, 48.0, 70.0])], engine(), CPU, None,
                              cpu=True))["decode.vs_engine@1024"]
    assert c.detail.startswith("the figures did not settle (served decode 46.0 +/- 25.1 tok/s "
                               "over 3 requests, 54%; error of the figure 31.5%; its repeats "
                               "and the host's load not recorded): run again, or give "
                               "--settle-budget-s more time; served 48.0 tok/s vs engine")
    assert c.detail.endswith("at 1024 ctx: ratio 0.960 not judged (a figure whose own error "
                             "is over 6% cannot judge it)")


def test_a_noisy_zero_rate_is_quoted_as_measured():
    from beekeeper.verify.judge import Spread, judge_decode

    v = judge_decode(0.0, 50.0, 1024, spreads=[Spread("served decode", 10.0, 9.0, "tok/s")])
    assert v.status == "SKIP" and v.ratio == 0.0
    assert "; served 0.0 tok/s vs engine 50.0 tok/s (llama-bench) at 1024 ctx: ratio 0.000 " \
           "not judged" in v.detail


def test_a_check_not_judged_keeps_its_ratio():
    from beekeeper.verify.judge import Spread, judge_decode, judge_ttft
    from beekeeper.verify.settle import Settled

    noisy = Spread("served decode", 10.0, 9.0, "tok/s")
    assert judge_decode(40.0, 50.0, 1024, spreads=[noisy]).ratio == 0.8
    busy = Spread("served TTFT", 1.0, 0.01, "s", 3,
                  settled=Settled.from_json(busy_settle([1.0, 1.0, 1.0])))
    v = judge_ttft(1.2, 1.0, 512, spreads=[busy])
    assert v.status == "SKIP" and v.ratio == 1.2


def test_the_repeats_of_each_figure_are_listed_on_its_check():
    settled = {"samples": [48.0, 48.1, 47.9], "rounds": [{"repeats": 3, "load_share": 0.01}],
               "stop": "settled", "wall_s": 6.0}
    run = engine()
    assert run.baseline is not None
    run.baseline.settle["decode@1024"] = {"samples": [0.1] * 5, "stop": "settled",
                                          "rounds": [{"repeats": 5}], "wall_s": 12.0}
    c = by_name(decode_checks([decode_run([48.0, 48.1, 47.9], settle=settled)], run, CPU,
                              None, cpu=True))["decode.vs_engine@1024"]
    assert c.status == "PASS"
    assert c.detail.endswith("; repeats: llama-bench decode@1024 5 repeats in 12 s, served "
                             "decode 3 repeats in 6 s")
    plain = by_name(decode_checks([decode_run([48.0, 48.1, 47.9])], engine(), CPU, None,
                                  cpu=True))["decode.vs_engine@1024"]
    assert plain.detail.endswith("needs >= 0.7")


# --- TTFT: the engine's prefill, the p95, the causes --------------------------------------

def test_the_ttft_line_says_the_rule_the_p95_and_the_engines_prefill_repeats():
    run = engine()
    assert run.baseline is not None
    run.baseline.settle["prefill@512"] = {"samples": [1.0] * 3, "stop": "settled",
                                          "rounds": [{"repeats": 3}], "wall_s": 3.0}
    c = by_name(ttft_checks(ttft_run([1.0, 1.0, 1.1, 1.0, 1.0]), run, CPU, None,
                            cpu=True))["ttft.vs_engine"]
    assert c.detail == ("median 1.000 s vs engine 1.020 s (prefill + first token, llama-bench) "
                        "at 512 tokens: ratio 0.980, needs <= 1.5; p95 1.100 s (nearest-rank) "
                        "over 5 requests; repeats: llama-bench prefill@512 3 repeats in 3 s")


def test_a_noisy_engine_prefill_leaves_the_ttft_unjudged():
    noisy = EngineRun(requested=True, baseline=EngineBaseline(
        placement="recorded", commands=[], decode=[bench(0, 160, 1024, 50.0)],
        prefill=bench(512, 0, 0, 512.0, stddev=100.0)))
    c = by_name(ttft_checks(ttft_run([1.0] * 5), noisy, CPU, None, cpu=True))["ttft.vs_engine"]
    assert c.status == "SKIP" and c.detail.startswith("the figures did not settle (llama-bench "
                                                      "512.0 +/- 100.0 tok/s over 3 runs")


def test_a_single_ttft_request_is_judged_on_its_own():
    c = by_name(ttft_checks(ttft_run([1.0]), engine(), CPU, None, cpu=True))["ttft.vs_engine"]
    assert c.status == "PASS" and "over 1 requests" in c.detail


def test_a_ttft_run_whose_requests_all_failed_fails_with_the_cause():
    failed = record(ok=False, error="HTTP 400: context size exceeded")
    tt = by_name(ttft_checks(ttft_run([], extra=[failed, failed]), engine(), CPU, None,
                             cpu=True))
    assert tt["ttft.vs_engine"].status == "FAIL"
    assert tt["ttft.vs_engine"].detail == (
        "no served figure: HTTP 400: context size exceeded at 512 tokens; 2 request(s) failed: "
        "HTTP 400: context size exceeded")  # no p95 of nothing


def test_a_ttft_without_an_engine_says_why():
    c = by_name(ttft_checks(ttft_run([1.1] * 5), EngineRun(requested=False), CPU, None,
                            cpu=True))["ttft.vs_engine"]
    assert c.detail.startswith("median 1.100 s at 512 tokens; no engine baseline (the engine "
                               "suite was not run (add --suite engine)), so no expectation; "
                               "p95 1.100 s")


def test_the_ttft_ceiling_holds_at_exactly_its_line():
    from beekeeper.verify.judge import judge_ttft

    assert judge_ttft(1.25, 1.0, 512).status == "PASS"
    assert judge_ttft(1.2501, 1.0, 512).status == "FAIL"


def test_why_a_noisy_figure_stopped_is_said():
    base = {"samples": [0.5, 1.0, 1.5, 2.0, 1.0], "rounds": [{"repeats": 5}], "wall_s": 6.0}
    for stop, said in (("failed", "a round gave no figure"), ("settled", "settled")):
        c = by_name(ttft_checks(ttft_run(base["samples"], settle={**base, "stop": stop}),
                                engine(), CPU, None, cpu=True))["ttft.vs_engine"]
        assert f"5 repeats in 6 s, {said}; the host's load not measured" in c.detail, stop


def test_a_figure_exactly_at_the_noise_limit_still_judges():
    from beekeeper.verify.judge import Spread, too_noisy

    assert too_noisy([Spread("served TTFT", 100.0, 6.0, "s")]) is None


# --- the engine's line ---------------------------------------------------------------------

def test_the_engine_line_without_repeats_or_decode_tests():
    prefill_only = EngineRun(requested=True, baseline=EngineBaseline(
        placement="recorded", commands=[], prefill=bench(512, 0, 0, 512.0, samples=0)))
    [c] = engine_checks(prefill_only)
    assert c.detail == "llama-bench, prefill 512 tokens in 1.000 s (512 tok/s); ? threads; recorded"


# --- the reference card's figures -----------------------------------------------------------

def test_the_reference_decode_on_and_off_the_reference_card():
    from beekeeper.verify.judge import judge_reference_decode as ref

    def judge_reference_decode(served, expected, card, depth_tokens=60000):
        return ref(served, expected, card, depth_tokens=depth_tokens)  # the reference's depth

    line = 71 * 0.8  # the seed's figure x its tolerance
    on = judge_reference_decode(line, PROD, "NVIDIA GeForce RTX 4090")
    assert on.status == "PASS" and on.ratio == pytest.approx(0.8)
    assert judge_reference_decode(line - 0.01, PROD, "NVIDIA GeForce RTX 4090").status == "FAIL"
    assert on.detail == ("served 56.8 tok/s; RTX 4090 (seed study) 71 tok/s; needs >= 56.8 on "
                         "this card")
    off = judge_reference_decode(142.0, PROD, "NVIDIA H200")
    assert (off.status, off.ratio) == ("INFO", 2.0)
    assert off.detail == ("served 142.0 tok/s; RTX 4090 (seed study) 71 tok/s; information "
                          "only on NVIDIA H200 (judged against the engine on this host "
                          "instead)")
    none = judge_reference_decode(None, PROD, "NVIDIA GeForce RTX 4090")
    assert (none.status, none.detail) == ("SKIP", "reference RTX 4090: 71 tok/s; no served "
                                                  "figure")
    cpu = judge_reference_decode(50.0, CPU, None, depth_tokens=1024)
    assert (cpu.status, cpu.detail) == ("SKIP", "the profile records no reference-card figure")


def test_the_reference_ttft_on_and_off_the_reference_card():
    from beekeeper.verify.judge import judge_reference_ttft as ref

    def judge_reference_ttft(served, expected, card, prompt_tokens=60000):
        return ref(served, expected, card, prompt_tokens=prompt_tokens)  # the reference's size

    on = judge_reference_ttft(8.96 * 1.25, PROD, "NVIDIA GeForce RTX 4090")
    assert on.status == "PASS"  # exactly at 1.25 x the seed's median
    assert on.detail == "median 11.200 s; RTX 4090 (seed study) 8.96 s; needs <= 11.20 on this card"
    assert judge_reference_ttft(11.3, PROD, "NVIDIA GeForce RTX 4090").status == "FAIL"
    off = judge_reference_ttft(11.3, PROD, None)
    assert (off.status, off.detail) == ("INFO", "median 11.300 s; RTX 4090 (seed study) 8.96 s; "
                                                "information only on an unknown card")
    none = judge_reference_ttft(None, PROD, "NVIDIA GeForce RTX 4090")
    assert (none.status, none.detail) == ("SKIP", "reference RTX 4090: 8.96 s; no served figure")
    cpu = judge_reference_ttft(1.0, CPU, None, prompt_tokens=512)
    assert (cpu.status, cpu.detail) == ("SKIP", "the profile records no reference-card TTFT")


def test_a_profile_measured_on_another_card_is_judged_on_that_card():
    from dataclasses import replace

    from beekeeper.verify.judge import judge_reference_decode as ref

    def judge_reference_decode(served, expected, card):
        return ref(served, expected, card, depth_tokens=60000)  # the reference's depth

    h200 = replace(PROD, reference_card="H200")
    assert judge_reference_decode(30.0, h200, "NVIDIA H200").status == "FAIL"
    assert judge_reference_decode(30.0, h200, "NVIDIA GeForce RTX 4090").status == "INFO"


def test_a_reference_figure_at_another_depth_or_prompt_size_is_not_judged():
    """The review's run: a 4090, decode at 4096 tokens (80 tok/s, over the 60K floor of
    56.8) and TTFT at 512 tokens, no engine suite: the reference figures are at 60K, so
    nothing is compared and the run is INCOMPLETE, never PASSED."""
    from dataclasses import replace

    from beekeeper.verify.judge import yield_reference_ttft

    card, none = "NVIDIA GeForce RTX 4090", EngineRun(requested=False)
    shallow = replace(decode_run([80.0, 80.5, 79.8]), ctx_tokens=4096)
    checks = yield_reference_ttft(decode_checks([shallow], none, PROD, card, cpu=False)
                                  + ttft_checks(ttft_run([0.05] * 5), none, PROD, card))
    got = by_name(checks)
    dec, ttft = got["decode.reference_card"], got["ttft.reference_card"]
    assert (dec.status, ttft.status) == ("SKIP", "SKIP")
    assert "measured at 4096 tokens, the reference's figure at 60000" in dec.detail
    assert "--decode-ctx 60000" in dec.detail
    assert "measured at 512 tokens" in ttft.detail and "--ttft-tokens 60000" in ttft.detail
    cov = coverage(checks, ["decode", "ttft"])
    assert cov.word == "INCOMPLETE" and cov.exit_status == EXIT_NOT_JUDGED
    # at the reference's depth the same card judges; the deepest run is not assumed to be it
    deep = replace(decode_run([80.0, 80.5, 79.8]), ctx_tokens=60000)
    both = by_name(decode_checks([deep, shallow], none, PROD, card, cpu=False))
    assert both["decode.reference_card"].status == "PASS"


def test_the_reference_card_judges_its_own_depth_never_another():
    """A 4090, decode at 4096 and 60000 tokens, no engine suite: the reference card judges
    the 60K figure, but the 4096 one has nothing to be judged against, so decode is not
    judged and the run is INCOMPLETE (it said PASSED, judged: decode). At 60K alone the
    reference card judges every requested depth, and the run passes as before."""
    from dataclasses import replace

    card, none = "NVIDIA GeForce RTX 4090", EngineRun(requested=False)
    deep = replace(decode_run([80.0, 80.5, 79.8]), ctx_tokens=60000)
    shallow = replace(decode_run([150.0, 150.5, 149.8]), ctx_tokens=4096)
    both = decode_checks([shallow, deep], none, PROD, card, cpu=False)
    got = by_name(both)
    assert got["decode.reference_card"].status == "PASS"
    cov = coverage(both, ["decode"])
    assert (cov.word, cov.exit_status) == ("INCOMPLETE", EXIT_NOT_JUDGED)
    assert cov.not_judged == [("decode", got["decode.vs_engine@4096"].detail)]
    assert "no engine baseline (the engine suite was not run" in cov.not_judged[0][1]
    # the depth the reference card judged says so; the other does not
    assert got["decode.vs_engine@60000"].detail.endswith(
        "; judged against the reference card instead (decode.reference_card)")
    assert "reference card" not in got["decode.vs_engine@4096"].detail
    alone = coverage(decode_checks([deep], none, PROD, card, cpu=False), ["decode"])
    assert (alone.word, alone.line()) == ("PASSED", "judged: decode")
    # the engine measured at both depths: each judges its own, the run passes
    measured = EngineRun(requested=True, baseline=EngineBaseline(
        placement="recorded", commands=[],
        decode=[bench(0, 160, 4096, 150.0), bench(0, 160, 60000, 80.0)]))
    assert coverage(decode_checks([shallow, deep], measured, PROD, card, cpu=False),
                    ["decode"]).word == "PASSED"


def test_a_depth_the_reference_card_failed_says_it_was_judged_by_it_too():
    """A 4090 at 60K with no engine suite, decoding at 50 tok/s (the seed's 71): the
    reference check FAILs and the depth's own check says the reference card judged it, as a
    passing one does.
    Mutant: `ref.status in ("PASS", "FAIL")` with the "FAIL" misspelt (a failed reference
    left unsaid on the depth's check)."""
    from dataclasses import replace

    card, none = "NVIDIA GeForce RTX 4090", EngineRun(requested=False)
    slow = replace(decode_run([50.0, 50.2, 49.8]), ctx_tokens=60000)
    got = by_name(decode_checks([slow], none, PROD, card, cpu=False))
    assert got["decode.reference_card"].status == "FAIL"
    assert got["decode.vs_engine@60000"].detail.endswith(
        "; judged against the reference card instead (decode.reference_card)")


def test_a_failed_repeats_error_is_said_to_160_characters():
    """The records check names how many repeats failed and the first one's error, cut at 160
    characters (an error text can be a whole HTML page).
    Mutant: the cut at 161."""
    from dataclasses import replace

    run = replace(decode_run([50.0, 50.2]), failed_repeats=["E" * 200, "F"])
    check = by_name(decode_checks([run], EngineRun(requested=False), PROD, None,
                                  cpu=False))["decode.records_consistent"]
    assert check.status == "FAIL"
    assert check.detail.endswith("; 2 repeat(s) failed: " + "E" * 160), check.detail


def test_a_smaller_context_keeps_the_reference_figures_size():
    """with_ctx_size shrinks verify's depths but the seed's figures stay at 60K: a 28K
    decode is not compared with them."""
    from beekeeper.core.profiles import PROFILES, with_ctx_size
    from beekeeper.verify.judge import judge_reference_decode

    small = with_ctx_size(PROFILES["q8-turbo4-64k"], 32_768).expected
    assert small.reference_tokens == 60000 and small.decode_ctx_tokens < 60000
    v = judge_reference_decode(80.0, small, "NVIDIA GeForce RTX 4090",
                               depth_tokens=small.decode_ctx_tokens)
    assert v.status == "SKIP"


# --- what a run says it judged --------------------------------------------------------------

def test_an_area_not_judged_gives_its_skips_reason_before_information():
    checks = [Check("decode.reference_card", "INFO", "information only on NVIDIA H200"),
              Check("decode.vs_engine@1024", "SKIP", "no engine baseline")]
    assert coverage(checks, ["decode"]).not_judged == [("decode", "no engine baseline")]
    both = coverage([Check("decode.vs_engine@1024", "PASS", ""),
                     Check("ttft.vs_engine", "FAIL", "")], ["decode", "ttft"])
    assert both.line() == "judged: decode, TTFT"


def test_a_long_cause_is_cut_at_160_characters():
    checks = by_name(niah_checks(niah(9, error="E" * 200), PROD))
    assert checks["niah.pass"].detail.endswith("; 1 request(s) failed: " + "E" * 160)


def test_a_noisy_ttft_quotes_both_figures_it_did_not_judge():
    c = by_name(ttft_checks(ttft_run([0.5, 1.0, 1.5, 2.0, 1.2]), engine(), CPU, None,
                            cpu=True))["ttft.vs_engine"]
    assert c.status == "SKIP"
    assert ("more time; median 1.200 s vs engine 1.020 s (prefill + first token, llama-bench) "
            "at 512 tokens: ratio 1.176 not judged (a figure whose own error is over 6% cannot "
            "judge it)") in c.detail


def test_the_sampling_allowance_is_2_ms_a_token_at_the_engines_rate():
    """At 1,000 tok/s the engine takes 1 ms a token: the served time may be 1/0.95 ms plus
    2 ms, a ratio of 0.32759; a thousandth either side of it passes or fails."""
    from beekeeper.verify.judge import judge_decode

    assert judge_decode(327.7, 1000.0, 1024, sampler_ms=2.0).status == "PASS"
    assert judge_decode(327.5, 1000.0, 1024, sampler_ms=2.0).status == "FAIL"


def test_a_figure_not_judged_on_noise_is_not_judged_whatever_else_its_area_passed():
    """TTFT's served figure left unjudged, the host busy, beside a reference card that
    passed: TTFT is not judged, and the busy line says why (a quiet figure does not stand for
    a noisy one). Decode: a depth with no baseline before a busy one: the busy one is why."""
    from beekeeper.verify.judge import BUSY

    busy = f"{BUSY}load 3.1 on 2 cores); run verify again on a quiet host"
    cov = coverage([Check("ttft.vs_engine", "SKIP", busy),
                    Check("ttft.reference_card", "PASS", "median 8.9 s")], ["ttft"])
    assert cov.judged == [] and cov.not_judged == [("ttft", busy)]
    assert cov.exit_status == EXIT_NOT_JUDGED
    cov = coverage([Check("decode.vs_engine@1024", "SKIP", "no engine baseline (x)"),
                    Check("decode.vs_engine@4096", "SKIP", busy)], ["decode"])
    assert cov.not_judged == [("decode", busy)]


def test_an_area_with_nothing_judged_says_why_by_its_skip_not_by_an_information_line():
    """An area whose checks are an INFO and a SKIP: the SKIP's detail is why, whichever
    comes first (the INFO says nothing about why no figure was judged)."""
    skip = "median 1.1 s at 512 tokens; no engine baseline (no llama-bench to run)"
    cov = coverage([Check("ttft.reference_card", "INFO", "information only on a CPU"),
                    Check("ttft.vs_engine", "SKIP", skip)], ["ttft"])
    assert cov.not_judged == [("ttft", skip)]


def test_an_area_with_no_check_says_whether_the_served_suites_stopped_or_never_ran():
    """A decode area with no check at all: after a failed `server.answered` the suites ended
    there ("not measured"); after a failed smoke check and no stop, none ran."""
    asked = ["decode"]
    stop = Check("server.answered", "FAIL", "stopped answering during TTFT: ...")
    assert coverage([stop], asked).not_judged == [("decode", "not measured: the served suites "
                                                   "ended at a failed request (server.answered)")]
    smoke = Check("smoke.health", "FAIL", "no answer")
    assert coverage([smoke], asked).not_judged == [
        ("decode", "no check ran (the smoke check failed first?)")]
