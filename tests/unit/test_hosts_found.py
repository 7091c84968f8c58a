"""
Hosts as users have them (issue 23, points 1, 3, 4, 5 and 8, and the reviewer's findings on
points 2 and 7), plus a host whose facts cannot be read (issue 24). Facts come from real
command output where it could be found (tests/unit/data/README-host-states.md); what was
typed by hand says so where it is defined.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from beekeeper.core.errors import BeekeeperError, PreflightError
from beekeeper.facts.docker import DockerEngineInfo

from .harness import (
    DEFAULTS,
    NATIVE,
    NO_DOCKER,
    NO_DRIVER,
    PCI_GTX1080,
    UBUNTU_570,
    _rtx3090_570,
    commands,
    facts,
    names,
    run_deploy,
    run_deploy_hosts,
)

DATA = Path(__file__).parent / "data"


# --- issue 24: a host whose facts cannot be read -----------------------------------------

@pytest.mark.parametrize("fact", ["InitSystem", "Wsl", "OsRelease", "DockerEngine",
                                  "BuildResources"])
def test_a_fact_that_cannot_be_read_is_one_line_naming_it_not_an_attribute_error(fact):
    # pyinfra answers a fact whose command failed (sudo missing: `_sudo = True` on a host
    # without it) with the fact's default, None
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(**{fact: None}))
    msg = str(e.value)
    assert e.value.subject and msg.startswith(
        f"host canned: {e.value.subject}: could not be read")
    assert f"fact {fact} returned nothing" in msg
    assert "_sudo" in msg and "sudo -n true" in msg and "\n" not in msg
    assert isinstance(e.value, BeekeeperError)


def test_an_unreadable_host_fails_alone_and_the_other_host_deploys():
    failed, ops = run_deploy_hosts({
        "no-sudo": (DEFAULTS, facts(InitSystem=None)),
        "good": (DEFAULTS, facts()),
    })
    assert failed == {"no-sudo"}
    assert ops["no-sudo"] == []
    assert any(n.startswith("Build server image") for n in ops["good"])


# --- reviewer, point 2: Secure Boot after a fresh install; Debian 12's key ---------------

SB_ON = ["efi=1", "SecureBoot enabled"]  # mokutil --sb-state's words (lcp/mokutil)
UBUNTU_KEY = "/var/lib/shim-signed/mok/MOK.der"
DKMS_MODULE = "/lib/modules/6.8.0-45-generic/updates/dkms/nvidia.ko.zst"  # typed by hand


def test_a_fresh_install_with_an_enrolled_key_asks_for_a_reboot_not_secure_boot():
    from beekeeper.facts.boot import parse_secure_boot
    from beekeeper.facts.gpu import NvidiaModuleInfo

    sb = parse_secure_boot([*SB_ON, f"{UBUNTU_KEY} is already enrolled"])
    fresh = NvidiaModuleInfo(path=DKMS_MODULE, since_boot=True)
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(**NO_DRIVER, NvidiaKernelModule=fresh, SecureBoot=sb))
    msg = str(e.value)
    assert "installed after the last boot" in msg and "reboot the host" in msg
    assert UBUNTU_KEY in msg and "likely cause" not in msg
    # with allow_reboot the kit reboots it itself
    ops = run_deploy({**DEFAULTS, "allow_reboot": True},
                     facts(**NO_DRIVER, NvidiaKernelModule=fresh, SecureBoot=sb))
    assert "Reboot to load the NVIDIA driver (allow_reboot)" in names(ops)


def test_debian_gets_a_key_recipe_its_dkms_has_not_generate_mok():
    from beekeeper.facts.boot import parse_secure_boot
    from beekeeper.facts.host import OsReleaseInfo

    debian = OsReleaseInfo(id="debian", version_id="12")
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(**NO_DRIVER, OsRelease=debian,
                                   SecureBoot=parse_secure_boot(SB_ON)))
    msg = str(e.value)
    assert "generate_mok" not in msg and "update-secureboot-policy" not in msg
    assert "-keyout /var/lib/dkms/mok.key -outform DER -out /var/lib/dkms/mok.pub" in msg
    assert "mokutil --import /var/lib/dkms/mok.pub" in msg


# --- reviewer, point 7: a stopped Docker Desktop -----------------------------------------

def _desktop_cli_fact(tmp_path, cli_there: bool):
    """The DockerEngine fact, run on a PATH whose docker is Desktop's WSL integration's link
    into its cli-tools: the CLI there (`docker info` failing as with Desktop stopped: the
    stub's message typed by hand), or not (the link dangling)."""
    from beekeeper.facts.docker import DockerEngine

    from .harness import _run_sh as _run, _stub, _tools

    tools = tmp_path / "docker-desktop" / "cli-tools" / "usr" / "bin"
    if cli_there:
        tools.mkdir(parents=True)
        _stub(tools, "docker", 'echo "Cannot connect to the Docker daemon" >&2; exit 1')
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "grep", "readlink")
    (bin_ / "docker").symlink_to(tools / "docker")
    _stub(bin_, "dpkg-query", "exit 1")
    _stub(bin_, "systemctl", "echo inactive")
    return DockerEngine().process(_run(DockerEngine().command(), bin_))


def test_a_stopped_docker_desktop_is_refused_in_preflight(tmp_path):
    got = _desktop_cli_fact(tmp_path, cli_there=True)
    assert got.flavour == "docker-desktop" and got.server_version is None
    with pytest.raises(PreflightError, match=r"Docker Desktop's engine does not answer.*start "
                                             r"Docker Desktop"):
        run_deploy({**DEFAULTS, "use_docker_desktop": True}, facts(DockerEngine=got))
    unknown = replace(got, flavour="unknown")
    with pytest.raises(PreflightError, match="no engine answers"):
        run_deploy(DEFAULTS, facts(DockerEngine=unknown))


@pytest.mark.parametrize("use_desktop", [False, True])
def test_docker_desktop_asleep_leaves_a_dangling_cli_link_and_is_refused_not_replaced(
        tmp_path, use_desktop):
    """Docker Desktop in its resource saver, or quit: the distro's docker CLI is a link into
    Desktop's cli-tools, which are not there, so `command -v docker` finds nothing; the
    deploy must not take that for a host without Docker and install docker.io beside
    Desktop (docs/hosts-as-you-find-them.md: refused, start Docker Desktop). The link is
    the only sign of Desktop: the fix names it, dangling, as one that may go."""
    got = _desktop_cli_fact(tmp_path, cli_there=False)
    assert got.flavour == "docker-desktop" and got.server_version is None, got
    assert got.dangling_link == str(tmp_path / "bin" / "docker")
    with pytest.raises(PreflightError) as e:
        run_deploy({**DEFAULTS, "use_docker_desktop": use_desktop}, facts(DockerEngine=got))
    assert e.value.subject == ("host data `use_docker_desktop`" if use_desktop
                               else "Docker Desktop's WSL integration"), str(e.value)
    assert f"docker link {got.dangling_link} " in e.value.fix
    assert "dangling: remove it only once Docker Desktop is uninstalled" in e.value.fix


@pytest.mark.parametrize("engine", [
    NO_DOCKER,  # no docker CLI at all: Desktop's integration off for this distro
    DockerEngineInfo(present=True, path="/usr/bin/docker", flavour="distro",
                     server_version="24.0.7"),  # the distro's own engine, not Desktop's
])
def test_use_docker_desktop_with_no_desktop_engine_is_refused_before_anything_changes(engine):
    """`use_docker_desktop` where no Docker Desktop engine answers: refused in preflight,
    not taken as leave to install docker.io and the Container Toolkit (or to use another
    engine) in Desktop's stead (docs/hosts-as-you-find-them.md, Docker Desktop)."""
    with pytest.raises(PreflightError) as e:
        run_deploy({**DEFAULTS, "use_docker_desktop": True}, facts(DockerEngine=engine))
    assert e.value.subject == "host data `use_docker_desktop`", str(e.value)
    assert "no Docker Desktop engine answers" in e.value.problem
    assert "WSL integration" in e.value.fix and "remove use_docker_desktop" in e.value.fix
    assert "dangling" not in e.value.fix


# --- point 5: the image's own rule, the card's brand -------------------------------------

def _h200_580():
    from beekeeper.facts.gpu import parse_nvidia_smi

    # the GpuInfo command's own output on the H200 host (its nvidia-smi under
    # /usr/local/nvidia/bin there), as it printed it
    lines = (DATA / "gpuinfo-fact-h200-580.txt").read_text().splitlines()
    return replace(parse_nvidia_smi(lines), path="/usr/bin/nvidia-smi")


def test_the_kit_spells_the_images_rule_as_nvidia_does():
    from beekeeper.core.cudacompat import require_cuda

    assert require_cuda("13.2.1") == (DATA / "require-cuda-13.2.1-base-dockerfile.txt"
                                      ).read_text().strip()
    assert require_cuda("13.0.2") == (DATA / "require-cuda-13.0.2-h200-env.txt"
                                      ).read_text().strip()


def test_an_h200_on_580_runs_the_13_2_image_by_the_images_rule():
    h200 = _h200_580()
    assert h200.brand == "NVIDIA" and h200.driver_version == "580.159.04"
    ops = run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=h200))
    assert any(n.startswith("Build server image") and "cuda13.2-sm90-" in n for n in names(ops))
    # the same driver on a GeForce card: refused before any change
    geforce = replace(h200, brand="GeForce")
    with pytest.raises(PreflightError, match=r"reports CUDA 13\.0, brand GeForce, older than"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=geforce))
    # a datacenter card on a branch the rule does not list (585): refused
    with pytest.raises(PreflightError, match="upgrade_driver = True"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=replace(h200, driver_version="585.1"),
                                   LinuxDriverPackages=["nvidia-open"]))


# --- point 1: a driver already installed, older than cuda_version needs -------------------


def test_an_old_driver_is_refused_by_default_with_both_keys_offered():
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=_rtx3090_570(),
                                   LinuxDriverPackages=UBUNTU_570))
    msg = str(e.value)
    assert "upgrade_driver = True" in msg and "cuda_follows_driver = True" in msg
    assert "branch 595" in msg and "CUDA 12.8.1" in msg and "\n" not in msg


def test_upgrade_driver_purges_the_old_driver_then_installs_the_pinned_branch():
    ops = run_deploy({**DEFAULTS, "upgrade_driver": True},
                     facts(Wsl=NATIVE, GpuInfo=_rtx3090_570(), LinuxDriverPackages=UBUNTU_570))
    steps = names(ops)
    purge = next(s for s in steps if s.startswith("Purge the installed NVIDIA driver (570"))
    pin = "Lock the NVIDIA driver to branch 595 (nvidia-driver-pinning-595)"
    install = "Install the NVIDIA driver, branch 595 (nvidia-open)"
    assert steps.index(purge) < steps.index(pin) < steps.index(install)
    assert not any(s.startswith("Hold the NVIDIA driver") for s in steps)  # the pin keeps it
    cmd = " ".join(c for n, cs in ops if n == purge for c in cs)
    assert "apt-mark unhold" in cmd and "apt-get purge -y" in cmd
    assert "grep -vE '^libnvidia-(container|" in cmd  # the Container Toolkit is kept
    # installed after the purge even though dpkg listed a driver at the start of the run
    assert any("apt-get install" in c and "nvidia-open" in c
               for n, cs in ops if n == install for c in cs)
    assert steps[-1] == "Stop: the new NVIDIA driver needs a reboot"


def test_cuda_follows_driver_builds_the_image_for_the_drivers_cuda():
    ops = run_deploy({**DEFAULTS, "cuda_follows_driver": True},
                     facts(Wsl=NATIVE, GpuInfo=_rtx3090_570()))
    build = next(n for n in names(ops) if n.startswith("Build server image"))
    assert "cuda12.8-sm86-" in build
    dockerfile = next(c for n, cs in ops if n == "Render the Dockerfile" for c in cs
                      if c.startswith("upload "))
    assert "ARG BUILD_BASE=nvidia/cuda:12.8.1-devel-ubuntu24.04" in dockerfile
    assert not any("NVIDIA driver" in n and "Install" in n for n in names(ops))
    # the CUDA toolkit on the host, where host data asks for it, follows too
    ops = run_deploy({**DEFAULTS, "cuda_follows_driver": True, "install_cuda_toolkit": True},
                     facts(Wsl=NATIVE, GpuInfo=_rtx3090_570()))
    assert "Install the CUDA toolkit (cuda-toolkit-12-8 only)" in names(ops)


# --- point 3: open kernel modules, headers for future kernels ----------------------------

def test_open_modules_by_default_proprietary_on_request_and_headers_for_future_kernels():
    steps = names(run_deploy(DEFAULTS, facts(**NO_DRIVER)))
    assert "Install the NVIDIA driver, branch 595 (nvidia-open)" in steps
    assert "Install the kernel headers (linux-headers-6.8.0-45-generic, linux-headers-generic)" \
        in steps
    steps = names(run_deploy({**DEFAULTS, "driver_flavour": "proprietary"}, facts(**NO_DRIVER)))
    assert "Install the NVIDIA driver, branch 595 (cuda-drivers)" in steps


# `uname -r` of each kernel flavour, as the archives name their headers packages (Debian's:
# linux-headers-<release> beside the meta-packages, read from trixie's and bookworm-backports'
# package lists; Ubuntu's: the GA and HWE series of each LTS release)
@pytest.mark.parametrize(("os_id", "version", "kernel", "meta"), [
    ("debian", "12", "6.1.0-18-amd64", "linux-headers-amd64"),
    ("debian", "12", "6.1.0-18-cloud-amd64", "linux-headers-cloud-amd64"),
    ("debian", "12", "6.12.95+deb12-amd64", "linux-headers-amd64"),      # backports
    ("debian", "12", "6.12.12+bpo-amd64", "linux-headers-amd64"),        # older backports
    ("debian", "13", "6.12.117+deb13-amd64", "linux-headers-amd64"),
    ("debian", "13", "6.12.117+deb13-cloud-amd64", "linux-headers-cloud-amd64"),
    ("debian", "13", "6.12.117+deb13-rt-amd64", "linux-headers-rt-amd64"),
    ("ubuntu", "24.04", "6.8.0-45-generic", "linux-headers-generic"),
    ("ubuntu", "22.04", "5.15.0-122-generic", "linux-headers-generic"),
    ("ubuntu", "22.04", "6.8.0-45-generic", "linux-headers-generic-hwe-22.04"),
    ("ubuntu", "24.04", "6.14.0-29-generic", "linux-headers-generic-hwe-24.04"),
    ("ubuntu", "22.04", "6.5.0-1025-azure", "linux-headers-azure"),
    ("ubuntu", "24.04", "6.8.0-1015-gcp", "linux-headers-gcp"),
    ("fedora", "41", "6.11.4-301.fc41.x86_64", None),
])
def test_the_headers_meta_package_follows_the_running_kernels_flavour(os_id, version, kernel,
                                                                      meta):
    from beekeeper.core.distro import headers_meta

    assert headers_meta({"id": os_id, "version_id": version}, kernel) == meta


def test_open_modules_are_refused_on_a_pre_turing_card():
    from beekeeper.facts.gpu import GpuCard

    pascal = replace(_rtx3090_570(), gpus=(GpuCard(name="NVIDIA GeForce GTX 1080 Ti",
                                                   driver_version="570.172.08",
                                                   compute_cap="6.1", memory_total_mib=11264),))
    with pytest.raises(PreflightError, match="driver_flavour = 'proprietary'"):
        run_deploy({**DEFAULTS, "upgrade_driver": True, "cuda_arch": "61"},
                   facts(Wsl=NATIVE, GpuInfo=pascal))


def _sysfs_listing(tmp_path: Path, functions: dict[str, tuple[str, str, str]]) -> tuple:
    """The PCI fact's command, run by sh over a sysfs-shaped tree: each PCI function's
    vendor, class and device files as the kernel writes them (hex, a newline). Returns what
    it prints, the listing the PCI fact parses (the harness's PciListing)."""
    import subprocess

    from beekeeper.facts.gpu import PciNvidiaDevices

    root = tmp_path / "devices"
    for slot, (vendor, cls, device) in functions.items():
        (root / slot).mkdir(parents=True)
        for name, value in (("vendor", vendor), ("class", cls), ("device", device)):
            (root / slot / name).write_text(value + "\n")
    cmd = PciNvidiaDevices().command().replace("/sys/bus/pci/devices", str(root))
    out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, check=True)
    return tuple(out.stdout.splitlines())


def test_with_no_driver_a_pre_turing_card_is_told_by_its_pci_id_before_any_change(tmp_path):
    from .harness import pci_facts

    # a GTX 1080 (GP104, 10de:1b80) and its HDMI audio function, beside an Intel iGPU
    pascal = _sysfs_listing(tmp_path / "a", {
        "0000:00:02.0": ("0x8086", "0x030000", "0x3e92"),
        "0000:01:00.0": ("0x10de", "0x030000", "0x1b80"),
        "0000:01:00.1": ("0x10de", "0x040300", "0x10f0")})
    assert pascal == PCI_GTX1080  # the harness's canned listing is what sysfs gives
    assert pci_facts(pascal) == {"PciNvidiaDevices": (0x1B80,)}
    # an RTX 4090 (AD102, 10de:2684)
    ada = _sysfs_listing(tmp_path / "b", {"0000:01:00.0": ("0x10de", "0x030000", "0x2684")})
    assert pci_facts(ada) == {"PciNvidiaDevices": (0x2684,)}
    # the refusal names the card by its PCI id and the whole way that works (CUDA 13 and
    # the branches after 580 dropped Pascal), before any change
    refusal = (r"PCI id 10de:1b80\) is older than Turing \(ids below 10de:1e00\): Maxwell, "
               r"Pascal or Volta, which CUDA 13 dropped .*fix: set driver_flavour = "
               r"'proprietary', cuda_version = '12\.9\.1' and driver_branch = 580")
    with pytest.raises(PreflightError, match=refusal):
        run_deploy(DEFAULTS, facts(**{**NO_DRIVER, "PciListing": pascal}))
    # the proprietary flavour alone, under CUDA 13, is the dead end: refused the same way
    with pytest.raises(PreflightError, match=refusal):
        run_deploy({**DEFAULTS, "driver_flavour": "proprietary"},
                   facts(**{**NO_DRIVER, "PciListing": pascal}))
    # what the refusal offers deploys: branch 580's proprietary driver, CUDA 12.9.1
    old_card = {"driver_flavour": "proprietary", "cuda_version": "12.9.1", "driver_branch": 580}
    steps = names(run_deploy({**DEFAULTS, **old_card},
                             facts(**{**NO_DRIVER, "PciListing": pascal})))
    assert "Install the NVIDIA driver, branch 580 (cuda-drivers)" in steps
    assert not any("branch 595" in s for s in steps)
    assert "Install the NVIDIA driver, branch 595 (nvidia-open)" in names(run_deploy(
        DEFAULTS, facts(**{**NO_DRIVER, "PciListing": ada})))


# --- point 4: Debian's contrib, Debian 12's dkms -----------------------------------------

DEBIAN12 = {"Wsl": replace(NATIVE, kernel_release="6.1.0-18-amd64")}


def test_debian_enables_contrib_and_debian_12_checks_its_dkms_before_the_driver():
    from beekeeper.facts.host import OsReleaseInfo, parse_debian_components

    # Debian 12's stock deb822 sources line (Components: main non-free-firmware)
    found = parse_debian_components(["Components: main non-free-firmware"])
    ops = run_deploy(DEFAULTS, facts(**{**NO_DRIVER, **DEBIAN12}, DebianComponents=found,
                                     OsRelease=OsReleaseInfo(id="debian", version_id="12")))
    steps = names(ops)
    contrib = "Enable Debian's contrib archive area (NVIDIA's Debian steps)"
    check = "Check that Debian 12's dkms can take the driver packages"
    install = "Install the NVIDIA driver, branch 595 (nvidia-open)"
    assert steps.index(contrib) < steps.index(check) < steps.index(install)
    assert "Install the kernel headers (linux-headers-6.1.0-18-amd64, linux-headers-amd64)" \
        in steps
    cmd = " ".join(c for n, cs in ops if n == check for c in cs)
    assert "apt-get install -s" in cmd and "Debian 13" in cmd
    ops = run_deploy(DEFAULTS, facts(**{**NO_DRIVER, **DEBIAN12},
                                     DebianComponents=["main", "contrib"],
                                     OsRelease=OsReleaseInfo(id="debian", version_id="13")))
    assert next(cs for n, cs in ops if n == contrib) == []
    assert check not in names(ops)


# --- point 8: disk for the image build ----------------------------------------------------

def _disk(free_gib: float, model_mount: str = "/srv"):
    """`free_gib` on `/`; model_dir (under /srv) on `model_mount`: there 500 GiB where
    that is a file system of its own."""
    from beekeeper.facts.host import DiskInfo

    def disk_of(path: str) -> DiskInfo:
        mount = model_mount if path.startswith("/srv") else "/"
        free = free_gib if mount == "/" else 500
        return DiskInfo(mount=mount, free_bytes=int(free * 2**30))
    return disk_of


def test_the_deploy_reads_model_dirs_room_for_the_download_and_goes_on_where_unknown():
    """The deploy's preflight reads the free space of model_dir's file system (DiskOf) and
    refuses a download it cannot hold, before any change; a host that does not say (no df
    answer) is not judged: the deploy goes on."""
    from beekeeper.facts.host import DiskInfo

    with pytest.raises(PreflightError, match=r"^host canned: model_dir /srv/beekeeper/models "
                                             r"has 5\.0 GiB free; the model files still to "
                                             r"download or upload need 8\.9 GiB "
                                             r"plus 1 GiB margin: free space or set model_dir "
                                             r"elsewhere"):
        run_deploy(DEFAULTS, facts(DiskOf=DiskInfo(mount="/", free_bytes=5 * 2**30)))
    ops = run_deploy(DEFAULTS, facts(DiskOf=None))
    assert any(n.startswith("Download model ") for n in names(ops))


def test_the_image_build_needs_room_under_dockers_root_dir():
    from beekeeper.facts.docker import parse_docker_engine

    # Docker Root Dir read from the engine's real `docker info`
    info = (DATA / "docker-info-own-engine-wsl2.txt").read_text().splitlines()
    engine = parse_docker_engine(["path=/usr/bin/docker", "pkg_io=1"]
                                 + ["info=" + x for x in info])
    assert engine.root_dir == "/var/lib/docker"
    with pytest.raises(PreflightError, match=r"Docker's root dir /var/lib/docker \(file system "
                                             r"/\) has 8\.0 GiB free; building the CUDA server "
                                             r"image takes about 11 GiB"):
        run_deploy(DEFAULTS, facts(DockerEngine=engine, DiskOf=_disk(8)))
    # model_dir on the same file system: the model download counts there too
    with pytest.raises(PreflightError, match=r"plus the model download 8\.9 GiB"):
        run_deploy(DEFAULTS, facts(DockerEngine=engine, DiskOf=_disk(20, model_mount="/")))
    # room for both: the build is queued, and runs (its command) after its Dockerfile
    ops = run_deploy(DEFAULTS, facts(DockerEngine=engine, DiskOf=_disk(40, model_mount="/")))
    build = next(n for n in names(ops) if n.startswith("Build server image "))
    assert names(ops).index("Render the Dockerfile") < names(ops).index(build)
    assert any("docker build" in c for c in commands(ops, build))
    # the image is there already: nothing to build, so 1 GiB free is no refusal, and the
    # build step changes nothing
    ops = run_deploy(DEFAULTS, facts(DockerEngine=engine, DiskOf=_disk(1),
                                     DockerImageId="sha256:" + "0" * 64))
    assert "Render the Dockerfile" not in names(ops)
    assert commands(ops, "Build server image ") == []
    assert any(n.startswith("Download model ") for n in names(ops))  # the deploy goes on


# --- point 8: the host's proxy, for the build's apt-get ----------------------------------

# a typical Ubuntu /etc/environment behind a proxy (typed by hand; the password is made up)
ENVIRONMENT = ('PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n'
               'http_proxy="http://user:s3cret@proxy.corp:3128/"\n'
               'https_proxy="http://user:s3cret@proxy.corp:3128/"\n'
               'no_proxy="localhost,127.0.0.1,.corp"\n')


def test_the_proxy_reaches_docker_builds_environment_by_name_never_its_command_line(tmp_path):
    import subprocess

    from beekeeper.facts.host import ProxyVars
    from beekeeper.operations.docker import proxy_build

    from .harness import _run_sh as _run, _stub, _tools

    env = tmp_path / "environment"
    env.write_text(ENVIRONMENT)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "grep", "sed")
    names = ProxyVars().process(_run(ProxyVars().command().replace("/etc/environment",
                                                                   str(env)), bin_))
    assert names == ("http_proxy", "https_proxy", "no_proxy")
    prefix, args = proxy_build(names, str(env))
    assert "s3cret" not in prefix + args and "--build-arg http_proxy" in args
    # a stand-in docker prints what it was given and its environment
    _stub(bin_, "docker", 'echo "argv: $*"; echo "env: $https_proxy|$no_proxy"')
    out = subprocess.run(["/bin/sh", "-c", f"{prefix}docker build{args} -t x ."],
                         capture_output=True, text=True, env={"PATH": str(bin_)}).stdout
    argv = next(x for x in out.splitlines() if x.startswith("argv:"))
    assert "s3cret" not in argv and "--build-arg https_proxy" in argv
    assert "env: http://user:s3cret@proxy.corp:3128/|localhost,127.0.0.1,.corp" in out
    assert proxy_build(()) == ("", "")
    # inside the build's heartbeat wrapper too (operations/shell.py), as image_built runs it
    from beekeeper.operations.shell import with_heartbeat

    _tools(bin_, "date", "tail", "awk", "cut", "cat", "mkdir", "sleep")
    log = tmp_path / "log" / "build.log"
    run = subprocess.run(["/bin/sh", "-c", with_heartbeat(f"{prefix}docker build{args} -t x .",
                                                          str(log), "building x", every_s=1)],
                         capture_output=True, text=True, env={"PATH": str(bin_)})
    assert run.returncode == 0, run.stderr
    assert "env: http://user:s3cret@proxy.corp:3128/|" in log.read_text()


def test_behind_a_proxy_an_engine_without_one_is_warned(capsys):
    names = ("http_proxy", "https_proxy")
    run_deploy(DEFAULTS, facts(ProxyVars=names))
    err = capsys.readouterr().err
    assert "uses a proxy (/etc/environment sets http_proxy, https_proxy)" in err
    assert "docker.service.d/http-proxy.conf" in err
    run_deploy(DEFAULTS, facts(ProxyVars=names, DockerEngine=replace(
        facts()["DockerEngine"], proxy=True)))
    assert "uses a proxy" not in capsys.readouterr().err


def test_the_build_step_says_which_proxy_variables_it_passes():
    build = [n for n in names(run_deploy(DEFAULTS, facts(ProxyVars=("http_proxy", "no_proxy"))))
             if n.startswith("Build server image")]
    assert build and build[0].endswith("; proxy from /etc/environment: http_proxy, no_proxy)")
    build = [n for n in names(run_deploy(DEFAULTS, facts())) if n.startswith("Build server")]
    assert build and "proxy" not in build[0]


def test_the_engines_own_proxy_is_read_from_docker_info():
    from beekeeper.facts.docker import parse_docker_engine

    def engine(name: str):
        info = (DATA / name).read_text().splitlines()
        return parse_docker_engine(["path=/usr/bin/docker"] + ["info=" + x for x in info])

    assert engine("docker-info-desktop-wsl2.txt").proxy  # HTTP Proxy: http.docker.internal
    assert not engine("docker-info-own-engine-wsl2.txt").proxy


def test_a_datacenter_card_on_an_older_branch_the_rule_lists_is_accepted_but_not_a_geforce():
    h200 = _h200_580()
    # 570 is listed for brand=nvidia in the 13.2 image's rule (values typed by hand)
    old = replace(h200, driver_version="570.172.08", driver_branch=570, cuda_version="12.8")
    ops = run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=old))
    assert any(n.startswith("Build server image") for n in names(ops))
    # facts out of step (a 570 driver said to report 13.2, as a stand-in nvidia-smi may):
    # the CUDA clause does not hold below the CUDA major's floor branch
    odd = replace(old, brand="GeForce", cuda_version="13.2")
    with pytest.raises(PreflightError, match="driver 570.172.08 is older than 580"):
        run_deploy(DEFAULTS, facts(Wsl=NATIVE, GpuInfo=odd))


def test_contrib_is_added_to_each_debian_source_once(tmp_path):
    import subprocess

    from beekeeper.facts.host import DebianComponents
    from beekeeper.operations import apt_sources

    from .harness import _run_sh as _run, _stub, _tools

    etc = tmp_path / "etc" / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    real = (DATA / "debian12-docker-image-debian.sources").read_text()
    (etc / "sources.list.d" / "debian.sources").write_text(real)
    (etc / "sources.list").write_text("deb http://deb.debian.org/debian bookworm main\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _tools(bin_, "sed", "grep")
    _stub(bin_, "apt-get", "exit 0")

    def here(cmd: str) -> str:
        return cmd.replace("/etc/apt", str(etc))

    assert DebianComponents().process(_run(here(DebianComponents().command()), bin_)) == \
        ["main"]
    cmd = apt_sources.component_command("contrib")  # what the operation yields
    for _ in range(2):  # twice: the second run adds nothing
        subprocess.run(["/bin/sh", "-c", here(cmd)], check=True, env={"PATH": str(bin_)},
                       capture_output=True)
    after = (etc / "sources.list.d" / "debian.sources").read_text()
    assert after.count("Components: main contrib\n") == 2 and "contrib contrib" not in after
    assert (etc / "sources.list").read_text() == \
        "deb http://deb.debian.org/debian bookworm main contrib\n" \
        "# beekeeper added the contrib area to the Debian sources in this file\n"
    assert after.count("# beekeeper added the contrib area") == 1  # the record, once
    assert DebianComponents().process(_run(here(DebianComponents().command()), bin_)) == \
        ["main", "contrib"]
