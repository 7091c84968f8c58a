"""
Gateway suite: what the gateway adds, measured in one run against the server it fronts.
Pairs of identical greedy requests, one straight to the server and one through the gateway,
in alternating order (so a drift in the server's speed falls on both): the gateway's added
time to first token, its decode rate against the direct one, and whether the tokens are the
same. A benchmark: the figures are INFO; only failed requests or different tokens fail it.
"""

from __future__ import annotations

from typing import Any

from . import metrics
from .client import RequestRecord, ServerClient, ttfts_s
from .judge import Check

PROMPT = [{"role": "user", "content": "Count from one to two hundred in words, one number "
           "per line, and nothing else."}]


def _figures(records: list[RequestRecord]) -> dict[str, Any]:
    ok = [r for r in records if r.ok]
    ttfts = ttfts_s(ok)
    rates = [x for x in (metrics.decode_tok_s(r) for r in ok) if x is not None]
    return {"requests": len(records), "failed": len(records) - len(ok),
            "ttft_s_median": metrics.median(ttfts) if ttfts else None,
            "ttft_s_p95": metrics.percentile(ttfts, 95) if ttfts else None,
            "decode_tok_s_median": metrics.median(rates) if rates else None,
            "ttft_s": ttfts, "decode_tok_s": rates}


def run_gateway(gateway: ServerClient, direct: ServerClient, model: str, pairs: int = 8,
                out_tokens: int = 64) -> tuple[list[Check], dict[str, Any]]:
    """`pairs` requests each way (one warm-up each first); the request names `model`, so the
    gateway's URL may be its root or /model/<name>."""
    body = {"model": model}
    for c in (direct, gateway):  # warm-up: load, caches, connections
        c.stream_chat(PROMPT, max_tokens=8, extra=body)
    via: list[RequestRecord] = []
    straight: list[RequestRecord] = []
    for i in range(pairs):
        order = [(direct, straight), (gateway, via)]
        for client, out in (order if i % 2 == 0 else order[::-1]):
            out.append(client.stream_chat(PROMPT, max_tokens=out_tokens, ignore_eos=True,
                                          seed=42, extra=body))
    g, d = _figures(via), _figures(straight)
    checks = [Check.of("gateway.requests_ok", g["failed"] == 0 and d["failed"] == 0,
                       f"{pairs} through the gateway ({g['failed']} failed), {pairs} direct "
                       f"({d['failed']} failed)")]
    same = [a.text == b.text for a, b in zip(via, straight, strict=True) if a.ok and b.ok]
    checks.append(Check.of("gateway.same_tokens", bool(same) and all(same),
                           f"{sum(same)} of {len(same)} greedy pairs streamed the same text"))
    added_ms = None
    if g["ttft_s_median"] is not None and d["ttft_s_median"] is not None:
        added_ms = (g["ttft_s_median"] - d["ttft_s_median"]) * 1000
        checks.append(Check("gateway.ttft_added", "INFO",
                            f"median TTFT {g['ttft_s_median'] * 1000:.1f} ms through the "
                            f"gateway, {d['ttft_s_median'] * 1000:.1f} ms direct: "
                            f"{added_ms:+.1f} ms"))
    ratio = None
    if g["decode_tok_s_median"] and d["decode_tok_s_median"]:
        ratio = g["decode_tok_s_median"] / d["decode_tok_s_median"]
        checks.append(Check("gateway.decode_ratio", "INFO",
                            f"decode {g['decode_tok_s_median']:.1f} tok/s through the gateway"
                            f", {d['decode_tok_s_median']:.1f} direct: x{ratio:.3f}"))
    return checks, {"pairs": pairs, "out_tokens": out_tokens, "gateway": g, "direct": d,
                    "ttft_added_ms": added_ms, "decode_ratio": ratio,
                    "records": {"gateway": [r.to_json() for r in via],
                                "direct": [r.to_json() for r in straight]}}
