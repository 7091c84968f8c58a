"""
Compare two verify runs side by side (a regression check after an upgrade).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .vram import server_peak_mib


def key_figures(report: dict[str, Any]) -> dict[str, float | None]:
    """The headline numbers of one report.json, with units in the names."""
    s = report.get("suites", {})
    dec = s.get("decode") or []
    ttft = s.get("ttft") or {}
    niah = s.get("niah") or {}
    vram = s.get("vram") or {}
    load = s.get("load") or {}
    return {
        "decode_tok_s": dec[-1]["decode_tok_s"] if dec else None,
        "server_decode_tok_s": dec[-1]["server_predicted_per_second"] if dec else None,
        "ttft_median_s": ttft.get("median_s"),
        "ttft_p95_s": ttft.get("p95_s"),
        "niah_passed": niah.get("passed"),
        "peak_vram_mib": server_peak_mib(vram),
        "load_aggregate_tok_s": load.get("aggregate_tok_s"),
    }


def compare(a_path: Path, b_path: Path) -> str:
    a, b = (json.loads(p.read_text()) for p in (a_path, b_path))
    fa, fb = key_figures(a), key_figures(b)
    lines = [f"| figure | A: {a.get('profile')} {a.get('started_utc')} | "
             f"B: {b.get('profile')} {b.get('started_utc')} | B / A |", "|---|---|---|---|"]
    for k in fa:
        va, vb = fa[k], fb[k]
        ratio = f"{vb / va:.3f}" if va and vb is not None else "-"
        lines.append(f"| {k} | {'-' if va is None else f'{va:.4g}'} | "
                     f"{'-' if vb is None else f'{vb:.4g}'} | {ratio} |")
    ca = {c["name"]: c["passed"] for c in a.get("checks", [])}
    cb = {c["name"]: c["passed"] for c in b.get("checks", [])}
    lines += ["", "| check | A | B |", "|---|---|---|"]
    for name in sorted(set(ca) | set(cb)):
        def show(v: bool | None) -> str:
            return "-" if v is None else ("PASS" if v else "FAIL")
        mark = " (changed)" if ca.get(name) != cb.get(name) else ""
        lines.append(f"| {name}{mark} | {show(ca.get(name))} | {show(cb.get(name))} |")
    return "\n".join(lines) + "\n"
