from pathlib import Path

from beekeeper.facts.docker import DockerImageId, parse_docker_engine
from beekeeper.facts.gpu import GpuCard, parse_nvidia_smi
from beekeeper.facts.host import InitInfo, parse_df, parse_os_release, parse_pid1, parse_wsl
from beekeeper.facts.server import ServerSmoke

DATA = Path(__file__).parent / "data"


def test_os_release():
    out = parse_os_release(['PRETTY_NAME="Ubuntu 24.04.1 LTS"', "ID=ubuntu",
                            'VERSION_ID="24.04"', "# comment"])
    assert out.id == "ubuntu" and out.version_id == "24.04"
    assert out.pretty_name == "Ubuntu 24.04.1 LTS"


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
    assert parse_df(lines) == 995892109312
    assert parse_df([]) is None


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
    trixie = parse_docker_engine(["path=", "pkg_io=1", "active=active"])
    assert trixie.present is False and trixie.flavour == "distro"
    # the version and the runtimes are the engine's own words, from `docker info`
    distro = parse_docker_engine(["path=/usr/bin/docker", "pkg_io=1", "active=active",
                                  *_docker_info("docker-info-own-engine-wsl2.txt")])
    assert distro.flavour == "distro" and distro.active and not distro.nvidia_runtime
    assert distro.server_version == "24.0.7"
    assert distro.runtimes == ("io.containerd.runc.v2", "runc")
    assert parse_docker_engine(["path=/snap/bin/docker"]).flavour == "snap"
    # Docker Desktop is what the engine that answers says, whatever package is installed
    assert parse_docker_engine(["path=/usr/bin/docker", "pkg_ce=1",
                                *_docker_info("docker-info-desktop-wsl2.txt")]).flavour == \
        "docker-desktop"
    # `nvidia-ctk runtime configure` adds the `nvidia` runtime (the Runtimes value by hand)
    ce = parse_docker_engine(["path=/usr/bin/docker", "pkg_ce=1", *_docker_info(
        "docker-info-own-engine-wsl2.txt", runtimes="io.containerd.runc.v2 nvidia runc")])
    assert ce.flavour == "docker-ce" and ce.nvidia_runtime
    assert ce.runtimes == ("io.containerd.runc.v2", "nvidia", "runc")


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
