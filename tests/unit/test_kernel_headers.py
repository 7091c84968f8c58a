"""
Issue 33, Debian kernel headers and Debian 12's dkms: the kernels whose headers the kit
cannot install are refused in preflight, before any change, with a fix that works for CUDA
13; the branch Debian 12's dkms stop offers runs cuda_version.

The `apt-cache policy` outputs are typed by hand in the shape apt prints (the version table
of a package offered by a release at 500 and its backports at 100, as apt-cache policy shows
on a host with backports in its sources); the version numbers are shaped as Debian's kernel
packages' (6.1.x-N for bookworm, 6.12.x-N~bpo12+1 for bookworm-backports), not read from
the archive on a given day.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.facts.host import AptPolicyInfo, OsReleaseInfo, parse_apt_policy

from .harness import DEFAULTS, NATIVE, PCI_RTX4090, facts, names, run_deploy

DEBIAN12 = OsReleaseInfo(id="debian", version_id="12")
DEBIAN13 = OsReleaseInfo(id="debian", version_id="13")
MIRROR = "http://mirror.example/debian"
META_BOOKWORM = f"""linux-headers-amd64:
  Installed: (none)
  Candidate: 6.1.158-1
  Version table:
     6.12.48-1~bpo12+1 100
        100 {MIRROR} bookworm-backports/main amd64 Packages
     6.1.158-1 500
        500 {MIRROR} bookworm/main amd64 Packages
"""
# after `apt install -t bookworm-backports linux-headers-amd64`: installed from backports,
# it stays the candidate (apt never downgrades to the release's 6.1 at 500)
META_FROM_BACKPORTS = f"""linux-headers-amd64:
  Installed: 6.12.48-1~bpo12+1
  Candidate: 6.12.48-1~bpo12+1
  Version table:
 *** 6.12.48-1~bpo12+1 100
        100 {MIRROR} bookworm-backports/main amd64 Packages
        100 /var/lib/dpkg/status
     6.1.158-1 500
        500 {MIRROR} bookworm/main amd64 Packages
"""
OFFERED = """linux-headers-{k}:
  Installed: (none)
  Candidate: {v}
  Version table:
     {v} {p}
        {p} {m} {s}/main amd64 Packages
"""
INSTALL_HEADERS = "Install the kernel headers"
# apt-cache policy of a package no list names prints nothing (the kit's fact: `|| true`)
UNKNOWN = ""


def _policy(outputs: dict[str, str]):
    """The AptPolicy fact of a host whose apt-cache policy prints `outputs` per package."""
    def policy(package: str) -> AptPolicyInfo:
        return parse_apt_policy(outputs.get(package, UNKNOWN).splitlines())
    return policy


def _host(kernel: str, outputs: dict[str, str], os_release: OsReleaseInfo = DEBIAN12,
          **over):
    return facts(**{"Wsl": replace(NATIVE, kernel_release=kernel), "GpuInfo": None,
                    "PciListing": PCI_RTX4090, "OsRelease": os_release,
                    "DebianComponents": ["main", "contrib"], "AptPolicy": _policy(outputs),
                    **over})


@pytest.mark.parametrize("kernel", ["6.12.48+bpo-amd64", "6.12.48+deb12-amd64"],
                         ids=["+bpo", "+deb12 (2025 naming)"])
def test_a_bookworm_backports_kernel_is_refused_before_any_change_naming_backports_headers(
        kernel):
    outputs = {"linux-headers-amd64": META_BOOKWORM,
               f"linux-headers-{kernel}": OFFERED.format(
                   k=kernel, v="6.12.48-1~bpo12+1", p=100, m=MIRROR, s="bookworm-backports")}
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, _host(kernel, outputs))
    msg = str(e.value)
    assert f"the running kernel {kernel} is a bookworm-backports kernel" in msg
    assert "linux-headers-amd64 6.1.158-1 is the 6.1 series'" in msg
    assert "fix: `sudo apt install -t bookworm-backports linux-headers-amd64`" in msg
    assert "\n" not in msg


def test_a_backports_kernel_whose_headers_meta_package_follows_backports_deploys():
    kernel = "6.12.48+bpo-amd64"
    outputs = {"linux-headers-amd64": META_FROM_BACKPORTS,
               f"linux-headers-{kernel}": OFFERED.format(
                   k=kernel, v="6.12.48-1~bpo12+1", p=100, m=MIRROR, s="bookworm-backports")}
    steps = names(run_deploy(DEFAULTS, _host(kernel, outputs)))
    assert f"{INSTALL_HEADERS} (linux-headers-{kernel}, linux-headers-amd64)" in steps
    assert "Install the NVIDIA driver, branch 595 (nvidia-open)" in steps


def test_a_backports_kernel_is_refused_on_an_upgrade_too():
    from .harness import UBUNTU_570, _rtx3090_570

    kernel = "6.12.48+bpo-cloud-amd64"
    with pytest.raises(PreflightError, match=r"apt install -t bookworm-backports "
                                             r"linux-headers-cloud-amd64"):
        run_deploy({**DEFAULTS, "upgrade_driver": True},
                   _host(kernel, {}, GpuInfo=_rtx3090_570(), LinuxDriverPackages=UBUNTU_570))


def test_trixies_own_kernel_and_bookworms_own_kernel_are_not_backports():
    trixie = "6.12.57+deb13-amd64"
    outputs = {"linux-headers-amd64": META_BOOKWORM.replace("6.1.158-1", "6.12.57-1"),
               f"linux-headers-{trixie}": OFFERED.format(k=trixie, v="6.12.57-1", p=500,
                                                         m=MIRROR, s="trixie")}
    assert f"{INSTALL_HEADERS} (linux-headers-{trixie}, linux-headers-amd64)" in names(
        run_deploy(DEFAULTS, _host(trixie, outputs, DEBIAN13)))
    bookworm = "6.1.0-40-amd64"
    outputs = {"linux-headers-amd64": META_BOOKWORM,
               f"linux-headers-{bookworm}": OFFERED.format(k=bookworm, v="6.1.158-1", p=500,
                                                           m=MIRROR, s="bookworm")}
    assert f"{INSTALL_HEADERS} (linux-headers-{bookworm}, linux-headers-amd64)" in names(
        run_deploy(DEFAULTS, _host(bookworm, outputs)))


@pytest.mark.parametrize(("kernel", "image"), [
    ("6.1.0-18-amd64", "linux-image-amd64"),
    ("6.1.0-18-cloud-amd64", "linux-image-cloud-amd64"),
])
def test_a_kernel_whose_abi_the_archive_dropped_is_refused_before_any_change(kernel, image):
    meta = image.replace("image", "headers")
    outputs = {meta: META_BOOKWORM.replace("linux-headers-amd64", meta)}  # its own: nothing
    with pytest.raises(PreflightError) as e:
        run_deploy(DEFAULTS, _host(kernel, outputs))
    msg = str(e.value)
    assert f"the running kernel {kernel} has no headers apt can install (linux-headers-" \
        f"{kernel}: no candidate" in msg
    assert f"fix: `sudo apt update && sudo apt install {image}`, reboot into the kernel it " \
        "brings, then deploy again" in msg
    assert "linux-headers-$(uname -r)" in msg and "\n" not in msg


def test_an_ubuntu_kernel_whose_headers_are_gone_is_refused_naming_its_image_meta_package():
    kernel = "6.8.0-31-generic"
    meta = OFFERED.format(k="x", v="6.8.0-90.90", p=500, m="http://mirror.example/ubuntu",
                          s="noble-updates").replace("linux-headers-x", "linux-headers-generic")
    with pytest.raises(PreflightError, match=r"sudo apt install linux-image-generic`"):
        run_deploy(DEFAULTS, _host(kernel, {"linux-headers-generic": meta},
                                   OsReleaseInfo(id="ubuntu", version_id="24.04")))


def test_headers_installed_or_no_apt_lists_are_not_refused():
    kernel = "6.1.0-18-amd64"
    installed = f"""linux-headers-{kernel}:
  Installed: 6.1.76-1
  Candidate: 6.1.76-1
  Version table:
 *** 6.1.76-1 100
        100 /var/lib/dpkg/status
"""
    outputs = {"linux-headers-amd64": META_BOOKWORM, f"linux-headers-{kernel}": installed}
    assert f"{INSTALL_HEADERS} (linux-headers-{kernel}, linux-headers-amd64)" in names(
        run_deploy(DEFAULTS, _host(kernel, outputs)))
    # no lists at all (apt knows neither package): the headers step's apt update decides
    assert "Install the NVIDIA driver, branch 595 (nvidia-open)" in names(
        run_deploy(DEFAULTS, _host(kernel, {})))


def test_a_host_with_a_working_driver_is_not_asked_about_headers():
    steps = names(run_deploy(DEFAULTS, facts(Wsl=replace(NATIVE, kernel_release="6.1.0-18-amd64"),
                                             OsRelease=DEBIAN12, AptPolicy=_policy({}))))
    assert not any(s.startswith(INSTALL_HEADERS) for s in steps)


def test_the_kernel_name_rules():
    from beekeeper.core.distro import backports_suite, debian_kernel, series

    assert series("6.12.48+bpo-amd64") == (6, 12) == series("6.12.48-1~bpo12+1")
    assert series("6.1.158-1") == (6, 1) and series("") is None and series("bogus") is None
    for name in ("6.1.0-18-amd64", "6.12.48+bpo-cloud-amd64", "6.12.57+deb13-rt-arm64"):
        assert debian_kernel(name), name
    for name in ("6.8.0-45-generic", "6.6.87.2-microsoft-standard-WSL2", "6.18.44-fc-v1098"):
        assert not debian_kernel(name), name
    bookworm = {"id": "debian", "version_id": "12"}
    assert backports_suite(bookworm, "6.12.48+bpo-amd64") == "bookworm-backports"
    assert backports_suite({"id": "debian", "version_id": "13"},
                           "6.17.8+deb13-amd64") == "trixie-backports"
    assert backports_suite(bookworm, "6.1.0-18-amd64") is None
    assert backports_suite(bookworm, "5.10.0-30-amd64") is None  # Debian 11's, left behind
    assert backports_suite(bookworm, "6.12.48-generic") is None
    assert backports_suite({"id": "ubuntu", "version_id": "24.04"}, "6.12.48+bpo-amd64") is None


# --- Debian 12's dkms stop: the older branch it offers still runs cuda_version ------------

CHECK = "Check that Debian 12's dkms can take the driver packages"
BOOKWORM_KERNEL = "6.1.0-18-amd64"
BOOKWORM_HEADERS = {"linux-headers-amd64": META_BOOKWORM,
                    f"linux-headers-{BOOKWORM_KERNEL}": OFFERED.format(
                        k=BOOKWORM_KERNEL, v="6.1.76-1", p=500, m=MIRROR, s="bookworm")}


def _dkms_stop(data) -> str:
    ops = run_deploy({**DEFAULTS, **data}, _host(BOOKWORM_KERNEL, BOOKWORM_HEADERS))
    cmd = " ".join(c for n, cs in ops if n == CHECK for c in cs)
    return cmd.replace("'\"'\"'", "'")  # the fix line's quotes, as sh reads them


@pytest.mark.parametrize(("data", "advice"), [
    ({}, "no older branch runs CUDA 13.2.1 in container mode: set cuda_version = '13.0.2' "
         "and driver_branch = 580 (its branch)"),
    ({"mode": "native"}, "set driver_branch = 590 (an older branch that still runs CUDA "
                         "13.2.1 in native mode)"),
    ({"mode": "native", "driver_branch": 590}, "set driver_branch = 580 (an older branch"),
    ({"cuda_version": "13.0.2"}, "no older branch the kit knows runs CUDA 13.0.2"),
])
def test_debian_12s_dkms_stop_offers_only_a_branch_that_runs_cuda_13(data, advice):
    cmd = _dkms_stop(data)
    assert advice in cmd
    assert "an older branch that runs cuda_version" not in cmd  # the old words: any branch


def test_the_dkms_stops_advice_deploys_and_a_branch_below_580_is_refused():
    steps = names(run_deploy({**DEFAULTS, "cuda_version": "13.0.2", "driver_branch": 580},
                             _host(BOOKWORM_KERNEL, BOOKWORM_HEADERS)))
    assert CHECK in steps and "Install the NVIDIA driver, branch 580 (nvidia-open)" in steps
    for mode in ("container", "native"):  # an "older branch" that cannot run CUDA 13
        with pytest.raises(PreflightError, match=r"driver_branch`: 570 runs CUDA"):
            run_deploy({**DEFAULTS, "mode": mode, "driver_branch": 570},
                       _host(BOOKWORM_KERNEL, BOOKWORM_HEADERS))


@pytest.mark.parametrize("mode", ["container", "native"])
@pytest.mark.parametrize("cuda", ["13.0.2", "13.2.1"])
@pytest.mark.parametrize("branch", [None, 580, 590, 595])
def test_every_branch_the_dkms_advice_names_is_one_the_kit_installs(mode, cuda, branch):
    import re

    from beekeeper.core.config import load_host_config
    from beekeeper.tasks.driver_preflight import driver_branch_to_install, older_branch_advice

    data = {**DEFAULTS, "mode": mode, "cuda_version": cuda, "driver_branch": branch}
    try:
        chosen = driver_branch_to_install(load_host_config(data))
    except PreflightError:
        return  # refused before any change: no dkms stop to advise from
    advice = older_branch_advice(load_host_config(data), chosen)
    m = re.search(r"driver_branch = (\d+)", advice)
    if m is None:
        assert advice.startswith("no older branch the kit knows")
        return
    named = re.search(r"cuda_version = '([\d.]+)'", advice)
    after = {**data, "driver_branch": int(m.group(1)),
             "cuda_version": named.group(1) if named else cuda}
    assert int(m.group(1)) >= 580 and int(m.group(1)) < chosen
    assert driver_branch_to_install(load_host_config(after)) == int(m.group(1))
