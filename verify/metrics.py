"""Metric functions: pure, defined by formula, tested on fabricated records (TTFT is
RequestRecord.ttft_s: the first token event's seconds since the send)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence

from .client import RequestRecord

PERCENTILE_METHOD = "nearest-rank"


def decode_tok_s(rec: RequestRecord) -> float | None:
    """(N - 1) / (t_last - t_first), N = usage.completion_tokens: steady decode rate,
    excluding the first token."""
    times = rec.token_event_times_s
    n = rec.completion_tokens
    if n is None or n < 2 or len(times) < 2 or times[-1] <= times[0]:
        return None
    return (n - 1) / (times[-1] - times[0])


def windowed_tok_s(rec: RequestRecord, window_tokens: int = 64) -> list[float]:
    """Decode rate over consecutive windows of token events (shows the rate is sustained),
    scaled by N / events where an event carries several tokens (speculative decoding)."""
    times = rec.token_event_times_s
    n = rec.completion_tokens or len(times)
    if len(times) < window_tokens + 1:
        return []
    scale = n / len(times)
    out = []
    for i in range(0, len(times) - window_tokens, window_tokens):
        dt = times[i + window_tokens] - times[i]
        if dt > 0:
            out.append(window_tokens * scale / dt)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q% of values <= it."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"q must be in (0, 100], got {q}")
    ordered = sorted(values)
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def bootstrap_ci(values: Sequence[float], stat: Callable[[Sequence[float]], float],
                 confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
                 ) -> tuple[float, float]:
    """Percentile bootstrap interval of `stat`, fixed seed (the same interval every run)."""
    if not values:
        raise ValueError("bootstrap of no values")
    rng = random.Random(seed)
    k = len(values)
    stats = sorted(stat([values[rng.randrange(k)] for _ in range(k)])
                   for _ in range(n_resamples))
    lo = stats[int((1 - confidence) / 2 * n_resamples)]
    hi = stats[min(int((1 + confidence) / 2 * n_resamples), n_resamples - 1)]
    return lo, hi


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> tuple[float, float] | None:
    """(mean, sample standard deviation: n - 1, as llama-bench's stddev_ts) of two or more
    values; None for fewer."""
    if len(values) < 2:
        return None
    return float(statistics.mean(values)), float(statistics.stdev(values))


def _binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval of k successes in n."""
    if not 0 <= k <= n or n == 0:
        raise ValueError(f"need 0 <= k <= n and n > 0, got k={k}, n={n}")
    alpha = 1 - confidence

    def solve(f: Callable[[float], float], target: float) -> float:
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            if f(mid) < target:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = 0.0 if k == 0 else solve(lambda p: _binom_sf(k, n, p), alpha / 2)
    # upper: P(X <= k | p) = alpha/2, decreasing in p
    upper = 1.0 if k == n else solve(lambda p: 1 - (1 - _binom_sf(k + 1, n, p)), 1 - alpha / 2)
    return lower, upper
