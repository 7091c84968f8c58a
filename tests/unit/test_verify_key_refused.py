"""A server that wants an API key verify was not given (its /health and /v1/models open, as
llama-server's are, the rest HTTP 401) is not "broken: read the server's log": where a failed
check shows a request refused for its key (the smoke's, or any suite's), the verdict
sentence's next step says the server wants an API key and the option that gives it. Against a
real server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

from beekeeper import cli
from beekeeper.verify.client import ServerClient
from beekeeper.verify.judge import Check, load_checks
from beekeeper.verify.report import Report, SuiteResults, verdict_sentence
from beekeeper.verify.suites import run_load

from .harness import FakeLlama, loopback_llama

KEY = "k3y-the-server-was-started-with"
RUN = ["--profile", "cpu-tiny", "--quick", "--settle-budget-s", "0", "--host-label", "box"]
WANTS_KEY = ("next: the server wants an API key: give the one it was started with in a file, "
             "`{flag} FILE`.")


def sentence(out: Path) -> str:
    (file,) = out.rglob("report.json")
    return str(json.loads(file.read_text())["verdict"]["sentence"])


def test_a_smoke_refused_for_its_key_says_to_give_the_key_not_to_read_the_log(tmp_path,
                                                                               capsys):
    with loopback_llama(FakeLlama(key=KEY)) as url:
        rc = cli.main(["verify", "--url", url, "--suite", "smoke", "--out", str(tmp_path),
                       *RUN])
    out = capsys.readouterr().out
    assert rc == 1
    said = sentence(tmp_path)
    assert said.startswith("The server is broken: it did not answer a basic request "
                           "(smoke.stream: 0 token(s), ttft not measured, error HTTP 401: ")
    assert said.endswith(WANTS_KEY.format(flag="--api-key-file")), said
    assert "server's log" not in said
    assert out.splitlines()[0] == said  # the console opens with the same sentence


def test_the_key_it_names_is_the_one_that_was_missing(tmp_path, capsys):
    key = tmp_path / "api.key"
    key.write_text(KEY + "\n")
    with loopback_llama(FakeLlama(key=KEY)) as url:
        rc = cli.main(["verify", "--url", url, "--suite", "smoke", "--out", str(tmp_path),
                       "--api-key-file", str(key), *RUN])
    assert rc == 0, capsys.readouterr()
    assert sentence(tmp_path).startswith("The server works")


def test_a_suites_request_refused_for_its_key_says_the_same():
    """The load suite's requests refused (HTTP 401): its check, not the smoke's, failed."""
    with loopback_llama(FakeLlama(key=KEY)) as url, ServerClient(url) as client:
        load = run_load(client, clients=1, seconds=0.2, out_tokens=4)
    checks = [Check("smoke.stream", "PASS", "8 token(s)"), *load_checks(load)]
    assert "; first error: HTTP 401: " in checks[-1].detail
    report = Report(profile="cpu-tiny", url=url, started_utc="t", budget_mib=0.0,
                    checks=checks, suites=SuiteResults(load=load), requested=["smoke", "load"])
    said = verdict_sentence(report)
    assert said.startswith(f"The server is broken: {load.failed} of {load.failed} requests "
                           "failed under load; "), said
    assert said.endswith(WANTS_KEY.format(flag="--api-key-file")), said


def test_the_server_behind_a_gateway_refused_names_its_own_key_option(tmp_path, capsys):
    """--suite gateway: the gateway (--url) open, the server behind it (--direct-url) keyed
    and no --direct-api-key-file: its option is the one named."""
    with loopback_llama(FakeLlama()) as gateway, loopback_llama(FakeLlama(key=KEY)) as direct:
        rc = cli.main(["verify", "--url", gateway, "--direct-url", direct, "--suite",
                       "smoke,gateway", "--out", str(tmp_path), *RUN])
    assert rc == 1, capsys.readouterr()
    said = sentence(tmp_path)
    assert said.startswith("The server is broken: gateway.requests_ok failed (8 through the "
                           "gateway (0 failed), 8 direct (8 failed))"), said
    assert said.endswith(WANTS_KEY.format(flag="--direct-api-key-file")), said


def test_a_failure_of_another_kind_still_names_the_servers_log():
    report = Report(profile="cpu-tiny", url="http://127.0.0.1:8083", started_utc="t",
                    budget_mib=0.0, requested=["smoke"],
                    checks=[Check("smoke.stream", "FAIL", "0 token(s), ttft not measured, error "
                                  "HTTP 500: {\"error\": \"HTTP 401 in a message\"}")])
    assert "next: read the server's log" in verdict_sentence(report)


def test_docs_verify_md_quotes_the_key_step():
    doc = (Path(__file__).resolve().parents[2] / "docs/verify.md").read_text()
    assert WANTS_KEY.format(flag="--api-key-file").rstrip(".") in doc
