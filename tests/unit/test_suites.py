"""run_suites end to end on httpx.MockTransport: typed results, the judge step, report.json's
shape, and the VRAM budget the caller passes."""

import json
from pathlib import Path

import httpx
import pytest

from beekeeper.core.profiles import PROFILES
from beekeeper.verify.client import ServerClient
from beekeeper.verify.judge import vram_budget_mib
from beekeeper.verify.results import DecodeResult, LoadResult, NiahResult, TtftResult
from beekeeper.verify.suites import Sizes, run_suites

from .harness import fake_server


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    sizes = Sizes(decode_ctx_tokens=[200], decode_out_tokens=40, ttft_tokens=100,
                  ttft_requests=2, niah_tokens=150, niah_cases=3, load_clients=1,
                  load_seconds=0.2, load_out_tokens=4)
    out = tmp_path_factory.mktemp("reports")
    with ServerClient("http://server", transport=httpx.MockTransport(fake_server)) as c:
        return run_suites(c, PROFILES["cpu-tiny"], ["all"], out_dir=str(out), sizes=sizes,
                          budget_gib=7.5)


def test_suites_return_typed_results_that_the_judge_reads(report):
    s = report.suites
    assert isinstance(s.decode[0], DecodeResult) and s.decode[0].records_consistent
    assert isinstance(s.ttft, TtftResult) and s.ttft.no_prompt_reuse
    assert isinstance(s.niah, NiahResult) and s.niah.passed == 3
    assert isinstance(s.load, LoadResult) and s.load.failed == 0 and s.load.requests > 0
    names = [c.name for c in report.checks]
    assert names[:4] == ["engine.baseline", "smoke.health", "smoke.models", "smoke.stream"]
    assert "decode.vs_engine@200" in names and "niah.pass" in names
    assert names[-1] == "vram.rise_vs_budget"
    assert next(c for c in report.checks if c.name == "engine.baseline").status == "SKIP"


def test_report_json_keeps_its_keys(report):
    data = json.loads((Path(report.out_dir) / "report.json").read_text())
    assert list(data) == ["profile", "url", "started_utc", "host", "checks", "suites",
                          "server", "planner", "engine", "out_dir", "budget_mib", "passed",
                          "verdict"]
    assert list(data["suites"]) == ["smoke", "decode", "ttft", "niah", "load", "vram"]
    assert set(data["suites"]["decode"][0]) == {
        "ctx_tokens", "out_tokens_requested", "decode_tok_s", "server_predicted_per_second",
        "windowed_tok_s", "record", "samples_tok_s", "engine_tok_s", "served_over_engine",
        "settle", "failed_repeats", "again_engine", "first_pair"}
    assert set(data["suites"]["ttft"]) == {
        "n_tokens", "ttft_s", "median_s", "p95_s", "p95_method", "median_ci95_s",
        "server_prompt_ms", "engine_ttft_s", "engine_prefill_s", "records", "settle",
        "set_aside_records"}
    # how each served figure's repeats were measured (verify/settle.py), round by round
    for st in (data["suites"]["decode"][0]["settle"], data["suites"]["ttft"]["settle"]):
        assert st["stop"] in ("settled", "cap", "budget") and st["rounds"]
        assert st["repeats"] == sum(r["repeats"] for r in st["rounds"] if r["used"])
    assert data["suites"]["niah"]["passed"] == 3 and data["suites"]["niah"]["n"] == 3
    assert data["suites"]["load"]["failed"] == 0 and "ttft_s" in data["suites"]["load"][
        "records"][0]
    assert data["budget_mib"] == 7.5 * 1024  # the caller's budget, not the profile's


def test_decode_is_repeated_so_its_spread_is_known(report):
    """Three requests at each depth (suites.DECODE_REPEATS): the first on a fresh prompt
    (cache_n 0, the consistency check's), the figure their median."""
    from beekeeper.verify.judge import NOISE_MAX
    from beekeeper.verify.metrics import median
    from beekeeper.verify.suites import DECODE_REPEATS

    for r in report.suites.decode:
        assert DECODE_REPEATS == 3 and r.settle is not None
        rounds = r.settle["rounds"]
        assert rounds[0]["repeats"] == DECODE_REPEATS and len(r.samples_tok_s) >= DECODE_REPEATS
        # more repeats only while the figure's error was over the limit (verify/settle.py)
        for before in rounds[:-1]:
            assert before["error_after"] > NOISE_MAX
        assert len(r.samples_tok_s) == sum(x["repeats"] for x in rounds)
        assert r.decode_tok_s == median(r.samples_tok_s)


def test_the_vram_budget_is_the_callers_else_the_profiles():
    e = PROFILES["cpu-tiny"].expected
    assert vram_budget_mib(e, 12) == 12 * 1024
    assert vram_budget_mib(e) == e.vram_budget_gib * 1024
