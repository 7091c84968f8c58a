"""`beekeeper verify`'s options are defined once (verify_main.OPTIONS) and `--on-host` passes
every one given on to the host's command line (issue 25: it dropped --decode-ctx and --card);
options that cannot work together are a usage error in one line. Built without SSH."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from beekeeper import cli, hostverify, verify_main
from beekeeper.core.profiles import PROFILES
from beekeeper.verify_main import Keys, host_command

from .harness import host_args, verify_on_host as on_host

# the options that say where verify runs (the controller's own), not how it judges
WHERE = {"-h", "--help", "--url", "--sandbox", "--port", "--on-host", "--ssh"}


def verify_parser() -> argparse.ArgumentParser:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["verify"]


def a_value(action: argparse.Action, folder: Path) -> list[str]:
    """A value for the option that is not its default, as a user would type it."""
    flag = action.option_strings[-1]
    if action.dest.endswith("key_file"):
        (folder / action.dest).write_text(f"sk-{action.dest}\n")
        return [flag, str(folder / action.dest)]
    if action.nargs == 0:  # store_true
        return [flag]
    if action.choices:
        return [flag, sorted(action.choices)[-1]]
    if action.dest == "profile":
        return [flag, sorted(PROFILES)[-1]]
    if action.dest == "slots":  # 1 to 16
        return [flag, "3"]
    if action.dest == "settle_budget_s" or action.type is float:
        return [flag, "7.5"]
    if action.type is not None:  # a whole number (tokens, requests) or an amount (GiB)
        return [flag, "4097"]
    if action.dest == "decode_ctx":
        return [flag, "4096,60000"]
    if action.dest == "direct_url":
        return [flag, "http://10.0.0.2:8083"]
    if action.dest == "suite":  # a name that is not a suite is a usage error
        return [flag, "engine,decode"]
    return [flag, f"/given/{action.dest}"]


def every_option(folder: Path) -> tuple[list[str], list[argparse.Action]]:
    acts = [a for a in verify_parser()._actions
            if a.option_strings and not set(a.option_strings) & WHERE]
    return [x for a in acts for x in a_value(a, folder)], acts


def test_every_option_given_to_verify_on_host_reaches_the_hosts_command_line(monkeypatch,
                                                                           tmp_path):
    given, acts = every_option(tmp_path)
    assert {"--decode-ctx", "--card", "--llama-bench", "--engine-image", "--model",
            "--budget-gib", "--suite", "--decode-out", "--ctx-size", "--quick",
            "--engine-gpu", "--direct-url", "--profile", "--slots"} <= {
                a.option_strings[-1] for a in acts}
    seen = on_host(monkeypatch, given)
    host = host_args(seen)
    mine = seen["args"]
    for a in acts:
        if a.option_strings[-1] in verify_main.NOT_FORWARDED:
            continue
        assert getattr(host, a.dest) == getattr(mine, a.dest), a.option_strings[-1]
    assert host.url == "http://127.0.0.1:8083" and host.host_label == "/given/host_label"
    assert host.out == "/var/lib/beekeeper/reports/T"  # the host's folder, brought back
    assert host.keys_on_stdin and seen["keys"] == Keys("sk-api_key_file",
                                                       "sk-direct_api_key_file")


def test_a_key_file_that_is_not_there_is_one_line(capsys, tmp_path):
    rc = cli.main(["verify", "--url", "http://127.0.0.1:9", "--profile", "cpu-tiny",
                   "--api-key-file", str(tmp_path / "nokey")])
    assert "nokey: No such file or directory" in _one_line_usage_error(capsys, rc)


def test_the_keys_travel_on_standard_input_never_the_command_line(monkeypatch, tmp_path):
    key, direct = tmp_path / "key", tmp_path / "direct"
    key.write_text("sk-server-secret\n")
    direct.write_text("sk-direct-secret\n")
    seen = on_host(monkeypatch, ["--profile", "cpu-tiny", "--api-key-file", str(key),
                                 "--direct-api-key-file", str(direct)])
    line = host_command(seen["args"], "py", 8083, "/o", "gpu-box", seen["keys"])
    assert "secret" not in line and str(tmp_path) not in line and "--keys-on-stdin" in line
    assert json.loads(seen["keys"].to_stdin()) == {"api": "sk-server-secret",
                                                   "direct": "sk-direct-secret"}
    # no key: nothing on stdin, no flag
    none = on_host(monkeypatch, ["--profile", "cpu-tiny"])
    assert none["keys"].to_stdin() is None
    assert "--keys-on-stdin" not in host_command(none["args"], "py", 1, "/o", "h", none["keys"])
    assert none["label"] == "gpu-box"  # the host's name, not the controller's
    assert none["args"].budget_gib is not None  # the controller's budget, sent on


def test_the_budget_the_controller_configured_reaches_the_host(monkeypatch):
    from beekeeper.core import config

    monkeypatch.setattr(config, "configured_budget_gib", lambda: 23.5)
    host = host_args(on_host(monkeypatch, ["--profile", "q8-turbo4-64k"]))
    assert host.budget_gib == 23.5


def test_the_vram_budget_is_the_given_else_the_recorded_else_the_group_datas(monkeypatch):
    """One order for every command (verify_main.vram_budget_gib): --budget-gib, else the
    budget the host's deployed.json records, else the controller's group data (cli._budget;
    verify on a host: None, the profile's)."""
    from beekeeper.core import config
    from beekeeper.core.deployed import DeployedService
    from beekeeper.verify_main import vram_budget_gib

    base = {"service": "llm", "unit": "beekeeper-llm.service", "container": "beekeeper-llm",
            "profile": "q4km-f16-32k", "model_sha256": None, "mode": "container",
            "runtime": "systemd", "port": 8084, "ctx_size": 32768, "bind_address": "127.0.0.1",
            "image": "beekeeper/llama-server:x", "model_path": "/srv/beekeeper/models/m.gguf"}
    recorded = DeployedService.from_json(json.dumps({**base, "vram_budget_gib": 24}))
    unrecorded = DeployedService.from_json(json.dumps(base))
    assert vram_budget_gib(12.0, recorded, lambda: 8.0) == 12.0
    assert vram_budget_gib(None, recorded, lambda: 8.0) == 24
    assert vram_budget_gib(None, unrecorded, lambda: 8.0) == 8.0
    assert vram_budget_gib(None, None, lambda: None) is None
    monkeypatch.setattr(config, "configured_budget_gib", lambda: 23.5)
    assert cli._budget(argparse.Namespace(budget_gib=None), recorded) == 24
    assert cli._budget(argparse.Namespace(budget_gib=None), None) == 23.5
    assert cli._budget(argparse.Namespace(budget_gib=12), recorded) == 12.0


def _one_line_usage_error(capsys: pytest.CaptureFixture[str], rc: int) -> str:
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err, err
    return err


def test_engine_image_without_model_is_a_usage_error(capsys, monkeypatch):
    def no_host(*a: Any, **k: Any) -> Any:
        raise AssertionError("nothing may run on a host")

    monkeypatch.setattr(hostverify, "run_on_host", no_host)
    base = ["verify", "--profile", "q8-turbo4-64k", "--engine-image", "ghcr.io/x/y:1"]
    for extra in (["--url", "http://127.0.0.1:9"], ["--on-host", "--ssh", "gpu-box"]):
        err = _one_line_usage_error(capsys, cli.main([*base, *extra]))
        assert "--engine-image needs --model PATH" in err
    err = _one_line_usage_error(capsys, verify_main.main(
        ["--url", "http://127.0.0.1:9", "--profile", "q8-turbo4-64k",
         "--engine-image", "ghcr.io/x/y:1"]))
    assert "--engine-image needs --model PATH" in err


def test_a_decode_ctx_that_is_not_sizes_is_a_usage_error(capsys):
    rc = cli.main(["verify", "--url", "http://127.0.0.1:9", "--profile", "cpu-tiny",
                   "--decode-ctx", "4k,60k"])
    assert "e.g. 4096,60000" in _one_line_usage_error(capsys, rc)


def test_on_host_alone_is_this_machine():
    """`@local`: the controller is the host; --on-host alone verifies the server here."""
    args = verify_parser().parse_args(["--on-host", "--profile", "cpu-tiny", "--port", "8090"])
    assert cli.local_url(args) == "http://127.0.0.1:8090"
    args = verify_parser().parse_args(["--profile", "cpu-tiny"])
    assert cli.local_url(args) is None


def test_ssh_verifies_that_host_beside_a_server_deployed_here(monkeypatch):
    """A controller with a server of its own (a deployed.json here): `--ssh HOST` still
    reaches HOST's server through the tunnel, not this machine's on 127.0.0.1."""
    monkeypatch.setattr(cli, "local_manifest", lambda service: '{"port": 8090}')
    here = verify_parser().parse_args(["--profile", "cpu-tiny", "--port", "8090"])
    assert cli.local_url(here) == "http://127.0.0.1:8090"
    for remote in (["--ssh", "gpu-box"], ["--sandbox"]):
        args = verify_parser().parse_args(["--profile", "cpu-tiny", "--port", "8090", *remote])
        assert cli.local_url(args) is None, remote


def test_verify_main_reads_the_keys_from_stdin(monkeypatch):
    import io

    seen: dict[str, Any] = {}

    def run_verify(args: argparse.Namespace, url: str, **kw: Any) -> int:
        seen.update(url=url, **kw)
        return 0

    monkeypatch.setattr(verify_main, "run_verify", run_verify)
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"api": "k1", "direct": null}'))
    assert verify_main.main(["--url", "http://127.0.0.1:8083", "--profile", "cpu-tiny",
                             "--keys-on-stdin"]) == 0
    assert seen["keys"] == Keys("k1", None)


def test_ttft_tokens_and_requests_set_the_ttft_suites_size_over_quicks():
    """--quick alone measures TTFT at 512 tokens; --ttft-tokens/--ttft-requests give the
    seed's 60,000-token TTFT in a short run (the H200 deploy record's verify)."""
    profile = PROFILES["q8-turbo4-64k"]
    quick = verify_main.sizes_of(verify_main.parser().parse_args(
        ["--url", "http://127.0.0.1:8083", "--profile", "q8-turbo4-64k", "--quick",
         "--decode-ctx", "4096,60000"]), profile)
    assert (quick.ttft_tokens, quick.ttft_requests) == (512, 5)
    args = verify_main.parser().parse_args(
        ["--url", "http://127.0.0.1:8083", "--profile", "q8-turbo4-64k", "--quick",
         "--decode-ctx", "4096,60000",
         "--ttft-tokens", "60000", "--ttft-requests", "3"])
    sizes = verify_main.sizes_of(args, profile)
    assert (sizes.ttft_tokens, sizes.ttft_requests) == (60000, 3)
    assert sizes.decode_ctx_tokens == [4096, 60000] and sizes.decode_out_tokens == 160


@pytest.mark.skipif(not __import__("shutil").which("ssh"), reason="no ssh client here")
def test_ssh_that_cannot_reach_the_host_is_said_so_not_a_missing_record():
    """The real ssh client against a closed loopback port (exit 255): verify says ssh could
    not reach the host, with ssh's own words, not "no deployed.json of service 'llm'"
    (which sent a user whose agent had lost its key to --profile)."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        ssh = f"-p {port} -o BatchMode=yes -o ConnectTimeout=5 me@127.0.0.1"
        args = verify_parser().parse_args(["--ssh", ssh])
        with pytest.raises(cli.UsageError) as e:
            cli._verify(args)
    said = str(e.value)
    assert said.startswith("ssh could not reach the host") and "refused" in said, said
    assert "deployed.json" not in said and f"`ssh {ssh} true`" in said


@pytest.mark.parametrize(("ssh", "label"), [
    ("me@gpu-box.lan", "gpu-box.lan"), ("me@gpu-box.lan -p 2222", "gpu-box.lan"),
    ("-p 2222 -i keys/id me@gpu-box.lan", "gpu-box.lan"), ("-vp 22 gpu-box", "gpu-box"),
    ("ssh://me@gpu-box.lan:2222", "gpu-box.lan")])
def test_the_report_is_labelled_by_the_host_ssh_reaches_not_its_last_word(ssh, label):
    assert cli._ssh_target(verify_parser().parse_args(["--ssh", ssh]))[1] == label


def test_url_with_on_host_and_a_host_is_refused_not_dropped():
    """`--url` was left out of the host's command line with --on-host --ssh, so a gateway's
    verify measured the server against itself; now it is a usage error naming the way."""
    for where in (["--ssh", "me@gpu-box.lan"], ["--sandbox"]):
        args = verify_parser().parse_args(["--on-host", *where, "--url",
                                           "http://192.168.1.50:4000/model/q8-turbo4-64k",
                                           "--suite", "gateway", "--profile", "cpu-tiny"])
        said = verify_main.usage_error(args)
        assert said is not None and said.startswith("--url with --on-host and a host"), said
    here = verify_parser().parse_args(["--url", "http://127.0.0.1:4000", "--suite", "gateway",
                                       "--direct-url", "http://127.0.0.1:8083"])
    assert verify_main.usage_error(here) is None


def test_no_record_for_the_service_names_the_service_option():
    args = verify_parser().parse_args(["--ssh", "me@gpu-box.lan"])
    said = verify_main.from_deployed(args, None, "gpu-box.lan")
    assert said is not None and "--service NAME" in said and "'llm'" in said
