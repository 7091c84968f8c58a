"""Issue 25: the engine baseline wherever the server runs, llama-bench's -fa spelling, a
verdict that says what it judged, and the card read where the server runs (offline)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import httpx
import pytest

from beekeeper.core.container import confined
from beekeeper.core.profiles import PROFILES
from beekeeper.verify import engine as eng
from beekeeper.verify.client import ServerClient, sse_data
from beekeeper.verify.judge import (
    EXIT_FAILED,
    EXIT_NOT_JUDGED,
    EXIT_PASSED,
    Check,
    VramFigures,
    coverage,
    judge_vram,
)
from beekeeper.verify.report import Report, print_summary
from beekeeper.verify.suites import HandStarted, Sizes, judgeable, run_suites
from beekeeper.verify.vram import Locality, locate_server

from .harness import fake_server

ROOT = Path(__file__).resolve().parents[2]


# -- llama-bench's -fa, as each llama-bench parses it ------------------------------------

def beellama_bench_fa(text: str) -> list[bool]:
    """beellama's llama-bench at the pinned commit: `string_split<bool>` of the value, each
    part read by `std::istringstream >> bool` without boolalpha: an integer, 0 false and 1
    true, any other integer true with the stream failed, anything else false (C++11)."""
    out = []
    for part in text.split(","):
        try:
            out.append(int(part.strip()) != 0)
        except ValueError:
            out.append(False)
    return out


def upstream_bench_fa(text: str) -> list[str]:
    """llama.cpp's llama-bench (the vendored tree the sandbox builds): is_truthy, is_falsey,
    is_autoy of common/arg.cpp, anything else refused."""
    names = {**dict.fromkeys(("on", "enabled", "true", "1"), "enabled"),
             **dict.fromkeys(("off", "disabled", "false", "0"), "disabled"),
             **dict.fromkeys(("auto", "-1"), "auto")}
    return [names[p] for p in text.split(",")]  # KeyError: invalid_param


def test_the_servers_on_was_off_to_beellamas_llama_bench():
    assert beellama_bench_fa("on") == [False]  # the measured H200 case: "flash_attn": false
    assert beellama_bench_fa("1") == [True]


@pytest.mark.parametrize("value,enabled", [("on", True), ("off", False), ("auto", True)])
def test_fa_mapping_means_the_same_to_both_llama_benches(value, enabled):
    spelled = eng.llama_bench_fa(value)
    assert beellama_bench_fa(spelled) == [enabled]
    assert upstream_bench_fa(spelled) == ["enabled" if enabled else "disabled"]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_no_profile_passes_a_word_to_llama_bench_fa(name):
    prof = PROFILES[name]
    for cmd in eng.bench_commands(prof, "/m.gguf", depths_tokens=[512], out_tokens=8,
                                  prompt_tokens=256):
        value = cmd[cmd.index("-fa") + 1]
        assert value in ("0", "1"), cmd
        assert beellama_bench_fa(value) == [prof.server.flash_attn != "off"]


def test_an_unknown_fa_value_is_refused():
    with pytest.raises(ValueError, match="flash_attn"):
        eng.llama_bench_fa("yes")


# -- what a run judged ---------------------------------------------------------------------

SKIPPED = [Check("smoke.health", "PASS", "200"),
           Check("decode.records_consistent", "PASS", "ok"),
           Check("decode.vs_engine@4096", "SKIP", "no engine baseline"),
           Check("decode.reference_card", "INFO", "information only"),
           Check("ttft.no_prompt_reuse", "PASS", "ok"),
           Check("ttft.vs_engine", "SKIP", "no engine baseline"),
           Check("ttft.reference_card", "INFO", "information only"),
           Check("vram.rise_vs_budget", "SKIP", "no idle baseline")]


def test_a_run_that_judged_nothing_is_not_passed(capsys):
    cov = coverage(SKIPPED, ["smoke", "decode", "ttft", "vram"])
    assert cov.exit_status == EXIT_NOT_JUDGED == 3 and cov.word == "INCOMPLETE"
    assert [a for a, _ in cov.not_judged] == ["decode", "ttft", "vram"] and not cov.judged
    rep = Report(profile="p", url="u", started_utc="t", budget_mib=1.0, checks=SKIPPED,
                 requested=["smoke", "decode", "ttft", "vram"])
    print_summary(rep)
    out = capsys.readouterr().out
    assert "PASSED" not in out and out.startswith("verify INCOMPLETE")
    assert "not judged: decode, TTFT, VRAM; judged: none" in out
    assert "  not judged: VRAM: no idle baseline" in out


def test_judged_failed_and_nothing_requested():
    judged = [*SKIPPED[:2], Check("decode.vs_engine@4096", "PASS", "ratio 0.99")]
    assert coverage(judged, ["decode"]).exit_status == EXIT_PASSED
    part = coverage(judged, ["decode", "niah"])
    assert part.exit_status == EXIT_NOT_JUDGED and part.judged == ["decode"]
    assert "no check ran" in part.not_judged[0][1]
    failed = [*judged, Check("vram.rise_vs_budget", "FAIL", "over")]
    assert coverage(failed, ["decode", "vram", "niah"]).exit_status == EXIT_FAILED
    # smoke alone asks for no speed verdict; a VRAM check the sampler added is not asked
    assert coverage(SKIPPED, ["smoke"]).exit_status == EXIT_PASSED
    # a reference-card check on the reference card judges
    ref = [Check("decode.reference_card", "PASS", "on an RTX 4090")]
    assert coverage(ref, ["decode"]).judged == ["decode"]


def test_vram_without_an_idle_baseline_is_judged_on_the_servers_own_peak():
    fig = VramFigures(None, 9738.0, 9755.0, 10240.0, "none: started by hand",
                      process_is_server=True)
    v = judge_vram(fig)
    assert v.status == "PASS" and "process peak 9738 MiB" in v.detail
    assert judge_vram(VramFigures(None, 11000.0, None, 10240.0, "x",
                                  process_is_server=True)).status == "FAIL"
    # another process on the card: the peak is not the server's alone
    assert judge_vram(VramFigures(None, 9738.0, None, 10240.0, "x")).status == "SKIP"


# -- where llama-bench runs ----------------------------------------------------------------

class FakeShell:
    """A host: records scripts; nvidia-smi, test -x and llama-bench answer as told."""

    label = "fake host"

    def __init__(self, gpus: str = "", manifest: dict | None = None):
        self.scripts: list[str] = []
        self.gpus, self.manifest = gpus, manifest

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        self.scripts.append(script)
        out, rc = "", 0
        if "nvidia-smi --query-gpu" in script:
            out, rc = self.gpus, 0 if self.gpus else 127
        elif script.startswith("cat "):
            out, rc = json.dumps(self.manifest), 0 if self.manifest else 1
        elif "-o json" in script:
            out = json.dumps(bench_json(script))
        return subprocess.CompletedProcess(script, rc, out, "")


def bench_json(script: str) -> list[dict]:
    """llama-bench -o json for the command: 100 tok/s decode, 1000 tok/s prefill."""
    a = script.split()
    n_p, n_g = int(a[a.index("-p") + 1]), int(a[a.index("-n") + 1])
    fa = a[a.index("-fa") + 1]
    common = {"n_threads": 8, "type_k": "f16", "type_v": "f16", "n_gpu_layers": 99,
              "flash_attn": fa == "1", "backends": "CUDA", "gpu_info": "fake"}
    if n_g:
        return [{**common, "n_prompt": 0, "n_gen": n_g, "n_depth": int(d), "avg_ts": 100.0,
                 "avg_ns": int(n_g / 100 * 1e9)} for d in a[a.index("-d") + 1].split(",")]
    return [{**common, "n_prompt": n_p, "n_gen": 0, "n_depth": 0, "avg_ts": 1000.0,
             "avg_ns": int(n_p / 1000 * 1e9)}]


def test_a_hand_started_server_is_measured_beside_it_and_never_stopped():
    sh = FakeShell(gpus="NVIDIA H200, 10000\n")
    e = eng.user_engine(sh, PROFILES["q8-turbo4-64k"], "/w/m.gguf",
                        llama_bench="/w/build/bin/llama-bench")
    base = eng.measure(e, PROFILES["q8-turbo4-64k"], depths_tokens=[4096, 60000],
                       out_tokens=512, prompt_tokens=60000)
    assert not any("systemctl" in s or "kill" in s for s in sh.scripts)
    assert "beside the running server" in base.placement and "did not stop" in base.placement
    assert base.commands[0][:3] == ["/w/build/bin/llama-bench", "-m", "/w/m.gguf"]
    assert base.decode_tok_s_at(60000) == 100.0 and base.prefill_s == pytest.approx(60.0)
    assert base.gpu_name == "NVIDIA H200" and base.idle_used_mib is None  # not idle
    assert all(t.flash_attn == "True" for t in base.decode)  # -fa 1 reached the engine


def test_engine_gpu_and_image_for_a_hand_started_server():
    prof = PROFILES["q8-turbo4-64k"]
    e = eng.user_engine(FakeShell(), prof, "/w/m.gguf", llama_bench="/lb", engine_gpu="1")
    assert e.prefix == ["env", "CUDA_VISIBLE_DEVICES=1", "/lb"] and e.stop is None
    img = eng.user_engine(FakeShell(), prof, "/w/m.gguf", llama_bench=None, image="ghcr/x:1")
    assert img.model_arg == "/models/m.gguf" and "/w:/models:ro" in img.prefix
    assert img.prefix[-3:] == ["--entrypoint", "/usr/local/bin/llama-bench", "ghcr/x:1"]
    # the service's own hardening (core/container.py's, which its docker run renders too)
    assert img.prefix[3:-3] == [w for line in confined("/w", "all") for w in line]
    with pytest.raises(eng.EngineError, match="--llama-bench"):
        eng.user_engine(FakeShell(), prof, "/w/m.gguf", llama_bench=None)


@pytest.mark.parametrize("runtime", ["systemd", "compose"])
def test_a_deployed_service_is_stopped_and_started_through_its_unit(runtime):
    from beekeeper.core.deployed import DeployedService

    manifest = DeployedService(service="llm", unit="beekeeper-llm.service", mode="container",
                               image="beekeeper/llama-server:t", model_path="/srv/m/q.gguf",
                               runtime=runtime).to_dict()
    sh = FakeShell(gpus="NVIDIA GeForce RTX 4090, 512\n", manifest=manifest)
    e = eng.deployed_engine(sh, PROFILES["q8-turbo4-64k"])
    assert e.stop == "systemctl stop beekeeper-llm.service" and runtime in e.placement
    assert "no-new-privileges" in e.prefix  # the unit's settings, all of them
    base = eng.measure(e, PROFILES["q8-turbo4-64k"], depths_tokens=[4096], out_tokens=16,
                       prompt_tokens=None)
    stop, start = sh.scripts.index(e.stop), sh.scripts.index(e.start or "")
    assert stop < start and base.idle_used_mib == 512 and "stopped while" in base.placement


def test_run_suites_judges_a_hand_started_server_and_the_card_where_it_runs(monkeypatch):
    """The issue's run: smoke,decode,ttft,vram with --llama-bench; decode and TTFT judged
    against the engine, the reference checks on the card nvidia-smi names where the server
    runs, not on this machine's (a tunnel: NVML is not read)."""
    import itertools

    from verify import client

    # the stand-in answers at once: its events are timed on a clock that ticks 1 ms a
    # reading, so the served figures have no spread on a busy machine (the noise rule)
    ticks = itertools.count()
    monkeypatch.setattr(client.time, "perf_counter", lambda: next(ticks) / 1000)
    sizes = Sizes(decode_ctx_tokens=[200], decode_out_tokens=40, ttft_tokens=100,
                  ttft_requests=2, niah_tokens=150, niah_cases=1)
    sh = FakeShell(gpus="NVIDIA GeForce RTX 4090, 700\n")
    names = ["smoke", "decode", "ttft", "vram"]
    with ServerClient("http://127.0.0.1:9", transport=httpx.MockTransport(fake_server)) as c:
        rep = run_suites(c, PROFILES["q8-turbo4-64k"], names, sizes=sizes, shell=sh,
                         hand=HandStarted(llama_bench="/lb", model="/m.gguf"),
                         where=Locality(False, "port 9 here is an ssh tunnel"))
    st = {ch.name: ch for ch in rep.checks}
    assert st["engine.baseline"].status == "INFO"
    assert st["decode.vs_engine@200"].status in ("PASS", "FAIL")
    assert st["ttft.vs_engine"].status in ("PASS", "FAIL")
    # the 4090 is seen (another card gives INFO); the reference figure is at 60K, this
    # run's decode at 200 tokens, so it is not compared
    ref = st["decode.reference_card"]
    assert ref.status == "SKIP" and "--decode-ctx 60000" in ref.detail
    assert "ssh tunnel" in st["vram.rise_vs_budget"].detail
    cov = rep.coverage
    assert cov.judged == ["decode", "ttft"] and [a for a, _ in cov.not_judged] == ["vram"]
    # a CPU profile has no GPU memory: VRAM is no verdict it owes, and never INCOMPLETE
    cpu = coverage(rep.checks, judgeable(names, PROFILES["cpu-tiny"]))
    assert cpu.judged == ["decode", "ttft"] and cpu.not_judged == [] and cpu.exit_status == 0


# -- where the server is -------------------------------------------------------------------

def test_a_tunnel_or_another_host_is_not_this_machine(monkeypatch):
    from beekeeper.verify import vram

    assert not locate_server("http://gpu-box.example:8083").local
    monkeypatch.setattr(vram, "_owner", lambda inodes: (4242, "ssh"))
    loc = locate_server("http://127.0.0.1:8083")
    assert not loc.local and "ssh tunnel" in loc.why
    monkeypatch.setattr(vram, "_owner", lambda inodes: (77, "llama-server"))
    assert locate_server("http://localhost:8083") == Locality(
        True, "llama-server, pid 77, on this machine", 77)
    monkeypatch.setattr(vram, "_owner", lambda inodes: None)  # docker-proxy, not readable
    assert locate_server("http://127.0.0.1:8083").local


def test_sse_events_are_read_without_httpx_sse():
    lines = [": ping", "data: {\"a\":", "data: 1}", "", "event: x", "data:[DONE]"]
    assert list(sse_data(lines)) == ['{"a":\n1}', "[DONE]"]


def test_verify_runs_from_a_checkout_without_pyinfra_docker_gguf_matplotlib(tmp_path):
    """What the GPU box has: httpx and nvidia-ml-py; the kit copied, not installed."""
    import shutil

    for d in ("beekeeper", "verify"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    blocked = ["pyinfra", "docker", "gguf", "matplotlib", "httpx_sse", "yaml", "jinja2",
               "numpy", "testinfra"]
    script = (
        "import sys, runpy\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] in {blocked!r}:\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"sys.path[:0] = [{str(tmp_path)!r}, {sysconfig.get_paths()['purelib']!r}]\n"
        "import beekeeper.cli\n"
        "from beekeeper.verify_main import use_checkout_verify\n"
        "use_checkout_verify()\n"
        "import beekeeper.verify.suites, beekeeper.verify.report, beekeeper.core.planner\n"
        f"assert beekeeper.verify.suites.__file__.startswith({str(tmp_path)!r})\n"
        "sys.argv = ['verify_main', '--help']\n"
        "runpy.run_module('beekeeper.verify_main', run_name='__main__')\n")
    p = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "--llama-bench" in p.stdout


def test_the_card_is_read_on_wsl2_where_root_has_no_nvidia_smi_on_its_path(tmp_path,
                                                                           monkeypatch):
    """WSL2 keeps nvidia-smi in /usr/lib/wsl/lib, on an interactive login's PATH only: root
    through sudo (secure_path) and SSH sessions lack it (microsoft/WSL#8794), so on a WSL2
    box (@local, or --ssh/--on-host to one) the card and the idle VRAM were never read. The
    folder here stands in for /usr/lib/wsl/lib: a hand-written nvidia-smi printing the
    query's format (name, memory.used)."""
    lib = tmp_path / "wsl-lib"
    lib.mkdir()
    smi = lib / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA GeForce RTX 4090, 1234'\n")
    smi.chmod(0o755)
    monkeypatch.setattr(eng, "WSL_LIB", str(lib), raising=False)
    monkeypatch.setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")  # sudo's secure_path
    assert eng.host_gpus(eng.LocalShell()) == [("NVIDIA GeForce RTX 4090", 1234.0)]


def _listener(exe: Path, port: int) -> subprocess.Popen:
    """A real process named llama-server (a symlink to python) listening on `port`."""
    code = ("import socket, sys, time\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([str(exe), "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "up"
    return p


def test_the_server_is_found_again_after_the_engine_suite_restarted_it(tmp_path):
    """llama-bench stops the kit's service and starts it again: the VRAM sampler must follow
    the new server process, not the pid read before the engine suite (on the H200 it followed
    the old one and reported no per-process peak)."""
    import socket as _socket

    from beekeeper.verify.results import EngineRun
    from beekeeper.verify.suites import server_after_engine

    exe = tmp_path / "llama-server"
    exe.symlink_to(sys.executable)
    with _socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    first = _listener(exe, port)
    try:
        before = locate_server(url)
        assert before.pid == first.pid
    finally:
        first.kill()
        first.wait()
    second = _listener(exe, port)  # the service, started again after llama-bench
    try:
        after = server_after_engine(before, url, EngineRun(requested=True))
        assert after.pid == second.pid != first.pid
        # no engine suite: nothing was restarted, the pid read before stands
        assert server_after_engine(before, url, EngineRun(requested=False)) is before
    finally:
        second.kill()
        second.wait()


@pytest.mark.parametrize(("names", "prefills"), [(["smoke", "decode"], 0),
                                                  (["smoke", "decode", "ttft"], 1)])
def test_the_engine_times_the_prompt_only_when_ttft_is_asked_for(monkeypatch, names, prefills):
    """The prefill test is the engine suite's longest (at 60K on the H200, 46 s of 68): run
    only for the TTFT check, the one that judges against it."""
    import itertools

    from verify import client

    ticks = itertools.count()
    monkeypatch.setattr(client.time, "perf_counter", lambda: next(ticks) / 1000)
    sizes = Sizes(decode_ctx_tokens=[200], decode_out_tokens=40, ttft_tokens=100,
                  ttft_requests=2, niah_tokens=150, niah_cases=1)
    sh = FakeShell(gpus="NVIDIA GeForce RTX 4090, 700\n")
    with ServerClient("http://127.0.0.1:9", transport=httpx.MockTransport(fake_server)) as c:
        rep = run_suites(c, PROFILES["q8-turbo4-64k"], names, sizes=sizes, shell=sh,
                         hand=HandStarted(llama_bench="/lb", model="/m.gguf"),
                         where=Locality(False, "port 9 here is an ssh tunnel"))
    benches = [s for s in sh.scripts if "-o json" in s]
    assert sum(" -n 0 " in f"{s} " for s in benches) == prefills, benches
    assert any(" -n 40 " in f"{s} " for s in benches)  # decode is timed either way
    assert rep.engine is not None and (rep.engine.prefill is not None) == bool(prefills)
