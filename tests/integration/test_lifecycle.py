"""
A host's whole life on a sandbox host of its own (issue 26): a fresh host is recorded
(packages, unit files, files under the folders the kit writes to), cpu-tiny is deployed
from the git server stand-in, upgraded to a second commit there (a new image, switched by
the smoke gate, the old one kept for the rollback, older leftovers removed with the disk
freed said), rolled back and forth, then uninstalled; the host must then match its record.

The host has its own name and SSH port (beside `beekeeper-sandbox`, which it never
touches but to copy a server image it already built: the same source commit and
Dockerfile give the same tag, so the first deploy builds nothing). The upgrade builds
once (about 6 minutes on 2 cores).
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from beekeeper import sandbox
from beekeeper.core.cache import cpu_source_tarball
from beekeeper.core.paths import ServicePaths
from beekeeper.hostside import rollback_command

from . import helpers
from .helpers import grand_total, pyinfra, results, sandbox_exec
from .standins import GitForge, ReverseTunnel, _git

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NAME = "beekeeper-lifecycle"  # outside the beekeeper-sandbox-* set `sandbox down` takes
PORT = sandbox.DEFAULT_SSH_PORT + 7
INVENTORY = "tests/integration/inventory_lifecycle.py"
# where the kit writes (and the system folders it drops files into)
FOLDERS = ("/etc/beekeeper", "/var/lib/beekeeper", "/var/log/beekeeper", "/opt/beekeeper",
           "/usr/local/lib/beekeeper", "/srv/beekeeper", "/etc/systemd/system",
           "/etc/apt/sources.list.d", "/etc/apt/keyrings", "/etc/apt/preferences.d",
           "/etc/modprobe.d", "/etc/profile.d", "/etc/ld.so.conf.d")
# an older generation, as an upgrade before the one tested would have left it: a source
# tree and an image build folder that no unit runs any more (placed by hand, 8 MiB)
OLD_REF = "0" * 40
OLD_SLUG = f"{OLD_REF[:12]}-cpu-x86-64-v3-00000000"


def on_host(cmd: str) -> subprocess.CompletedProcess:
    return sandbox_exec(cmd, NAME)


def record() -> dict[str, list[str]]:
    """What the comparison reads on the host."""
    find = " ".join(FOLDERS)
    return {
        "packages": on_host("dpkg-query -W -f '${Package} ${Version}\\n' | sort").stdout
        .splitlines(),
        "units": on_host("systemctl list-unit-files --no-legend --no-pager | awk '{print $1}' "
                         "| sort").stdout.splitlines(),
        "files": on_host(f"find {find} 2>/dev/null | sort").stdout.splitlines(),
        "accounts": on_host("{ cut -d: -f1 /etc/passwd; cut -d: -f1 /etc/group "
                            "| sed 's/^/group:/'; } | sort").stdout.splitlines(),
    }


def diff(before: list[str], after: list[str]) -> dict[str, list[str]]:
    return {"added": sorted(set(after) - set(before)),
            "gone": sorted(set(before) - set(after))}


class Life:
    def __init__(self, tmp):
        if shutil.which("git") is None:
            pytest.skip("git is needed for the git server stand-in")
        sandbox.down(purge=True, name=NAME)
        self.state = sandbox.up(ssh_port=PORT, name=NAME)
        self.forge = GitForge(tmp / "forge")
        self.work = tmp / "work"
        self.commits = [self.forge.publish_tarball("llama.cpp", cpu_source_tarball(),
                                                   self.work)]
        self.tunnel = ReverseTunnel(sandbox.ssh_options(self.state), [self.forge.port])
        self.use(self.commits[0])
        self.fresh = record()

    def use(self, commit: str) -> None:
        sandbox.write_host_data({"source": {"git": self.forge.url("llama.cpp"),
                                            "ref": commit}}, NAME)

    def second_commit(self) -> str:
        """A new commit on the git server's main (one file added to the tree)."""
        tree = self.work / "llama.cpp"
        (tree / "BEEKEEPER-UPGRADE").write_text("the second commit of the lifecycle test\n")
        _git("add", "-A", cwd=tree)
        _git("commit", "-q", "-m", "second commit", cwd=tree)
        _git("push", "-q", str(self.forge.root / "llama.cpp.git"), "main", cwd=tree)
        commit = _git("rev-parse", "HEAD", cwd=tree)
        self.commits.append(commit)
        return commit

    def run(self, *args: str, dry: bool = False, file: str = "deploy.py") -> helpers.Run:
        self.tunnel.ensure()
        helpers.wait_until(lambda: on_host(f"exec 3<>/dev/tcp/127.0.0.1/{self.forge.port}")
                           .returncode == 0, 30, "the tunnel to the git server")
        return pyinfra("--dry" if dry else "-y", INVENTORY, file, *args)

    def close(self) -> None:
        self.tunnel.close()
        self.forge.close()
        sandbox.down(purge=True, name=NAME)


@pytest.fixture(scope="module")
def life(tmp_path_factory):
    life = Life(tmp_path_factory.mktemp("lifecycle"))
    yield life
    life.close()


def running_image() -> str:
    return json.loads(on_host("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]


def test_deploy_on_a_fresh_host(life):
    run = life.run("--data", 'stages=["provision"]')  # the engine, then a build to share
    assert run.rc == 0, run.out[-3000:]
    shared = helpers.share_server_image(NAME)
    run = life.run()
    print(f"\n[figure] lifecycle first deploy: {run.wall_s:.0f} s (server images shared: "
          f"{shared or 'none, built here'})")
    assert run.rc == 0, run.out[-4000:]
    assert helpers.healthy(name=NAME)


def test_upgrade_to_a_second_commit_keeps_the_rollback_and_frees_the_rest(life):
    first = running_image()
    on_host(f"mkdir -p /var/lib/beekeeper/src/{OLD_REF} /var/lib/beekeeper/build/{OLD_SLUG} && "
            f"head -c 8388608 /dev/zero > /var/lib/beekeeper/src/{OLD_REF}/blob && "
            f"echo FROM scratch > /var/lib/beekeeper/build/{OLD_SLUG}/Dockerfile")
    commit = life.second_commit()
    life.use(commit)
    dry = life.run(dry=True)
    assert dry.rc == 0, dry.out[-3000:]
    run = life.run()
    print(f"\n[figure] lifecycle upgrade deploy (one build): {run.wall_s:.0f} s")
    assert run.rc == 0, run.out[-4000:]
    now = running_image()
    assert now != first and now.split(":", 1)[1].startswith(commit[:12])
    prev = json.loads(on_host("cat /etc/beekeeper/llm/deployed.json.prev").stdout)["image"]
    assert prev == first
    freed = [line for line in run.out.splitlines() if "freed" in line]
    print("[figure] upgrade cleanup: " + (" | ".join(freed) or "no line"))
    rows = results(run.out)
    cleaned = [k for k in rows if "no rollback needs" in k]
    assert cleaned and all(rows[k][0] == "1" for k in cleaned), rows
    src = on_host("ls /var/lib/beekeeper/src").stdout.split()
    assert OLD_REF not in src and commit in src, src
    assert OLD_SLUG not in on_host("ls /var/lib/beekeeper/build").stdout.split()
    images = on_host("docker images --format '{{.Repository}}:{{.Tag}}' "
                     "beekeeper/llama-server").stdout.split()
    assert first in images and now in images, images


def test_the_rollback_finds_what_it_needs_after_the_cleanup(life):
    now = running_image()
    back = on_host(rollback_command(ServicePaths("llm"), restore=False, timeout_s=120))
    assert back.returncode == 0, back.stderr[-2000:]
    assert running_image() != now and helpers.healthy(name=NAME)
    again = on_host(rollback_command(ServicePaths("llm"), restore=False, timeout_s=120))
    assert again.returncode == 0 and running_image() == now, again.stderr[-2000:]


def users_docker_data() -> dict[str, str]:
    """An image, a container and a volume of the user's in the engine the kit installed
    (docker.io's purge would empty /var/lib/docker): their ids, and where each lies."""
    made = on_host("tar cf - --files-from /dev/null | docker import - mine/keep:1 >/dev/null "
                   "&& docker create --name keep -v keep:/data mine/keep:1 /none && "
                   "echo mine > \"$(docker volume inspect -f '{{.Mountpoint}}' keep)/mark\" "
                   "&& docker image inspect -f '{{.Id}}' mine/keep:1")
    assert made.returncode == 0, made.stderr[-2000:]
    container, image = made.stdout.split()[-2:]
    return {"image": "/var/lib/docker/image/overlay2/imagedb/content/sha256/"
                     + image.removeprefix("sha256:"),
            "container": f"/var/lib/docker/containers/{container}",
            "volume": "/var/lib/docker/volumes/keep/_data/mark"}


def test_uninstall_returns_the_host_to_its_fresh_record(life):
    mine = users_docker_data()
    dry = life.run(dry=True, file="uninstall.py")
    assert dry.rc == 0, dry.out[-3000:]
    listed = helpers.detected_changes(dry.out)
    print("\n[figure] uninstall --dry lists: " + "; ".join(sorted(listed)))
    assert any(n.startswith("Purge the packages the kit installed") for n in listed), listed
    assert on_host("systemctl is-active beekeeper-llm.service").stdout.strip() == "active"
    run = life.run(file="uninstall.py")
    print(f"[figure] uninstall: {run.wall_s:.0f} s")
    assert run.rc == 0, run.out[-4000:]
    now = record()
    changes = {k: diff(life.fresh[k], now[k]) for k in now}
    print(f"[figure] after uninstall vs fresh host: {json.dumps(changes)}")
    for key in ("packages", "units", "files"):
        assert changes[key] == {"added": [], "gone": []}, (key, changes[key])
    # Docker's data stays, as docs/lifecycle.md says: the user's image, container, volume
    gone = [what for what, path in mine.items() if on_host(f"test -e {path}").returncode]
    assert not gone, f"the uninstall took the user's Docker {gone} from /var/lib/docker"
    again = life.run(file="uninstall.py")
    assert again.rc == 0 and grand_total(again.out)[1] == "-", again.out[-3000:]

