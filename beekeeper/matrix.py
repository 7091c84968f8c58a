"""
Config matrix: deploy each profile in turn on one host, measure it with the verify suites,
rank the results the way the seed study did, and name the production profile by policy.
The host is left on the profile it ran before (or the recommended one when asked).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.errors import BeekeeperError
from .core.paths import KIT_ROOT
from .core.profiles import PROFILES

if TYPE_CHECKING:
    from beekeeper.verify.report import Report

# the engine suite first, so each row's decode and TTFT are judged against its own engine
SUITES = ["engine", "decode", "ttft", "niah", "vram"]
POLICY = ("fastest decode among profiles whose peak VRAM is within the budget (or not "
          "measurable) and whose NIAH pass count meets the profile's requirement "
          "(10/10 for the Qwen3.5 profiles), and whose verify run did not fail (a server slower "
          "than its own engine is not recommended)")


@dataclass
class Row:
    profile: str
    summary: str
    deployed: bool
    decode_tok_s: float | None = None
    ttft_s_median: float | None = None
    niah_passed: int | None = None
    niah_n: int | None = None
    niah_required: int | None = None
    peak_vram_mib: float | None = None
    vram_note: str | None = None
    within_budget: bool | None = None
    error: str | None = None
    report_dir: str | None = None
    verdict: str | None = None  # verify's word for the row: PASSED, FAILED or INCOMPLETE
    not_judged: list[str] | None = None  # "area: why", when INCOMPLETE

    @property
    def eligible(self) -> bool:
        return (self.deployed and self.error is None and self.decode_tok_s is not None
                and self.within_budget is not False and self.niah_passed is not None
                and self.niah_passed >= (self.niah_required or 0)
                and self.verdict != "FAILED")


def rank(rows: list[Row]) -> tuple[list[Row], Row | None]:
    """Rows by decode tok/s (fastest first; failed runs last) and the recommended row."""
    ordered = sorted(rows, key=lambda r: (r.decode_tok_s is None, -(r.decode_tok_s or 0)))
    best = next((r for r in ordered if r.eligible), None)
    return ordered, best


def markdown(rows: list[Row], best: Row | None, host: str, budget_gib: float | None) -> str:
    budget = (f"{budget_gib:g} GiB" if budget_gib is not None
              else "each profile's default (`Expected.vram_budget_gib`)")
    out = [f"# Config matrix on {host}", "",
           f"- date (UTC): {datetime.now(UTC).isoformat(timespec='seconds')}",
           f"- VRAM budget: {budget}", f"- policy: {POLICY}",
           f"- recommended: **{best.profile if best else 'none meets the policy'}**", "",
           "| rank | config | decode tok/s | VRAM | TTFT | NIAH | notes |",
           "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        vram = (f"{r.peak_vram_mib:.0f} MiB" if r.peak_vram_mib is not None
                else (r.vram_note or "-"))
        niah = f"{r.niah_passed}/{r.niah_n}" if r.niah_n else "-"
        note = r.error or ("recommended" if best is r else
                           ("" if r.eligible else "fails the policy"))
        if r.verdict and r.verdict != "PASSED":
            note = f"{note}; verify {r.verdict}" if note else f"verify {r.verdict}"
        out.append(f"| {i} | {r.profile}: {r.summary} | "
                   f"{(f'{r.decode_tok_s:.1f}' if r.decode_tok_s else '-')} | {vram} | "
                   f"{(f'{r.ttft_s_median:.2f} s' if r.ttft_s_median else '-')} | {niah} | "
                   f"{note} |")
    return "\n".join(out) + "\n"


def html_page(md_rows: list[Row], best: Row | None, host: str) -> str:
    vals = [(r.profile, r.decode_tok_s or 0.0) for r in md_rows]
    top = max((v for _, v in vals), default=1) or 1
    bars = []
    for i, (name, v) in enumerate(vals):
        w = 420 * v / top
        color = "#2ca02c" if best and best.profile == name else "#1f77b4"
        bars.append(f'<text x="0" y="{30 + i * 28}" font-size="12">{name}</text>'
                    f'<rect x="190" y="{18 + i * 28}" width="{w:.1f}" height="16" '
                    f'fill="{color}"/><text x="{195 + w:.1f}" y="{30 + i * 28}" '
                    f'font-size="11">{v:.1f} tok/s</text>')
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="700" height="{40 + 28 * len(vals)}">'
           + "".join(bars) + "</svg>")
    rows = "".join(f"<tr><td>{i}</td><td>{r.profile}</td><td>{r.decode_tok_s or '-'}</td>"
                   f"<td>{r.peak_vram_mib or r.vram_note or '-'}</td>"
                   f"<td>{r.ttft_s_median or '-'}</td><td>{r.niah_passed}/{r.niah_n}</td>"
                   f"<td>{r.error or ''}</td></tr>" for i, r in enumerate(md_rows, 1))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>matrix {host}</title>"
            "<style>body{font-family:sans-serif;max-width:760px;margin:2em auto}"
            "td,th{border:1px solid #ccc;padding:4px}</style></head><body>"
            f"<h1>Config matrix on {host}</h1><p>Policy: {POLICY}</p><p>Recommended: "
            f"<b>{best.profile if best else 'none'}</b></p>{svg}<table><tr><th>rank</th>"
            "<th>config</th><th>decode tok/s</th><th>VRAM</th><th>TTFT s</th><th>NIAH</th>"
            f"<th>error</th></tr>{rows}</table></body></html>\n")


def _fill_row(row: Row, rep: Report) -> None:
    """A row's figures from one verify run; VRAM within the budget the run judged against."""
    res = rep.suites
    row.report_dir = rep.out_dir
    cov = rep.coverage
    row.verdict, row.not_judged = cov.word, [f"{a}: {why}" for a, why in cov.not_judged]
    row.decode_tok_s = res.decode[-1].decode_tok_s if res.decode else None
    row.ttft_s_median = res.ttft.median_s if res.ttft else None
    if res.niah is not None:
        row.niah_passed, row.niah_n = res.niah.passed, len(res.niah.cases)
    vram = res.vram
    if vram is not None and vram.skipped:
        row.vram_note = vram.skipped
    elif vram is not None:  # no process peak from the driver: not measured, not within
        row.peak_vram_mib = vram.server_peak_mib
        row.within_budget = (None if row.peak_vram_mib is None
                             else row.peak_vram_mib <= rep.budget_mib)
        row.vram_note = "not measured" if row.peak_vram_mib is None else None


def suite_options(host: str, ssh: list[str] | None) -> dict[str, Any]:
    """run_suites' options for a row on `host`: llama-bench and the unit's stop and start run
    there over `ssh` as root (as `verify --ssh` runs them); the server is on the far side of
    the tunnel, so this machine's NVML does not sample it."""
    from beekeeper.verify.engine import SshShell
    from beekeeper.verify.vram import Locality

    return {"shell": SshShell(list(ssh), label=host) if ssh else None,
            "where": Locality(False, f"the server is on {host}, reached through an ssh "
                                     "tunnel")}


def run_matrix(profiles: list[str], deploy: Callable[[str], int],
               tunnel: Callable[[], AbstractContextManager[str]], current_profile: str | None,
               out_dir: Path, host: str, budget_gib: float | None = None, quick: bool = False,
               apply_recommended: bool = False, ssh: list[str] | None = None
               ) -> tuple[list[Row], Row | None, Path]:
    """Deploy, measure and rank each profile; leave the host on a whole profile. `budget_gib`:
    the user's VRAM budget, else each profile's. `ssh`: how to reach the host, for the
    engine suite (suite_options)."""
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.report import folder_stamp
    from beekeeper.verify.suites import run_suites

    folder = out_dir / host / f"matrix-{folder_stamp()}"
    rows: list[Row] = []
    for name in profiles:
        prof = PROFILES[name]
        print(f"[matrix] {name}: deploying", flush=True)
        row = Row(profile=name, summary=prof.summary, deployed=deploy(name) == 0,
                  niah_required=prof.expected.niah_min_pass)
        rows.append(row)
        if not row.deployed:
            row.error = "deploy failed"
            continue
        try:
            with tunnel() as url, ServerClient(url) as client:
                rep = run_suites(client, prof, SUITES, out_dir=str(folder), quick=quick,
                                 host_label=name, budget_gib=budget_gib,
                                 **suite_options(host, ssh))
        except Exception as e:  # one profile's failure is a row, not the end
            row.error = f"{type(e).__name__}: {e}"
            continue
        _fill_row(row, rep)
    ordered, best = rank(rows)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "matrix.md").write_text(markdown(ordered, best, host, budget_gib))
    (folder / "matrix.html").write_text(html_page(ordered, best, host))
    (folder / "matrix.json").write_text(json.dumps(
        {"policy": POLICY, "recommended": best.profile if best else None,
         "rows": [asdict(r) for r in ordered]}, indent=2))
    final = best.profile if apply_recommended and best else current_profile
    if final:
        print(f"[matrix] leaving {host} on {final}", flush=True)
        if deploy(final) != 0:
            raise BeekeeperError(f"could not put {host} back on {final}: deploy it by hand")
    print((folder / "matrix.md").read_text(), flush=True)
    return ordered, best, folder


def deploy_command(inventory: str, *extra: str) -> list[str]:
    """`pyinfra -y INVENTORY deploy.py EXTRA...`, with the pyinfra beside this Python."""
    return [str(Path(sys.executable).parent / "pyinfra"), "-y", inventory, "deploy.py", *extra]


def pyinfra_deployer(inventory: str, host: str) -> Callable[[str], int]:

    def deploy(profile: str) -> int:
        cmd = deploy_command(inventory, "--limit", host, "--data", f"profile={profile}")
        p = subprocess.run(cmd, cwd=KIT_ROOT, capture_output=True, text=True)
        if p.returncode != 0:
            print((p.stdout + p.stderr)[-2000:], file=sys.stderr)
        return p.returncode

    return deploy
