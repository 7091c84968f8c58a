import pytest

from beekeeper.verify.client import RequestRecord, StreamEvent
from beekeeper.verify.metrics import (
    bootstrap_ci,
    clopper_pearson,
    decode_tok_s,
    median,
    percentile,
    windowed_tok_s,
)


def record(times, n=None, kind="content"):
    rec = RequestRecord(ok=True, status_code=200, error=None, t_send_s=0.0)
    rec.events = [StreamEvent(t, kind, 1) for t in times]
    rec.usage = {"completion_tokens": n if n is not None else len(times), "prompt_tokens": 10}
    return rec


def test_decode_excludes_the_first_token():
    # first token at 1.0 s (TTFT), then 10 more at 0.1 s steps: 10 tokens / 1.0 s
    rec = record([1.0 + 0.1 * i for i in range(11)])
    assert decode_tok_s(rec) == pytest.approx(10.0)
    assert rec.ttft_s == 1.0


def test_decode_counts_tokens_from_usage_not_events():
    # speculative decoding: 5 events carry 20 tokens
    rec = record([0.0, 0.1, 0.2, 0.3, 0.4], n=20)
    assert decode_tok_s(rec) == pytest.approx(19 / 0.4)


def test_decode_needs_two_tokens():
    assert decode_tok_s(record([0.5])) is None


def test_windowed_rate_is_flat_for_a_steady_stream():
    rec = record([0.01 * i for i in range(257)])
    w = windowed_tok_s(rec, 64)
    assert len(w) == 4 and all(x == pytest.approx(100.0) for x in w)


def test_nearest_rank_percentile():
    vals = list(range(1, 11))
    assert percentile(vals, 95) == 10  # n=10: p95 is the maximum
    assert percentile(vals, 50) == 5
    assert percentile([3.0], 95) == 3.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_bootstrap_ci_brackets_the_median_and_is_deterministic():
    vals = [1.0, 1.1, 0.9, 1.05, 0.95, 1.2, 0.8, 1.0, 1.02, 0.98]
    lo, hi = bootstrap_ci(vals, median)
    assert lo <= median(vals) <= hi and hi - lo < 0.3
    assert bootstrap_ci(vals, median) == (lo, hi)
    assert bootstrap_ci([2.0] * 5, median) == (2.0, 2.0)


@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    (10, 10, 0.6915, 1.0),     # 10/10 proves recall >= 69%
    (0, 10, 0.0, 0.3085),
    (5, 10, 0.1871, 0.8129),
    (8, 10, 0.4439, 0.9748),
    (1, 10, 0.0025, 0.4450),
])
def test_clopper_pearson_known_values(k, n, lo, hi):
    a, b = clopper_pearson(k, n)
    assert a == pytest.approx(lo, abs=1e-4) and b == pytest.approx(hi, abs=1e-4)


def test_spread_is_the_sample_stddev_llama_bench_reports():
    """llama-bench's stddev_ts is the sample standard deviation (n - 1) of samples_ts: the
    recorded sandbox run (tests/unit/data/llama-bench-cpu-tiny.json) reproduces it."""
    import json
    from pathlib import Path

    from beekeeper.verify.metrics import spread

    tests = json.loads((Path(__file__).parent / "data/llama-bench-cpu-tiny.json").read_text())
    for t in tests:
        mean, sd = spread(t["samples_ts"])
        assert abs(mean - t["avg_ts"]) < 1e-3 and abs(sd - t["stddev_ts"]) < 1e-3
    assert spread([5.0]) is None


# --- the formulas' edges (verify/metrics.py under mutation: each assert fails on a mutant) --

def test_decode_rate_needs_two_tokens_and_a_forward_stream_and_reads_its_ends():
    """Two tokens a second apart: 1 tok/s, the smallest record with a rate; none where the
    record says fewer than two tokens or none, or the stream has no duration or runs
    backwards; the first and the last event are its ends, whatever lies between."""
    assert decode_tok_s(record([0.0, 1.0], n=2)) == pytest.approx(1.0)
    assert decode_tok_s(record([0.0, 1.0], n=1)) is None
    unsaid = record([0.0, 1.0])
    unsaid.usage = {"prompt_tokens": 10}  # no completion_tokens, no timings
    assert decode_tok_s(unsaid) is None
    assert decode_tok_s(record([5.0, 5.0], n=2)) is None
    assert decode_tok_s(record([1.0, 0.0], n=2)) is None
    assert decode_tok_s(record([0.0, 0.0, 1.0], n=3)) == pytest.approx(2.0)
    assert decode_tok_s(record([0.0, 1.0, 1.0], n=3)) == pytest.approx(2.0)


def test_windowed_rate_windows_of_64_scaled_by_tokens_per_event_skipping_empty_ones():
    steady = [0.01 * i for i in range(65)]  # 65 events: one window of 64 (the default)
    assert windowed_tok_s(record(steady)) == [pytest.approx(100.0)]
    assert windowed_tok_s(record(steady[:64])) == []
    # speculative decoding: two tokens an event, twice the rate
    assert windowed_tok_s(record(steady, n=130)) == [pytest.approx(200.0)]
    # a window of no duration is left out, not divided by
    assert windowed_tok_s(record([1.0] * 65)) == []


def test_percentile_takes_q_in_0_exclusive_to_100_and_ranks_by_ceiling():
    assert percentile([1.0, 2.0], 100) == 2.0
    assert percentile([1.0, 2.0], 0.5) == 1.0
    assert percentile(list(range(1, 201)), 100) == 200
    for q in (0, -1, 100.5):
        with pytest.raises(ValueError, match=rf"^q must be in \(0, 100\], got {q}$"):
            percentile([1.0], q)
    with pytest.raises(ValueError, match="^percentile of no values$"):
        percentile([], 50)


def test_bootstrap_interval_is_the_sorted_statistics_at_its_two_quantiles():
    """2,000 resamples by default, seed 0, 95 %: with a statistic that counts its calls, the
    sorted statistics are 0..1999 and the interval is the 51st and the 1,951st; at 100 % the
    first and the last."""
    calls = iter(range(10**6))
    assert bootstrap_ci([1.0], lambda _: next(calls)) == (50, 1950)
    assert next(calls) == 2000  # resamples drawn
    calls = iter(range(10**6))
    assert bootstrap_ci([1.0], lambda _: next(calls), confidence=1.0) == (0, 1999)
    vals = [1.0, 1.1, 0.9, 1.05, 0.95, 1.2, 0.8, 1.0, 1.02, 0.98]
    assert bootstrap_ci(vals, median) == bootstrap_ci(vals, median, seed=0)
    with pytest.raises(ValueError, match="^bootstrap of no values$"):
        bootstrap_ci([], median)


def test_clopper_pearson_ends_are_exact_and_its_input_checked():
    assert clopper_pearson(0, 10)[0] == 0.0 and clopper_pearson(10, 10)[1] == 1.0
    lo, hi = clopper_pearson(1, 1)  # one of one: at least 2.5 % at 95 %
    assert lo == pytest.approx(0.025) and hi == 1.0
    for k, n in ((3, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match=rf"^need 0 <= k <= n and n > 0, got k={k}, "
                                             rf"n={n}$"):
            clopper_pearson(k, n)
