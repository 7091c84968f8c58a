"""The plain sentence that opens verify's summary (issue 43, item 4): "The server works: ...",
"The server is broken: ..." or "Not judged: ...; <what to do>: `<command>`", read from the
same `coverage` as the PASSED / FAILED / INCOMPLETE line, never a second copy of its rules.

Every report here is built from real check records: the judge step's own functions
(verify/judge.py) on the suites' typed results, as tests/unit/test_judge_rules.py and
test_noise.py build them (a quiet 50 tok/s llama-bench, a busy host's settle record, a NIAH
run of 3 in 10). A sentence logic turned round (works for a failed run, broken for a passed
one, a busy host called broken) fails each test.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from beekeeper import verify_main
from beekeeper.verify.judge import (
    EXIT_FAILED,
    EXIT_NOT_JUDGED,
    EXIT_PASSED,
    Check,
    decode_checks,
    engine_checks,
    niah_checks,
    ttft_checks,
    vram_checks,
)
from beekeeper.verify.report import (
    Invocation,
    Report,
    SuiteResults,
    print_checks,
    print_summary,
    summary_line,
    verdict_sentence,
)
from beekeeper.verify.results import DecodeResult, EngineRun
from beekeeper.verify.vram import VramResult

from .harness import CPU_EXPECTED as CPU, PROD, busy_settle, decode_run, engine, niah, ttft_run

SMOKE = [Check("smoke.health", "PASS", "200 in 0.01 s"),
         Check("smoke.stream", "PASS", "4 content events, finish_reason length")]
TYPED = "beekeeper verify --sandbox --suite engine,smoke,decode,ttft,niah"


def report(checks: list[Check], requested: list[str], suites: SuiteResults,
           run: EngineRun | None = None, command: str | None = TYPED) -> Report:
    return Report(profile="cpu-tiny", url="http://127.0.0.1:8083", started_utc="t",
                  budget_mib=10240.0, checks=checks, suites=suites,
                  engine=run.baseline if run else None, requested=requested,
                  invocation=Invocation(command))


def quiet_decode() -> DecodeResult:
    return decode_run([47.0, 47.5, 48.0])  # 0.95 of the quiet engine's 50 tok/s


def busy_decode() -> DecodeResult:
    """The same figures, measured while other processes used 1.6 of the host's 2 CPUs."""
    return decode_run([47.0, 47.5, 48.0], settle=busy_settle([47.0, 47.5, 48.0]))


def passed_run() -> Report:
    run, dec, found = engine(), quiet_decode(), niah(10)
    ttft = ttft_run([1.0, 1.05, 1.1, 1.0, 1.02])
    checks = [*engine_checks(run), *SMOKE, *decode_checks([dec], run, CPU, None, cpu=True),
              *ttft_checks(ttft, run, CPU, None, cpu=True), *niah_checks(found, PROD)]
    return report(checks, ["smoke", "decode", "ttft", "niah"],
                  SuiteResults(decode=[dec], ttft=ttft, niah=found), run)


def niah_failed_run(decode: DecodeResult | None = None) -> Report:
    """NIAH found 3 of 10 needles (the profile needs 10); with `decode`, a decode run too."""
    run, found = engine(), niah(3)
    checks = [*SMOKE, *niah_checks(found, PROD)]
    if decode is not None:
        checks += decode_checks([decode], run, CPU, None, cpu=True)
    return report(checks, ["smoke", "niah", *(["decode"] if decode else [])],
                  SuiteResults(niah=found, decode=[decode] if decode else None), run)


def busy_run() -> Report:
    run, dec = engine(), busy_decode()
    return report([*SMOKE, *decode_checks([dec], run, CPU, None, cpu=True)],
                  ["smoke", "decode"], SuiteResults(decode=[dec]), run)


# -- one sentence per outcome -----------------------------------------------------------------

def test_a_passed_run_says_the_server_works_with_each_area_and_its_figure():
    rep = passed_run()
    assert rep.coverage.exit_status == EXIT_PASSED
    assert verdict_sentence(rep) == (
        "The server works: it answered and streamed, ran at 0.95 of its engine's decode speed "
        "at 1,024 tokens, gave its first token in 1.02 s (median, 512-token prompts) and found "
        "the needle in 10 of 10 long prompts.")


def test_a_failed_niah_says_the_server_is_broken_with_the_count_and_what_to_read():
    rep = niah_failed_run()
    assert rep.coverage.exit_status == EXIT_FAILED
    said = verdict_sentence(rep)
    assert said == ("The server is broken: NIAH found the needle in 3 of 10 prompts (needs at "
                    "least 10); next: read the [FAIL] niah.pass line below (which prompts "
                    "missed).")
    assert "works" not in said


def test_a_server_that_does_not_answer_is_broken_and_the_sentence_names_its_log():
    rep = report([Check("smoke.health", "FAIL", "ConnectError: [Errno 111] Connection "
                        "refused; waited 60 s")], ["smoke", "decode"], SuiteResults(),
                 EngineRun(requested=False))
    assert rep.invocation.service == "llm"
    assert verdict_sentence(rep) == (
        "The server is broken: it did not answer a basic request (smoke.health: ConnectError: "
        "[Errno 111] Connection refused) (decode was not judged either); next: read the "
        "server's log (for the kit's service: `journalctl -u beekeeper-llm.service -n 200 "
        "--no-pager` on the host; runtime supervisor: /var/log/beekeeper/beekeeper-llm.log).")


def test_a_slow_server_is_broken_with_its_ratio_and_the_floor():
    run, dec = engine(), decode_run([20.0, 20.1, 20.2])
    rep = report([*SMOKE, *decode_checks([dec], run, CPU, None, cpu=True)],
                 ["smoke", "decode"], SuiteResults(decode=[dec]), run)
    said = verdict_sentence(rep)
    assert said.startswith("The server is broken: it decoded at 0.40 of its engine's speed at "
                           "1,024 tokens (needs at least 0.7); next: look for another program")


def test_a_busy_host_is_not_judged_with_its_load_and_the_command_to_run_again():
    rep = busy_run()
    assert rep.coverage.exit_status == EXIT_NOT_JUDGED
    said = verdict_sentence(rep)
    assert said == ("Not judged: the host was busy while decode was measured (other processes "
                    "used 1.60 of 2 CPUs); run again on a quiet host: "
                    f"`{TYPED}`.")
    assert "works" not in said and "broken" not in said


def test_a_llama_bench_that_could_not_run_is_not_called_a_broken_server():
    dec = quiet_decode()
    run = EngineRun(requested=True, error="sudo: a password is required")
    rep = report([*engine_checks(run), *SMOKE, *decode_checks([dec], run, CPU, None, cpu=True)],
                 ["engine", "smoke", "decode"], SuiteResults(decode=[dec]), run)
    assert rep.coverage.word == "INCOMPLETE" and rep.coverage.exit_status == EXIT_NOT_JUDGED
    said = verdict_sentence(rep)
    assert "broken" not in said and "works" not in said
    assert said.startswith("Not judged: decode had no engine baseline to be judged against "
                           "(llama-bench could not run: sudo: a password is required)")
    assert said.endswith(f"run again once that is seen to: `{TYPED}`.")


def test_no_engine_baseline_says_to_add_the_engine_suite_to_the_users_own_command():
    dec = quiet_decode()
    none = EngineRun(requested=False)
    typed = "beekeeper verify --url http://127.0.0.1:8083 --profile cpu-tiny --suite smoke,decode"
    rep = report([*SMOKE, *decode_checks([dec], none, CPU, None, cpu=True)],
                 ["smoke", "decode"], SuiteResults(decode=[dec]), none, command=typed)
    assert rep.coverage.word == "INCOMPLETE"
    said = verdict_sentence(rep)
    assert said.startswith("Not judged: decode had no engine baseline to be judged against")
    assert said.endswith("; add `--suite engine`: `beekeeper verify --url http://127.0.0.1:8083 "
                         "--profile cpu-tiny --suite engine,smoke,decode`.")
    # the command not known (a report built without one): the same options, the flag named
    rep.invocation = Invocation(None)
    assert verdict_sentence(rep).endswith(
        "add `--suite engine`, with the same `beekeeper verify` options as this run.")


def test_figures_that_did_not_settle_raise_the_settle_budget_in_the_command():
    rep = busy_run()
    d = rep.checks[-2]
    assert d.name == "decode.vs_engine@1024"
    rep.checks[-2] = Check(d.name, "SKIP", "the figures did not settle (llama-bench 18.8 +/- "
                           "10.9 tok/s over 3 runs, 58%; error of the figure 33.5%)")
    rep.invocation = Invocation(TYPED + " --settle-budget-s 400")
    assert verdict_sentence(rep) == (
        "Not judged: decode's figures did not settle (their error stayed over 6%); give "
        "`--settle-budget-s` more seconds: "
        "`beekeeper verify --sandbox --suite engine,smoke,decode,ttft,niah "
        "--settle-budget-s 800`.")


def test_a_vram_figure_not_measured_here_says_why_and_not_that_the_host_was_busy():
    """The sampler on the far side of a tunnel: the reason is its own, and the next step is
    to see to it (its words name `--on-host`), never "a quiet host"."""
    gone = VramResult(skipped="skipped: the server (10.0.0.2) is not on this machine; NVML "
                      "here would read this machine's card (run `beekeeper verify --on-host`)")
    rep = report([*SMOKE, *vram_checks(gone, None, 10240.0, None)], ["smoke", "vram"],
                 SuiteResults(vram=gone), command="beekeeper verify --url http://10.0.0.2:8083")
    assert rep.coverage.word == "INCOMPLETE"
    assert verdict_sentence(rep) == (
        "Not judged: VRAM: the server (10.0.0.2) is not on this machine; NVML here would read "
        "this machine's card (run `beekeeper verify --on-host`); run again once that is seen "
        "to: `beekeeper verify --url http://10.0.0.2:8083`.")


def test_decode_judged_by_two_checks_and_two_depths_is_one_phrase():
    """On the reference card decode is judged against the engine and the seed's figure: one
    phrase, the engine's ratio, over both depths."""
    run = engine()
    base = run.baseline
    assert base is not None
    base.decode.append(base.decode[0].__class__(**{**base.decode[0].__dict__,
                                                   "n_depth": 4096, "avg_tok_s": 40.0}))
    near, far = quiet_decode(), decode_run([35.0, 36.0, 37.0])
    far.ctx_tokens = 4096
    checks = [*SMOKE, *decode_checks([near, far], run, CPU, None, cpu=True),
              Check("decode.reference_card", "PASS", "served 38.0 tok/s; needs >= 30")]
    rep = report(checks, ["smoke", "decode"], SuiteResults(decode=[near, far]), run)
    assert rep.coverage.exit_status == EXIT_PASSED
    assert verdict_sentence(rep) == (
        "The server works: it answered and streamed and ran at 0.90 to 0.95 of its engine's "
        "decode speed at 1,024 to 4,096 tokens.")


# -- failed beats not judged; never "works" unless everything asked was judged ------------------

def test_a_failure_beside_a_busy_host_is_broken_not_merely_not_judged():
    rep = niah_failed_run(decode=busy_decode())
    cov = rep.coverage
    assert cov.failed and [a for a, _ in cov.not_judged] == ["decode"]
    said = verdict_sentence(rep)
    assert said.startswith("The server is broken: NIAH found the needle in 3 of 10 prompts")
    assert "(decode was not judged either)" in said
    assert not said.startswith("Not judged") and "works" not in said


@pytest.mark.parametrize("make", [niah_failed_run, busy_run,
                                  lambda: niah_failed_run(decode=busy_decode())])
def test_the_sentence_never_says_works_unless_the_run_passed(make):
    rep = make()
    assert rep.coverage.exit_status != EXIT_PASSED
    assert "works" not in verdict_sentence(rep)
    # the same checks with the failed and unjudged ones taken out: now it works
    rep.checks = [c for c in rep.checks if c.status == "PASS"]
    rep.requested = [a for a in rep.coverage.judged]
    assert verdict_sentence(rep).startswith("The server works: it answered and streamed")


def test_a_run_that_judged_nothing_of_the_server_does_not_say_it_works():
    rep = report(engine_checks(engine()), [], SuiteResults(), engine(),
                 command="beekeeper verify --on-host --suite engine")
    assert rep.coverage.exit_status == EXIT_PASSED
    assert verdict_sentence(rep) == (
        "Nothing failed, but this run judged nothing of the server: add `--suite smoke` (or "
        "`all`) to judge it: `beekeeper verify --on-host --suite smoke,engine`.")


# -- where the sentence appears -------------------------------------------------------------

def test_the_sentence_opens_the_console_before_the_check_lines_which_stay_as_they_were(capsys):
    rep = busy_run()
    print_checks(rep)
    print_summary(rep)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == verdict_sentence(rep)
    assert lines[1:1 + len(rep.checks)] == [f"  {c.line()}" for c in rep.checks]
    assert lines[1 + len(rep.checks)] == summary_line(rep)
    assert summary_line(rep).startswith("verify INCOMPLETE (nothing failed, but not judged: "
                                        "decode; judged: none; ")


def test_every_report_carries_the_sentence(tmp_path, capsys):
    """run_suites against harness.fake_server, the stand-in server: report.json keeps the
    sentence the console printed first, report.md and report.html open with it."""
    import html

    from .harness import _incomplete_run

    data, console = _incomplete_run(tmp_path, capsys)
    sentence = data["verdict"]["sentence"]
    assert sentence.startswith("Not judged: decode had no engine baseline")
    assert sentence in console.splitlines()
    first_check = next(i for i, ln in enumerate(console.splitlines()) if ln.startswith("  ["))
    assert console.splitlines().index(sentence) < first_check
    folder = Path(data["out_dir"])
    md = (folder / "report.md").read_text().splitlines()
    assert md[2] == f"**{sentence}**"
    page = (folder / "report.html").read_text()
    assert f"<p><b>{html.escape(sentence)}</b></p>" in page
    assert page.index(html.escape(sentence)) < page.index("<table>")
    assert json.loads((folder / "report.json").read_text())["verdict"]["word"] == "INCOMPLETE"


# -- the command line the sentence gives ------------------------------------------------------

def test_the_typed_command_is_the_users_line_with_credentials_hidden():
    argv = ["/home/me/.venv/bin/beekeeper", "verify", "--url", "http://me:pw@10.0.0.2:8083",
            "--profile", "cpu-tiny", "--ssh", "-p 2201 me@gpu-box"]
    line = verify_main.typed_command(argv)
    assert line is not None and "pw" not in line
    assert shlex.split(line) == ["beekeeper", "verify", "--url", "http://***@10.0.0.2:8083",
                                 "--profile", "cpu-tiny", "--ssh", "-p 2201 me@gpu-box"]
    assert verify_main.typed_command(["/kit/beekeeper/verify_main.py", "--url",
                                      "http://127.0.0.1:8083?token=s3cret"]) == (
        "python3 -m beekeeper.verify_main --url 'http://127.0.0.1:8083?***'")
    assert verify_main.typed_command(["/usr/bin/pytest", "-q"]) is None


def test_verify_on_host_hands_the_controllers_line_to_the_host(monkeypatch):
    """The host's own command line is not one the user typed: the controller's goes with it
    (--typed-command), and the host's verify_main puts it in the sentence."""
    from .harness import host_args, verify_on_host as on_host

    monkeypatch.setattr(verify_main.sys, "argv",
                        ["beekeeper", "verify", "--on-host", "--ssh", "gpu-box",
                         "--suite", "smoke,decode"])
    host = host_args(on_host(monkeypatch, ["--profile", "cpu-tiny", "--suite",
                                           "smoke,decode"]))
    assert host.typed_command == ("beekeeper verify --on-host --ssh gpu-box --suite "
                                  "smoke,decode")


def test_docs_verify_md_quotes_the_sentences_verify_prints():
    """docs/verify.md's outcomes table gives each outcome's sentence as verify prints it."""
    doc = (Path(__file__).resolve().parents[2] / "docs/verify.md").read_text()
    busy = busy_run()
    busy.invocation = Invocation("beekeeper verify --sandbox --suite engine,smoke,decode")
    for word, code, rep in (("PASSED", EXIT_PASSED, passed_run()),
                            ("FAILED", EXIT_FAILED, niah_failed_run()),
                            ("INCOMPLETE", EXIT_NOT_JUDGED, busy)):
        assert rep.coverage.exit_status == code
        assert f'| `verify {word}` | {code} | "{verdict_sentence(rep)}"' in doc, word
