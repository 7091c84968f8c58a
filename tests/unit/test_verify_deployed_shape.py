"""`beekeeper verify` sizes its requests by the context and slots the server was deployed with
(deployed.json's ctx_size and slots, host data `ctx_size`/`slots`), whichever of --profile and
--port the user gave: both name what the record names already, neither is a reason to size
every request for the profile's one slot (a 60K decode prompt into a 32K slot is refused by
the server, and the run FAILED for verify's own sizes). Built without a server: the suites'
entry point is where the test stops, as in test_verify_deployed_key.py."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from beekeeper import cli, verify_main
from beekeeper.core.deployed import DeployedService
from beekeeper.core.profiles import PROFILES

PROFILE = "q8-turbo4-64k"
RECORD = DeployedService(service="llm", container="beekeeper-llm", unit="beekeeper-llm",
                         profile=PROFILE, mode="native", image="/x/llama-server",
                         bind_address="127.0.0.1", port=8083, model_path="/m/x.gguf",
                         model_sha256="0" * 64, slots=2,
                         ctx_size_tokens=PROFILES[PROFILE].server.ctx_size, version=2).to_json()


@pytest.fixture
def sized(monkeypatch):
    """The profile `beekeeper verify ARGV` hands the suites, on a machine where the kit
    deployed `llm` with 2 slots."""
    seen: dict[str, Any] = {}

    def run_verify(args: argparse.Namespace, url: str, **kw: Any) -> int:
        seen["profile"] = verify_main.profile_of(args)
        return 0

    monkeypatch.setattr(cli, "run_verify", run_verify)
    monkeypatch.setattr(cli, "local_manifest",
                        lambda service: RECORD if service == "llm" else None)

    def run(*argv: str) -> Any:
        assert cli.main(["verify", *argv]) == 0
        return seen.pop("profile")
    return run


def test_verify_sizes_by_the_deployed_slots_with_profile_and_port_given(sized):
    assert PROFILES[PROFILE].server.parallel == 1
    assert sized().server.parallel == 2
    assert sized("--profile", PROFILE).server.parallel == 2
    # the same port the record names, given as well: the record's slots are dropped today
    assert sized("--profile", PROFILE, "--port", "8083").server.parallel == 2
