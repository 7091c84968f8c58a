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
