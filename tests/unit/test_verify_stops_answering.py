"""A server that stops answering during verify (it passed the smoke check, then drops every
connection or answers 503) is FAILED (exit 1), as one that never answered is: its report is
written with what was measured before, the step that failed named, the server's log as the
next step. An answer verify cannot read, a prompt it cannot fit, and Ctrl-C each end in one
line (exit 2, 2 and 130), never a traceback. Each against a stand-in llama-server on
127.0.0.1 (tests/unit/harness.py FakeLlama) that fails on cue."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from beekeeper import cli

from .harness import FakeLlama, loopback_llama

RUN = ["--profile", "cpu-tiny", "--quick", "--settle-budget-s", "0", "--host-label", "box"]


def verify(url: str, out: Path, suites: str, *more: str) -> int | str:
    """`beekeeper verify` of `url`; what escaped it, named, where it did not return."""
    try:
        return cli.main(["verify", "--url", url, "--suite", suites, "--out", str(out),
                         *RUN, *more])
    except KeyboardInterrupt:  # pytest would stop the session on it
        return "KeyboardInterrupt escaped"


def the_report(out: Path) -> dict:
    files = list(out.rglob("report.json"))
    assert len(files) == 1, files
    assert {p.name for p in files[0].parent.iterdir()} >= {"report.md", "report.html"}
    return json.loads(files[0].read_text())


def failed_run(fake: FakeLlama, tmp_path: Path, capsys) -> tuple[dict, dict]:
    """verify's smoke, decode and TTFT of `fake`, FAILED (exit 1): its report and checks."""
    with loopback_llama(fake) as url:
        rc = verify(url, tmp_path, "smoke,decode,ttft")
    assert rc == 1, capsys.readouterr()
    data = the_report(tmp_path)
    return data, {c["name"]: c for c in data["checks"]}


@pytest.mark.parametrize("stop, got, health", [
    ("drop", "POST /apply-template got no answer (RemoteProtocolError)",
     "no answer (RemoteProtocolError)"),
    (503, "POST /apply-template got HTTP 503 Service Unavailable", "HTTP 503 (loading)"),
])
def test_a_server_that_stops_answering_mid_run_is_failed_with_its_report(tmp_path, capsys,
                                                                         stop, got, health):
    fake = FakeLlama(stop_after_chats=1, stop=stop)  # the smoke check's chat, then no more
    with loopback_llama(fake) as url:
        rc = verify(url, tmp_path, "smoke,decode,ttft")
    out = capsys.readouterr()
    assert rc == 1, out
    assert "Traceback" not in out.err and "could not be reached" not in out.err, out.err
    data = the_report(tmp_path)
    checks = {c["name"]: c for c in data["checks"]}
    # what was measured before it stopped is kept ...
    assert [checks[f"smoke.{n}"]["status"] for n in ("health", "models", "stream")] == [
        "PASS"] * 3
    assert data["suites"]["smoke"]["record"]["ok"] is True
    # ... and the step that failed is named, with the request that got no answer
    stopped = checks["server.answered"]
    assert stopped["status"] == "FAIL"
    assert stopped["detail"].startswith(f"stopped answering during decode: {got}")
    assert stopped["detail"].endswith(f"; GET /health then got {health}")
    verdict = data["verdict"]
    assert verdict["word"] == "FAILED" and verdict["exit_status"] == 1
    assert verdict["sentence"].startswith("The server is broken: it did not answer a basic "
                                          "request (server.answered: stopped answering")
    assert "next: read the server's log (for the kit's service: `journalctl" in (
        verdict["sentence"])
    assert out.out.rstrip().splitlines()[-3].startswith("verify FAILED")
    assert f"report: {tmp_path}/box/" in out.out


@dataclass
class FailsOnce(FakeLlama):
    """Answers `stop` to the first request of `path`, then everything as llama-server."""

    path: str = "/tokenize"
    left: int = 1

    def stopped(self) -> bool:  # asked right after the request's path is recorded in `seen`
        if self.seen[-1] == self.path and self.left:
            self.left -= 1
            return True
        return super().stopped()


@pytest.mark.parametrize("status", [500, 503])
def test_one_5xx_while_the_server_is_up_is_an_error_not_a_stop(tmp_path, capsys, status):
    """A single 500 (or 503) to one /tokenize while /health answers 200: the server did not
    stop. The run fails on that request, says it was not a stop, and goes on to TTFT (it
    said `stopped answering during decode` and measured nothing more)."""
    with loopback_llama(FailsOnce(stop=status)) as url:
        rc = verify(url, tmp_path, "smoke,decode,ttft")
    assert rc == 1, capsys.readouterr()
    data = the_report(tmp_path)
    checks = {c["name"]: c for c in data["checks"]}
    failed = checks["server.answered"]
    assert failed["status"] == "FAIL"
    reason = "Internal Server Error" if status == 500 else "Service Unavailable"
    assert failed["detail"] == (
        f"failed a request during decode: POST /tokenize got HTTP {status} {reason}, while "
        "GET /health answered 200: an error on that request, not a stop")
    # the decode depth it cut is not measured; TTFT ran after it
    assert checks["decode.vs_engine@1024"]["status"] == "SKIP"
    assert checks["decode.vs_engine@1024"]["detail"].startswith("not measured: ")
    assert checks["ttft.no_prompt_reuse"]["status"] == "PASS"
    assert data["suites"]["ttft"]["ttft_s"]


def test_a_request_with_no_answer_is_a_stop_even_where_health_answers_200(tmp_path, capsys):
    """One /tokenize dropped without an answer while /health still answers 200 (as a hung
    server's may, its requests waiting out the client's timeout): a stop, not an error on
    that request: no suite after it runs, each to wait its timeout out."""
    data, checks = failed_run(FailsOnce(stop="drop"), tmp_path, capsys)
    assert checks["server.answered"]["detail"] == (
        "stopped answering during decode: POST /tokenize got no answer (RemoteProtocolError); "
        "GET /health then got HTTP 200")
    assert not data["suites"].get("ttft") and "ttft.no_prompt_reuse" not in checks


def test_a_server_that_stops_between_depths_keeps_the_depth_it_measured(tmp_path, capsys):
    """The smoke chat, then the 64-token depth's three requests, then no answer at all: the
    64 figure is judged (it was measured, kept in report.json, and had no check), the 128
    depth is not measured, and the stop is decode's."""
    fake = FakeLlama(stop_after_chats=4)
    with loopback_llama(fake) as url:
        rc = verify(url, tmp_path, "smoke,decode", "--decode-ctx", "64,128")
    assert rc == 1, capsys.readouterr()
    data = the_report(tmp_path)
    checks = {c["name"]: c for c in data["checks"]}
    assert [d["ctx_tokens"] for d in data["suites"]["decode"]] == [64]
    assert checks["decode.records_consistent"]["status"] == "PASS"
    assert checks["decode.vs_engine@64"]["detail"].startswith("served ")
    assert checks["decode.vs_engine@128"] == {
        "name": "decode.vs_engine@128", "status": "SKIP",
        "detail": "not measured: the decode suite ended at a failed request before it "
                  "(server.answered)"}
    assert checks["server.answered"]["detail"] == (
        "stopped answering during decode: POST /apply-template got no answer "
        "(RemoteProtocolError); GET /health then got no answer (RemoteProtocolError)")


def test_a_server_that_stops_within_a_decode_depth_is_decodes_stop(tmp_path, capsys):
    """It answers the smoke chat and the timed decode request, then drops every connection:
    the decode requests' failures are data, so the stop went unnamed until TTFT built its
    prompt (`stopped answering during TTFT`); now /health, asked after the failed repeats,
    names it in decode, and TTFT is not run against a server that is gone."""
    data, checks = failed_run(FakeLlama(stop_after_chats=2), tmp_path, capsys)
    assert checks["server.answered"]["detail"] == (
        "stopped answering during decode: POST /v1/chat/completions failed "
        "(RemoteProtocolError); GET /health then got no answer (RemoteProtocolError)")
    assert checks["decode.records_consistent"]["status"] == "FAIL"  # its 2 repeats failed
    assert data["suites"].get("ttft") is None
    why = {n["area"]: n["why"] for n in data["verdict"]["not_judged"]}
    assert why["ttft"] == ("not measured: the served suites ended at a failed request "
                           "(server.answered)")


def test_a_server_down_from_the_start_is_failed_the_same_way(tmp_path, capsys, monkeypatch):
    """The case the mid-run one is made consistent with: no connection at all."""
    from beekeeper.verify import smoke

    fake = FakeLlama(stop_after_chats=0)  # drops every connection, /health's too
    with loopback_llama(fake) as url:
        real = smoke.wait_healthy
        monkeypatch.setattr(smoke, "wait_healthy", lambda c, d: real(c, 0.2))  # not 60 s
        rc = verify(url, tmp_path, "smoke,decode")
    assert rc == 1
    data = the_report(tmp_path)
    assert data["verdict"]["sentence"].startswith(
        "The server is broken: it did not answer a basic request (smoke.health: ")
    assert "next: read the server's log" in data["verdict"]["sentence"]


def test_an_answer_without_the_tokens_is_one_line_exit_2(tmp_path, capsys):
    with loopback_llama(FakeLlama(tokens_field="ids")) as url:
        rc = verify(url, tmp_path, "smoke,decode")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith(f"beekeeper: the server at {url}: POST /tokenize answered without "
                          "`tokens` (a server other than llama-server?)"), err


def test_a_prompt_that_cannot_be_fitted_is_one_line_exit_2(tmp_path, capsys):
    """Two tokens a word: no prompt is 1,001 tokens long (PromptFitError)."""
    with loopback_llama(FakeLlama(tokens_per_word=2)) as url:
        rc = verify(url, tmp_path, "smoke,decode", "--decode-ctx", "1001")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "no prompt of the size asked could be built" in err
    assert "could not hit exactly 1001 tokens" in err and "--decode-ctx" in err


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    """Ctrl-C while the decode prompt is fitted: SIGINT sent to a `beekeeper verify` process
    while it waits for the server's answer (a signal, as a terminal sends it: not
    _thread.interrupt_main, whose target under pytest-xdist is not the test's thread)."""
    running: list[subprocess.Popen[str]] = []

    def ctrl_c() -> None:
        running[0].send_signal(signal.SIGINT)
        running[0].wait(timeout=30)  # the answer only after verify is gone

    with loopback_llama(FakeLlama(on_template=ctrl_c)) as url:
        running.append(subprocess.Popen(
            [sys.executable, "-m", "beekeeper.cli", "verify", "--url", url, "--suite",
             "smoke,decode", "--out", str(tmp_path), *RUN],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # a shell's background job (`cmd &`, as CI may start the tests) ignores SIGINT,
            # and exec keeps that: the verify process gets the terminal's default
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)))
        out, err = running[0].communicate(timeout=120)
    assert running[0].returncode == 130, (out, err)
    assert err.strip() == "verify: interrupted (Ctrl-C): no report written", err
    assert not list(tmp_path.rglob("report.json"))


def test_docs_say_what_ctrl_c_ends_in():
    doc = (Path(__file__).resolve().parents[2] / "docs/commands.md").read_text()
    assert "`verify: interrupted (Ctrl-C): no report written`, and exit 130" in " ".join(
        doc.split())


def test_a_decode_repeat_the_server_fails_fails_the_run(tmp_path, capsys):
    """The server answers the smoke check and the timed decode request, then 503 to every
    repeat: the repeats were dropped and the figure judged on what was left (exit 0 with an
    engine, 3 without); a repeat that failed now fails decode."""
    fake = FakeLlama(stop_after_chats=2, stop=503)  # the smoke chat, the timed request
    with loopback_llama(fake) as url:
        rc = verify(url, tmp_path, "smoke,decode")
    out = capsys.readouterr()
    assert rc == 1, out
    checks = {c["name"]: c for c in the_report(tmp_path)["checks"]}
    consistent = checks["decode.records_consistent"]
    assert consistent["status"] == "FAIL" and "repeat(s) failed" in consistent["detail"]


def test_a_llama_bench_that_ran_and_failed_fails_one_that_could_not_run_does_not():
    from beekeeper.verify.engine import EngineError, EngineFailed, parse_bench_json
    from beekeeper.verify.judge import engine_checks
    from beekeeper.verify.results import EngineRun

    with pytest.raises(EngineFailed):  # it ran: printed something, no JSON
        parse_bench_json("error loading model: tensor data out of range")
    ran = EngineRun(requested=True, error="llama-bench exit 134: error loading model",
                    failed=True)
    assert [c.status for c in engine_checks(ran)] == ["FAIL"]
    missing = EngineRun(requested=True, error=str(EngineError("no /x/llama-bench on box")))
    assert [c.status for c in engine_checks(missing)] == ["SKIP"]


def test_ctrl_c_outside_the_suites_is_one_line_and_exit_130(monkeypatch, capsys):
    """Ctrl-C while `beekeeper verify --on-host --ssh` waits on the host (no suite of this
    machine's running): one line and 130, as inside the suites."""
    from beekeeper import hostverify

    def run_on_host(*a: object) -> tuple[int, Path]:
        raise KeyboardInterrupt

    monkeypatch.setattr(hostverify, "run_on_host", run_on_host)
    monkeypatch.setattr(cli, "_cat_manifest", lambda ssh, service, root=True:
                        subprocess.CompletedProcess(["ssh"], 1, "", ""))
    assert cli.main(["verify", "--on-host", "--ssh", "me@gpu-box", *RUN]) == 130
    assert capsys.readouterr().err.strip() == "beekeeper verify: interrupted (Ctrl-C)"
