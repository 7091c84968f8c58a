import fcntl
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from beekeeper import sandbox
from beekeeper.core.cache import cpu_source_tarball, pypi_model
from beekeeper.core.profiles import PROFILES

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
        # one reverse tunnel per sandbox host, by container name
        self.tunnels: dict[str, ReverseTunnel] = {}
        self.add_host(sandbox.CONTAINER)

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.forge.port, self.hub.port, self.hub.storage_port)

    def add_host(self, name: str) -> None:
        """Let another sandbox host reach the stand-ins on its own loopback."""
        self.tunnels[name] = ReverseTunnel(sandbox.ssh_options(sandbox.load_state(name)),
                                           list(self.ports))
        self.ensure_tunnel(name)

    def ensure_tunnel(self, name: str | None = None) -> None:
        """(Re)open the tunnels (or one) and wait until the host's loopback ports answer."""
        for host in [name] if name else list(self.tunnels):
            self._ensure_one(host)

    def _ensure_one(self, name: str) -> None:
        tunnel = self.tunnels[name]
        for _ in range(3):
            if self._reachable(name):
                return
            if tunnel.proc is not None and tunnel.proc.poll() is None:
                tunnel.close()
            tunnel.ensure()
            for _ in range(30):
                time.sleep(0.5)
                if self._reachable(name):
                    return
        raise RuntimeError(f"the reverse tunnel to sandbox host {name} did not come up")

    def _reachable(self, name: str) -> bool:
        return all(helpers.sandbox_exec(f"exec 3<>/dev/tcp/127.0.0.1/{p}", name).returncode == 0
                   for p in self.ports)

    def close(self) -> None:
        for tunnel in self.tunnels.values():
            tunnel.close()
        self.forge.close()
        self.hub.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Where the tier runs as two lanes (scripts/test.sh), a test marked `quiet` (it judges
    speed) runs alone: it takes the lanes' lock exclusively, every other test shared, each
    for its whole run, the set-up of the module and session fixtures it starts included, so
    the other lane waits at its next test and its current one ends first."""
    if not helpers.LANE:
        yield
        return
    quiet = item.get_closest_marker("quiet") is not None
    with helpers.QUIET_LOCK.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        yield  # the lock goes with the file's closing


@pytest.fixture(scope="session")
def fresh_sandbox(tmp_path_factory):
    """A new sandbox host: no Docker engine, no image, no model (removed first). Its
    inventory builds from the git forge stand-in at a full commit (the real source path)."""
    # the side lane's set-up (a host, the stand-ins, Docker) after the main lane's build,
    # which its CPU would slow, not beside it
    built = helpers.wait_for_main_build() if helpers.LANE == "side" else None
    if os.environ.get("BEEKEEPER_TEST_REUSE_SANDBOX") != "1":  # a developer's quick re-run
        sandbox.down(purge=True)
    with ThreadPoolExecutor(1) as pool:  # downloads beside the host's debootstrap
        fetched = pool.submit(lambda: (pypi_model(PROFILES["cpu-tiny"].model),
                                       pypi_model(PROFILES["cpu-smollm"].model),
                                       cpu_source_tarball()))
        state = sandbox.up()
        fetched.result()
    if helpers.LANE != "side":  # the side lane's modules use no Debian 13 host
        _prepare_second_release()
    standins = StandIns(tmp_path_factory.mktemp("standins"))
    os.environ["BEEKEEPER_MODEL_PINS"] = str(tmp_path_factory.mktemp("pins") / "pins.json")
    sandbox.write_host_data(standins_host_data(standins))
    standins.ensure_tunnel()
    helpers.STANDINS = standins
    if built is not None:
        _take_the_main_build(built)
    yield state
    helpers.STANDINS = None
    sandbox.write_host_data(None)
    for name in list(standins.tunnels)[1:]:
        sandbox.write_host_data(None, name)
    standins.close()


def _take_the_main_build(tag: str) -> None:
    """The side lane's first host: its Docker engine (stage `provision`), then the main
    lane's server image `tag` copied in, so that no module here builds."""
    run = helpers.deploy("--data", 'stages=["provision"]')
    assert run.rc == 0, run.out[-3000:]
    assert helpers.copy_image(tag, helpers.MAIN_HOST, sandbox.CONTAINER), tag
    print(f"\n[sandbox] the side lane's first host took {tag} from {helpers.MAIN_HOST}")


_SECOND_IMAGES: list[threading.Thread] = []


def _prepare_second_release() -> None:
    """Make the Debian 13 host's images (debootstrap, the host image: mostly downloads and
    unpacking) while the first host builds its server image (compiling): the second host,
    needed later, then only starts. A failure here is left to `sandbox.up`, which makes
    them again and says why."""
    def prepare() -> None:
        try:
            sandbox.prepare("trixie")
        except Exception as e:  # noqa: BLE001 (up() retries and reports)
            print(f"[sandbox] preparing the Debian 13 images ahead failed: {e}")

    thread = threading.Thread(target=prepare, name="trixie-images", daemon=True)
    thread.start()
    _SECOND_IMAGES.append(thread)


def standins_host_data(standins: StandIns) -> dict[str, object]:
    """The source at a full commit on the git stand-in, models from the Hub stand-in."""
    return {"source": {"git": standins.git_url, "ref": standins.commit},
            "hf_endpoint": standins.hub.url}


@pytest.fixture(scope="session")
def trixie_sandbox(fresh_sandbox, standins):
    """A second sandbox host beside the first, from Debian 13 (trixie), on the sandboxes'
    own network, created new (no Docker engine, no image, no model), with the same stand-ins.
    Its server image is copied from the first host when that one has built it (same inputs,
    same tag: the build is shared, see helpers.share_server_image)."""
    yield _new_second_host(standins)
    sandbox.write_host_data(None, helpers.SECOND)


def _new_second_host(standins: StandIns) -> sandbox.SandboxState:
    name = helpers.SECOND
    for thread in _SECOND_IMAGES:
        thread.join()
    if os.environ.get("BEEKEEPER_TEST_REUSE_SANDBOX") != "1":
        sandbox.down(purge=True, name=name)
    state = sandbox.up(ssh_port=sandbox.DEFAULT_SSH_PORT + 1, name=name, release="trixie")
    sandbox.write_host_data(standins_host_data(standins), name)
    if name in standins.tunnels:  # the host is new: so is its SSH host key
        standins.tunnels[name].close()
    standins.add_host(name)
    return state


@pytest.fixture(scope="module")
def new_trixie_host(trixie_sandbox, standins):
    """The second host made new again for one module, whatever other modules left on it
    (the gateway's module runs HAProxy there): a module that deploys "from nothing" then
    gets exactly that. A developer's re-run (BEEKEEPER_TEST_REUSE_SANDBOX=1) keeps it."""
    if os.environ.get("BEEKEEPER_TEST_REUSE_SANDBOX") == "1":
        return trixie_sandbox
    return _new_second_host(standins)


@pytest.fixture(scope="session")
def standins(fresh_sandbox) -> StandIns:
    assert helpers.STANDINS is not None
    return helpers.STANDINS


def pins_file() -> dict:
    return json.loads(open(os.environ["BEEKEEPER_MODEL_PINS"]).read())
