"""
A host's life after the first deploy (issue 26): the upgrade cleanup keeps what a rollback
needs and removes the rest, saying the disk it freed; the uninstall takes away what the kit
put there, and only that.

The kit's folders are real folders under tmp_path (state_dir points there, and the native
prefix is moved there): the fact commands run on them for real, and so do the removal
commands the operations queue, so a second run reads what the first one left. The
manifests are the record's own text (DeployedService.to_json, as tasks/service.py writes
them; only the fields the cleanup reads set), the `.prev` unit (under /etc) by hand.

The uninstall's facts: `apt-history-debian12-real.log` is one transaction of a Debian 12
machine's /var/log/apt/history.log and `apt-get-s-purge-make-patch-debian12.txt` that
machine's `apt-get -s -q purge --allow-change-held-packages make patch` (both real);
`apt-history-kit-written-by-hand.log` is written by hand in that format, with the command
lines pyinfra's apt.packages runs (pyinfra/facts/apt.py, noninteractive_apt);
`apt-history-kit-driver-written-by-hand.log` too, for a Debian 12 host the kit gave NVIDIA's
open driver (branch 580) and the Container Toolkit, with the driver's own apt-get line
(operations/nvidia.py driver_installed; no real capture of NVIDIA's packages was at hand,
so their names and versions are typed from NVIDIA's Debian repository's naming).
`daemon-json-nvidia-ctk-written-by-hand.json` is Docker's daemon.json as `nvidia-ctk runtime
configure --runtime=docker` leaves it (the toolkit's pkg/config/engine/docker: the runtime
entry merged in, json.MarshalIndent with four spaces, keys sorted) in a file that held the
user's log settings. The contrib test runs the kit's own commands on the Debian 12 image's
debian.sources (as test_hosts_found does).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from beekeeper.core.deployed import DeployedService
from beekeeper.core.distro import apt_wait
from beekeeper.core.errors import ConfigError
from beekeeper.core.paths import prev
from beekeeper.facts.lifecycle import (
    AptPurgeWould,
    FolderEntries,
    PresentPaths,
    parse_apt_history,
)
from beekeeper.tasks import prune

from .harness import (
    DATA,
    DEFAULTS,
    HISTORY,
    IMAGE,
    INSTALLED,
    KIT_DIRS,
    LLM,
    MODEL_DIR,
    REF_A,
    REF_B,
    REF_C,
    SLUG,
    TINY_MODEL as MODEL,
    commands,
    deployed_host,
    run_queued,
)


def sh(command: str) -> list[str]:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          check=True, timeout=30).stdout.splitlines()


class Machine:
    """The kit's folders under `root` (real), and hand-written files under /etc."""

    def __init__(self, root: Path):
        self.root = root
        self.state_dir = root / "var/lib/beekeeper"
        self.native = root / "opt/beekeeper/llama-server"
        self.etc: dict[str, str] = {}

    def build(self, ref: str, mib: int) -> str:
        """A native build of `ref` (`mib` MiB), its source tree and cmake tree; returns
        the binary a unit runs."""
        slug = SLUG[ref]
        for folder, size in ((self.native / slug, mib), (self.state_dir / "src" / ref, 1),
                             (self.state_dir / "native" / slug / "build", 1)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "blob").write_bytes(b"\0" * size * 2**20)
        return f"{self.native}/{slug}/llama-server"

    def runs(self, image: str, before: str | None = None) -> None:
        """The llm unit runs `image`; its previous unit (if any) `before`."""
        self.etc = {LLM.manifest: DeployedService(service="llm", image=image).to_json(),
                    LLM.unit: "[Service]\n"}
        if before:
            self.etc[prev(LLM.manifest)] = DeployedService(service="llm", image=before).to_json()
            self.etc[prev(LLM.unit)] = "[Service]\n"

    def facts(self) -> dict[str, Any]:
        def entries(path: str):
            assert path.startswith(str(self.root)), path
            return FolderEntries().process(sh(FolderEntries().command(path=path)))

        def present(paths: list[str]):
            real = [p for p in paths if p.startswith(str(self.root))]
            found = PresentPaths().process(sh(PresentPaths().command(paths=real))) if real else {}
            return {**found, **{p: 4 for p in paths if p in self.etc}}

        def contents(path: str):
            return self.etc[path].splitlines() if path in self.etc else None

        return {"FolderEntries": entries, "PresentPaths": present, "FileContents": contents,
                "DeployedServices": ["llm"] if LLM.manifest in self.etc else []}

    def data(self, ref: str) -> dict[str, Any]:
        return {**DEFAULTS, "profile": "cpu-tiny", "mode": "native",
                "state_dir": str(self.state_dir),
                "source": {"git": "https://example.org/beellama.cpp", "ref": ref}}

    def tree(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*")
                      if p.name != "blob" and p.name != "build")


@pytest.fixture
def machine(tmp_path, monkeypatch):
    m = Machine(tmp_path)
    monkeypatch.setattr(prune, "NATIVE_PREFIX", str(m.native))
    return m


def cleanup(m: Machine, ref: str, artifact: str) -> list[tuple[str, list[str]]]:
    ops = run_queued(lambda cfg: prune.ensure(cfg, "after", artifact), m.data(ref), m.facts())
    return [(n, c) for n, c in ops if "no rollback needs" in n]


def apply(m: Machine, ops: list[tuple[str, list[str]]]) -> list[str]:
    """Run the queued removals for real (each touches only the tmp folders)."""
    out = []
    for _, cmds in ops:
        for c in cmds:
            assert "rm -rf " + str(m.root) in c, c
            out += sh(c)
    return out


def test_upgrade_keeps_the_running_and_previous_builds_and_removes_older(machine):
    m = machine
    a, b = m.build(REF_A, 3), m.build(REF_B, 2)
    m.runs(b, before=a)  # before this deploy: B runs, A is its rollback
    c = m.build(REF_C, 2)  # this deploy's build (already built by the native task)
    ops = cleanup(m, REF_C, c)
    by_folder = {n.split(" from ")[1].split(" (")[0]: (n, cmds) for n, cmds in ops}
    name, cmds = by_folder[str(m.native)]
    # the name says what goes and the disk it frees, before the run (and --dry) does it
    assert "removes 1, 3 MiB" in name and SLUG[REF_B] in name and SLUG[REF_C] in name
    assert cmds == [f"rm -rf {m.native}/{SLUG[REF_A]} && echo 'beekeeper: removed 1 native "
                    f"builds ({SLUG[REF_A]}): 3 MiB freed'"]
    lines = apply(m, ops)
    assert any("3 MiB freed" in line for line in lines), lines
    left = m.tree()
    for ref in (REF_B, REF_C):  # the previous unit's and this deploy's build, tree, source
        assert f"opt/beekeeper/llama-server/{SLUG[ref]}" in left
        assert f"var/lib/beekeeper/src/{ref}" in left
        assert f"var/lib/beekeeper/native/{SLUG[ref]}" in left
    assert not [p for p in left if REF_A[:12] in p], left


def test_a_second_run_changes_nothing(machine):
    m = machine
    a, b = m.build(REF_A, 1), m.build(REF_B, 1)
    m.runs(b, before=a)
    c = m.build(REF_C, 1)
    apply(m, cleanup(m, REF_C, c))
    m.runs(c, before=b)  # what the deploy left: C runs, B is its rollback
    assert cleanup(m, REF_C, c) == []  # no step: nothing is left to remove


def test_an_unchanged_service_keeps_its_rollback(machine):
    m = machine
    a, b = m.build(REF_A, 1), m.build(REF_B, 1)
    m.runs(b, before=a)
    # the deploy runs what already runs: A stays the rollback
    assert cleanup(m, REF_B, b) == []
    assert f"opt/beekeeper/llama-server/{SLUG[REF_A]}" in m.tree()


def test_nothing_is_removed_when_the_previous_unit_is_unknown(machine):
    m = machine
    a, b = m.build(REF_A, 1), m.build(REF_B, 1)
    m.runs(b, before=a)
    del m.etc[prev(LLM.manifest)]  # a `.prev` unit, but what it runs cannot be read
    c = m.build(REF_C, 1)
    # B becomes the previous unit: known; the unchanged case reads the `.prev` one
    assert cleanup(m, REF_B, b) == []
    m.etc[LLM.manifest] = "{not json"  # what runs now cannot be read either
    assert cleanup(m, REF_C, c) == []
    assert f"opt/beekeeper/llama-server/{SLUG[REF_A]}" in m.tree()


def test_container_mode_keeps_the_trees_and_build_folders_of_the_kept_images(machine):
    m = machine
    for ref in (REF_A, REF_B, REF_C):
        m.build(ref, 1)
        (m.state_dir / "build" / SLUG[ref]).mkdir(parents=True)
        (m.state_dir / "build" / SLUG[ref] / "Dockerfile").write_text("FROM scratch\n")
    (m.state_dir / "src" / f"{REF_C}.tmp").mkdir()  # a fetch cut short
    tag = {r: f"beekeeper/llama-server:{SLUG[r]}" for r in (REF_A, REF_B, REF_C)}
    m.runs(tag[REF_B], before=tag[REF_A])
    data = {**m.data(REF_C), "mode": "container"}
    ops = run_queued(lambda cfg: prune.ensure(cfg, "after", tag[REF_C]), data, m.facts())
    apply(m, [(n, c) for n, c in ops if "no rollback needs" in n])
    left = m.tree()
    assert sorted(p for p in left if p.startswith("var/lib/beekeeper/src/")) == [
        f"var/lib/beekeeper/src/{REF_B}", f"var/lib/beekeeper/src/{REF_C}"]
    assert sorted(p for p in left if p.startswith("var/lib/beekeeper/build/")
                  and p.count("/") == 4) == [
        f"var/lib/beekeeper/build/{SLUG[REF_B]}", f"var/lib/beekeeper/build/{SLUG[REF_C]}"]


def test_what_this_deploy_fetches_and_builds_after_the_cleanup_is_queued_stays(machine):
    """On a real host the cleanup is queued before this deploy fetches its source and builds
    (pyinfra reads the folders again when the step runs): the new tree and build folder,
    absent when the step was planned, must stay (the sandbox's upgrade removed them)."""
    m = machine
    tag = {r: f"beekeeper/llama-server:{SLUG[r]}" for r in (REF_A, REF_B, REF_C)}
    for ref in (REF_A, REF_B):
        m.build(ref, 1)
    m.runs(tag[REF_B], before=tag[REF_A])

    def deploy(cfg):
        prune.ensure(cfg, "after", tag[REF_C])
        m.build(REF_C, 1)  # the fetch and the build run after the cleanup was queued
        (m.state_dir / "build" / SLUG[REF_C]).mkdir(parents=True)

    ops = run_queued(deploy, {**m.data(REF_C), "mode": "container"}, m.facts())
    apply(m, [(n, c) for n, c in ops if "no rollback needs" in n])
    left = m.tree()
    assert f"var/lib/beekeeper/src/{REF_C}" in left, left
    assert f"var/lib/beekeeper/build/{SLUG[REF_C]}" in left, left


def test_the_cleanup_is_planned_only_when_the_deploy_names_its_artifact(machine):
    m = machine
    m.runs(m.build(REF_B, 1), before=m.build(REF_A, 1))
    ops = run_queued(lambda cfg: prune.ensure(cfg, "after"), m.data(REF_C), m.facts())
    assert not [n for n, _ in ops if "no rollback needs" in n]


# --- uninstall --------------------------------------------------------------------------

KIT_INSTALLED = ["containerd", "docker.io", "git", "git-man", "iptables", "liberror-perl",
                 "runc", "tini"]


def fresh_host() -> dict[str, Any]:
    """The same host once uninstalled: the packages the host had, nothing of the kit's."""
    return deployed_host(DeployedServices=[], FileContents=None, ImageTags=[],
                         PresentPaths=lambda paths: {}, FileSizes=lambda path: {},
                         InstalledPackages=sorted(set(INSTALLED) - set(KIT_INSTALLED)))


def uninstall(facts: dict[str, Any], **data: Any) -> list[tuple[str, list[str]]]:
    return run_queued(None, {**DEFAULTS, "profile": "cpu-tiny", **data}, facts)


def cmd(ops: list[tuple[str, list[str]]], prefix: str) -> list[str]:
    return commands(ops, prefix)


def test_the_apt_history_is_read_as_apt_writes_it():
    real = parse_apt_history((DATA / "apt-history-debian12-real.log").read_text().splitlines())
    assert len(real) == 1 and real[0].commandline == "apt-get install -qqy gcc python3-pip"
    assert {"gcc", "python3-pip", "g++-12", "libstdc++-12-dev"} <= set(real[0].installed)
    assert len(real[0].installed) == 44  # every `name:arch (version[, automatic])` entry


def test_uninstall_removes_what_the_kit_put_there(monkeypatch):
    ops = uninstall(deployed_host())
    names = [n for n, _ in ops]
    assert "systemctl disable --now beekeeper-llm.service" in cmd(ops, "Remove service llm")[0]
    assert cmd(ops, "Remove the server images") == [f"docker rmi -f {IMAGE}"]
    models = cmd(ops, "Remove the models")[0]
    assert models.startswith(f"rm -rf {MODEL} && ") and "1 MiB freed" in models
    assert cmd(ops, "Remove /etc/beekeeper")[0].startswith("rm -rf /etc/beekeeper && ")
    state = cmd(ops, "Remove the state and log folders")[0]
    assert state.startswith("rm -rf /var/lib/beekeeper /var/log/beekeeper && ")
    scripts = cmd(ops, "Remove /opt/beekeeper")[0]
    assert "/opt/beekeeper/venv" in scripts and "/usr/local/lib/beekeeper" in scripts
    keys = cmd(ops, "Remove the kit's apt sources and keyrings")[0]
    assert keys.startswith("rm -rf /etc/apt/keyrings/nvidia-container-toolkit.gpg && ")
    # only what the kit's own transactions installed: not curl (the user's), nginx (another
    # pyinfra deploy's, not a package of the kit's), python3 (there before)
    purge = cmd(ops, "Purge the packages the kit installed (8: containerd, docker.io, git, ")
    assert purge[-1] == ("DEBIAN_FRONTEND=noninteractive apt-get -y -q purge "
                         "--allow-change-held-packages " + " ".join(KIT_INSTALLED))
    assert cmd(ops, "Remove the kit's folders left empty") == [
        "rmdir /srv/beekeeper/models 2>/dev/null ; rmdir /srv/beekeeper 2>/dev/null ; "
        "rmdir /opt/beekeeper 2>/dev/null ; true"]
    # packages go last, after the engine's images, and the services first
    assert names.index("Remove the server images (beekeeper/llama-server)") < \
        names.index(next(n for n in names if n.startswith("Purge the packages")))
    assert names[0].startswith("Remove service llm")


def test_the_purge_of_docker_io_keeps_dockers_data():
    """docker.io's postrm `purge` runs the nuke-graph-directory.sh its prerm `remove` copied
    into /var/lib/docker (`rm -rf /var/lib/docker/*`; Debian 12's 20.10.24+dfsg1-1+deb12u1
    maintainer scripts): no command line may purge docker.io while that copy can be made or
    is there. It is removed alone first, the copy deleted, then purged with the rest."""
    ops = uninstall(deployed_host())
    lines = cmd(ops, "Purge the packages the kit installed")
    remove, purge = lines
    # apt free first (unattended-upgrades)
    assert next(c for n, c in ops if n.startswith("Purge the packages"))[0] == apt_wait()
    assert remove == ("DEBIAN_FRONTEND=noninteractive apt-get -y -q remove "
                      "--allow-change-held-packages docker.io && "
                      "rm -f /var/lib/docker/nuke-graph-directory.sh")
    assert " purge " in purge and "docker.io" in purge.split()
    # no line purges docker.io before the remove and the copy's deletion
    every = [c for _, cs in ops for c in cs]
    first_purge = next(i for i, c in enumerate(every) if " purge " in c
                       and "docker.io" in c.split())
    assert every.index(remove) < first_purge


def test_a_second_uninstall_changes_nothing():
    ops = uninstall(fresh_host())
    assert [(n, c) for n, c in ops if c] == []


def test_keep_models_keeps_the_models_and_their_folder():
    ops = uninstall(deployed_host(), keep_models=True)
    assert not [n for n, _ in ops if n.startswith("Remove the models")]
    assert cmd(ops, "Remove the kit's folders left empty") == [
        "rmdir /opt/beekeeper 2>/dev/null ; true"]


def test_a_bad_keep_models_is_one_line_before_anything_runs():
    with pytest.raises(ConfigError, match=r"host canned: host data `keep_models`: 'yes' is "
                                          r"not True or False; fix: --data keep_models=true"):
        uninstall(deployed_host(), keep_models="yes")


def test_nothing_is_purged_when_apt_would_take_a_package_the_kit_did_not_install():
    ops = uninstall(deployed_host(AptPurgeWould=lambda packages: [*packages, "my-tool"]))
    assert cmd(ops, "Purge the packages the kit installed") == []


def test_held_packages_the_kit_installed_are_released_first():
    ops = uninstall(deployed_host(AptHolds=["docker.io", "nginx"]))
    assert cmd(ops, "Release the apt holds the kit set (docker.io)") == \
        ["apt-mark unhold docker.io"]


def test_the_nouveau_blacklist_goes_only_while_it_holds_the_kits_lines():
    kit = "blacklist nouveau\noptions nouveau modeset=0\n"
    path = "/etc/modprobe.d/blacklist-nouveau.conf"
    mine = deployed_host(FileContents=lambda path: kit.splitlines()
                         if path.endswith("nouveau.conf") else None)
    ops = uninstall(mine)
    assert cmd(ops, "Remove the nouveau blacklist") == [f"rm -f {path}"]
    assert cmd(ops, "Refresh the loader cache")[0].startswith("ldconfig")
    yours = deployed_host(FileContents=lambda path: [*kit.splitlines(), "# mine"]
                          if path.endswith("nouveau.conf") else None)
    ops = uninstall(yours)
    assert cmd(ops, "Remove the nouveau blacklist") == []
    assert not [n for n, _ in ops if n.startswith("Refresh the loader cache")]


def test_the_docker_group_goes_with_an_engine_the_kit_installed():
    ops = uninstall(deployed_host(Groups=["docker", "users"]))
    assert cmd(ops, "Remove the docker group") == [
        "if getent group docker >/dev/null; then groupdel docker; fi"]
    # the host had its engine: the kit's history has no docker.io transaction
    had_engine = deployed_host(Groups=["docker"], AptHistory=parse_apt_history(HISTORY[10:]))
    assert not [n for n, _ in uninstall(had_engine) if n.startswith("Remove the docker group")]


def test_a_unit_of_the_kit_left_without_its_manifest_is_removed_too(tmp_path):
    units = tmp_path / "system"
    units.mkdir()
    for name in ("beekeeper-old.service.prev", "beekeeper-llm.service", "ssh.service"):
        (units / name).write_text("[Service]\n")
    listing = FolderEntries().process(sh(FolderEntries().command(path=str(units))))
    ops = uninstall(deployed_host(FolderEntries=lambda path: listing
                                  if path == "/etc/systemd/system" else [],
                                  PresentPaths=lambda paths: {p: 4 for p in paths}))
    removed = [n for n, _ in ops if n.endswith("(no manifest)")]
    assert removed == ["Remove beekeeper-old.service (no manifest)"]  # llm has its own step
    assert "rm -f /etc/systemd/system/beekeeper-old.service " \
           "/etc/systemd/system/beekeeper-old.service.prev" in cmd(ops, removed[0])[0]


def test_apt_says_what_a_purge_would_take_along():
    """`apt-get -s purge make patch` on a Debian 12 machine (real output): make and patch
    are needed by build-essential, dpkg-dev, tcl/tk headers, which the purge would take."""
    real = DATA / "apt-get-s-purge-make-patch-debian12.txt"
    command = AptPurgeWould().command(packages=["make", "patch"])
    assert command.startswith("apt-get -s -q purge --allow-change-held-packages make patch ")
    would = AptPurgeWould().process(sh(f"cat {real} | " + command.split(" | ", 1)[1]))
    assert {"make", "patch", "build-essential", "dpkg-dev"} <= set(would)
    ops = uninstall(deployed_host(AptPurgeWould=lambda packages: would,
                                  InstalledPackages=[*INSTALLED, "make", "patch"]))
    assert cmd(ops, "Purge the packages the kit installed") == []


# The kit's driver on a Debian 12 host (apt-history-kit-driver-written-by-hand.log): the
# headers, the branch pin and nvidia-open (its own apt-get line), the Container Toolkit,
# then the user's htop. The driver task of that kit held the driver packages (a kit before
# the branch pin alone kept the branch), the toolkit task its four.
DRIVER_LOG = (DATA / "apt-history-kit-driver-written-by-hand.log").read_text().splitlines()
DRIVER_HISTORY = parse_apt_history(DRIVER_LOG)
DRIVER_INSTALLED = sorted({n for t in DRIVER_HISTORY for n in t.installed} |
                          {"ca-certificates", "docker.io", "python3"})
DRIVER_HELD = ["firmware-nvidia-gsp", "libcuda1", "libnvidia-container-tools",
               "libnvidia-container1", "libnvidia-ml1", "nvidia-container-toolkit",
               "nvidia-container-toolkit-base", "nvidia-driver-cuda", "nvidia-kernel-open-dkms",
               "nvidia-kernel-support", "nvidia-modprobe", "nvidia-open", "nvidia-persistenced"]
DRIVER_GROUP = ["cpp-12", "dkms", "firmware-nvidia-gsp", "gcc-12", "libcuda1", "libnvidia-ml1",
                "linux-compiler-gcc-12-x86", "linux-headers-6.1.0-37-amd64",
                "linux-headers-6.1.0-37-common", "linux-headers-amd64", "linux-kbuild-6.1",
                "make", "nvidia-driver-cuda", "nvidia-driver-pinning-580",
                "nvidia-kernel-open-dkms", "nvidia-kernel-support", "nvidia-modprobe",
                "nvidia-open", "nvidia-persistenced"]
CUDA_SOURCE = "/etc/apt/sources.list.d/nvidia-cuda.sources"
NOUVEAU_LINES = ["blacklist nouveau", "options nouveau modeset=0"]


def driver_host(**over: Any) -> dict[str, Any]:
    """deployed_host with the kit's driver and Container Toolkit installed and held."""
    present = {*KIT_DIRS, CUDA_SOURCE, "/etc/apt/keyrings/nvidia-cuda.gpg",
               "/etc/apt/keyrings/nvidia-cuda.gpg.src"}
    return deployed_host(**{
        "AptHistory": DRIVER_HISTORY, "InstalledPackages": DRIVER_INSTALLED,
        "AptHolds": DRIVER_HELD,
        "PresentPaths": lambda paths: {p: 4 for p in paths if p in present},
        "FileContents": lambda path: NOUVEAU_LINES if path.endswith("nouveau.conf") else None,
        "KitComponents": [("contrib", "/etc/apt/sources.list.d/debian.sources")], **over})


def test_the_driver_the_kit_installed_goes_with_its_holds_pin_and_source():
    """The driver's own `apt-get install -y --no-install-recommends nvidia-open` line is the
    kit's: the driver, its pin and headers are purged and their holds released, so NVIDIA's
    source goes with nothing held left behind. A hand-typed line of the same words for
    another package (htop) is not the kit's."""
    ops = uninstall(driver_host())
    names = [n for n, _ in ops]
    release = next(n for n in names if n.startswith("Release the apt holds"))
    assert cmd(ops, release) == ["apt-mark unhold " + " ".join(
        [p for p in DRIVER_HELD if p.startswith("libnvidia-container") or
         p.startswith("nvidia-container")] + [p for p in DRIVER_GROUP if p in DRIVER_HELD])]
    driver = cmd(ops, "Purge the NVIDIA driver the kit installed (19: ")
    assert driver == ["DEBIAN_FRONTEND=noninteractive apt-get -y -q purge "
                      "--allow-change-held-packages " + " ".join(DRIVER_GROUP)]
    other = cmd(ops, "Purge the packages the kit installed")[-1]
    for name in ("nvidia-container-toolkit", "gnupg", "wget", "dirmngr"):
        assert f" {name} " in f"{other} "
    assert "htop" not in other + driver[-1] and "libnl-3-200" not in other + driver[-1]
    assert names.index(release) < names.index(next(n for n in names if "NVIDIA driver" in n))
    apt_files = cmd(ops, "Remove the kit's apt sources and keyrings")[0]
    assert CUDA_SOURCE in apt_files and "/etc/apt/keyrings/nvidia-cuda.gpg" in apt_files
    assert "/etc/apt/keyrings/nvidia-cuda.gpg.src" in apt_files  # the key's URL beside it
    assert cmd(ops, "Remove the nouveau blacklist") == \
        ["rm -f /etc/modprobe.d/blacklist-nouveau.conf"]
    assert cmd(ops, "Remove Debian's contrib area the kit added")
    assert not [n for n in names if n.startswith("Keep the NVIDIA driver")]


def test_keep_driver_keeps_it_whole_with_its_holds_pin_source_and_blacklist():
    ops = uninstall(driver_host(), keep_driver=True)
    names = [n for n, _ in ops]
    keep = next(n for n in names if n.startswith("Keep the NVIDIA driver"))
    assert "(host data keep_driver)" in keep and cmd(ops, keep) == []
    assert not [n for n in names if n.startswith("Purge the NVIDIA driver")]
    release = cmd(ops, "Release the apt holds")[0]
    assert "nvidia-open" not in release and "libcuda1" not in release  # held, as it was
    assert "nvidia-container-toolkit" in release
    assert CUDA_SOURCE not in cmd(ops, "Remove the kit's apt sources and keyrings")[0]
    assert not [n for n in names if n.startswith(("Remove the nouveau", "Remove Debian's"))]
    # the other packages go, and apt may not take a driver package with them
    assert "nvidia-open" not in cmd(ops, "Purge the packages the kit installed")[0]


def test_the_holds_the_kit_recorded_are_released_on_packages_that_stay_too():
    """A Container Toolkit the host had before the kit (not in the kit's apt transactions,
    so it stays), held by the kit at its pinned version: the hold is in the kit's record
    and is released. The user's own hold (nginx) is not in it and stays."""
    from beekeeper.core.paths import HOLDS_RECORD

    record = ["nvidia-container-toolkit", "libnvidia-container1"]
    ops = uninstall(deployed_host(
        AptHolds=["libnvidia-container1", "nginx", "nvidia-container-toolkit"],
        InstalledPackages=[*INSTALLED, "libnvidia-container1", "nvidia-container-toolkit"],
        FileContents=lambda path: record if path == HOLDS_RECORD else None))
    assert cmd(ops, "Release the apt holds the kit set") == \
        ["apt-mark unhold nvidia-container-toolkit libnvidia-container1"]
    assert "nvidia-container-toolkit" not in cmd(ops, "Purge the packages the kit installed")[0]


def test_keep_driver_keeps_the_driver_holds_the_kit_recorded():
    from beekeeper.core.paths import HOLDS_RECORD

    def files(path: str) -> list[str] | None:
        if path == HOLDS_RECORD:
            return DRIVER_HELD
        return NOUVEAU_LINES if path.endswith("nouveau.conf") else None
    release = cmd(uninstall(driver_host(FileContents=files), keep_driver=True),
                  "Release the apt holds")[0]
    assert "nvidia-open" not in release and "libcuda1" not in release
    assert "nvidia-container-toolkit" in release


def test_a_driver_apt_would_take_more_with_stays_whole():
    def would(packages):
        return [*packages, "my-cuda-app"] if "nvidia-open" in packages else packages
    ops = uninstall(driver_host(AptPurgeWould=would))
    keep = next(n for n, _ in ops if n.startswith("Keep the NVIDIA driver"))
    assert "would also remove my-cuda-app" in keep
    assert CUDA_SOURCE not in cmd(ops, "Remove the kit's apt sources and keyrings")[0]
    assert "nvidia-open" not in cmd(ops, "Release the apt holds")[0]


def test_a_driver_purged_for_upgrade_driver_is_named_as_not_restored():
    purge = ["Start-Date: 2026-12-02  08:41:55",
             "Commandline: apt-get purge -y libnvidia-compute-570 nvidia-dkms-570 "
             "nvidia-driver-570 nvidia-utils-570",
             "Purge: nvidia-driver-570:amd64 (570.172.08-0ubuntu1)",
             "End-Date: 2026-12-02  08:42:00", ""]
    ops = uninstall(driver_host(AptHistory=parse_apt_history(purge + DRIVER_LOG)))
    driver = next(n for n, _ in ops if n.startswith("Purge the NVIDIA driver"))
    assert driver.endswith("; the driver it replaced (libnvidia-compute-570, nvidia-dkms-570, "
                           "nvidia-driver-570, nvidia-utils-570, upgrade_driver) is not restored")


def test_contrib_goes_only_where_the_kit_recorded_adding_it(tmp_path):
    """Run for real on the Debian 12 image's own debian.sources and a sources.list: the
    kit's component command (operations/apt_sources.py) adds contrib and, as the record the
    uninstall reads, the kit's line (facts/lifecycle.py component_mark) is appended to each
    file it changed; the uninstall's command gives back the files as they were."""
    from beekeeper.facts.lifecycle import KitComponents, component_mark
    from beekeeper.operations import apt_sources

    from .harness import _run_sh as _run, _stub, _tools

    etc = tmp_path / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    files = {etc / "sources.list.d" / "debian.sources":
             (DATA / "debian12-docker-image-debian.sources").read_text(),
             etc / "sources.list": "deb http://deb.debian.org/debian bookworm main\n"}
    for path, text in files.items():
        path.write_text(text)
    mine = etc / "sources.list.d" / "mine.sources"  # the user's own contrib: no record
    mine.write_text("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"
                    "Components: main contrib\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "grep")
    _stub(bin_, "apt-get", "exit 0")

    def here(command: str) -> str:
        return command.replace("/etc/apt", str(etc))

    def recorded() -> list[tuple[str, str]]:
        out = _run(here(KitComponents().command()), bin_)
        return KitComponents().process([line.replace(str(etc), "/etc/apt") for line in out])

    assert recorded() == []  # a host deployed before the record: contrib stays
    assert not [n for n, _ in uninstall(deployed_host()) if n.startswith("Remove Debian's")]
    _run(here(apt_sources.component_command("contrib")), bin_)  # writes its record line
    for path in files:
        assert path.read_text().endswith(component_mark("contrib") + "\n")
    found = recorded()
    assert found == [("contrib", "/etc/apt/sources.list"),
                     ("contrib", "/etc/apt/sources.list.d/debian.sources")]
    ops = uninstall(deployed_host(KitComponents=found))
    revert = cmd(ops, "Remove Debian's contrib area the kit added (/etc/apt/sources.list, ")
    assert len(revert) == 1
    assert _run(here(revert[0]), bin_)[-1] == "beekeeper: removed the contrib area the kit added"
    for path, text in files.items():
        assert path.read_text() == text
    assert recorded() == [] and "beekeeper" not in mine.read_text()


TOOLKIT_ONLY = parse_apt_history(DRIVER_LOG[20:25])  # the Container Toolkit's transaction
DAEMON_JSON = (DATA / "daemon-json-nvidia-ctk-written-by-hand.json").read_text()


def test_the_nvidia_runtime_and_cdi_spec_go_with_the_toolkit_the_kit_installed(tmp_path):
    """daemon.json as nvidia-ctk writes it (Go's json.MarshalIndent, 4 spaces, keys sorted)
    into a file with the user's log settings: the entry goes, the rest stays, Docker is
    restarted (try-restart: only if it runs) as the kit did not install it."""
    def contents(path):
        return DAEMON_JSON.splitlines() if path == "/etc/docker/daemon.json" else None
    spec, cdi = "/var/run/cdi/nvidia.yaml", "/var/run/cdi"
    ops = uninstall(deployed_host(
        AptHistory=TOOLKIT_ONLY, FileContents=contents,
        InstalledPackages=[*INSTALLED, "libnvidia-container1", "libnvidia-container-tools",
                           "nvidia-container-toolkit-base", "nvidia-container-toolkit"],
        PresentPaths=lambda paths: {p: 4 for p in paths if p in [*KIT_DIRS, spec, cdi]}))
    write, restart = cmd(ops, "Remove the nvidia runtime nvidia-ctk added to "
                              "/etc/docker/daemon.json")
    assert restart == "systemctl try-restart docker.service"
    target = tmp_path / "daemon.json"
    target.write_text(DAEMON_JSON)
    sh(write.replace("/etc/docker/daemon.json", str(target)))
    assert json.loads(target.read_text()) == {"log-driver": "json-file",
                                              "log-opts": {"max-size": "10m"}}
    assert cmd(ops, "Remove the CDI spec")[0].startswith(f"rm -rf {spec} && ")
    assert "rmdir /var/run/cdi" in cmd(ops, "Remove the kit's folders left empty")[0]
    # a daemon.json nvidia-ctk made holding only the runtime goes; the engine the kit
    # installed goes too: nothing to restart
    alone = json.dumps({"runtimes": json.loads(DAEMON_JSON)["runtimes"]}, indent=4)
    ops = uninstall(deployed_host(
        AptHistory=[*parse_apt_history(HISTORY), *TOOLKIT_ONLY],
        FileContents=lambda path: alone.splitlines() if path.endswith("daemon.json") else None,
        InstalledPackages=[*INSTALLED, "nvidia-container-toolkit"]))
    assert cmd(ops, "Remove the nvidia runtime") == ["rm -f /etc/docker/daemon.json"]


def test_a_toolkit_the_host_had_keeps_its_runtime_entry():
    ops = uninstall(deployed_host(
        FileContents=lambda path: DAEMON_JSON.splitlines() if path.endswith("daemon.json")
        else None, InstalledPackages=[*INSTALLED, "nvidia-container-toolkit"]))
    assert not [n for n, _ in ops if "nvidia runtime" in n or "CDI" in n]


def test_models_of_earlier_profiles_go_but_not_the_users_files():
    """In model_dir: an earlier profile's Hub download (its downloader log beside it), a
    model of the kit's catalogue copied from PyPI (its exact size), an interrupted
    download; a file of the user's, and one named as a catalogue model but of another size
    (the user's too), stay."""
    listing = {"Qwen3.5-9B-Q4_K_M.gguf": 5_629_108_736,
               "Qwen3.5-9B-Q4_K_M.gguf.download.log": 2_048,
               "Qwen3.5-9B-Q4_K_M.gguf.download.log.rc": 2,
               "SmolLM2-135M-Instruct.Q4_1.gguf": 98_362_432,
               "Qwen3.5-9B-Q8_0.gguf.partial": 1_000_000,
               "my-own-model.gguf": 1_000,
               "Qwen3.5-9B-DFlash-q8_0.gguf": 12}
    files = {f"{MODEL_DIR}/{n}" for n in listing}
    ops = uninstall(deployed_host(
        FileSizes=lambda path: listing if path == MODEL_DIR else {},
        PresentPaths=lambda paths: {p: 4 for p in paths if p in KIT_DIRS or p in files}))
    name = next(n for n, _ in ops if n.startswith("Remove the models the kit placed"))
    removed = cmd(ops, name)[0].split(" && ")[0].split()[2:]
    assert sorted(removed) == sorted([MODEL] + [f"{MODEL_DIR}/{n}" for n in (
        "Qwen3.5-9B-Q4_K_M.gguf", "Qwen3.5-9B-Q4_K_M.gguf.download.log",
        "Qwen3.5-9B-Q4_K_M.gguf.download.log.rc", "SmolLM2-135M-Instruct.Q4_1.gguf",
        "Qwen3.5-9B-Q8_0.gguf.partial")])
    # --dry lists them by name before anything goes
    assert "Qwen3.5-9B-Q4_K_M.gguf, " in name and "my-own-model" not in name
    assert "DFlash" not in name


def test_the_cuda_files_go_whatever_cuda_release_wrote_them():
    """cuda_follows_driver, or a cuda_version bumped since, wrote another release's path."""
    written = {"/etc/profile.d/cuda.sh": ["export PATH=/usr/local/cuda-12.8/bin:$PATH"],
               "/etc/ld.so.conf.d/cuda.conf": ["/usr/local/cuda-12.8/lib64"]}
    ops = uninstall(deployed_host(FileContents=lambda path: written.get(path)))
    assert cmd(ops, "Remove the CUDA PATH file") == ["rm -f /etc/profile.d/cuda.sh"]
    assert cmd(ops, "Remove the CUDA loader path") == ["rm -f /etc/ld.so.conf.d/cuda.conf"]


def test_a_bad_keep_driver_is_one_line_before_anything_runs():
    with pytest.raises(ConfigError, match=r"host data `keep_driver`: 1 is not True or False; "
                                          r"fix: --data keep_driver=true to keep the NVIDIA "
                                          r"driver"):
        uninstall(deployed_host(), keep_driver=1)


def test_the_deploy_queues_the_upgrade_cleanup_after_the_smoke_checks(machine):
    """deploy.py itself names its artifact to the cleanup (it once queued prune without it,
    so no real deploy cleaned anything): an upgrade from B to C removes A's build, after
    the service's smoke check, and keeps B's for the rollback."""
    from beekeeper.facts.gpu import NvidiaSmiInfo

    from .harness import NATIVE, facts, run_deploy

    m = machine
    m.runs(m.build(REF_B, 1), before=m.build(REF_A, 1))
    ops = run_deploy(m.data(REF_C), {**facts(Wsl=NATIVE, GpuInfo=NvidiaSmiInfo(path=None)),
                                     **m.facts()})
    names = [n for n, _ in ops]
    cleanup_at = [i for i, n in enumerate(names) if "no rollback needs" in n]
    assert cleanup_at, names
    smoke_at = max(i for i, n in enumerate(names) if "smoke" in n.lower())
    assert min(cleanup_at) > smoke_at, names
    assert "keeps the running and previous units' builds" in "\n".join(names)
    # the queued removals, run for real on the machine's folders: A's build, its cmake tree
    # and its source go; B's (the rollback's) stay
    apply(m, [(n, cs) for n, cs in ops if "no rollback needs" in n])
    left = m.tree()
    assert not [p for p in left if SLUG[REF_A] in p or REF_A in p], left
    for path in (f"opt/beekeeper/llama-server/{SLUG[REF_B]}", f"var/lib/beekeeper/src/{REF_B}",
                 f"var/lib/beekeeper/native/{SLUG[REF_B]}"):
        assert path in left, left


def test_each_removal_says_what_it_removes_in_its_name_and_its_last_line():
    """The uninstall's `--dry` is its list of names: each folder and system file step names
    the folder or file, and its last line what went (the checks above match names by their
    start only)."""
    said = {n: c for n, c in uninstall(driver_host())}
    freed = "&& echo 'beekeeper: removed {}: 0.0 MiB freed'"
    assert said["Remove /etc/beekeeper (manifests, keys, gateway config)"][0].endswith(
        freed.format("/etc/beekeeper"))
    assert said["Remove the state and log folders (source trees, builds, reports, logs)"][0] \
        .endswith(freed.format("state and log folders"))
    assert said["Remove /opt/beekeeper (native builds, host venvs, verify kit) and the "
                "host-side scripts"][0].endswith(freed.format("native builds, venvs and scripts"))
    assert said["Remove the kit's apt sources and keyrings (NVIDIA's)"][0].endswith(
        freed.format("apt sources and keyrings"))
    assert {"Remove the CUDA PATH file (/etc/profile.d/cuda.sh)",
            "Remove the CUDA loader path (/etc/ld.so.conf.d/cuda.conf)",
            "Remove the nouveau blacklist the kit wrote"} <= set(said)
    kept = [n for n, _ in uninstall(driver_host(), keep_driver=True)]
    assert "Remove the kit's apt sources and keyrings (NVIDIA's, but the CUDA one of the kept " \
           "driver)" in kept and "Remove the nouveau blacklist the kit wrote" not in kept


def test_an_install_the_deploy_runs_is_the_kits_in_apts_history():
    """The install line the deploy's apt steps run (operations/apt.packages, with its wait
    for apt's locks), as apt's history log keeps it (the argv, without the environment
    assignment), is one the uninstall counts as the kit's: every name it asked for, nothing
    else (an option added to the line once made every such install a user's)."""
    import shlex

    from beekeeper.facts.lifecycle import asked_names
    from beekeeper.tasks.uninstall import KIT_PACKAGES

    from .harness import POD_DATA, POD_TOOLS, pod, run_deploy

    tools = replace(POD_TOOLS, tools=(("c++", "/usr/bin/c++"), ("make", "/usr/bin/make")),
                    apt_lists=7)
    ops = run_deploy(POD_DATA, pod(HostTools=tools))
    install = next(c for n, cmds in ops if n.startswith("Install the build tools")
                   for c in cmds if " install " in c)
    argv = [w for w in shlex.split(install) if not w.startswith("DEBIAN_FRONTEND=")]
    asked = asked_names(" ".join(argv))
    assert asked == ["cmake"], (install, asked)
    assert all(KIT_PACKAGES.match(n) for n in asked)
