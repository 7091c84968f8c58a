"""
Issue 23, the audit's gaps: the GPU check inside a container on Docker Desktop and in the
host checks (point 7), the driver purge of `upgrade_driver` kept to the driver's packages
(point 1), Debian 12's dkms check before anything that touches the driver or the boot
(point 4), the example inventory (point 9).

Where the facts come from:
- `docker-info-desktop-wsl2.txt`: real `docker info` of Docker Desktop (README-host-states.md).
- `dpkg-query-nvidia-ubuntu2404-570.txt` and `dpkg-query-nvidia-debian12-535.txt`: what
  `dpkg-query -W -f '${binary:Package} ${Status}\\n'` prints on an Ubuntu 24.04 box with
  Ubuntu's nvidia-driver-570 (apt install, DKMS), the CUDA toolkit from Ubuntu's archive,
  nvidia-prime, nvidia-settings and the Container Toolkit; and on a Debian 12 box with
  Debian's nvidia-driver (535) and the Container Toolkit. Assembled by hand, not captured
  on one host: the package names are the binary packages Ubuntu's
  nvidia-graphics-drivers-570/-580 and Debian's nvidia-graphics-drivers source packages
  build (as Ubuntu's and Debian's archive pages list them), with i386 copies of the libraries and
  a config-files leftover as `dpkg -l '*nvidia*'` listings in NVIDIA's and Docker's issue
  trackers show them (NVIDIA/nvidia-container-toolkit#229, docker/docs#19366); the other
  packages are those archives' own names.
- UBUNTU_PRECOMPILED: the names in real `dpkg -l | grep -i nvidia` output on Ubuntu 24.04
  with Ubuntu's signed precompiled 550-server modules (NVIDIA/gpu-driver-container#186).
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from beekeeper.core.container import gpu_in_container_command
from beekeeper.core.deployed import DeployedService
from beekeeper.core.distro import apt_wait
from beekeeper.facts.docker import parse_docker_engine
from beekeeper.facts.host import OsReleaseInfo, parse_debian_components
from beekeeper.operations import nvidia
from beekeeper.verify import test_host as checks

from .harness import (
    DEFAULTS,
    NATIVE,
    NO_DOCKER,
    PCI_RTX4090,
    UBUNTU_570,
    Out,
    _rtx3090_570,
    facts as gpu_facts,
    names,
    require_tools,
    run_deploy,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
GPU_CHECK = "Check that the GPU is visible inside a container"


def facts(**over):
    """test_gpu_hosts' canned host, with no old builds or units for the cleanup to read."""
    return gpu_facts(**{"FolderEntries": [], **over})


# --- point 7: the GPU inside a container on Docker Desktop --------------------------------

def _desktop():
    info = (DATA / "docker-info-desktop-wsl2.txt").read_text().splitlines()
    return parse_docker_engine(["path=/usr/bin/docker"]
                               + ["info=" + x for x in info])


def test_docker_desktop_gets_the_gpu_check_but_no_toolkit():
    desktop = _desktop()
    assert desktop.flavour == "docker-desktop" and not desktop.nvidia_runtime
    ops = run_deploy({**DEFAULTS, "use_docker_desktop": True},
                     facts(DockerEngine=desktop, ComposeVersion="2.40.3"))
    steps = names(ops)
    assert GPU_CHECK in steps
    assert not any("Container Toolkit" in s or "nvidia runtime" in s for s in steps)
    build = next(s for s in steps if s.startswith("Build server image"))
    serve = next(s for s in steps if s.startswith("Start and enable beekeeper-llm"))
    assert steps.index(build) < steps.index(GPU_CHECK) < steps.index(serve)
    cmd = " ".join(c for n, cs in ops if n == GPU_CHECK for c in cs)
    assert "docker run --rm --gpus all --entrypoint nvidia-smi" in cmd
    assert "Docker Desktop" in cmd and "Container Toolkit" not in cmd


def test_the_gpu_check_is_skipped_only_without_a_gpu_server_in_a_container():
    desktop = _desktop()
    steps = names(run_deploy({**DEFAULTS, "use_docker_desktop": True, "profile": "cpu-tiny"},
                             facts(DockerEngine=desktop, ComposeVersion="2.40.3",
                                   GpuInfo=None)))
    assert GPU_CHECK not in steps
    # the host's own engine: toolkit and check, the check's fix names the toolkit
    ops = run_deploy(DEFAULTS, facts())
    assert GPU_CHECK in names(ops)
    assert "Container Toolkit" in " ".join(c for n, cs in ops if n == GPU_CHECK for c in cs)


# --- point 7: the same check after the deploy (verify/test_host.py) ----------------------

# Docker's answer when no engine-side GPU support is there (moby daemon/oci, as printed)
NO_GPU_DRIVER = ('docker: Error response from daemon: could not select device driver "" '
                 'with capabilities: [[gpu]].')

CUDA_SVC = DeployedService(
    mode="container", profile="q8-turbo4-64k", container="beekeeper-llm",
    image="beekeeper/llama-server:ba1fdce591f5-cuda13.2-sm89-1a2b3c4d")
CPU_SVC = DeployedService(
    mode="container", profile="cpu-tiny", container="beekeeper-tiny",
    image="beekeeper/llama-server:ba1fdce591f5-cpu-x86-64-v3-5e6f7a8b")


@dataclass
class Host:
    """testinfra's `host`, answering `docker run ... nvidia-smi` with `answer`."""

    answer: Out
    commands: list[str] = field(default_factory=list)

    def run(self, command: str) -> Out:
        self.commands.append(command)
        assert command.startswith("docker run --rm --gpus all --entrypoint nvidia-smi ")
        return self.answer


def test_the_host_checks_look_for_the_gpu_inside_a_container_of_the_server_image():
    host = Host(Out(0, "NVIDIA GeForce RTX 4090, 8.9\n"))
    checks.test_gpu_visible_inside_a_container(host, [CUDA_SVC, CPU_SVC])
    assert host.commands == [gpu_in_container_command(CUDA_SVC.image)]
    assert CUDA_SVC.image in host.commands[0]
    # a name the shell would read is quoted
    assert "'a b;c'" in gpu_in_container_command("a b;c")


def test_no_gpu_inside_a_container_fails_with_dockers_words_and_the_fix():
    with pytest.raises(AssertionError) as e:
        checks.test_gpu_visible_inside_a_container(Host(Out(125, "", NO_GPU_DRIVER)),
                                                   [CUDA_SVC])
    text = str(e.value)
    assert "could not select device driver" in text and "Container Toolkit" in text
    assert "Docker Desktop" in text
    # exit 0 and nothing printed sees no GPU either
    with pytest.raises(AssertionError, match="no GPU inside a container"):
        checks.test_gpu_visible_inside_a_container(Host(Out(0, "")), [CUDA_SVC])


def test_cpu_and_native_services_skip_the_gpu_check_with_a_reason():
    from beekeeper.verify import host_checks

    # the decision (verify/host_checks.py), asserted on: a wrong one fails here, never skips
    assert host_checks.gpu_checked([CPU_SVC]).skip == ("no container-mode service with a CUDA "
                                                       "profile: no GPU to look for")
    assert host_checks.gpu_checked([DeployedService(mode="native")]).skip.startswith(
        "no container-mode service: ")
    assert host_checks.gpu_checked([CPU_SVC, CUDA_SVC]).items == (CUDA_SVC,)
    # a profile this kit does not know: the image tag says CUDA or not
    unknown = replace(CUDA_SVC, profile="my-own")
    assert host_checks.gpu_checked([unknown]) == host_checks.Applies(items=(unknown,))
    assert host_checks.gpu_checked([replace(CPU_SVC, profile="my-own")]).skip
    # the testinfra check skips on that reason, and checks the unknown profile's image
    with pytest.raises(pytest.skip.Exception, match="no container-mode service with a CUDA"):
        checks.test_gpu_visible_inside_a_container(Host(Out(1, "")), [CPU_SVC])
    host = Host(Out(0, "NVIDIA H200, 9.0"))
    checks.test_gpu_visible_inside_a_container(host, [unknown])
    assert host.commands == [gpu_in_container_command(unknown.image)]


# --- point 1: upgrade_driver purges the driver, nothing else -----------------------------

UBUNTU_DRIVER = {
    "libnvidia-cfg1-570:amd64", "libnvidia-common-570", "libnvidia-compute-570:amd64",
    "libnvidia-compute-570:i386", "libnvidia-decode-570:amd64", "libnvidia-decode-570:i386",
    "libnvidia-encode-570:amd64", "libnvidia-encode-570:i386", "libnvidia-extra-570:amd64",
    "libnvidia-fbc1-570:amd64", "libnvidia-fbc1-570:i386", "libnvidia-gl-570:amd64",
    "libnvidia-gl-570:i386", "nvidia-compute-utils-570", "nvidia-dkms-570",
    "nvidia-driver-570", "nvidia-firmware-570-570.172.08", "nvidia-kernel-common-570",
    "nvidia-kernel-source-570", "nvidia-utils-570", "xserver-xorg-video-nvidia-570"}
UBUNTU_KEPT = {
    "libnvidia-container-tools", "libnvidia-container1:amd64", "libnvidia-egl-gbm1:amd64",
    "libnvidia-egl-wayland1:amd64", "libxnvctrl0:amd64", "nvidia-container-toolkit",
    "nvidia-container-toolkit-base", "nvidia-cuda-dev:amd64", "nvidia-cuda-gdb",
    "nvidia-cuda-toolkit", "nvidia-cuda-toolkit-doc", "nvidia-opencl-dev:amd64",
    "nvidia-prime", "nvidia-profiler", "nvidia-settings", "screen-resolution-extra"}
DEBIAN_DRIVER = {
    "firmware-nvidia-gsp", "libcuda1:amd64", "libegl-nvidia0:amd64",
    "libgl1-nvidia-glvnd-glx:amd64", "libgles-nvidia1:amd64", "libgles-nvidia2:amd64",
    "libglx-nvidia0:amd64", "libnvcuvid1:amd64", "libnvidia-allocator1:amd64",
    "libnvidia-cfg1:amd64", "libnvidia-eglcore:amd64", "libnvidia-encode1:amd64",
    "libnvidia-glcore:amd64", "libnvidia-glvkspirv:amd64", "libnvidia-ml1:amd64",
    "libnvidia-ptxjitcompiler1:amd64", "libnvidia-rtcore:amd64", "libnvoptix1:amd64",
    "nvidia-alternative", "nvidia-cuda-mps", "nvidia-driver", "nvidia-driver-bin",
    "nvidia-driver-libs:amd64", "nvidia-egl-common", "nvidia-egl-icd:amd64",
    "nvidia-kernel-common", "nvidia-kernel-dkms", "nvidia-kernel-support", "nvidia-legacy-check",
    "nvidia-modprobe",
    "nvidia-opencl-common", "nvidia-opencl-icd:amd64", "nvidia-persistenced", "nvidia-smi",
    "nvidia-suspend-common", "nvidia-vdpau-driver:amd64", "nvidia-vulkan-common",
    "nvidia-vulkan-icd:amd64", "xserver-xorg-video-nvidia"}
UBUNTU_PRECOMPILED = [
    "libnvidia-cfg1-550-server:amd64", "libnvidia-compute-550-server:amd64",
    "linux-modules-nvidia-550-server-6.8.0-51-generic",
    "linux-objects-nvidia-550-server-6.8.0-51-generic",
    "linux-signatures-nvidia-6.8.0-51-generic", "nvidia-compute-utils-550-server",
    "nvidia-firmware-550-server-550.127.08", "nvidia-kernel-common-550-server"]
# NVIDIA's own packages: the 580 names (Ubuntu), the branch-less ones from 590 (NVIDIA's
# "Ubuntu 590 package renames" table), the metas and branch locks; and what is not the driver
NVIDIA_REPO = ["cuda-drivers", "cuda-drivers-580", "nvidia-open", "nvidia-open-580",
               "nvidia-driver-580-open", "nvidia-dkms-580-open", "nvidia-kernel-source-580-open",
               "nvidia-driver-pinning-580", "libnvidia-compute", "libnvidia-gpucomp",
               "nvidia-dkms-open", "nvidia-driver-open", "nvidia-kernel-source-open",
               "nvidia-kernel-open-dkms", "nvidia-open-kernel-dkms"]
NOT_THE_DRIVER = ["nvidia-fabricmanager-570", "libnvidia-nscq-570", "nvidia-imex-570",
                  "nvidia-fs-dkms", "nvidia-driver-assistant", "nvidia-xconfig",
                  "nvidia-openjdk-8-jre", "nvidia-libopencl1:amd64", "nvidia-docker2",
                  "nvidia-container-runtime", "glx-alternative-nvidia", "nvidia-support",
                  "nvidia-installer-cleanup", "nvidia-detect", "libnvsdm"]


def _stub(folder: Path, name: str, body: str) -> None:
    p = folder / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)


def _dpkg(tmp_path: Path, listing: str) -> Path:
    """A PATH whose dpkg-query prints `listing`, its apt-get simulates by purging exactly
    what it is given plus $EXTRA, and whose apt-mark and apt-get log what they were asked."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    data = tmp_path / "dpkg.txt"
    data.write_text(listing)
    log = tmp_path / "log"
    _stub(bin_, "dpkg-query", f"cat {data}")
    _stub(bin_, "apt-mark", f'echo "apt-mark $*" >> {log}')
    _stub(bin_, "apt-get", 'if [ "$1" = -s ]; then shift 4; '
                           'for p in "$@" $EXTRA; do echo "Purg $p [1.0]"; done; '
                           f'else echo "apt-get $*" >> {log}; fi')
    return bin_


def _sh(command: str, bin_: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          timeout=30, env={"PATH": f"{bin_}:/usr/bin:/bin", **env})


def _picked(tmp_path: Path, listing: str, branch: int | None = None) -> set[str]:
    out = _sh(nvidia.purge_pick(branch), _dpkg(tmp_path, listing))
    return set(out.stdout.split())


def test_the_purge_takes_ubuntus_driver_and_leaves_cuda_prime_settings_and_the_toolkit(
        tmp_path):
    listing = (DATA / "dpkg-query-nvidia-ubuntu2404-570.txt").read_text()
    assert _picked(tmp_path, listing) == UBUNTU_DRIVER
    # every nvidia package of the listing is either taken or named as kept, none unsorted
    nvidia_named = {ln.split()[0] for ln in listing.splitlines()
                    if "nvidia" in ln and ln.endswith(" installed")}
    assert nvidia_named - UBUNTU_DRIVER == {n for n in UBUNTU_KEPT if "nvidia" in n}


def test_the_purge_takes_debians_driver_and_leaves_the_rest(tmp_path):
    listing = (DATA / "dpkg-query-nvidia-debian12-535.txt").read_text()
    picked = _picked(tmp_path, listing)
    assert picked == DEBIAN_DRIVER
    for kept in ("nvidia-settings", "nvidia-container-toolkit", "libnvidia-container1:amd64",
                 "libnvidia-egl-wayland1:amd64", "glx-alternative-nvidia", "nvidia-support"):
        assert kept not in picked


def test_the_purge_knows_precompiled_modules_nvidias_names_and_what_is_not_the_driver(
        tmp_path):
    names_ = UBUNTU_PRECOMPILED + NVIDIA_REPO + NOT_THE_DRIVER
    listing = "".join(f"{n} install ok installed\n" for n in names_)
    assert _picked(tmp_path, listing) == set(UBUNTU_PRECOMPILED + NVIDIA_REPO)
    # the lock of the branch the kit installs next stays; the old branch's goes
    locks = "nvidia-driver-pinning-580 install ok installed\n" \
            "nvidia-driver-pinning-595 install ok installed\n"
    (tmp_path / "locks").mkdir()
    assert _picked(tmp_path / "locks", locks, branch=595) == {"nvidia-driver-pinning-580"}


def test_the_pattern_is_the_same_in_python_and_grep():
    pattern = re.compile(nvidia.PURGE_PATTERN)
    for n in UBUNTU_DRIVER | DEBIAN_DRIVER:
        assert pattern.match(n), n
    for n in UBUNTU_KEPT | set(NOT_THE_DRIVER):
        assert not pattern.match(n) or re.match(nvidia.KEEP_PATTERN, n), n


def test_the_purge_stops_before_purging_when_apt_would_take_more(tmp_path):
    bin_ = _dpkg(tmp_path, (DATA / "dpkg-query-nvidia-ubuntu2404-570.txt").read_text())
    # Ubuntu's nvidia-cuda-dev depends on libnvidia-compute (or libcuda.so.1)
    out = _sh(nvidia.purge_command(595), bin_, EXTRA="nvidia-cuda-dev:amd64 nvidia-cuda-toolkit")
    assert out.returncode == 1
    assert "nothing was purged" in out.stderr
    assert "nvidia-cuda-dev:amd64 nvidia-cuda-toolkit" in out.stderr
    assert not (tmp_path / "log").exists()  # no unhold, no purge


def test_the_purge_unholds_and_purges_exactly_the_driver(tmp_path):
    bin_ = _dpkg(tmp_path, (DATA / "dpkg-query-nvidia-ubuntu2404-570.txt").read_text())
    out = _sh(nvidia.purge_command(595), bin_, EXTRA="")
    assert out.returncode == 0, out.stderr
    unhold, purge = (tmp_path / "log").read_text().splitlines()
    assert set(unhold.split()[2:]) == UBUNTU_DRIVER and unhold.startswith("apt-mark unhold ")
    assert purge.startswith("apt-get purge -y ") and set(purge.split()[3:]) == UBUNTU_DRIVER


def test_upgrade_driver_queues_the_narrow_purge():
    ops = run_deploy({**DEFAULTS, "upgrade_driver": True},
                     facts(Wsl=NATIVE, GpuInfo=_rtx3090_570(), LinuxDriverPackages=UBUNTU_570))
    cmd = " ".join(c for n, cs in ops if n.startswith("Purge the installed NVIDIA") for c in cs)
    assert nvidia.purge_command(595) == cmd
    assert "'^(nvidia-|" not in cmd  # not every nvidia-* package


# --- point 4: Debian 12's dkms check before the driver or the boot is touched ------------

DEBIAN12 = {"Wsl": replace(NATIVE, kernel_release="6.1.0-18-amd64"),
            "OsRelease": OsReleaseInfo(id="debian", version_id="12"),
            "DebianComponents": parse_debian_components(["Components: main non-free-firmware"])}
CHECK = "Check that Debian 12's dkms can take the driver packages"


@pytest.mark.parametrize(("upgrade", "docker"), [(False, True), (True, True), (False, False)])
def test_debian_12s_dkms_check_comes_before_nouveau_headers_and_purge(upgrade, docker):
    engine = {} if docker else {"DockerEngine": NO_DOCKER}
    if upgrade:
        host = facts(**DEBIAN12, **engine, GpuInfo=_rtx3090_570(), LinuxDriverPackages=UBUNTU_570)
        data = {**DEFAULTS, "upgrade_driver": True}
    else:
        host = facts(**DEBIAN12, **engine, GpuInfo=None, PciListing=PCI_RTX4090)
        data = DEFAULTS
    ops = run_deploy(data, host)
    steps = names(ops)
    touching = [s for s in steps if s.startswith(("Blacklist nouveau", "Install the kernel "
                                                  "headers", "Purge the installed NVIDIA"))]
    assert len(touching) == (3 if upgrade else 2)
    before = steps[:steps.index(CHECK)]
    assert "Enable Debian's contrib archive area (NVIDIA's Debian steps)" in before
    assert "Add NVIDIA's CUDA repository (signed-by its keyring)" in before
    assert not set(touching) & set(before)
    # apt's lists are refreshed first: NVIDIA's repository was added in this same run
    cmd = " ".join(c for n, cs in ops if n == CHECK for c in cs)
    assert cmd.startswith(apt_wait() + "; apt-get update -qq && ") and "apt-get install -s" in cmd
    assert "apt-get download -qq nvidia-driver-pinning-595" in cmd  # its pins, not installed
    # the stop says what changed by then: the two sources, and Docker on a host without it
    assert "the driver and the boot were not touched" in cmd
    assert any(s.startswith("Install host packages: docker.io") for s in before) != docker
    assert "s engine where the host had none" in cmd


# --- point 9: the example inventory --------------------------------------------------------

def test_the_example_inventory_names_no_host_and_says_how(monkeypatch, tmp_path):
    monkeypatch.delenv("BEEKEEPER_HOSTS", raising=False)
    path = str(ROOT / "inventories" / "home.py")
    with pytest.raises(SystemExit) as e:
        runpy.run_path(path)
    assert "names no host" in str(e.value.code) and "BEEKEEPER_HOSTS" in str(e.value.code)
    text = (ROOT / "inventories" / "home.py").read_text()
    head = text.split('"""')[1]
    assert "a WSL2 box and a native Linux box" in head and "commented out" in head
    # both examples are there, commented
    assert '#     "wsl-4090.local",' in text and '#     "linux-3090.lan",' in text
    # BEEKEEPER_HOSTS names them instead: spaces and empty names dropped, each host with
    # the group defaults only (no example's settings)
    monkeypatch.setenv("BEEKEEPER_HOSTS", " box-a.lan, ,box-b.lan,")
    assert runpy.run_path(path)["gpu_boxes"] == [("box-a.lan", {}), ("box-b.lan", {})]
    # the examples as a user uncomments them: two hosts whose data the kit takes as it is
    monkeypatch.delenv("BEEKEEPER_HOSTS")
    body = text.split("gpu_boxes: list[tuple[str, dict]] = [", 1)[1].split("\n]\n", 1)[0]
    uncommented = text.replace(body, re.sub(r"(?m)^    # (?=\($|\),$|  )", "    ", body))
    (tmp_path / "home.py").write_text(uncommented)
    boxes = runpy.run_path(str(tmp_path / "home.py"))["gpu_boxes"]
    assert [h for h, _ in boxes] == ["wsl-4090.local", "linux-3090.lan"]
    from beekeeper.core.config import load_host_config

    cfgs = [load_host_config({**DEFAULTS, **data}) for _, data in boxes]
    assert [c.service.profile.name for c in cfgs] == ["q8-turbo4-64k", "q4km-f16-32k"]
    assert cfgs[1].data.cuda_arch == "86" and cfgs[1].service.data.port == 8084



# --- point 4: the simulation picks the branch's versions (real apt, a local repository) ---

def _deb(root, name: str, version: str, files: dict[str, str]) -> Path:
    """A real .deb built by dpkg-deb: `files` {path inside: text}."""
    tree = root / f"{name}-{version}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: t <t@t>\n"
        f"Description: test\n")
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    out = root / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "-b", str(tree), str(out)], check=True, capture_output=True)
    return out


def _apt_world(tmp, pin_branch: str):
    """A repository like NVIDIA's as apt sees it: nvidia-open at the pinned branch (its dkms
    package takes Debian 12's dkms 3.0.10) and at a newer one (needs dkms 3.1.8), and the
    branch's pinning package, whose preferences file pins the branch (a real .deb)."""
    import hashlib

    repo = tmp / "repo"
    repo.mkdir()
    pin = _deb(repo, f"nvidia-driver-pinning-{pin_branch}", f"{pin_branch}.0-1", {
        "etc/apt/preferences.d/nvidia-pin": "Package: nvidia-open nvidia-kernel-open-dkms\n"
        f"Pin: version {pin_branch}.*\nPin-Priority: 1000\n"})
    data = pin.read_bytes()
    stanzas = [f"Package: nvidia-driver-pinning-{pin_branch}\nVersion: {pin_branch}.0-1\n"
               f"Architecture: all\nFilename: ./{pin.name}\nSize: {len(data)}\n"
               f"SHA256: {hashlib.sha256(data).hexdigest()}\nDescription: pin\n",
               "Package: dkms\nVersion: 3.0.10-8\nArchitecture: all\nFilename: ./dkms.deb\n"
               "Size: 1\nDescription: dkms\n"]
    for version, dkms in (("595.45.04-1", "2.1.0"), ("600.10.01-1", "3.1.8")):
        stanzas += [f"Package: nvidia-open\nVersion: {version}\nArchitecture: all\n"
                    f"Depends: nvidia-kernel-open-dkms (= {version})\nFilename: ./x.deb\n"
                    "Size: 1\nDescription: d\n",
                    f"Package: nvidia-kernel-open-dkms\nVersion: {version}\nArchitecture: all\n"
                    f"Depends: dkms (>= {dkms})\nFilename: ./y.deb\nSize: 1\nDescription: k\n"]
    (repo / "Packages").write_text("\n".join(stanzas))
    state = tmp / "state"
    for d in ("lists/partial", "etc/preferences.d", "etc/sources.list.d", "cache/archives/partial"):
        (state / d).mkdir(parents=True)
    (state / "status").write_text("")
    (state / "etc" / "sources.list").write_text(f"deb [trusted=yes] file:{repo} ./\n")
    conf = tmp / "apt.conf"
    conf.write_text(
        f'Dir::State "{state}";\nDir::State::status "{state}/status";\n'
        f'Dir::Cache "{state}/cache";\nDir::Etc::SourceList "{state}/etc/sources.list";\n'
        f'Dir::Etc::SourceParts "{state}/etc/sources.list.d";\n'
        f'Dir::Etc::PreferencesParts "{state}/etc/preferences.d";\n'
        'APT::Sandbox::User "root";\nDebug::NoLocking "true";\n')
    return {**os.environ, "APT_CONFIG": str(conf)}


@pytest.mark.parametrize("branch,ok", [("595", True), ("600", False)])
def test_debian_12s_simulation_installs_the_pinned_branch_not_the_newest(tmp_path, branch, ok):
    """Without the pinning package's pins, apt simulates the newest nvidia-open (600 here,
    whose dkms package needs dkms 3.1.8) and refuses a branch that installs fine."""
    require_tools("apt-get", "dpkg-deb", why="Debian's apt and dpkg")
    from beekeeper.operations.nvidia import installable_command

    env = _apt_world(tmp_path, branch)
    cmd = installable_command(f"nvidia-driver-pinning-{branch}", ["nvidia-open"], "FIX-LINE")
    p = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, env=env,
                       timeout=120, cwd=tmp_path)
    assert (p.returncode == 0) == ok, p.stdout + p.stderr
    if not ok:
        assert "dkms" in p.stderr and "FIX-LINE" in p.stderr, p.stderr
