"""
Reports: report.json (everything), report.md, report.html (one offline file, matplotlib's
charts inlined as SVG), and two report.json files side by side (`beekeeper report A B`). The
md and html are drawn from the JSON, so a host's report is drawn again on the controller.
"""

from __future__ import annotations

import html
import io
import json
import os
import re
import shlex
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from beekeeper.core.errors import VerifyError
from beekeeper.core.paths import ServicePaths
from beekeeper.core.profiles import REFERENCE_CARD
from beekeeper.core.runtime import runtime_of

from .client import TOKEN_KINDS
from .engine import EngineBaseline
from .judge import (
    AREAS,
    BUSY,
    CPU_SAMPLER_MS,
    DECODE_FLOOR,
    DECODE_FLOOR_CPU,
    NO_BASELINE,
    NOISE_MAX,
    TTFT_CEILING,
    TTFT_CEILING_CPU,
    UNSETTLED,
    VERDICT_CHECKS,
    Check,
    Coverage,
    coverage,
)
from .results import DecodeResult, LoadResult, NiahResult, TtftResult
from .smoke import SmokeResult
from .vram import VramResult, server_peak_mib

STATUS_COLOR = {"PASS": "#2ca02c", "FAIL": "#d62728", "SKIP": "#7f7f7f", "INFO": "#1f77b4"}

# where a kit service's log is: a systemd unit's journal, or supervisord's log file
UNIT, SUPERVISED = runtime_of("native", "systemd"), runtime_of("native", "supervisor")


@dataclass(frozen=True)
class Invocation:
    """How this verify was started, for the verdict sentence's next step: the command line as
    typed (credentials hidden; None: not known) and the kit's service it verifies."""

    command: str | None = None
    service: str = "llm"


# set by the entry point (verify_main.run_verify) for the run it starts; a Report takes it
INVOCATION: ContextVar[Invocation | None] = ContextVar("invocation", default=None)


@dataclass
class SuiteResults:
    """What each suite that ran returned (None: not run)."""

    smoke: SmokeResult | None = None
    decode: list[DecodeResult] | None = None
    ttft: TtftResult | None = None
    niah: NiahResult | None = None
    load: LoadResult | None = None
    gateway: dict[str, Any] | None = None
    vram: VramResult | None = None

    def to_json(self, engine: EngineBaseline | None) -> dict[str, Any]:
        """report.json's `suites`, keyed by suite in the order they ran."""
        out: dict[str, Any] = {}
        if self.smoke is not None:
            rec = self.smoke.record
            out["smoke"] = {"record": rec.to_json() if rec else None}
        if self.decode is not None:
            out["decode"] = [r.to_json(engine) for r in self.decode]
        if self.ttft is not None:
            out["ttft"] = self.ttft.to_json(engine)
        if self.niah is not None:
            out["niah"] = self.niah.to_json()
        if self.load is not None:
            out["load"] = self.load.to_json()
        if self.gateway is not None:
            out["gateway"] = self.gateway
        if self.vram is not None:
            out["vram"] = {**asdict(self.vram),
                           "idle_used_mib": engine.idle_used_mib if engine else None}
        return out


@dataclass
class Report:
    """A verify run: config echo, every check, typed results per suite."""

    profile: str
    url: str
    started_utc: str
    budget_mib: float
    host: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    suites: SuiteResults = field(default_factory=SuiteResults)
    server: dict[str, Any] = field(default_factory=dict)
    planner: dict[str, Any] | None = None
    engine: EngineBaseline | None = None
    out_dir: str | None = None
    # the suites whose verdict the run owes (suites.judgeable); None: judged on checks alone
    requested: list[str] | None = None
    invocation: Invocation = field(default_factory=lambda: INVOCATION.get() or Invocation())

    @property
    def passed(self) -> bool:
        """No check failed (the run's word, PASSED or INCOMPLETE, is `coverage`'s)."""
        return all(c.passed for c in self.checks)

    @property
    def coverage(self) -> Coverage:
        return coverage(self.checks, self.requested or [])

    def to_json(self) -> dict[str, Any]:
        """report.json. `passed` is true only for a PASSED run; `verdict` is the console's
        summary line, word for word."""
        cov = self.coverage
        verdict = {"word": cov.word, "exit_status": cov.exit_status, "summary": summary_line(self),
                   "sentence": verdict_sentence(self), "judged": cov.judged,
                   "not_judged": [{"area": a, "why": why} for a, why in cov.not_judged]}
        return json.loads(json.dumps({  # a dataclass as its fields, anything else as its str
            "profile": self.profile, "url": self.url, "started_utc": self.started_utc,
            "host": self.host, "checks": [asdict(c) for c in self.checks],
            "suites": self.suites.to_json(self.engine), "server": self.server,
            "planner": self.planner, "engine": asdict(self.engine) if self.engine else None,
            "out_dir": self.out_dir, "budget_mib": self.budget_mib,
            "passed": cov.exit_status == 0, "verdict": verdict},
            default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o)))


def summary_line(report: Report) -> str:
    """`verify PASSED|FAILED|INCOMPLETE (what was judged; the counts)`."""
    cov = report.coverage
    counts = {s: sum(c.status == s for c in report.checks)
              for s in ("PASS", "FAIL", "SKIP", "INFO")}
    return (f"verify {cov.word} ({cov.line()}; "
            + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")")


def verdict_sentence(report: Report) -> str:
    """The plain sentence that opens the summary: `coverage`'s verdict in words
    (docs/verify.md, "What the summary says")."""
    cov = report.coverage
    if cov.failed:
        return _broken(report, cov)
    if cov.not_judged:
        return _not_judged(report, cov)
    said = [p for p in (_works(report, c) for c in report.checks if c.status == "PASS") if p]
    said = list(dict.fromkeys(said))  # one phrase a family (smoke's three checks: one)
    if not said:
        return ("Nothing failed, but this run judged nothing of the server: add `--suite "
                f"smoke` (or `all`) to judge it{_run(_again(report, suite='smoke'))}.")
    return f"The server works: it {_and(said)}."


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _decode_ratios(report: Report) -> list[tuple[int, float]]:
    """(depth, served / engine decode) of each depth with both figures."""
    return [(r.ctx_tokens, ratio) for r in report.suites.decode or []
            if (ratio := r.served_over_engine(report.engine))]


def _works(report: Report, check: Check) -> str | None:
    """A passed check's family in words, with its key figure where the run has one."""
    s, name = report.suites, check.name
    if name.startswith("smoke."):
        return "answered and streamed"
    if name.startswith(VERDICT_CHECKS["decode"]):  # against the engine, or tok/s alone
        ratios = _decode_ratios(report)
        last = s.decode[-1].decode_tok_s if s.decode else None
        if not ratios:
            return (f"decoded at {last:.1f} tokens a second" if last
                    else "decoded as fast as expected")
        depths = sorted(d for d, _ in ratios)
        lo, hi = (f"{f(r for _, r in ratios):.2f}" for f in (min, max))
        at = f"{depths[0]:,}" + (f" to {depths[-1]:,}" if len(depths) > 1 else "")
        span = lo if hi == lo else f"{lo} to {hi}"
        return f"ran at {span} of its engine's decode speed at {at} tokens"
    if name.startswith(VERDICT_CHECKS["ttft"]):
        med = s.ttft.median_s if s.ttft else None
        return (f"gave its first token in {med:.2f} s (median, {s.ttft.target_tokens:,}-token "
                "prompts)" if s.ttft and med is not None else "gave its first token in time")
    if name == "niah.pass":
        return (f"found the needle in {s.niah.passed} of {len(s.niah.cases)} long prompts"
                if s.niah else "found the needle in its long prompts")
    if name.startswith(VERDICT_CHECKS["vram"]):
        return f"stayed within its VRAM budget of {report.budget_mib:,.0f} MiB"
    if name == "load.no_failures" and s.load:
        return (f"served {s.load.requests} requests from {s.load.clients} clients at once "
                "without a failure")
    if name.startswith("gateway."):
        return "answered through its gateway"
    return None


def _needs(detail: str) -> str:
    """` (needs at least 10)` for a detail's `needs >= 10` (`<=`: at most), else nothing."""
    m = re.search(r"needs ([<>]=) ?([0-9][0-9.,]*)", detail)
    return f" (needs {'at least' if m.group(1) == '>=' else 'at most'} {m.group(2)})" if m else ""


def _head(detail: str, limit: int = 160) -> str:
    """A check's detail up to its first `;`, cut at `limit` characters."""
    head = detail.split("; ", 1)[0]
    return head if len(head) <= limit else head[:limit - 3] + "..."


def _broken_what(report: Report, check: Check) -> tuple[str, str]:
    """A failed check in words, and where to look next."""
    s, name, needs = report.suites, check.name, _needs(check.detail)
    p = ServicePaths(report.invocation.service)
    log = (f"read the server's log (for the kit's service: `{UNIT.log_lines(p, 200)}` on the "
           f"host; runtime supervisor: {SUPERVISED.log(p)})")
    gpu = ("look for another program using the GPU (`nvidia-smi`) or the CPUs (`top`) on the "
           "host, then verify again")
    depth = name.partition("@")[2]
    ratio = dict(_decode_ratios(report)).get(int(depth)) if depth.isdigit() else None
    if name.startswith(("smoke.", "server.")):  # server.answered: it stopped answering
        return f"it did not answer a basic request ({name}: {_head(check.detail)})", log
    if name.startswith("decode.vs_engine@") and ratio is not None:
        return (f"it decoded at {ratio:.2f} of its engine's speed at {int(depth):,} tokens"
                f"{needs}", gpu)
    eng_ttft = s.ttft.engine_ttft_s(report.engine) if s.ttft else None
    if name == "ttft.vs_engine" and s.ttft and s.ttft.median_s and eng_ttft:
        return (f"its first token took {s.ttft.median_s / eng_ttft:.2f} times its engine's "
                f"time{needs}", gpu)
    if name == "niah.pass" and s.niah:
        return (f"NIAH found the needle in {s.niah.passed} of {len(s.niah.cases)} prompts"
                f"{needs}", f"read the [FAIL] {name} line below (which prompts missed)")
    if name.startswith("vram."):
        return (f"it used more GPU memory than its {report.budget_mib:,.0f} MiB budget",
                "try a smaller profile or ctx_size")
    if name == "load.no_failures" and s.load:
        return (f"{s.load.failed} of {s.load.requests} requests failed under load", log)
    return f"{name} failed ({_head(check.detail)})", f"read the [FAIL] {name} line below"


# the next step where a failed check shows a request refused for its key (HTTP 401 or 403)
KEY_NEXT = ("the server wants an API key: give the one it was started with in a file, "
            "`{flag} FILE`")


def _refused_for_key(report: Report, check: Check) -> str | None:
    """The option giving the key a request `check` shows refused (HTTP 401 or 403) wanted:
    --api-key-file, or --direct-api-key-file for the server behind a gateway; None where
    none was refused. A gateway check's detail counts failures: its records say why."""
    if not check.name.startswith("gateway."):  # the first status named is the request's
        status = re.search(r"\bHTTP (\d{3})\b", check.detail)
        return "--api-key-file" if status and status.group(1) in ("401", "403") else None
    records = (report.suites.gateway or {}).get("records") or {}
    return next((flag for side, flag in (("gateway", "--api-key-file"),
                                         ("direct", "--direct-api-key-file"))
                 if any(r.get("status_code") in (401, 403) for r in records.get(side, []))),
                None)


def _broken(report: Report, cov: Coverage) -> str:
    said = [(*_broken_what(report, c), _refused_for_key(report, c))
            for c in report.checks if not c.passed]
    what = list(dict.fromkeys(w for w, _, _ in said))
    # each one's next step, the key's where a request was refused for it
    look = list(dict.fromkeys(KEY_NEXT.format(flag=key) if key else n for _, n, key in said))
    also = (f" ({_and([AREAS[a] for a, _ in cov.not_judged])} was not judged either)"
            if cov.not_judged else "")
    return f"The server is broken: {'; '.join(what)}{also}; next: {'; '.join(look)}."


# what the next run does differently, by why an area was not judged (in this order)
NEXT_STEP = {"engine": "add `--suite engine`", "settle": "give `--settle-budget-s` more seconds",
             "quiet": "run again on a quiet host", "fix": "run again once that is seen to"}


def _why_not(area: str, why: str) -> tuple[str, str]:
    """Why an area was not judged, in words, and its next step (a key of NEXT_STEP)."""
    name = AREAS[area]
    if why.startswith(BUSY):
        load = why[len(BUSY):].split(" while ", 1)[0].split(", ", 1)[0]
        return f"the host was busy while {name} was measured ({load})", "quiet"
    if why.startswith(UNSETTLED):
        return (f"{name}'s figures did not settle (their error stayed over {NOISE_MAX:.0%})",
                "settle")
    if NO_BASELINE in why:
        inner = why.split(NO_BASELINE, 1)[1].rsplit("), so no expectation", 1)[0]
        if "--suite engine" in inner:
            return (f"{name} had no engine baseline to be judged against (the engine suite "
                    "was not run; it measures the engine on the host)", "engine")
        return f"{name} had no engine baseline to be judged against ({inner})", "fix"
    return f"{name}: {why.removeprefix('skipped: ')}", "fix"


def _not_judged(report: Report, cov: Coverage) -> str:
    said = [_why_not(a, why) for a, why in cov.not_judged]
    steps = {step for _, step in said}
    command = _again(report, suite="engine" if "engine" in steps else None,
                     settle="settle" in steps)
    return (f"Not judged: {'; '.join(w for w, _ in said)}; "
            f"{_and([t for k, t in NEXT_STEP.items() if k in steps])}{_run(command)}.")


def _run(command: str | None) -> str:
    """`: `the command``, or how to make it when this run's own line is not known."""
    return (f": `{command}`" if command is not None else
            ", with the same `beekeeper verify` options as this run")


def _again(report: Report, suite: str | None = None, settle: bool = False) -> str | None:
    """The command that ran this verify, with `suite` added to its --suite and the settle
    budget raised; None when it is not known."""
    typed = report.invocation.command
    if typed is None:
        return None
    argv = shlex.split(typed)
    if suite:
        argv = _option(argv, "--suite", lambda v: v if suite in (v or "").split(",")
                       or v == "all" else f"{suite},{v or 'smoke'}")
    if settle:
        argv = _option(argv, "--settle-budget-s",
                       lambda v: f"{max(600.0, 2 * float(v or 120)):g}")
    return shlex.join(argv)


def _option(argv: list[str], flag: str, value: Any) -> list[str]:
    """`argv` with `flag`'s value replaced by value(old) (added at the end when absent;
    old None); `--flag v` and `--flag=v` both read."""
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return [*argv[:i + 1], value(argv[i + 1]), *argv[i + 2:]]
        if a.startswith(flag + "="):
            return [*argv[:i], f"{flag}={value(a.split('=', 1)[1])}", *argv[i + 1:]]
    return [*argv, flag, value(None)]


def verdict_of(data: dict[str, Any]) -> tuple[str, str | None, list[str], str | None]:
    """A report.json's word, summary line, `not judged` lines and verdict sentence (an older
    report's word: PASS or FAIL, from `passed`; its sentence None)."""
    v = data.get("verdict")
    if not isinstance(v, dict):
        return ("PASS" if data.get("passed") else "FAIL"), None, [], None
    lines = [_not_judged_line(n["area"], n["why"]) for n in v.get("not_judged", [])]
    sentence = str(v["sentence"]) if v.get("sentence") else None
    return str(v["word"]), v.get("summary"), lines, sentence


def _not_judged_line(area: str, why: str) -> str:
    """A `not judged` line, as the console, report.md and report.html say it."""
    return f"not judged: {AREAS.get(area, area)}: {why}"


def _figure(width_in: float = 7.0, height_in: float = 2.8) -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display; SVG output only
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), layout="constrained")


def _svg(ax: Any, title: str) -> str:
    """The chart, titled, as inline SVG (text as paths: no font is needed to view it)."""
    import matplotlib

    ax.set_title(title)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "beekeeper"}):
        ax.figure.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _none(title: str, why: str) -> str:
    return f"<p><b>{html.escape(title)}</b>: {html.escape(why)}</p>"


def ttft_chart(ttft_s: list[float], engine_ttft_s: float | None) -> str:
    title = f"TTFT distribution ({len(ttft_s)} requests)"
    if not ttft_s:
        return _none(title, "no TTFT requests in this run")
    ax = _figure(7.0, 2.4).add_subplot()
    ax.boxplot(ttft_s, orientation="horizontal", widths=0.5)
    ax.scatter(ttft_s, [1 + ((i * 7) % 9 - 4) * 0.03 for i in range(len(ttft_s))], s=12,
               color="#333", zorder=3, label="requests")
    if engine_ttft_s:
        ax.axvline(engine_ttft_s, color="#ff7f0e", linestyle="--",
                   label=f"engine prefill + first token {engine_ttft_s:.3f} s")
        ax.legend(loc="upper right", fontsize=8)
    ax.set(yticks=[], xlabel="time to first token, s")
    return _svg(ax, title)


def token_latency_chart(run: dict[str, Any]) -> str:
    rec = run["record"]
    times = [e["t_s"] for e in rec["events"] if e["kind"] in TOKEN_KINDS]
    gaps_ms = [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]
    title = f"Per-token latency, {run['ctx_tokens']} context tokens"
    if not gaps_ms:
        return _none(title, rec.get("error") or "no tokens")
    ax = _figure().add_subplot()
    ax.plot(range(2, len(gaps_ms) + 2), gaps_ms, linewidth=0.8, color="#1f77b4",
            label="served: gap to the previous token")
    eng = run.get("engine_tok_s")
    if eng:
        ax.axhline(1000 / eng, color="#ff7f0e", linestyle="--",
                   label=f"engine: {1000 / eng:.1f} ms/token (llama-bench)")
    ax.set(xlabel="output token", ylabel="ms")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper right", fontsize=8)
    return _svg(ax, title)


def vram_chart(vram: dict[str, Any], budget_mib: float | None) -> str:
    title = "VRAM over time (card memory.used)"
    samples = vram.get("samples") or []
    if not samples:
        return _none(title, str(vram.get("skipped") or "not sampled in this run"))
    idle = vram.get("idle_used_mib")
    base = idle if idle is not None else vram.get("baseline_mib") or 0.0
    ax = _figure().add_subplot()
    ax.plot([s["t_s"] for s in samples], [s["used_mib"] for s in samples], color="#1f77b4",
            label="memory.used")
    proc = [(s["t_s"], s["process_mib"]) for s in samples if s.get("process_mib") is not None]
    if proc:
        ax.plot([t for t, _ in proc], [m for _, m in proc], color="#9467bd",
                label="server process (NVML)")
    ax.axhline(base, color="#7f7f7f", linestyle=":",
               label=("idle (service stopped)" if idle is not None else "start of run"))
    if budget_mib:
        ax.axhline(base + budget_mib, color="#d62728", linestyle="--",
                   label=f"baseline + budget {budget_mib:.0f} MiB")
    ax.set(xlabel="s since the run began", ylabel="MiB")
    ax.legend(loc="lower right", fontsize=8)
    return _svg(ax, title)


def niah_chart(cases: list[dict[str, Any]]) -> str:
    title = "NIAH: exact match by needle depth"
    if not cases:
        return _none(title, "not run")
    ax = _figure(7.0, 2.4).add_subplot()
    depths = [c["depth"] * 100 for c in cases]
    ax.bar(depths, [1] * len(cases), width=min(6.0, 80 / len(cases)),
           color=["#2ca02c" if c["passed"] else "#d62728" for c in cases])
    ax.set(xlim=(0, 100), yticks=[],
           xlabel="needle depth, % of the haystack (green: exact match, red: miss)")
    return _svg(ax, title)


@contextmanager
def _matplotlib_home() -> Iterator[None]:
    """matplotlib's config folder and font cache in a folder removed after drawing, unless
    MPLCONFIGDIR names one: verify on a host (as root) leaves nothing in root's home that the
    uninstall would miss."""
    if os.environ.get("MPLCONFIGDIR"):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="beekeeper-matplotlib-") as folder:
        os.environ["MPLCONFIGDIR"] = folder
        try:
            yield
        finally:
            del os.environ["MPLCONFIGDIR"]


def charts(data: dict[str, Any], budget_mib: float | None) -> list[str]:
    """Every chart of a report, as inline SVG (or a line saying why there is none)."""
    with _matplotlib_home():
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return [_none("charts", "matplotlib is not installed where this report was written; "
                          "`beekeeper verify --on-host` draws them again on the controller")]
        s = data.get("suites", {})
        ttft = s.get("ttft") or {}
        out = [ttft_chart(ttft.get("ttft_s") or [], ttft.get("engine_ttft_s"))]
        out += [token_latency_chart(run) for run in s.get("decode") or []]
        out.append(vram_chart(s.get("vram") or {}, budget_mib))
        out.append(niah_chart((s.get("niah") or {}).get("cases") or []))
        return out


# a run of backticks: a code span's delimiter where the same run closes it (CommonMark)
_TICKS = re.compile(r"`+")
_LINE_END = re.compile(r"\r\n|\r|\n")


def md_spans(text: str) -> Iterator[tuple[str, str]]:
    """`text` in parts as a markdown renderer reads it: (plain text, "") and (a code span's
    content, its backticks); a run of backticks no run of the same length closes is text."""
    start = pos = 0
    while (tick := _TICKS.search(text, pos)) is not None:
        close = next((m for m in _TICKS.finditer(text, tick.end())
                      if m.group() == tick.group()), None)
        if close is None:
            pos = tick.end()
            continue
        yield text[start:tick.start()], ""
        yield text[tick.end():close.start()], tick.group()
        start = pos = close.end()
    yield text[start:], ""


def _code(content: str, ticks: str) -> str:
    """A code span of `content` (none if empty), spaced where a backtick would join its
    delimiter (a renderer strips one space each side)."""
    if not content:
        return ""
    pad = " " if content[0] == "`" or content[-1] == "`" else ""
    return f"{ticks}{pad}{content}{pad}{ticks}"


def _md(text: Any, cell: bool) -> str:
    """md_text, and md_cell where `cell`. Inside a code span a renderer shows each character
    as written (no entity, no backslash escape is read there): its text goes in as it is, on
    one line, and in a cell split at each `|` (an escaped `|` between its pieces)."""
    out = []
    for part, ticks in md_spans(str(text)):
        if ticks:
            pieces = _LINE_END.sub(" ", part).split("|") if cell else [_LINE_END.sub(" ", part)]
            out.append("\\|".join(_code(p, ticks) for p in pieces))
            continue
        plain = _LINE_END.sub("<br>", html.escape(part.replace("\\", "\\\\"), quote=False))
        out.append(plain.replace("|", "\\|") if cell else plain)
    return "".join(out)


def md_text(text: Any) -> str:
    """Text from a check or the server, safe in a markdown line: HTML escaped (`<script>`
    shows as text, as report.html escapes it), a backslash shown as one, and on one line;
    a code span's text as written (_md)."""
    return _md(text, cell=False)


def md_cell(text: Any) -> str:
    """`md_text`, in a table cell: a `|` escaped, so it adds no column."""
    return _md(text, cell=True)


def md_rules() -> str:
    """report.md's footer: the rules, in the judge's own figures (verify/judge.py)."""
    return (f"Rules: served decode >= {DECODE_FLOOR} x the engine's ({DECODE_FLOOR_CPU} on a "
            "CPU build, whose server threads share the cores; a GPU server sampling on the "
            f"CPU may take {CPU_SAMPLER_MS:g} ms a token more, as llama-bench samples "
            "nothing) (llama-bench, same build, model, KV types, flash attention, GPU layers, "
            "depth, on this host), a served decode below it measured again once as a pair "
            "(llama-bench at that depth, then the server) and the second pair judged; "
            f"median TTFT <= {TTFT_CEILING} x (engine prefill + one "
            f"decode step) ({TTFT_CEILING_CPU} x on a CPU build); a figure whose own error is "
            f"over {NOISE_MAX:.0%} is not judged; the seed study's {REFERENCE_CARD} figures "
            f"are checks only on an {REFERENCE_CARD} and of figures measured at the seed's "
            "size, information elsewhere (the reference TTFT is information there too when "
            "ttft.vs_engine and every decode.vs_engine check passed); VRAM budget against the "
            "rise of the card's memory.used over idle (service stopped).")


def markdown(data: dict[str, Any]) -> str:
    word, summary, not_judged, sentence = verdict_of(data)
    lines = [f"# beekeeper verify: {md_text(data['profile'])}", "",
             *([f"**{md_text(sentence)}**", ""] if sentence else []),
             f"- server: {md_text(data['url'])}",
             f"- started (UTC): {md_text(data['started_utc'])}",
             f"- result: **{word}**" + (f": {md_text(summary)}" if summary else ""),
             *[f"  - {md_text(ln)}" for ln in not_judged], ""]
    eng = data.get("engine")
    if eng:
        lines += [f"- engine baseline: llama-bench, {md_text(eng['placement'])}", ""]
    lines += ["| check | result | measured vs expected |", "|---|---|---|"]
    for c in data["checks"]:
        lines.append(f"| {md_cell(c['name'])} | {md_cell(c['status'])} | "
                     f"{md_cell(c['detail'])} |")
    lines += ["", "Definitions: decode tok/s = (N - 1) / (t_last_token - t_first_token), "
              "N = usage.completion_tokens; TTFT = first token event - send; p95 nearest-rank; "
              "NIAH bound = two-sided 95% Clopper-Pearson. Statuses: PASS/FAIL judge a figure "
              "against an expectation; SKIP (no expectation, and why) and INFO (shown, not "
              "judged) never pass or fail a run.", "", md_rules()]
    return "\n".join(lines) + "\n"


def page(data: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(c['name'])}</td>"
        f"<td style=\"color:{STATUS_COLOR.get(c['status'], '#000')};font-weight:bold\">"
        f"{c['status']}</td><td>{html.escape(c['detail'])}</td></tr>" for c in data["checks"])
    body = "\n".join(f"<figure>{c}</figure>" for c in charts(data, data.get("budget_mib")))
    eng = data.get("engine")
    eng_line = (f"<p>Engine baseline: llama-bench, {html.escape(eng['placement'])}.</p>"
                if eng else "")
    profile = html.escape(data["profile"])
    word, summary, not_judged, sentence = verdict_of(data)
    result = f"<b>{html.escape(word)}</b>" + (f": {html.escape(summary)}" if summary else "")
    why = "".join(f"<li>{html.escape(ln)}</li>" for ln in not_judged)
    why = f"<ul>{why}</ul>" if why else ""
    lead = f"<p><b>{html.escape(sentence)}</b></p>" if sentence else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>beekeeper verify: {profile}</title>
<style>body{{font-family:sans-serif;max-width:820px;margin:2em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;font-size:13px}}
figure{{margin:1em 0}}svg{{max-width:100%;height:auto}}</style></head><body>
<h1>beekeeper verify: {profile}</h1>
{lead}
<p>server {html.escape(data['url'])}, started {html.escape(data['started_utc'])} UTC:
{result}</p>{why}
{eng_line}
<table><tr><th>check</th><th>result</th><th>measured vs expected</th></tr>
{rows}</table>
{body}
</body></html>
"""


def render_from_json(folder: Path) -> None:
    data = json.loads((folder / "report.json").read_text())
    (folder / "report.md").write_text(markdown(data))
    (folder / "report.html").write_text(page(data))


def folder_stamp(when: datetime | None = None) -> str:
    """A report folder's name: its UTC time (now if not given), `20261203T141500Z`."""
    return (when or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def write_reports(report: Report, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    render_from_json(folder)


def print_checks(report: Report) -> None:
    print(verdict_sentence(report), flush=True)
    for c in report.checks:
        print(f"  {c.line()}", flush=True)


def print_summary(report: Report) -> None:
    """The last line, PASSED, FAILED or INCOMPLETE (docs/verify.md), and the `not judged`
    lines; the reports carry the same (report.json's `verdict`)."""
    print(summary_line(report), flush=True)
    for area, why in report.coverage.not_judged:
        print(f"  {_not_judged_line(area, why)}", flush=True)


def key_figures(data: dict[str, Any]) -> dict[str, float | None]:
    """The headline numbers of one report.json, with units in the names (None: not run)."""
    s = data.get("suites") or {}
    dec = s.get("decode") or []
    ttft = s.get("ttft") or {}
    niah = s.get("niah") or {}
    load = s.get("load") or {}
    return {
        "decode_tok_s": dec[-1].get("decode_tok_s") if dec else None,
        "server_decode_tok_s": dec[-1].get("server_predicted_per_second") if dec else None,
        "ttft_median_s": ttft.get("median_s"),
        "ttft_p95_s": ttft.get("p95_s"),
        "niah_passed": niah.get("passed"),
        "peak_vram_mib": server_peak_mib(s.get("vram") or {}),
        "load_aggregate_tok_s": load.get("aggregate_tok_s"),
    }


def load_report(path: Path) -> dict[str, Any]:
    """A report.json, or the folder `verify` wrote it in."""
    file = path / "report.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as e:
        raise VerifyError(f"{file}: not a readable report.json ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("checks"), list):
        raise VerifyError(f"{file}: no `checks` list: not a report.json that verify wrote")
    return data


# each headline figure: (higher is better, B's word when better, B's word when worse)
BETTER: dict[str, tuple[bool, str, str]] = {
    "decode_tok_s": (True, "faster", "slower"),
    "server_decode_tok_s": (True, "faster", "slower"),
    "ttft_median_s": (False, "faster", "slower"),
    "ttft_p95_s": (False, "faster", "slower"),
    "niah_passed": (True, "better", "worse"),
    "peak_vram_mib": (False, "smaller", "larger"),
    "load_aggregate_tok_s": (True, "faster", "slower"),
}


def b_versus_a(figure: str, a: float | None, b: float | None) -> str:
    """B against A in words, by how much the figure moved: `B is 20% slower` for a decode
    rate of 0.80 x A or a TTFT of 1.20 x A; `same` within half a percent; '-' without both."""
    if not a or b is None:
        return "-"
    change = b / a - 1
    moved = f"{abs(change):.0%}"
    if moved == "0%":
        return "same"
    higher_better, better, worse = BETTER[figure]
    return f"B is {moved} {better if (change > 0) == higher_better else worse}"


def compare(a_path: Path, b_path: Path) -> str:
    """Two verify runs side by side, as markdown: the headline figures with B / A and which
    way B moved, then the verdict and every check's status, a changed one marked."""
    a, b = load_report(a_path), load_report(b_path)
    fa, fb = key_figures(a), key_figures(b)
    lines = [f"| figure | A: {a.get('profile')} {a.get('started_utc')} | "
             f"B: {b.get('profile')} {b.get('started_utc')} | B / A | B against A |",
             "|---|---|---|---|---|"]
    for k in fa:
        va, vb = fa[k], fb[k]
        ratio = f"{vb / va:.3f}" if va and vb is not None else "-"
        lines.append(f"| {k} | {'-' if va is None else f'{va:.4g}'} | "
                     f"{'-' if vb is None else f'{vb:.4g}'} | {ratio} | "
                     f"{b_versus_a(k, va, vb)} |")
    verdict = {"verdict": tuple(verdict_of(r)[0] if "passed" in r or "verdict" in r else None
                                for r in (a, b))}
    sa, sb = ({c["name"]: c.get("status") for c in r["checks"]} for r in (a, b))
    rows = {**verdict, **{n: (sa.get(n), sb.get(n)) for n in sorted(set(sa) | set(sb))}}
    lines += ["", "| check | A | B |", "|---|---|---|"]
    for name, (x, y) in rows.items():
        mark = " (changed)" if x != y else ""
        lines.append(f"| {name}{mark} | {'-' if x is None else x} | {'-' if y is None else y} |")
    return "\n".join(lines) + "\n"
