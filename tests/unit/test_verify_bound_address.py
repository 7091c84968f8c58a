"""`beekeeper verify` reaches a service bound to one address of its host (host data
`bind_address`, e.g. docs/gateway.md's backends on 10.0.0.11) where it listens: the record's
bind address, not 127.0.0.1, on which such a server refuses every connection (the verify
then FAILED for its own URL). Built without a server: the suites' entry point is where the
test stops, as in test_verify_deployed_shape.py."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from beekeeper import cli, verify_main
from beekeeper.core.deployed import DeployedService
from beekeeper.verify_main import Keys, host_command

PROFILE = "cpu-tiny"


def record(bind: str) -> str:
    return DeployedService(service="llm", container="beekeeper-llm", unit="beekeeper-llm",
                           profile=PROFILE, mode="native", image="/x/llama-server",
                           bind_address=bind, port=8083, model_path="/m/x.gguf",
                           model_sha256="0" * 64, version=2).to_json()


@pytest.fixture
def url_for(monkeypatch):
    """The URL `beekeeper verify` (this machine, a record here) hands the suites, for a
    record whose bind address is `bind`."""
    seen: dict[str, Any] = {}

    def run_verify(args: argparse.Namespace, url: str, **kw: Any) -> int:
        seen["url"] = url
        return 0

    monkeypatch.setattr(cli, "run_verify", run_verify)

    def run(bind: str) -> str:
        monkeypatch.setattr(cli, "local_manifest",
                            lambda service: record(bind) if service == "llm" else None)
        assert cli.main(["verify"]) == 0
        return str(seen.pop("url"))
    return run


@pytest.mark.parametrize("bind, url", [
    ("127.0.0.2", "http://127.0.0.2:8083"),
    ("::1", "http://[::1]:8083"),
    ("0.0.0.0", "http://127.0.0.1:8083"),
    ("::", "http://127.0.0.1:8083"),
    ("127.0.0.1", "http://127.0.0.1:8083"),
])
def test_verify_here_reaches_the_server_at_its_bind_address(url_for, bind, url):
    assert url_for(bind) == url


def test_verify_on_the_host_asks_the_host_for_the_server_at_its_bind_address():
    args = verify_main.parser().parse_args(["--url", "http://x:1"])
    assert verify_main.from_deployed(args, record("10.0.0.11"), "the host") is None
    line = host_command(args, "python3", 8083, "reports/out", "gpu", Keys())
    assert "--url http://10.0.0.11:8083" in line, line


def test_verify_of_another_port_takes_nothing_of_the_record(monkeypatch):
    """`--port` other than the record's is another server (one started by hand beside the
    deployed one): its address and shape are not the record's."""
    seen: dict[str, Any] = {}

    def run_verify(args: argparse.Namespace, url: str, **kw: Any) -> int:
        seen.update(url=url, profile=verify_main.profile_of(args))
        return 0

    bound = DeployedService.from_json(record("127.0.0.2"))
    two_slots = DeployedService(**{**bound.__dict__, "slots": 2}).to_json()
    monkeypatch.setattr(cli, "run_verify", run_verify)
    monkeypatch.setattr(cli, "local_manifest", lambda service: two_slots)
    assert cli.main(["verify", "--profile", PROFILE, "--port", "9000"]) == 0
    assert seen["url"] == "http://127.0.0.1:9000"
    assert seen["profile"].server.parallel == 1
    assert cli.main(["verify", "--profile", PROFILE, "--port", "8083"]) == 0
    assert seen["url"] == "http://127.0.0.2:8083"
    assert seen["profile"].server.parallel == 2


def test_verify_through_ssh_tunnels_to_the_bind_address(monkeypatch):
    """--ssh: the tunnel's far end is where the host reaches the server (its record's bind
    address), not the host's loopback."""
    import subprocess
    from contextlib import nullcontext

    from beekeeper import tunnel

    far: list[str] = []

    def ssh_tunnel(ssh: list[str], port: int, **kw: Any) -> Any:
        far.append(f"{kw.get('remote_host', '127.0.0.1')}:{port}")
        return nullcontext("http://127.0.0.1:1")

    monkeypatch.setattr(cli, "run_verify", lambda args, url, **kw: 0)
    monkeypatch.setattr(tunnel, "ssh_tunnel", ssh_tunnel)
    monkeypatch.setattr(cli, "read_over_ssh", lambda ssh, command, root=True:
                        subprocess.CompletedProcess([], 0, record("10.0.0.11"), ""))
    assert cli.main(["verify", "--ssh", "gpu-box", "--api-key-file", ""]) == 0
    assert far == ["10.0.0.11:8083"]


def test_matrix_tunnels_to_the_bind_address(monkeypatch):
    """`beekeeper matrix --ssh`: each profile's run reaches the service through a tunnel whose
    far end is the record's bind address, as verify's."""
    import subprocess
    from contextlib import nullcontext

    from beekeeper import matrix, tunnel

    far: list[str] = []

    def ssh_tunnel(ssh: list[str], port: int, **kw: Any) -> Any:
        far.append(f"{kw.get('remote_host', '127.0.0.1')}:{port}")
        return nullcontext("http://127.0.0.1:1")

    def run_matrix(profiles: list[str], deploy: Any, connect: Any, *a: Any, **kw: Any) -> Any:
        with connect():
            pass
        return None, "cpu-tiny", "reports/matrix"

    monkeypatch.setattr(tunnel, "ssh_tunnel", ssh_tunnel)
    monkeypatch.setattr(matrix, "run_matrix", run_matrix)
    monkeypatch.setattr(cli, "_cat_manifest", lambda ssh, service, root=True:
                        subprocess.CompletedProcess([], 0, record("10.0.0.11"), ""))
    assert cli.main(["matrix", "--profiles", "cpu-tiny", "--ssh", "gpu-box", "--inventory",
                     "inventories/home.py", "--host", "gpu-box"]) == 0
    assert far == ["10.0.0.11:8083"]
