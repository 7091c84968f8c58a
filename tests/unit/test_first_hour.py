"""The CLI as a new user meets it (issue 34): every usage error one line with exit 2, help on
every option, --version, `profiles | head` without a traceback, an unknown --card refused by
`profiles` and `plan` alike, and verify taking the profile, port and context from what was
deployed rather than guessing 8083. The commands run as the user runs them: the installed
`beekeeper` in .venv/bin, in a subprocess."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from beekeeper import __version__
from beekeeper.cli import parser
from beekeeper.verify_main import from_deployed

ROOT = Path(__file__).resolve().parents[2]
BEEKEEPER = str(Path(sys.executable).parent / "beekeeper")


def run(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([BEEKEEPER, *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, **kw)


@pytest.mark.parametrize("argv, says", [
    (["verify", "--suite", "smok", "--profile", "cpu-tiny", "--url", "http://127.0.0.1:9"],
     "--suite 'smok': 'smok' is not a suite"),
    (["verify", "--profile", "no-such", "--url", "http://127.0.0.1:9"],
     "unknown profile 'no-such'"),
    (["plan"], "the following arguments are required: --profile"),
    (["plan", "--profile", "q8-turbo4-64k", "--card", "RTX 409"], "--card 'RTX 409': not a card"),
    (["profiles", "--card", "RTX 9999"], "--card 'RTX 9999': not a card the kit knows"),
    (["profiles", "--budget-gib", "ten"], "'ten' is not a VRAM budget in GiB"),
    (["nosuch"], "invalid choice"),
    (["plan", "--profile", "cpu-tiny", "--gguf", "/no/such.gguf"], "--gguf /no/such.gguf: no"),
    (["matrix", "--profiles", "cpu-tiny"], "give --sandbox, or --ssh"),
    (["report", "/no/such", "/no/such2"], "not a readable report.json"),
])
def test_a_usage_error_is_one_line_and_exit_2(argv, says):
    p = run(*argv)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("beekeeper")


def test_a_known_card_still_plans_by_the_name_nvidia_smi_prints():
    for argv in (["profiles", "--card", "NVIDIA GeForce RTX 3090"],
                 ["plan", "--profile", "q8-turbo4-64k", "--card", "NVIDIA H200"]):
        p = run(*argv)
        assert p.returncode == 0 and p.stderr == "", p.stderr


def test_version():
    p = run("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"beekeeper {__version__}"


def test_every_option_of_every_command_has_help():
    missing = []

    def walk(p: argparse.ArgumentParser, name: str) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, sp in a.choices.items():
                    walk(sp, sub)
            elif not a.help or a.help == argparse.SUPPRESS:
                missing.append(f"{name} {a.option_strings or a.dest}")

    walk(parser(), "beekeeper")
    assert missing == []


def test_profiles_into_head_ends_quietly():
    p = subprocess.run(f"{BEEKEEPER} profiles | head -1", shell=True, capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert p.stdout.startswith("profile ") and len(p.stdout.splitlines()) == 1
    assert p.stderr == "", p.stderr  # before: BrokenPipeError and its traceback


def args_for(**over):
    base = dict(profile=None, port=None, ctx_size=None, service="llm")
    return argparse.Namespace(**{**base, **over})


def manifest(**over) -> str:
    """A deployed.json as tasks/service.py writes it (the 3090 example: port 8084)."""
    d = {"service": "llm", "unit": "beekeeper-llm.service", "container": "beekeeper-llm",
         "profile": "q4km-f16-32k", "model_sha256": None,
         "mode": "container", "runtime": "systemd", "port": 8084, "ctx_size": 32768,
         "bind_address": "127.0.0.1", "image": "beekeeper/llama-server:x",
         "model_path": "/srv/beekeeper/models/m.gguf", **over}
    return json.dumps(d)


def test_verify_takes_profile_and_port_from_what_was_deployed(capsys):
    args = args_for()
    assert from_deployed(args, manifest(), "gpu-box") is None
    assert (args.profile, args.port, args.ctx_size) == ("q4km-f16-32k", 8084, None)
    assert "profile q4km-f16-32k, port 8084, from what was deployed on gpu-box" in \
        capsys.readouterr().out
    # a context set in host data follows the record's server (its port, given or not)
    args = args_for(port=8084)
    assert from_deployed(args, manifest(ctx_size=8192), "gpu-box") is None
    assert (args.port, args.ctx_size) == (8084, 8192)
    # another port is another server (test_verify_bound_address.py): not its context
    args = args_for(port=9000)
    assert from_deployed(args, manifest(ctx_size=8192), "gpu-box") is None
    assert (args.port, args.ctx_size) == (9000, None)


def test_verify_judges_vram_by_the_budget_the_host_was_deployed_with(capsys):
    """A pod's quickstart sets BEEKEEPER_VRAM_BUDGET_GIB=24: verify on the host judged the
    rise against the controller's default 10 GiB and said FAILED on a plan the deploy took."""
    args = args_for(budget_gib=None)
    assert from_deployed(args, manifest(vram_budget_gib=24), "gpu-box") is None
    assert args.budget_gib == 24
    assert "VRAM budget 24 GiB" in capsys.readouterr().out
    given = args_for(budget_gib=12.0)  # --budget-gib given: the user's
    assert from_deployed(given, manifest(vram_budget_gib=24), "gpu-box") is None
    assert given.budget_gib == 12.0
    other = args_for(port=9000, budget_gib=None)  # another server: not its budget
    assert from_deployed(other, manifest(vram_budget_gib=24), "gpu-box") is None
    assert other.budget_gib is None
    old = args_for(budget_gib=None)  # a record of an older kit: verify's default
    assert from_deployed(old, manifest(), "gpu-box") is None
    assert old.budget_gib is None


def test_verify_without_a_deployment_or_profile_says_what_to_give():
    problem = from_deployed(args_for(), None, "this machine")
    assert problem is not None and problem.startswith("give --profile NAME")
    assert from_deployed(args_for(profile="cpu-tiny"), None, "here") is None
    bad = from_deployed(args_for(), manifest(profile="gone"), "gpu-box")
    assert bad is not None and "'gone'" in bad


def test_verify_with_no_host_and_no_profile_is_one_line_exit_2():
    p = run("verify", "--url", "http://127.0.0.1:9", "--suite", "smoke")
    if Path("/etc/beekeeper/llm/deployed.json").exists():
        pytest.skip("this machine has a kit-deployed server: its profile would be read")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "give --profile NAME" in p.stderr


def test_verify_on_the_host_asks_sudo_for_a_password_once_where_sudo_n_cannot(
        tmp_path, monkeypatch):
    """A WSL2 user's sudo wants a password, and after a long deploy its cache has expired:
    the engine's `sudo -n` steps would each fail and verify end INCOMPLETE. With a terminal,
    verify asks sudo once (`sudo -v`) before them; without one, or where `sudo -n` works,
    it asks nothing. A stand-in sudo (first on PATH) keeps its cache in a file."""
    import os

    from beekeeper import verify_main

    log, cache = tmp_path / "calls", tmp_path / "cached"
    sudo = tmp_path / "sudo"
    sudo.write_text(f'#!/bin/sh\necho "$*" >> {log}\n'
                    f'[ "$1" = -v ] && {{ touch {cache}; exit 0; }}\n[ -e {cache} ]\n')
    sudo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(verify_main.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(verify_main.sys.stdin, "isatty", lambda: True)
    # suites that need no root (the default smoke) ask nothing
    args = verify_main.argparse.Namespace(suite="smoke,decode", llama_bench=None,
                                          engine_image=None, model=None)
    verify_main.engine_shell(args, [], "this machine")
    assert not log.exists()
    monkeypatch.setattr(verify_main.sys.stdin, "isatty", lambda: False)
    verify_main.sudo_once()
    assert not log.exists()  # no terminal: nothing asked
    monkeypatch.setattr(verify_main.sys.stdin, "isatty", lambda: True)
    verify_main.sudo_once()
    assert log.read_text().split("\n") == ["-n true", "-v", ""]
    verify_main.sudo_once()  # cached now: `sudo -n` answers
    assert log.read_text().split("\n") == ["-n true", "-v", "-n true", ""]
    cache.unlink()
    verify_main.engine_shell(verify_main.argparse.Namespace(
        suite="all", llama_bench=None, engine_image=None, model=None), [], "this machine")
    assert log.read_text().split("\n")[-3:] == ["-n true", "-v", ""]  # the engine's: asked
