"""Typed results of the verify suites, units in the field names; `to_json()` is report.json's
shape, with the figures that compare with the engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import metrics
from .client import RequestRecord, ttfts_s
from .engine import EngineBaseline


@dataclass
class DecodeResult:
    """Long-context decode at one depth: the timed request (`record`, a fresh prompt) and its
    repeats on the same prompt; `decode_tok_s` is the median of `samples_tok_s`."""

    ctx_tokens: int
    out_tokens_requested: int
    decode_tok_s: float | None
    server_predicted_per_second: float | None
    windowed_tok_s: list[float]
    record: RequestRecord
    samples_tok_s: list[float] = field(default_factory=list)
    settle: dict[str, Any] | None = None  # Settled.to_json()
    failed_repeats: list[str] = field(default_factory=list)  # each failed repeat's error
    # measured again as a pair (suites.decode_again): llama-bench at this depth just before,
    # which this figure is judged against, and the first pair's figures (served_tok_s,
    # engine_tok_s, ratio), below the bar
    again_engine: EngineBaseline | None = None
    first_pair: dict[str, float] | None = None

    @property
    def records_consistent(self) -> bool:
        """usage.completion_tokens == timings.predicted_n and no cached prompt tokens."""
        r = self.record
        return (r.ok and r.usage is not None and r.timings is not None
                and r.usage["completion_tokens"] == r.timings["predicted_n"]
                and r.timings.get("cache_n") == 0)

    def engine_tok_s(self, engine: EngineBaseline | None) -> float | None:
        """The engine's decode rate at this depth (None: no baseline): the one measured just
        before this figure where it was measured again as a pair."""
        engine = self.again_engine or engine
        return engine.decode_tok_s_at(self.ctx_tokens) if engine else None

    def served_over_engine(self, engine: EngineBaseline | None) -> float | None:
        """The served decode rate over the engine's at this depth (None without both)."""
        eng = self.engine_tok_s(engine)
        return self.decode_tok_s / eng if self.decode_tok_s and eng else None

    def to_json(self, engine: EngineBaseline | None) -> dict[str, Any]:
        return {**asdict(self), "record": self.record.to_json(),
                "engine_tok_s": self.engine_tok_s(engine),
                "served_over_engine": self.served_over_engine(engine)}


@dataclass
class TtftResult:
    """K requests of `target_tokens` each, every one with its own prefix, no prompt cache."""

    target_tokens: int
    prompt_tokens: list[int]  # as the prompt builder fitted them
    records: list[RequestRecord]  # the requests the figure is judged on
    settle: dict[str, Any] | None = None  # Settled.to_json()
    set_aside: list[RequestRecord] = field(default_factory=list)  # busy rounds' requests

    @property
    def ttft_s(self) -> list[float]:
        return ttfts_s(self.records)

    @property
    def median_s(self) -> float | None:
        return metrics.median(self.ttft_s) if self.ttft_s else None

    @property
    def p95_s(self) -> float | None:
        return metrics.percentile(self.ttft_s, 95) if self.ttft_s else None

    @property
    def no_prompt_reuse(self) -> bool:
        """timings.cache_n == 0 on every request, and every request timed."""
        return (all((r.timings or {}).get("cache_n") == 0
                    for r in [*self.records, *self.set_aside])
                and len(self.ttft_s) == len(self.records))

    def engine_ttft_s(self, engine: EngineBaseline | None) -> float | None:
        """The engine's TTFT at this prompt length (None: no baseline)."""
        return engine.ttft_s(self.target_tokens) if engine else None

    def to_json(self, engine: EngineBaseline | None) -> dict[str, Any]:
        ttfts = self.ttft_s
        return {
            "n_tokens": self.prompt_tokens, "ttft_s": ttfts,
            "median_s": self.median_s, "p95_s": self.p95_s,
            "p95_method": metrics.PERCENTILE_METHOD,
            "median_ci95_s": metrics.bootstrap_ci(ttfts, metrics.median) if ttfts else None,
            "server_prompt_ms": [(r.timings or {}).get("prompt_ms") for r in self.records],
            "engine_ttft_s": self.engine_ttft_s(engine),
            "engine_prefill_s": engine.prefill_s if engine else None,
            "records": [r.to_json() for r in self.records],
            "settle": self.settle,
            "set_aside_records": [r.to_json() for r in self.set_aside],
        }


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
    error: str | None = None  # the request's failure (HTTP status, timeout), if it failed


@dataclass
class NiahResult:
    target_tokens: int
    cases: list[NiahCase]

    @property
    def passed(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def clopper_pearson_95(self) -> tuple[float, float]:
        return metrics.clopper_pearson(self.passed, len(self.cases))

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.clopper_pearson_95
        return {"cases": [asdict(c) for c in self.cases], "passed": self.passed,
                "n": len(self.cases), "clopper_pearson_95": [lo, hi]}


@dataclass
class LoadResult:
    """Closed-loop clients for a bounded time; every request is recorded."""

    clients: int
    seconds: float  # wall time of the run
    records: list[RequestRecord] = field(default_factory=list)

    @property
    def ok_records(self) -> list[RequestRecord]:
        return [r for r in self.records if r.ok]

    @property
    def requests(self) -> int:
        return len(self.records)

    @property
    def failed(self) -> int:
        return len(self.records) - len(self.ok_records)

    @property
    def errors(self) -> list[str | None]:
        return [r.error for r in self.records if not r.ok][:5]

    @property
    def aggregate_tok_s(self) -> float | None:
        toks = sum(r.completion_tokens or 0 for r in self.ok_records)
        return toks / self.seconds if self.seconds else None

    @property
    def ttft_s_p95(self) -> float | None:
        ttfts = ttfts_s(self.records)
        return metrics.percentile(ttfts, 95) if ttfts else None

    def to_json(self) -> dict[str, Any]:
        ttfts = ttfts_s(self.records)
        return {
            "clients": self.clients, "seconds": round(self.seconds, 2),
            "requests": self.requests, "failed": self.failed, "errors": self.errors,
            "aggregate_tok_s": self.aggregate_tok_s,
            "ttft_s_median": metrics.median(ttfts) if ttfts else None,
            "ttft_s_p95": self.ttft_s_p95,
            "per_request_decode_tok_s": [metrics.decode_tok_s(r) for r in self.ok_records],
            "records": [r.to_json() for r in self.records],
        }


@dataclass
class EngineRun:
    """The engine suite: llama-bench's baseline, or why there is none."""

    requested: bool
    baseline: EngineBaseline | None = None
    error: str | None = None  # llama-bench could not run (EngineError): no baseline
    failed: bool = False  # it ran and failed (EngineFailed): judged a failure
    # llama-bench's decode again at these depths, as `baseline` was measured (None: verify
    # cannot run it again: no engine, or the engine suite not run)
    again: Callable[[list[int]], EngineBaseline] | None = field(
        default=None, repr=False, compare=False)

    @property
    def why_not(self) -> str | None:
        """Why no served figure can be judged against the engine (None when measured)."""
        if self.baseline is not None:
            return None
        if not self.requested:
            return "the engine suite was not run (add --suite engine)"
        if self.error is not None:
            return f"llama-bench could not run: {self.error}"
        return ("no llama-bench to run: the server is not the kit's on this machine and no "
                "host was named (give --ssh or --sandbox, run --on-host, or for a server you "
                "started give --llama-bench PATH and --model)")
