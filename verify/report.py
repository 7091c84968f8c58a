"""
Reports: report.json (everything), report.md (summary table), report.html (self-contained,
inline SVG charts, opens offline).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

W, H, PAD = 640, 240, 64


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=lambda o: asdict(o)
                                 if hasattr(o, "__dataclass_fields__") else str(o)))


def _axes(title: str, xlabel: str, ylabel: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'role="img" aria-label="{html.escape(title)}">',
            f'<rect width="{W}" height="{H}" fill="#fff" stroke="#ccc"/>',
            f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13">'
            f'{html.escape(title)}</text>',
            f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 10}" y2="{H - PAD}" stroke="#333"/>',
            f'<line x1="{PAD}" y1="30" x2="{PAD}" y2="{H - PAD}" stroke="#333"/>',
            f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="11">'
            f'{html.escape(xlabel)}</text>',
            f'<text x="12" y="{H / 2}" font-size="11" transform="rotate(-90 12 {H / 2})" '
            f'text-anchor="middle">{html.escape(ylabel)}</text>']


def _scale(v: float, lo: float, hi: float, a: float, b: float) -> float:
    return a if hi == lo else a + (v - lo) / (hi - lo) * (b - a)


def line_chart(title: str, xs: list[float], ys: list[float], xlabel: str, ylabel: str,
               hline: float | None = None, hlabel: str = "") -> str:
    if not xs:
        return f"<p>{html.escape(title)}: no data</p>"
    out = _axes(title, xlabel, ylabel)
    y_hi = max(max(ys), hline or 0) * 1.05 or 1
    x0, x1 = min(xs), max(xs)
    pts = " ".join(f"{_scale(x, x0, x1, PAD, W - 10):.1f},"
                   f"{_scale(y, 0, y_hi, H - PAD, 30):.1f}" for x, y in zip(xs, ys,
                                                                              strict=False))
    out.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{pts}"/>')
    for v in (0, y_hi / 2, y_hi):
        y = _scale(v, 0, y_hi, H - PAD, 30)
        out.append(f'<text x="{PAD - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">'
                   f'{_num(v)}</text>')
    out.append(f'<text x="{PAD}" y="{H - PAD + 14}" font-size="10">{_num(x0)}</text>')
    out.append(f'<text x="{W - 10}" y="{H - PAD + 14}" font-size="10" text-anchor="end">'
               f'{_num(x1)}</text>')
    if hline is not None:
        y = _scale(hline, 0, y_hi, H - PAD, 30)
        out.append(f'<line x1="{PAD}" y1="{y:.1f}" x2="{W - 10}" y2="{y:.1f}" stroke="#d62728" '
                   f'stroke-dasharray="6 3"/><text x="{W - 12}" y="{y - 4:.1f}" font-size="10" '
                   f'text-anchor="end" fill="#d62728">{html.escape(hlabel)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def strip_chart(title: str, values: list[float], xlabel: str) -> str:
    """Distribution: every value as a dot, with a box from p25 to p75 and the median."""
    if not values:
        return f"<p>{html.escape(title)}: no data</p>"
    out = _axes(title, xlabel, "")
    lo, hi = min(values) * 0.95, max(values) * 1.05 or 1
    sv = sorted(values)
    q = [sv[int(p * (len(sv) - 1))] for p in (0.25, 0.5, 0.75)]
    x25, x50, x75 = (_scale(v, lo, hi, PAD, W - 10) for v in q)
    out.append(f'<rect x="{x25:.1f}" y="{H / 2 - 30}" width="{max(x75 - x25, 1):.1f}" '
               f'height="60" fill="#aec7e8" stroke="#1f77b4"/>')
    out.append(f'<line x1="{x50:.1f}" y1="{H / 2 - 30}" x2="{x50:.1f}" y2="{H / 2 + 30}" '
               'stroke="#d62728" stroke-width="2"/>')
    for i, v in enumerate(values):
        out.append(f'<circle cx="{_scale(v, lo, hi, PAD, W - 10):.1f}" '
                   f'cy="{H / 2 - 20 + (i * 7) % 40}" r="3" fill="#333"/>')
    out.append(f'<text x="{PAD}" y="{H - PAD + 14}" font-size="10">{lo:.3g}</text>')
    out.append(f'<text x="{W - 10}" y="{H - PAD + 14}" font-size="10" text-anchor="end">'
               f'{hi:.3g}</text></svg>')
    return "\n".join(out)


def niah_grid(cases: list[dict]) -> str:
    if not cases:
        return "<p>NIAH: not run</p>"
    cell = (W - 2 * PAD) / len(cases)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="110" role="img" '
           'aria-label="NIAH depth grid">',
           f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13">NIAH: needle depth '
           '(green = exact match)</text>']
    for i, c in enumerate(cases):
        x = PAD + i * cell
        color = "#2ca02c" if c["passed"] else "#d62728"
        out.append(f'<rect x="{x:.1f}" y="30" width="{cell - 4:.1f}" height="40" '
                   f'fill="{color}"><title>depth {c["depth"]:.0%}, expected {c["expected"]}, '
                   f'got {html.escape(c["answer"][:40])}</title></rect>')
        out.append(f'<text x="{x + cell / 2 - 2:.1f}" y="88" font-size="10" '
                   f'text-anchor="middle">{c["depth"]:.0%}</text>')
    out.append("</svg>")
    return "\n".join(out)


def charts(data: dict[str, Any], budget_mib: float | None) -> list[str]:
    s = data.get("suites", {})
    out = []
    ttft = (s.get("ttft") or {}).get("ttft_s") or []
    out.append(strip_chart(f"TTFT distribution ({len(ttft)} requests)", ttft, "seconds"))
    for run in s.get("decode") or []:
        rec = run["record"]
        times = [e["t_s"] for e in rec["events"] if e["kind"] in ("content", "reasoning")]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        out.append(line_chart(f"Token latency over output position ({run['ctx_tokens']} ctx)",
                              list(range(1, len(gaps) + 1)), [g * 1000 for g in gaps],
                              "output token", "ms since previous token"))
        w = run.get("windowed_tok_s") or []
        out.append(line_chart(f"Decode tok/s over output ({run['ctx_tokens']} ctx, "
                              "64-token windows)", list(range(len(w))), w, "window",
                              "tok/s") if w else
                   f"<p>decode tok/s over output ({run['ctx_tokens']} ctx): output shorter "
                   "than two 64-token windows</p>")
    vram = s.get("vram") or {}
    if vram.get("samples"):
        out.append(line_chart("VRAM over time", [x["t_s"] for x in vram["samples"]],
                              [x["used_mib"] for x in vram["samples"]], "seconds", "MiB used",
                              hline=(vram.get("baseline_mib") or 0) + (budget_mib or 0),
                              hlabel="baseline + budget"))
    else:
        out.append(f"<p>VRAM over time: {html.escape(str(vram.get('skipped', 'not run')))}</p>")
    out.append(niah_grid((s.get("niah") or {}).get("cases") or []))
    return out


def write_reports(report: Any, folder: Path, budget_mib: float | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = _jsonable(asdict(report))
    data["passed"] = report.passed
    (folder / "report.json").write_text(json.dumps(data, indent=2))
    lines = [f"# beekeeper verify: {report.profile}", "",
             f"- server: {report.url}", f"- started (UTC): {report.started_utc}",
             f"- result: **{'PASS' if report.passed else 'FAIL'}**", "",
             "| check | required | result | measured vs expected |", "|---|---|---|---|"]
    for c in report.checks:
        lines.append(f"| {c.name} | {'yes' if c.required else 'no'} | "
                     f"{'PASS' if c.passed else 'FAIL'} | {c.detail} |")
    lines += ["", "Definitions: decode tok/s = (N - 1) / (t_last_token - t_first_token), "
              "N = usage.completion_tokens; TTFT = first token event - send; p95 nearest-rank; "
              "NIAH bound = two-sided 95% Clopper-Pearson."]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    rows = "".join(f"<tr class={'pass' if c.passed else 'fail'}><td>{html.escape(c.name)}</td>"
                   f"<td>{'yes' if c.required else 'no'}</td>"
                   f"<td>{'PASS' if c.passed else 'FAIL'}</td><td>{html.escape(c.detail)}</td>"
                   "</tr>" for c in report.checks)
    body = "\n".join(f"<figure>{c}</figure>" for c in charts(data, budget_mib))
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>beekeeper verify: {html.escape(report.profile)}</title>
<style>body{{font-family:sans-serif;max-width:760px;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;font-size:13px}}
.pass td:nth-child(3){{color:#2ca02c}}.fail td:nth-child(3){{color:#d62728;font-weight:bold}}
figure{{margin:1em 0}}</style></head><body>
<h1>beekeeper verify: {html.escape(report.profile)}</h1>
<p>server {html.escape(report.url)}, started {html.escape(report.started_utc)} UTC:
<b>{'PASS' if report.passed else 'FAIL'}</b></p>
<table><tr><th>check</th><th>required</th><th>result</th><th>measured vs expected</th></tr>
{rows}</table>
{body}
</body></html>
"""
    (folder / "report.html").write_text(page)
