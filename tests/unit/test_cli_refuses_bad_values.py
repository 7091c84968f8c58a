"""Every subcommand with values users and careless scripts give: each refused in one line
that names the argument, says what is wrong and the fix, exit 2, and never a traceback;
`--suite all,gateway` (every suite and the gateway) is taken as meant."""

from __future__ import annotations

import argparse
import os

import pytest

from beekeeper import cli, verify_main
from beekeeper.core.profiles import profile_problem

URL = ["--url", "http://127.0.0.1:9"]
VERIFY = ["verify", "--profile", "cpu-tiny", *URL]
PLAN = ["plan", "--profile", "q8-f16-4k"]


def refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """`beekeeper ARGV` in this process: exit 2 and one line on stderr, which is returned.
    Anything raised (a traceback for the user) fails the test."""
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's usage error (OneLineParser)
        rc = e.code
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, (rc, out.err)
    assert lines[0].startswith("beekeeper") and "Traceback" not in out.err
    return lines[0]


@pytest.mark.parametrize("argv, says", [
    # verify
    ([*VERIFY, "--suite", "smoke,"], "--suite 'smoke,': an empty name in the list"),
    ([*VERIFY, "--suite", ""], "--suite '': an empty name"),
    ([*VERIFY, "--suite", "all,gatway"], "'gatway' is not a suite"),
    ([*VERIFY, "--suite", "smoke,,decode"], "an empty name in the list"),
    ([*VERIFY, "--ctx-size", "0"], "argument --ctx-size: '0' is not a number of tokens"),
    ([*VERIFY, "--ctx-size", "-4096"], "'-4096' is not a number of tokens"),
    ([*VERIFY, "--decode-out", "0"], "argument --decode-out"),
    ([*VERIFY, "--ttft-tokens", "-1"], "argument --ttft-tokens"),
    ([*VERIFY, "--ttft-requests", "0"], "'0' is not a number of requests"),
    ([*VERIFY, "--budget-gib", "nan"], "'nan' is not a VRAM budget in GiB"),
    ([*VERIFY, "--budget-gib", "inf"], "'inf' is not a VRAM budget"),
    ([*VERIFY, "--budget-gib", "-3"], "'-3' is not a VRAM budget"),
    ([*VERIFY, "--settle-budget-s", "nan"], "--settle-budget-s nan"),
    ([*VERIFY, "--port", "0"], "argument --port: '0' is not a port"),
    ([*VERIFY, "--port", "70000"], "from 1 to 65535"),
    (["verify", "--profile", "cpu-tiny", "--url", "127.0.0.1:8083"], "not an http(s) URL"),
    (["verify", "--profile", "cpu-tiny", "--url", "http://h:port"], "not a number from 1"),
    (["verify", "--profile", "cpu-tny", *URL], "did you mean 'cpu-tiny'?"),
    ([*VERIFY, "--direct-url", "ftp://x"], "--direct-url 'ftp://x': not an http(s) URL"),
    # plan
    ([*PLAN, "--ctx", "0"], "argument --ctx: '0' is not a number of tokens"),
    ([*PLAN, "--ctx", "-1"], "argument --ctx"),
    ([*PLAN, "--ctx", "4k"], "'4k' is not a number of tokens"),
    ([*PLAN, "--parallel", "0"], "'0' is not a number of slots"),
    ([*PLAN, "--parallel", "-2"], "argument --parallel"),
    ([*PLAN, "--budget-gib", "nan"], "'nan' is not a VRAM budget"),
    ([*PLAN, "--budget-gib=-inf"], "'-inf' is not a VRAM budget"),
    ([*PLAN, "--budget-gib", "0"], "give a number above 0"),
    ([*PLAN, "--cuda-context-mib", "nan"], "argument --cuda-context-mib"),
    (["plan", "--profile", "CPU_TINY"], "did you mean 'cpu-tiny'?"),
    (["plan", "--profile", "q8-turbo4-64"], "did you mean 'q8-turbo4-64k'?"),
    ([*PLAN, "--gguf", ""], "--gguf '': empty"),
    # profiles, matrix, sandbox, demo
    (["profiles", "--budget-gib", "nan"], "argument --budget-gib"),
    (["matrix", "--profiles", "cpu-tiny,cpu-tny", "--sandbox"], "did you mean 'cpu-tiny'?"),
    (["matrix", "--profiles", "cpu-tiny,", "--sandbox"], "an empty name in the list"),
    (["matrix", "--profiles", "cpu-tiny", "--sandbox", "--port", "-1"], "is not a port"),
    (["matrix", "--profiles", "cpu-tiny", "--sandbox", "--budget-gib", "inf"], "budget"),
    (["sandbox", "up", "--ssh-port", "0"], "argument --ssh-port: '0' is not a port"),
    (["demo", "--suite", "smok"], "argument --suite: 'smok' is not a suite"),
])
def test_a_bad_value_is_one_line_and_exit_2(capsys, argv, says):
    assert says in refusal(capsys, argv)


def test_a_look_alike_profile_is_never_printed_as_the_real_one(capsys):
    cyrillic = "\u0441pu-tiny"  # looks like cpu-tiny
    line = refusal(capsys, ["plan", "--profile", cyrillic])
    assert r"(written '\u0441pu-tiny')" in line and "did you mean 'cpu-tiny'?" in line
    assert profile_problem("cpu-tiny") is None
    long = profile_problem("x" * 5000)
    assert long is not None and len(long) < 400 and "5000 characters" in long
    # a long look-alike keeps its ASCII spelling (cut), a short one of many such letters
    # stays one short line
    long_alike = profile_problem("\u0441" + "pu-tiny" * 14)
    assert long_alike is not None and r"(written '\u0441pu-tiny" in long_alike
    cyrillic_name = profile_problem("\u0441" * 70)
    assert cyrillic_name is not None and "(422 characters))" in cyrillic_name


@pytest.mark.parametrize("body, says", [
    (b"", "the file is empty"),
    (b"not a model at all", "not a GGUF file"),
    (b"GGUF\x03\x00\x00\x00", "not a GGUF model the planner can read"),
])
def test_plan_gguf_that_is_not_a_model_is_one_line(capsys, tmp_path, body, says):
    f = tmp_path / "model.gguf"
    f.write_bytes(body)
    line = refusal(capsys, [*PLAN, "--gguf", str(f)])
    assert line.startswith(f"beekeeper plan: --gguf {f}: ") and says in line
    assert "give the model's .gguf" in line


def test_plan_gguf_that_is_a_folder_or_missing(capsys, tmp_path):
    assert "a folder, not a file" in refusal(capsys, [*PLAN, "--gguf", str(tmp_path)])
    assert "no such file" in refusal(capsys, [*PLAN, "--gguf", str(tmp_path / "no.gguf")])


def test_all_and_the_gateway_run_every_suite_and_the_gateway(monkeypatch):
    seen: dict[str, str] = {}

    def run_verify(args: argparse.Namespace, url: str, **kw: object) -> int:
        seen["suite"] = args.suite
        return 0

    monkeypatch.setattr(cli, "run_verify", run_verify)
    assert cli.main([*VERIFY, "--suite", "all,gateway"]) == 0
    assert seen["suite"] == ",".join([*verify_main.SUITES, "gateway"])
    assert sorted(verify_main.suite_names("smoke,smoke,all")) == sorted(verify_main.SUITES)
    assert verify_main.suite_names("all") == ["all"]
    from beekeeper.verify_main import use_checkout_verify

    use_checkout_verify()
    from beekeeper.core.profiles import PROFILES
    from beekeeper.verify.suites import judgeable

    # the suites take the list as verify hands it on (before: "unknown suite(s) ['all']")
    assert "gateway" in judgeable(verify_main.suite_names("all,gateway"), PROFILES["cpu-tiny"])


def test_the_host_entry_point_refuses_as_the_cli_does(capsys):
    rc = verify_main.main(["--url", "http://127.0.0.1:9", "--profile", "cpu-tiny",
                           "--suite", "all,,smoke"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "an empty name in the list" in err
    with pytest.raises(SystemExit) as e:
        verify_main.main(["--url", "http://127.0.0.1:9", "--profile", "cpu-tiny",
                          "--ctx-size", "0"])
    assert e.value.code == 2


def test_rollback_with_nothing_to_roll_back_says_so(capsys, monkeypatch, tmp_path):
    """`beekeeper rollback --local` on a host where nothing of the service was deployed and
    PID 1 is not systemd (a GPU container): no unit path, nothing to roll back."""
    from beekeeper.core import paths

    real = paths.ServicePaths

    def in_tmp(service: str) -> object:
        p = real(service)
        return type("P", (), {k: str(tmp_path) + getattr(p, k) for k in
                              ("unit", "manifest", "compose_file", "program_conf",
                               "api_key")})()

    monkeypatch.setattr(cli, "ServicePaths", in_tmp)
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)  # no sudo: `sh -c` here
    rc = cli.main(["rollback", "--local"])
    out = capsys.readouterr()
    assert rc == 3, out
    assert "nothing to roll back on this host" in out.err
    assert "systemd" not in out.err and ".service" not in out.err and ".prev" not in out.err
    assert "rollback not done: nothing to roll back to" in out.out


def test_rollback_local_as_a_login_asks_sudo_once_first(capsys, monkeypatch, tmp_path):
    """WSL2: `beekeeper rollback --local` as the distro's user, whose sudo wants a password:
    the `sudo -n` line failed ("a password is required", rollback failed (exit 1)); with a
    terminal it asks once (`sudo -v`), as verify does, then runs. A stand-in sudo (first on
    PATH) keeps its cache in a file and runs the command once cached."""
    from beekeeper.core import paths

    log, cache = tmp_path / "calls", tmp_path / "cached"
    sudo = tmp_path / "sudo"
    sudo.write_text(f'#!/bin/sh\necho "$1 $2" >> {log}\n'
                    f'[ "$1" = -v ] && {{ touch {cache}; exit 0; }}\n'
                    f'[ -e {cache} ] || {{ echo "sudo: a password is required" >&2; exit 1; }}\n'
                    'shift; exec "$@"\n')
    sudo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    real = paths.ServicePaths
    monkeypatch.setattr(cli, "ServicePaths", lambda service: type("P", (), {
        k: str(tmp_path) + getattr(real(service), k) for k in
        ("unit", "manifest", "compose_file", "program_conf", "api_key")})())
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cli.sys.stdin, "isatty", lambda: True)
    rc = cli.main(["rollback", "--local"])
    out = capsys.readouterr()
    assert "a password is required" not in out.err, out
    assert rc == 3, out  # it ran as root: nothing of the service here to roll back
    assert log.read_text().split("\n") == ["-n true", "-v ", "-n sh", ""]


@pytest.mark.parametrize(("given", "recorded", "judged"), [
    ([], 24.0, 24.0),  # the record's: the budget the deploy planned the host's card by
    (["--budget-gib", "12"], 24.0, 12.0),  # given: the user's
    ([], None, None),  # none recorded (several GPU services, an older kit): group data's
])
def test_matrix_judges_vram_by_the_budget_the_host_was_deployed_with(monkeypatch, given,
                                                                      recorded, judged):
    """`beekeeper matrix` read the host's deployed.json and still judged VRAM by the
    controller's budget (10 GiB), as verify did: FAILED on a plan the deploy took. The
    matrix's runner records what it is given and ends there."""
    import json
    import subprocess

    from beekeeper import matrix
    from beekeeper.core.config import configured_budget_gib
    from beekeeper.core.deployed import DeployedService

    text = json.dumps({**DeployedService(
        service="llm", unit="beekeeper-llm", container="beekeeper-llm", profile="cpu-tiny",
        mode="native", image="x", bind_address="127.0.0.1", port=8083, model_path="/m.gguf",
        vram_budget_gib=recorded).to_dict()})
    monkeypatch.setattr(cli, "_cat_manifest", lambda ssh, service, root=True:
                        subprocess.CompletedProcess([], 0, text, ""))
    seen: dict = {}

    def runner(*_a, budget_gib=None, **_k):
        seen["budget_gib"] = budget_gib
        raise SystemExit(0)

    monkeypatch.setattr(matrix, "run_matrix", runner)
    with pytest.raises(SystemExit):
        cli.main(["matrix", "--ssh", "root@gpu-box", "--inventory", "inventories/home.py",
                  "--host", "gpu-box", "--profiles", "cpu-tiny", *given])
    assert seen["budget_gib"] == (judged if judged is not None else configured_budget_gib())

