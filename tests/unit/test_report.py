"""report.html: matplotlib charts inlined as SVG, one offline file; rendered in headless
Chromium with every host name unresolvable, so anything it tried to fetch would be missing.
`beekeeper report A B` on report.json files that verify wrote."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from beekeeper.cli import main
from beekeeper.verify.report import render_from_json

from .harness import _incomplete_run

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "benchmarks/h200/2026-11-29/gpu_tier.json"
# `beekeeper verify --sandbox --profile cpu-tiny --suite engine,decode`, as it wrote it on the
# 2-core sandbox (tests/unit/test_judge.py judges it again)
RECORDED = ROOT / "tests/unit/data/verify-cpu-tiny-engine-decode.json"
# `beekeeper verify --url http://127.0.0.1:9 --profile cpu-tiny --suite smoke,decode --quick`
# with no server there, as it wrote it (the health check waits its 60 s, hence recorded)
NO_SERVER = ROOT / "tests/unit/data/verify-cpu-tiny-no-server.json"


def recorded_report(folder: Path) -> Path:
    """A report.json built from the recorded H200 f16 run (its VRAM series, TTFTs, decode)."""
    c = json.loads(H200.read_text())["configs"][0]
    samples = [{"t_s": i * 0.05, "used_mib": m, "process_mib": None}
               for i, m in enumerate(c["vram_series_mib"])]
    n = 256
    events = [{"t_s": 0.1 + i / c["decode"][1]["decode_tok_s"], "kind": "content",
               "n_chars": 4} for i in range(n)]
    data = {
        "profile": "qwen35-9b-shaped-f16-64k", "url": "http://127.0.0.1:18100",
        "started_utc": "2026-11-29T23:14:07+00:00", "passed": False, "budget_mib": 10240.0,
        "engine": {"placement": "recorded run (server timings stand in)"},
        "checks": [
            {"name": "decode.vs_engine@60000", "status": "PASS", "detail": "ratio 1.001"},
            {"name": "decode.reference_card", "status": "INFO", "detail": "information"},
            {"name": "vram.rise_vs_budget", "status": "FAIL", "detail": "10910 > 10240"},
            {"name": "niah.pass", "status": "SKIP", "detail": "random weights"},
        ],
        "suites": {
            "ttft": {"ttft_s": c["ttft"]["ttft_s"], "engine_ttft_s": 7.17},
            "decode": [{"ctx_tokens": 60000, "engine_tok_s": 134.6,
                        "record": {"events": events, "error": None}}],
            "vram": {"samples": samples, "baseline_mib": c["vram"]["baseline_mib"],
                     "idle_used_mib": c["vram"]["baseline_mib"]},
            "niah": {"cases": [{"depth": 0.05 + 0.1 * i, "passed": i != 3,
                                "expected": "1234567", "answer": "x"} for i in range(10)]},
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(data))
    render_from_json(folder)
    return folder / "report.html"


def test_report_has_real_charts_and_no_external_reference(tmp_path):
    html = recorded_report(tmp_path).read_text()
    assert html.count("<svg") == 4  # TTFT, per-token latency, VRAM, NIAH
    # matplotlib axes: tick groups with labels, not hand-placed text
    assert html.count('id="xtick_') >= 8 and html.count('id="ytick_') >= 4
    for bad in ("<script", "<link", "<img", "@import", "url(http", 'href="http', "src="):
        assert bad not in html, bad
    # the only URLs are XML namespace names (identifiers, never fetched)
    urls = set(re.findall(r"https?://[^\"' )<,]+", html.split("<body>", 1)[1]))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink",
                    "http://creativecommons.org/ns#", "http://purl.org/dc/elements/1.1/",
                    "http://www.w3.org/1999/02/22-rdf-syntax-ns#", "http://127.0.0.1:18100",
                    "http://purl.org/dc/dcmitype/StillImage", "https://matplotlib.org/"}, urls


def test_charts_leave_nothing_in_the_home_of_the_account_verify_runs_as(tmp_path):
    """On a host, verify runs as root: matplotlib's config folder and font cache would stay in
    root's home after the uninstall (the GPU proof's snapshot saw /root/.config appear)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    code = ("import json, sys; from beekeeper.verify.report import charts; "
            "print(sum(c.count('<svg') for c in charts(json.load(sys.stdin), 10240.0)))")
    data = json.loads(recorded_report(tmp_path / "r").with_name("report.json").read_text())
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(data), text=True,
                         capture_output=True, env={**env, "HOME": str(home)}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == 4
    assert not list(home.iterdir())


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (scripts/setup.sh "
                    "installs it)")
def test_report_renders_offline_in_headless_chromium(tmp_path):
    page = recorded_report(tmp_path / "r")
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9"]
    dom = subprocess.run([*base, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 4 and "vram.rise_vs_budget" in dom.stdout
    shot = tmp_path / "shot.png"
    p = subprocess.run([*base, f"--user-data-dir={tmp_path / 'p2'}", f"--screenshot={shot}",
                        "--window-size=900,2400", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.exists(), p.stderr[-2000:]
    assert shot.stat().st_size > 50_000  # charts drawn, not a blank page


def test_the_recorded_reports_have_the_keys_verify_writes_today():
    """The recorded reports below are read as `verify` writes report.json now (Report.to_json),
    so a format change is seen here, not by a user's `beekeeper report`. They were written
    before `verify` was added (issue 25): `beekeeper report` reads their `passed` instead."""
    from beekeeper.verify.judge import Check
    from beekeeper.verify.report import Report

    now = Report(profile="cpu-tiny", url="http://127.0.0.1:9", started_utc="t", budget_mib=1.0,
                 checks=[Check("smoke.health", "FAIL", "ConnectError")]).to_json()
    for f in (RECORDED, NO_SERVER):
        data = json.loads(f.read_text())
        assert [*data, "verdict"] == list(now), f.name
        assert all(set(c) == set(now["checks"][0]) for c in data["checks"]), f.name


def test_report_compares_a_recorded_run_with_a_server_that_stopped_answering(tmp_path, capsys):
    """A: the recorded sandbox run (PASS); B: verify's report for a server that does not answer
    (FAIL). The comparison reads each check's status as verify writes it (it crashed on every
    real report with KeyError: 'passed'); B is given as the folder verify wrote."""
    folder = tmp_path / "vm" / "20261201T081744Z"
    folder.mkdir(parents=True)
    shutil.copy(NO_SERVER, folder / "report.json")
    assert main(["report", str(RECORDED), str(folder)]) == 0
    out = capsys.readouterr().out
    a = json.loads(RECORDED.read_text())
    assert f"| decode_tok_s | {a['suites']['decode'][-1]['decode_tok_s']:.4g} | - | - |" in out
    assert "| verdict (changed) | PASS | FAIL |" in out
    assert "| smoke.health (changed) | PASS | FAIL |" in out
    assert "| decode.vs_engine@1024 (changed) | PASS | - |" in out
    assert "| decode.reference_card (changed) | SKIP | - |" in out
    assert "| engine.baseline (changed) | INFO | - |" in out
    rows = [ln for ln in out.splitlines() if "(changed)" in ln]
    assert len(rows) == 1 + len({c["name"] for c in a["checks"]})


def test_report_of_a_recorded_run_against_itself_changes_nothing(capsys):
    assert main(["report", str(RECORDED), str(RECORDED)]) == 0
    out = capsys.readouterr().out
    a = json.loads(RECORDED.read_text())
    tok_s = a["suites"]["decode"][-1]["decode_tok_s"]
    assert f"| decode_tok_s | {tok_s:.4g} | {tok_s:.4g} | 1.000 |" in out
    assert "(changed)" not in out and "| verdict | PASS | PASS |" in out
    for c in a["checks"]:
        assert f"| {c['name']} | {c['status']} | {c['status']} |" in out


def test_report_of_a_file_verify_did_not_write_is_one_line(capsys):
    bench = ROOT / "tests/unit/data/llama-bench-cpu-tiny.json"  # llama-bench's own JSON
    assert main(["report", str(RECORDED), str(bench)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not a report.json that verify wrote" in err


# -- the reports say what the console says (issue 25) -----------------------------------------


def test_an_incomplete_run_is_incomplete_in_every_report_it_writes(tmp_path, capsys):
    data, console = _incomplete_run(tmp_path, capsys)
    summary = next(ln for ln in console.splitlines() if ln.startswith("verify "))
    assert summary.startswith("verify INCOMPLETE")
    why = "  not judged: decode: "
    not_judged = next(ln for ln in console.splitlines() if ln.startswith(why))
    assert "the engine suite was not run" in not_judged
    # report.json: the verdict word, its exit status, what was and was not judged
    assert data["passed"] is False  # no script reading `passed` takes it for PASSED
    v = data["verdict"]
    assert (v["word"], v["exit_status"], v["judged"]) == ("INCOMPLETE", 3, [])
    assert v["summary"] == summary
    assert v["not_judged"] == [{"area": "decode", "why": not_judged[len(why):]}]
    folder = Path(data["out_dir"])
    md = (folder / "report.md").read_text()
    assert "PASS**" not in md and f"- result: **INCOMPLETE**: {summary}" in md
    assert not_judged.strip() in md
    page = (folder / "report.html").read_text()
    assert "<b>INCOMPLETE</b>" in page and "<b>PASS</b>" not in page
    import html as h

    assert h.escape(not_judged.strip()) in page and h.escape(summary) in page


def test_the_verdict_survives_the_controllers_redraw(tmp_path, capsys):
    """`verify --on-host` draws report.md/html again on the controller from report.json."""
    data, _ = _incomplete_run(tmp_path, capsys)
    folder = Path(data["out_dir"])
    (folder / "report.md").unlink()
    render_from_json(folder)
    assert "- result: **INCOMPLETE**" in (folder / "report.md").read_text()


def test_beekeeper_report_shows_the_verdict_word_verify_wrote(tmp_path, capsys):
    data, _ = _incomplete_run(tmp_path, capsys)
    assert main(["report", data["out_dir"], str(NO_SERVER)]) == 0
    assert "| verdict (changed) | INCOMPLETE | FAIL |" in capsys.readouterr().out


def _with_figures(folder: Path, decode_tok_s: float, ttft_median_s: float, ttft_p95_s: float,
                  niah_passed: int, process_peak_mib: float, load_tok_s: float) -> Path:
    """The recorded sandbox report.json with its headline figures set."""
    data = json.loads(RECORDED.read_text())
    s = data["suites"]
    s["decode"][-1].update(decode_tok_s=decode_tok_s, server_predicted_per_second=50.0)
    s["ttft"] = {"median_s": ttft_median_s, "p95_s": ttft_p95_s}
    s["niah"] = {"passed": niah_passed, "cases": []}
    s["vram"] = {"peak_process_mib": process_peak_mib, "peak_delta_mib": 1.0}
    s["load"] = {"aggregate_tok_s": load_tok_s}
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(data))
    return folder


def test_report_says_which_way_each_figure_moved(tmp_path, capsys):
    """B / A is B's figure over A's; the words say whether that is better: a decode rate at
    0.8 x A is 20% slower, a TTFT at 1.2 x A is 20% slower too, a p95 at 0.8 x A 20%
    faster. With the ratio inverted (A / B) a 20% slowdown read 1.25, a speedup."""
    a = _with_figures(tmp_path / "a", 50.0, 1.0, 1.5, 10, 9000.0, 100.0)
    b = _with_figures(tmp_path / "b", 40.0, 1.2, 1.2, 9, 9900.0, 125.0)
    assert main(["report", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "| B / A | B against A |" in out
    for row in ("| decode_tok_s | 50 | 40 | 0.800 | B is 20% slower |",
                "| server_decode_tok_s | 50 | 50 | 1.000 | same |",
                "| ttft_median_s | 1 | 1.2 | 1.200 | B is 20% slower |",
                "| ttft_p95_s | 1.5 | 1.2 | 0.800 | B is 20% faster |",
                "| niah_passed | 10 | 9 | 0.900 | B is 10% worse |",
                "| peak_vram_mib | 9000 | 9900 | 1.100 | B is 10% larger |",
                "| load_aggregate_tok_s | 100 | 125 | 1.250 | B is 25% faster |"):
        assert row in out, row
    assert main(["report", str(b), str(a)]) == 0  # the other way round
    back = capsys.readouterr().out
    assert "| decode_tok_s | 40 | 50 | 1.250 | B is 25% faster |" in back
    assert "| peak_vram_mib | 9900 | 9000 | 0.909 | B is 9% smaller |" in back


def test_report_says_nothing_of_a_figure_one_run_lacks():
    from beekeeper.verify.report import b_versus_a

    assert b_versus_a("decode_tok_s", None, 40.0) == "-"
    assert b_versus_a("decode_tok_s", 50.0, None) == "-"
    assert b_versus_a("niah_passed", 0, 3) == "-"  # no ratio to zero
    assert b_versus_a("niah_passed", 10, 0) == "B is 100% worse"
    assert b_versus_a("decode_tok_s", 50.0, 50.2) == "same"  # within half a percent
    assert b_versus_a("decode_tok_s", 50.0, 50.3) == "B is 1% faster"


def test_report_md_escapes_server_text_in_its_table():
    """A `|` in a model name added a column, a newline ended the row, and `<script>` or
    `<img onerror>` from the server went into report.md as HTML (report.html escapes them)."""
    from beekeeper.verify.report import markdown

    data = json.loads(RECORDED.read_text())
    data["checks"] = [
        {"name": "smoke.models", "status": "PASS", "detail": "1 model(s): ['a|b']"},
        {"name": "smoke.stream", "status": "FAIL",
         "detail": "error <script>alert(1)</script>\nsecond line & <img src=x onerror=y>"}]
    md = markdown(data)
    rows = [ln for ln in md.splitlines() if ln.startswith("| smoke.")]
    assert len(rows) == 2  # one row each: the newline did not end one
    assert all(len(re.findall(r"(?<!\\)\|", r)) == 4 for r in rows)  # three columns
    assert "['a\\|b']" in rows[0]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;<br>second line &amp; &lt;img" in rows[1]
    assert "<script>" not in md and "<img" not in md


# text with code spans as the verdict and the checks give it: a shell line with `&&`, `|`,
# `<`, and a backslash; each shows as written in a markdown renderer
COMMAND = "sudo apt update && tail -n 5 <log | grep x\\|y"
CODE_DETAIL = f"HTTP 401; run `{COMMAND}` on the host, then a & <b> | c\\d \\.x\\|y"
SENTENCE = (f"The server is broken: it did not answer; next: `{COMMAND}` and "
            "`beekeeper verify --url 'http://h:8083/?a=1&b=2'`.")


def _coded_report() -> str:
    from beekeeper.verify.report import markdown

    data = json.loads(RECORDED.read_text())
    data["checks"] = [{"name": "smoke.models", "status": "FAIL", "detail": CODE_DETAIL}]
    data["verdict"] = {"word": "FAILED", "summary": "1 FAIL", "not_judged": [],
                       "sentence": SENTENCE}
    return markdown(data)


def test_report_md_code_spans_hold_their_text_as_written():
    """Inside a code span no entity or backslash escape is read: report.md wrote `&&` as
    `&amp;&amp;` there (shown so, not as `&&`), `<` as `&lt;`, and, in a table cell, `|` as
    `\\|` (GFM tables read it as `|`, other renderers show it as written); outside code spans
    text is still HTML escaped, a backslash doubled (`\\.` showed `.`), and a `|` adds no
    column."""
    md = _coded_report().splitlines()
    assert md[2] == f"**{SENTENCE}**"  # its code spans as written, nothing outside to escape
    row = next(ln for ln in md if ln.startswith("| smoke.models"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 4, row  # three columns
    # the `|` inside the span: the span split there, an escaped `|` between its pieces
    assert ("run `sudo apt update && tail -n 5 <log `\\|` grep x\\`\\|`y` on the host, then "
            "a &amp; &lt;b&gt; \\| c\\\\d \\\\.x\\\\\\|y") in row, row


def test_report_md_reads_right_in_a_markdown_renderer():
    """report.md through a CommonMark renderer with GFM tables (markdown-it, as editors
    preview it): the code shows the command as written, the cell stays one cell."""
    markdown_it = pytest.importorskip("markdown_it")
    import html

    out = markdown_it.MarkdownIt("commonmark").enable("table").render(_coded_report())
    codes = [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", out)]
    assert codes[:2] == [COMMAND, "beekeeper verify --url 'http://h:8083/?a=1&b=2'"], codes
    cell = re.search(r"<td>smoke\.models</td>\s*<td>FAIL</td>\s*<td>(.*?)</td>\s*</tr>", out,
                     re.S)
    assert cell is not None, out
    shown = html.unescape(re.sub(r"</?code>", "", cell.group(1)))
    assert shown == CODE_DETAIL.replace("`", ""), shown


def test_report_md_rules_are_the_judges_figures():
    """The footer said TTFT `<= 1.25` whatever the profile; a CPU build is judged at 1.5."""
    from beekeeper.verify import judge
    from beekeeper.verify.report import markdown

    rules = markdown(json.loads(RECORDED.read_text())).splitlines()[-1]
    assert rules.startswith("Rules: ")
    for figure in (judge.DECODE_FLOOR, judge.DECODE_FLOOR_CPU, judge.TTFT_CEILING,
                   judge.TTFT_CEILING_CPU):
        assert f"{figure}" in rules
    assert f"<= {judge.TTFT_CEILING} x" in rules
    assert f"({judge.TTFT_CEILING_CPU} x on a CPU" in rules
