"""`beekeeper verify` without --api-key-file uses the key the kit deployed the server with
(the root-only file beside deployed.json) where verify found that server from its record:
on this machine, through --ssh/--sandbox's tunnel (read over SSH as root, on standard
output), and on the host with --on-host (the host reads it itself). A key it cannot read is
one line saying why and what to do. Built without SSH (issue 43, point 3)."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from beekeeper import cli, hostverify, tunnel, verify_main
from beekeeper.core import remote as core_remote
from beekeeper.core.deployed import DeployedService, read_record
from beekeeper.core.errors import VerifyError
from beekeeper.verify_main import Keys

KEYLESS = DeployedService(service="llm", container="beekeeper-llm", unit="beekeeper-llm",
                          profile="cpu-tiny", mode="native", image="/x/llama-server",
                          bind_address="0.0.0.0", port=8090, model_path="/m/x.gguf",
                          model_sha256="0" * 64)
RECORD = replace(KEYLESS, api_key=True).to_json()  # a server deployed with a key


def verify_args(*argv: str) -> argparse.Namespace:
    sub = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["verify"].parse_args(list(argv))


@pytest.fixture
def here(monkeypatch, tmp_path):
    """This machine as a host the kit deployed `llm` on, with its key at `key`."""
    key = tmp_path / "api_key"
    key.write_text("sk-deployed-secret\n")
    monkeypatch.setattr(verify_main, "ServicePaths",
                        lambda service: argparse.Namespace(api_key=str(key)))
    for module in (verify_main, cli):
        monkeypatch.setattr(module, "local_manifest",
                            lambda service: RECORD if service == "llm" else None)
    return key


@pytest.fixture
def keys_of(monkeypatch):
    """The keys `beekeeper verify ARGV` hands the suites (--profile and --port given; no
    tunnel and no server here)."""
    seen: dict[str, Any] = {}

    def run_verify(args: argparse.Namespace, url: str, **kw: Any) -> int:
        seen.update(kw)
        return 0

    monkeypatch.setattr(cli, "run_verify", run_verify)
    monkeypatch.setattr(tunnel, "ssh_tunnel", lambda ssh, port, **_: nullcontext("http://x:1"))

    def run(*argv: str) -> Keys:
        rc = cli.main(["verify", "--profile", "cpu-tiny", "--port", "8090", *argv])
        if rc != 0:
            raise VerifyError(f"exit {rc}")
        return seen.pop("keys")
    return run


def no_ssh(*a: Any, **k: Any) -> Any:
    raise AssertionError("no SSH here")


def test_verify_on_this_machine_uses_the_deployed_key(here, keys_of, monkeypatch):
    monkeypatch.setattr(core_remote, "read_over_ssh", no_ssh)
    assert keys_of().api == "sk-deployed-secret"
    # a key given wins; a server named by --url is not assumed to be the deployed one
    given = here.parent / "given"
    given.write_text("sk-given\n")
    assert keys_of("--api-key-file", str(given)).api == "sk-given"
    assert keys_of("--url", "http://10.0.0.9:8090").api is None
    # another service (no deployed.json here), or a server deployed without a key: none
    assert keys_of("--service", "other", "--on-host").api is None
    here.unlink()
    assert keys_of().api is None


def test_a_key_file_a_keyless_deploy_left_is_not_the_servers(here, keys_of, monkeypatch):
    """A deploy without a key leaves the earlier deploy's key file (a rollback to it needs
    it): the record says the server takes none, so verify reads and sends none, and a user
    who is not root is not stopped by a file the server does not use."""
    monkeypatch.setattr(core_remote, "read_over_ssh", no_ssh)
    monkeypatch.setattr(cli, "local_manifest", lambda service: KEYLESS.to_json())
    here.chmod(0o000)  # root-only, as the deploy leaves it; unreadable where not root
    assert keys_of().api is None


def test_a_deployed_key_that_cannot_be_read_is_one_line_with_the_fix(here, monkeypatch,
                                                                     capsys):
    def denied(self: Path, *a: Any, **k: Any) -> str:
        if str(self) == str(here):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **k)

    real = Path.read_text
    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(VerifyError) as e:
        Keys.from_files(verify_args(), read_record(RECORD))
    line = str(e.value)
    assert "\n" not in line and str(here) in line and "Permission denied" in line
    assert "as root" in line and "--api-key-file" in line
    # through the CLI: its one line, exit 2, the key never shown
    rc = cli.main(["verify", "--profile", "cpu-tiny", "--port", "8090"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "as root" in err and "secret" not in err


def test_verify_through_the_ssh_tunnel_reads_the_key_over_ssh_as_root(keys_of, monkeypatch,
                                                                       capsys):
    sent: list[tuple[list[str], str, bool]] = []

    def remote(record: str, answer: tuple[int, str]) -> None:
        """The host: its record (read as the login), then the key (as root)."""
        def read(ssh: list[str], command: str, root: bool = True) -> Any:
            sent.append((ssh, command, root))
            return subprocess.CompletedProcess([], 0, record, "")

        def key(ssh: list[str], command: str) -> Any:
            sent.append((ssh, command, True))
            return subprocess.CompletedProcess([], *answer)

        monkeypatch.setattr(cli, "read_over_ssh", read)
        monkeypatch.setattr(core_remote, "read_over_ssh", key)

    remote(RECORD, (0, "sk-remote-secret\n"))
    args = ("--ssh", "-p 2201 me@gpu-box")
    assert keys_of(*args).api == "sk-remote-secret"
    (ssh, first, as_root), (_, command, then_root) = sent  # the record read once
    assert ssh == ["-p", "2201", "me@gpu-box"]
    assert "/etc/beekeeper/llm/deployed.json" in first and not as_root and then_root
    assert "/etc/beekeeper/llm/api_key" in command and "secret" not in command
    remote(RECORD, (3, ""))  # none stored
    assert keys_of(*args).api is None
    remote(RECORD, (126, ""))  # not root
    with pytest.raises(VerifyError):
        keys_of(*args)
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "on gpu-box" in line and "root" in line
    assert "--api-key-file" in line
    # a server deployed without a key: nothing asked as root, so a login without sudo works
    sent.clear()
    remote(KEYLESS.to_json(), (126, ""))
    assert keys_of(*args).api is None
    assert [r for _, _, r in sent] == [False]


def test_on_host_the_host_reads_its_own_key(here, monkeypatch):
    """--on-host --ssh: nothing is read over SSH on the controller; the entry point on the
    host, run as root against the deployed port, reads the key there."""
    monkeypatch.setattr(core_remote, "read_over_ssh", no_ssh)
    # the record's read as the login: none there (cat's exit 1)
    monkeypatch.setattr(cli, "read_over_ssh", lambda ssh, command, root=True:
                        subprocess.CompletedProcess([], 1, "", ""))
    seen: dict[str, Any] = {}

    def run_on_host(ssh: list[str], label: str, args: argparse.Namespace, port: int,
                    out_root: Path, keys: Keys) -> tuple[int, Path]:
        seen.update(keys=keys)
        return 0, out_root

    monkeypatch.setattr(hostverify, "run_on_host", run_on_host)
    assert cli.main(["verify", "--on-host", "--ssh", "gpu-box", "--profile", "cpu-tiny"]) == 0
    assert seen["keys"].api is None

    def run_verify(args: argparse.Namespace, url: str, **kw: Any) -> int:
        seen.update(url=url, **kw)
        return 0

    monkeypatch.setattr(verify_main, "run_verify", run_verify)
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"api": None, "direct": None})))
    assert verify_main.main(["--url", "http://127.0.0.1:8090", "--keys-on-stdin"]) == 0
    assert seen["keys"].api == "sk-deployed-secret"
    # no keys on stdin at all (none given on the controller): the same
    assert verify_main.main(["--url", "http://127.0.0.1:8090"]) == 0
    assert seen["keys"].api == "sk-deployed-secret"
    # another port is not the deployed server: no key assumed
    assert verify_main.main(["--url", "http://127.0.0.1:9999", "--profile", "cpu-tiny"]) == 0
    assert seen["keys"].api is None


def test_an_empty_api_key_file_means_no_key_on_the_controller_and_on_the_host(here, keys_of,
                                                                            monkeypatch):
    """`--api-key-file ''` is a key given (none): no deployed key, the same answer from
    `beekeeper verify` (cli.verify's `keyed`) and from the host's verify_main (Keys)."""
    monkeypatch.setattr(core_remote, "read_over_ssh", no_ssh)
    assert keys_of("--api-key-file", "").api is None
    assert Keys.from_files(verify_args("--api-key-file", ""), read_record(RECORD)).api is None
    assert Keys(None).or_deployed(verify_args("--api-key-file", ""), read_record(RECORD)).api \
        is None
    assert Keys(None).or_deployed(verify_args(), read_record(RECORD)).api == "sk-deployed-secret"
