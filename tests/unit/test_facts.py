from pathlib import Path

import pytest

from beekeeper.facts.docker import ComposeVersion, DockerImageId, parse_docker_engine
from beekeeper.facts.gpu import GpuCard, parse_nvidia_smi
from beekeeper.facts.host import (
    DiskInfo,
    InitInfo,
    parse_df_disk,
    parse_os_release,
    parse_pid1,
    parse_wsl,
)
from beekeeper.facts.server import ServerSmoke

DATA = Path(__file__).parent / "data"


def test_os_release():
    out = parse_os_release(['PRETTY_NAME="Ubuntu 24.04.1 LTS"', "ID=ubuntu",
                            'VERSION_ID="24.04"', "# comment"])
    assert out.id == "ubuntu" and out.version_id == "24.04"


def test_pid1():
    assert parse_pid1(["systemd", "running"]) == InitInfo(pid1="systemd", systemd=True,
                                                          state="running")
    assert parse_pid1(["init", "offline"]).systemd is False


def test_wsl2_reference_box():
    f = parse_wsl(["kernel=6.6.87.2-microsoft-standard-WSL2", "dxg=1", "wslconf_systemd=true"])
    assert f.is_wsl2 and f.dxg and f.wsl_conf_systemd
    assert f.kernel_release == "6.6.87.2-microsoft-standard-WSL2"


def test_native_linux_is_not_wsl():
    f = parse_wsl(["kernel=6.8.0-45-generic", "dxg=0", "wslconf_systemd="])
    assert not f.is_wsl2 and not f.wsl_conf_systemd


def test_df():
    lines = ["Filesystem 1B-blocks Used Available Use% Mounted on",
             "/dev/sdd 1081101176832 30215536640 995892109312 3% /"]
    assert parse_df_disk(lines) == DiskInfo(mount="/", free_bytes=995892109312,
                                               filesystem="/dev/sdd")
    assert parse_df_disk([]) is None


def test_nvidia_smi_wsl2_rtx4090():
    lines = ["path=/usr/lib/wsl/lib/nvidia-smi",
             "gpu=NVIDIA GeForce RTX 4090, 596.21, 8.9, 24564",
             "CUDA Version: 13.2"]
    f = parse_nvidia_smi(lines)
    assert f is not None and f.path.startswith("/usr/lib/wsl")
    assert f.driver_branch == 596 and f.cuda_version == "13.2"
    assert f.gpus[0] == GpuCard(name="NVIDIA GeForce RTX 4090", driver_version="596.21",
                                compute_cap="8.9", memory_total_mib=24564)


def test_no_nvidia_smi_is_none():
    assert parse_nvidia_smi([]) is None


def _docker_info(name: str, runtimes: str | None = None) -> list[str]:
    """A real `docker info` capture (tests/unit/data) as the DockerEngine command prints it
    (`info=` before each line); `runtimes` replaces its `Runtimes:` value (typed by hand)."""
    lines = (DATA / name).read_text().splitlines()
    if runtimes is not None:
        lines = [f" Runtimes: {runtimes}" if x.startswith(" Runtimes:") else x for x in lines]
    return ["info=" + x for x in lines]


def test_docker_flavours():
    assert parse_docker_engine(["path="]).present is False
    # Debian 13 with docker.io but not its client (a package of its own there): no docker
    trixie = parse_docker_engine(["path=", "pkg_io=1"])
    assert trixie.present is False and trixie.flavour == "distro"
    # the version and the runtimes are the engine's own words, from `docker info`
    distro = parse_docker_engine(["path=/usr/bin/docker", "pkg_io=1",
                                  *_docker_info("docker-info-own-engine-wsl2.txt")])
    assert distro.flavour == "distro" and not distro.nvidia_runtime
    assert distro.server_version == "24.0.7"
    assert parse_docker_engine(["path=/snap/bin/docker"]).flavour == "snap"
    # Docker Desktop is what the engine that answers says, whatever package is installed
    assert parse_docker_engine(["path=/usr/bin/docker", "pkg_ce=1",
                                *_docker_info("docker-info-desktop-wsl2.txt")]).flavour == \
        "docker-desktop"
    # `nvidia-ctk runtime configure` adds the `nvidia` runtime (the Runtimes value by hand)
    ce = parse_docker_engine(["path=/usr/bin/docker", "pkg_ce=1", *_docker_info(
        "docker-info-own-engine-wsl2.txt", runtimes="io.containerd.runc.v2 nvidia runc")])
    assert ce.flavour == "docker-ce" and ce.nvidia_runtime


def test_image_id_and_smoke_facts():
    assert DockerImageId().process(["sha256:abc"]) == "sha256:abc"
    assert DockerImageId().process([""]) is None
    assert ServerSmoke().process(['{"ok": true, "completion_tokens": 8}']) == {
        "ok": True, "completion_tokens": 8}
    assert ServerSmoke().process([]) is None


def test_build_resources_reads_cores_and_memory_from_real_command_output():
    import subprocess

    from beekeeper.facts.host import BuildResources

    fact = BuildResources()
    out = subprocess.run(["sh", "-c", fact.command()], capture_output=True, text=True).stdout
    got = fact.process(out.splitlines())
    # a 24 GiB machine printed MemTotal with awk's %g (2.5e+10) before: never 0 here
    assert got.cpus >= 1 and got.mem_total_bytes > 2**30


def _with_proxy(name: str, line: str) -> list[str]:
    """A real `docker info` capture with one proxy line added where dockerd prints them
    (in its Server section, as ` HTTP Proxy: URL`)."""
    lines = _docker_info(name)
    at = next(i for i, x in enumerate(lines) if x.startswith("info= Docker Root Dir:"))
    return lines[:at] + [f"info= {line}"] + lines[at:]


def test_the_engines_proxy_is_read_from_either_docker_info_line():
    base = ["path=/usr/bin/docker", "pkg_io=1"]
    own = "docker-info-own-engine-wsl2.txt"
    assert not parse_docker_engine([*base, *_docker_info(own)]).proxy
    assert parse_docker_engine([*base, *_with_proxy(own, "HTTP Proxy: http://p.lan:3128")]).proxy
    assert parse_docker_engine([*base, *_with_proxy(own, "HTTPS Proxy: http://p.lan:3128")]).proxy


def test_the_engines_flavour_from_the_snap_marker_an_unknown_cli_and_none():
    # the snap's CLI reached through another path, as `command -v` may find it
    assert parse_docker_engine(["path=/usr/bin/docker", "snap=1"]).flavour == "snap"
    assert parse_docker_engine(["path=/usr/bin/docker", "snap=0"]).flavour == "unknown"
    # a CLI no package the kit knows installed (a static binary in /usr/local/bin)
    odd = parse_docker_engine(["path=/usr/local/bin/docker"])
    assert (odd.present, odd.path, odd.flavour) == (True, "/usr/local/bin/docker", "unknown")
    none = parse_docker_engine(["pkg_ce=0"])  # no `path=` line at all
    assert (none.present, none.path, none.flavour) == (False, None, None)
    # a path holding '=' is read whole; a line without '=' (a shell's complaint) is skipped
    eq = parse_docker_engine(["docker: not found", "path=/opt/a=b/docker", "pkg_ce=1"])
    assert (eq.path, eq.flavour) == ("/opt/a=b/docker", "docker-ce")


def test_os_release_without_id_or_version_reads_empty():
    out = parse_os_release(['NAME="Some Linux"', "#ID=commented", ""])
    assert (out.id, out.version_id) == ("", "")


def test_an_os_release_line_without_an_equals_sign_is_skipped_not_read_as_empty():
    # not os-release(5) syntax: a stray word (here a key's own name) leaves what was read
    out = parse_os_release(["ID=ubuntu", "ID", 'VERSION_ID="24.04"', "VERSION_ID"])
    assert (out.id, out.version_id) == ("ubuntu", "24.04")


def test_wsl_is_told_by_the_kernels_words_or_dxg_and_missing_lines_read_empty():
    # WSL2's own kernel names itself; /dev/dxg is not needed to tell it
    assert parse_wsl(["kernel=5.15.153.1-microsoft-standard-WSL2", "dxg=0"]).is_wsl2
    # a custom WSL2 kernel without the word: /dev/dxg tells it
    assert parse_wsl(["kernel=6.6.36-microsoft-custom", "dxg=1"]).is_wsl2
    # WSL1's kernel string: Microsoft, no WSL2, no /dev/dxg
    assert not parse_wsl(["kernel=4.4.0-19041-Microsoft", "dxg=0"]).is_wsl2
    # a Linux box (not Microsoft's kernel) with a /dev/dxg of its own is not WSL2
    assert not parse_wsl(["kernel=6.8.0-45-generic", "dxg=1"]).is_wsl2
    bare = parse_wsl(["dxg=0"])  # no kernel and no wsl.conf line
    assert (bare.kernel_release, bare.is_wsl2, bare.wsl_conf_systemd) == ("", False, False)
    assert parse_wsl(["kernel=x", "wslconf_systemd=TRUE"]).wsl_conf_systemd
    # a value is all after the first "=" (a kernel built with its own LOCALVERSION)
    assert parse_wsl(["kernel=6.6.0-build=2", "dxg=0"]).kernel_release == "6.6.0-build=2"


@pytest.mark.parametrize(("lines", "version"), [
    (["2.26.1"], "2.26.1"),                       # Debian trixie's docker-compose plugin
    (["v2.40.3-desktop.1"], "2.40.3-desktop.1"),  # Docker Desktop's, its "v" dropped
    (["  2.26.1  ", "more"], "2.26.1"),            # the first line, stripped
    (["12.0.0"], "12.0.0"),                        # a major of two digits is over 2
    (["2.0"], "2.0"),                              # the first v2 release
    (["1.29.2"], None),                            # compose v1's number: no v2 plugin
    (["docker-compose version 1.29.2"], None),     # not a version line
    (["v2"], None), ([""], None), ([], None),      # nothing printed: no plugin
])
def test_the_compose_plugins_version_is_read_from_its_short_line(lines, version):
    assert ComposeVersion().process(lines) == version
