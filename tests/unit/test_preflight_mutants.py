"""
Host preflight's deciding rules, each pinned where a mutant of it survived (issue 45:
tasks/preflight.py through scripts/mutation.py; docs/testing.md, "Mutation testing"): the
VRAM budget and the card's margin, what a listener on the port is to the kit, whether the
deploy builds the server image, room for that build under Docker's root dir, and the WSL2
memory warning. Each rule is called as preflight calls it, with the host's facts canned as
tests/unit/harness.py cans them for the deploy; each test holds the line a user reads and
whether the deploy stops, at the boundary of each comparison.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from beekeeper.core.build import build_spec
from beekeeper.core.errors import PreflightError
from beekeeper.core.paths import sha256_stamps
from beekeeper.core.planner import predict
from beekeeper.core.profiles import PROFILES
from beekeeper.core.runtime import runtime_of
from beekeeper.facts.boot import WslSettingsInfo
from beekeeper.facts.docker import DockerEngineInfo
from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo
from beekeeper.facts.host import DiskInfo, PortOwner, PortOwnersInfo, Resources
from beekeeper.tasks import preflight as pf

from .harness import (
    DOCKER_CE,
    DOCKER_PROXY,
    RES,
    RTX4090,
    cfg,
    images,
    on_host,
    port_owners,
    runtime_named,
)

GIB = 2**30
MIB = 2**20


def refused(f: Any, *args: Any) -> str:
    with pytest.raises(PreflightError) as e:
        f(*args)
    return str(e.value)


# --- check_vram: each service within the budget, all of them within the card ------------

def test_a_profile_exactly_at_the_budget_passes_and_the_profiles_that_fit_are_named():
    small = predict(PROFILES["q4km-f16-32k"]).total_mib
    budget = small / 1024  # the budget in MiB is then the profile's plan exactly
    pf.check_vram(cfg(profile="q4km-f16-32k", vram_budget_gib=budget), RTX4090)
    big = predict(PROFILES["q8-f16-4k"])
    line = refused(pf.check_vram, cfg(profile="q8-f16-4k", vram_budget_gib=budget), RTX4090)
    assert line.startswith(
        f"profile q8-f16-4k needs {big.total_mib:.0f} MiB of VRAM, over vram_budget_gib "
        f"{budget:g} ({small:.0f} MiB): weights {big.weights_mib:.0f} + KV ")
    # the profile exactly at the budget fits; CPU profiles (no VRAM plan) are never offered
    assert line.endswith(" MiB; profiles that fit: q4km-f16-32k; or raise vram_budget_gib")


def test_the_profiles_that_fit_are_named_one_by_one():
    budget = predict(PROFILES["q8-turbo4-64k"]).total_mib / 1024
    line = refused(pf.check_vram, cfg(profile="q8-f16-4k", vram_budget_gib=budget), RTX4090)
    fits = line.split("; profiles that fit: ")[1].removesuffix("; or raise vram_budget_gib")
    names = fits.split(", ")
    assert {"q4km-f16-32k", "q8-turbo4-64k"} <= set(names) and "q8-f16-4k" not in names
    assert all(PROFILES[n].backend == "cuda" for n in names)


def test_a_budget_no_profile_fits_says_none():
    line = refused(pf.check_vram, cfg(profile="q4km-f16-32k", vram_budget_gib=5), RTX4090)
    assert "over vram_budget_gib 5 (5120 MiB): " in line
    assert line.endswith("; profiles that fit: none; or raise vram_budget_gib")


TWO = [{"profile": "q8-turbo4-64k", "port": 8083, "service_name": "llm"},
       {"profile": "q4km-f16-32k", "port": 8084, "service_name": "b"}]


def with_card(mib: int) -> NvidiaSmiInfo:
    return replace(RTX4090, gpus=(replace(RTX4090.gpus[0], memory_total_mib=mib),))


def test_two_services_fill_the_card_up_to_its_1024_mib_margin_and_no_further():
    two = cfg(services=TWO, vram_budget_gib=20)
    together = sum(predict(s.profile).total_mib for s in two.services)
    room = math.ceil(together + 1024)  # the plans and the margin fit, less than 1 MiB over
    pf.check_vram(two, with_card(room))
    assert refused(pf.check_vram, two, with_card(room - 1)) == (
        f"the 2 services need {together:.0f} MiB together, more than the card's {room - 1} "
        "MiB less 1024 MiB margin: drop a service or pick smaller profiles")
    # one service: its budget is the check (the card's is host data's and the planner's)
    one = cfg(profile="q8-turbo4-64k")
    pf.check_vram(one, with_card(1024))
    # a card whose memory nvidia-smi did not print: not judged
    pf.check_vram(two, with_card(0))
    pf.check_vram(two, None)


# --- _over_budget: the refusal names the shape refused and the ways out at it ------------

NON_DRAFT = [n for n, p in PROFILES.items()
             if p.backend == "cuda" and p.layout and p.server.draft_model is None]


def test_a_larger_ctx_size_over_the_budget_is_named_and_a_smaller_one_offered():
    line = refused(pf.check_vram, cfg(profile="q8-turbo4-64k", ctx_size=131072,
                                      vram_budget_gib=9.5), RTX4090)
    assert line.startswith("profile q8-turbo4-64k at ctx_size 131072 needs ")
    assert " MiB of VRAM, over vram_budget_gib 9.5 (9728 MiB): weights " in line
    # one slot: the profiles that fit are named without slots, and fewer slots are no way out
    assert line.endswith("; profiles that fit: q4km-f16-32k, or a smaller ctx_size; or raise "
                         "vram_budget_gib")


def test_a_shape_of_ctx_size_and_slots_is_named_whole_with_both_ways_out():
    line = refused(pf.check_vram, cfg(profile="q8-f16-4k", slots=2, ctx_size=8192,
                                      vram_budget_gib=9.6), RTX4090)
    assert line.startswith("profile q8-f16-4k at ctx_size 8192, 2 slots needs ")
    assert line.endswith(", or fewer slots, or a smaller ctx_size; or raise vram_budget_gib")
    assert "; profiles that fit with 2 slots: q4km-f16-32k, " in line


def test_two_slots_over_the_budget_offer_fewer_slots_but_no_smaller_ctx_size():
    line = refused(pf.check_vram, cfg(profile="q8-f16-4k", slots=2, vram_budget_gib=9.6),
                   RTX4090)
    assert line.startswith("profile q8-f16-4k at 2 slots needs ")
    assert line.endswith(", or fewer slots; or raise vram_budget_gib")


def test_a_draft_profile_is_offered_at_one_slot_and_never_at_more():
    """A draft profile keeps one slot (beellama drafts for one): offered where the service
    asks one, never where it asks more, even where its one-slot plan would fit."""
    budget = 11.2  # 11469 MiB: q8-dflash-32k's plan (one slot) fits, the 128K one's does not
    one = refused(pf.check_vram, cfg(profile="q8-turbo3tcq-dflash-128k",
                                     vram_budget_gib=budget), RTX4090)
    fits = one.split("; profiles that fit: ")[1].removesuffix("; or raise vram_budget_gib")
    assert fits.split(", ") == NON_DRAFT + ["q8-dflash-32k"]
    two = refused(pf.check_vram, cfg(profile="q8-turbo4-64k-bs", slots=2, ctx_size=262144,
                                     vram_budget_gib=budget), RTX4090)
    fits = two.split("; profiles that fit with 2 slots: ")[1].split(", or fewer slots")[0]
    assert fits.split(", ") == NON_DRAFT
    assert predict(PROFILES["q8-dflash-32k"]).total_mib <= budget * 1024


def test_a_model_whose_kv_rows_do_not_fill_the_profiles_cache_blocks_is_one_line(tmp_path):
    """The user's GGUF (model_path) with a head size the profile's KV type cannot hold: the
    line names the file, the profile and what to do, before any change."""
    from .harness import _gguf

    gguf = _gguf(tmp_path / "odd.gguf", {"block_count": 4, "embedding_length": 4000,
                                        "attention.head_count": 40,
                                        "attention.head_count_kv": 8,
                                        "context_length": 131072})
    assert refused(pf.check_vram, cfg(profile="q8-turbo4-64k", model_path=str(gguf)),
                   RTX4090) == (
        f"host data `model_path` {gguf} with profile q8-turbo4-64k: 800 values per row do not "
        "fill turbo4 blocks of 128; fix: pick a profile whose KV cache types fit the model "
        "(`beekeeper plan --profile NAME --gguf FILE` tries one)")


# --- classify_port_owner: what a listener on the port is to the kit ----------------------

def kind(owner: PortOwner, info: PortOwnersInfo, runtime: str = "systemd",
         docker_ours: bool = False) -> str:
    return pf.classify_port_owner(owner, info, runtime_named(runtime), frozenset({"llm"}),
                                  docker_ours)


def test_the_services_docker_proxy_is_known_by_its_name_or_by_its_program():
    proxy = port_owners(DOCKER_PROXY)
    # comm unread: the executable's own name
    assert kind(replace(DOCKER_PROXY, comm=""), proxy, docker_ours=True) == "supervised"
    assert kind(replace(DOCKER_PROXY, comm="", exe="/usr/libexec/docker/docker-proxy"), proxy,
                docker_ours=True) == "supervised"
    # the executable unread (no /proc/<pid>/exe): its comm
    assert kind(replace(DOCKER_PROXY, exe=""), proxy, docker_ours=True) == "supervised"
    # a program in a folder named docker-proxy is not the proxy
    assert kind(replace(DOCKER_PROXY, comm="", exe="/usr/bin/docker-proxy/x"), proxy,
                docker_ours=True) == "foreign"
    assert kind(replace(DOCKER_PROXY, comm=""), proxy, docker_ours=False) == "foreign"


SERVER = "/opt/beekeeper/llama-server/beellama-x-cuda13.2-sm89-x86-64-v3/bin/llama-server"
ORPHAN = PortOwner(pid=4242, ppid=1, user="beekeeper", exe=SERVER, comm="llama-server",
                   cgroups=("/system.slice/ssh.service",))


def test_a_kit_supervisord_elsewhere_supervises_none_but_its_own_children():
    info = port_owners(ORPHAN, supervisord=311)
    # the kit's supervisord runs, but the listener is not its child: an orphan of the kit's
    assert kind(ORPHAN, info, runtime="supervisor") == "orphan"
    assert kind(replace(ORPHAN, user="ubuntu"), info, runtime="supervisor") == "foreign"
    assert kind(replace(ORPHAN, ppid=311), info, runtime="supervisor") == "supervised"
    assert kind(replace(ORPHAN, ppid=312, ancestors=(311,)), info,
                runtime="supervisor") == "supervised"


def test_a_kit_server_in_another_units_cgroup_is_still_an_orphan():
    # started by hand from a login (tmux under user@1000.service): no unit of the kit's
    by_hand = replace(ORPHAN, cgroups=(
        "/user.slice/user-1000.slice/user@1000.service/app.slice/tmux-spawn-1.scope",))
    assert kind(by_hand, port_owners(by_hand)) == "orphan"
    # a unit of the kit's that is not a service of this deploy: not an orphan to end
    unit = replace(ORPHAN, cgroups=("/system.slice/beekeeper-chat.service",))
    assert kind(unit, port_owners(unit)) == "foreign"


def test_a_kit_server_under_the_prefix_as_resolved_is_an_orphan_whatever_the_folders_name():
    # /opt/beekeeper/llama-server links into a persistent root whose folder ends in an X
    real = "/workspace/BOX"
    orphan = replace(ORPHAN, exe=f"{real}/beellama-x-cuda13.2-sm89-x86-64-v3/bin/llama-server")
    assert kind(orphan, replace(port_owners(orphan), native_prefix_real=real)) == "orphan"
    assert kind(orphan, replace(port_owners(orphan), native_prefix_real=real + "/")) == "orphan"
    assert kind(orphan, replace(port_owners(orphan), native_prefix_real="/workspace/BO")) == \
        "foreign"


# --- image_missing: whether this deploy builds the server image --------------------------

RTX3090 = replace(RTX4090, gpus=(GpuCard(name="NVIDIA GeForce RTX 3090", driver_version="596.21",
                                         compute_cap="8.6", memory_total_mib=24576),))


def tag_of(c: Any, cap: str | None, res: Resources = RES) -> str:
    return build_spec(c, cap, res.cpus, res.mem_total_bytes, res.machine,
                      cuda_version=c.data.cuda_version, cuda_arch=c.data.cuda_arch).tag()


def missing(c: Any, gpu: Any, res: Resources, cuda_version: str | None) -> bool:
    return pf.image_missing(c, pf.build_there(c, gpu, res, cuda_version))


def test_the_image_is_missing_unless_its_own_tag_is_there():
    c = cfg()
    with on_host(DockerImageId=images(tag_of(c, "8.9"))):
        assert missing(c, RTX4090, RES, None) is False
        # another card: another arch, another tag
        assert missing(c, RTX3090, RES, None) is True
    with on_host(DockerImageId=images(tag_of(c, "8.6"))):
        assert missing(c, RTX3090, RES, None) is False
        assert missing(c, RTX4090, RES, None) is True


def test_the_image_of_the_cuda_the_driver_runs_is_the_one_looked_for():
    c = cfg()
    follow = tag_of(cfg(cuda_version="13.0.2"), "8.9")
    assert follow != tag_of(c, "8.9")
    with on_host(DockerImageId=images(follow)):
        assert missing(c, RTX4090, RES, "13.0.2") is False
        assert missing(c, RTX4090, RES, None) is True


def test_the_image_of_the_hosts_machine_is_the_one_looked_for():
    c = cfg(profile="cpu-tiny")
    arm = replace(RES, machine="aarch64", cpu_flags=frozenset({"asimd"}))
    assert tag_of(c, None, arm) != tag_of(c, None)
    with on_host(DockerImageId=images(tag_of(c, None, arm))):
        assert missing(c, None, arm, None) is False
        assert missing(c, None, RES, None) is True


def test_no_image_is_built_in_native_mode_or_without_the_build_stage():
    # the image fact is not even read (no DockerImageId canned: reading it is a KeyError)
    with on_host():
        assert missing(cfg(mode="native"), RTX4090, RES, None) is False
        assert missing(cfg(stages=["provision"]), RTX4090, RES, None) is False


# --- check_image_space: room for the build under Docker's root dir -----------------------

def disks(**free_gib: float) -> Any:
    """The DiskOf fact: a path's file system by its first folder (/var/lib/docker on "/",
    model_dir /srv/... on "/srv", /data on "/data"), with the GiB free given by its key
    (root, srv, data); one not given is unknown (None)."""
    mounts = {"var": ("/", "root"), "srv": ("/srv", "srv"), "data": ("/data", "data")}

    def disk_of(path: str) -> DiskInfo | None:
        mount, key = mounts[path.strip("/").split("/")[0]]
        return DiskInfo(mount=mount, free_bytes=int(free_gib[key] * GIB)) \
            if key in free_gib else None
    return disk_of


MODEL_BYTES = 9527501312  # Qwen3.5-9B-Q8_0.gguf, the default profile's file
BUILD_LINE = ("and 1 GiB margin: free space (`docker system prune` removes unused images and "
              "build cache), or move Docker's data-root")


def test_the_cuda_build_needs_11_gib_and_the_margin_under_the_default_root_dir():
    c = cfg()
    # model_dir on another file system (/srv): the download is not counted under /
    with on_host(DiskOf=disks(root=12, srv=100)):
        pf.check_image_space(c, DOCKER_CE, True)  # 11 GiB and 1 GiB margin, exactly
    with on_host(DiskOf=disks(root=12 - 1 / GIB, srv=100)):
        assert refused(pf.check_image_space, c, DOCKER_CE, True) == (
            "Docker's root dir /var/lib/docker (file system /) has 12.0 GiB free; building the "
            "CUDA server image takes about 11 GiB (base images and build layers), " + BUILD_LINE)
    # the model_dir's file system unknown: the download is not counted there
    with on_host(DiskOf=disks(root=12)):
        pf.check_image_space(c, DOCKER_CE, True)


def test_the_build_is_checked_where_dockers_root_dir_is():
    engine = replace(DOCKER_CE, root_dir="/data/docker")
    with on_host(DiskOf=disks(root=100, data=4)):
        assert refused(pf.check_image_space, cfg(), engine, True).startswith(
            "Docker's root dir /data/docker (file system /data) has 4.0 GiB free; ")


def test_the_cpu_build_needs_2_gib():
    c = cfg(profile="cpu-tiny")
    with on_host(DiskOf=disks(root=3)):
        pf.check_image_space(c, DOCKER_CE, True)
    with on_host(DiskOf=disks(root=2.5)):
        assert refused(pf.check_image_space, c, DOCKER_CE, True) == (
            "Docker's root dir /var/lib/docker (file system /) has 2.5 GiB free; building the "
            "CPU server image takes about 2 GiB (base images and build layers), " + BUILD_LINE)


def test_the_model_download_counts_where_model_dir_shares_dockers_file_system():
    c = cfg(model_dir="/var/models")
    need = 12 * GIB + MODEL_BYTES  # build, margin and the download
    with on_host(DiskOf=disks(root=need / GIB)):
        pf.check_image_space(c, DOCKER_CE, True)
    with on_host(DiskOf=disks(root=(need - 1) / GIB)):
        assert refused(pf.check_image_space, c, DOCKER_CE, True) == (
            "Docker's root dir /var/lib/docker (file system /) has 20.9 GiB free; building the "
            "CUDA server image takes about 11 GiB (base images and build layers) plus the model "
            "download 8.9 GiB (model_dir /var/models is on the same file system), "
            + BUILD_LINE)


def test_no_build_or_docker_desktop_or_an_unknown_disk_is_not_checked():
    with on_host(DiskOf=disks(root=0.5)):
        pf.check_image_space(cfg(), DOCKER_CE, False)
        pf.check_image_space(cfg(), replace(DOCKER_CE, flavour="docker-desktop"), True)
    with on_host():  # DiskOf None: not read
        pf.check_image_space(cfg(), DOCKER_CE, True)


# --- warn_wsl_memory: the memory WSL2 gave the distro ------------------------------------

CUDA_NEED = MODEL_BYTES + int(2.5 * GIB)  # the model file, one CUDA compile job and 1 GiB


def wsl_memory(c: Any, mem_total: int, settings: WslSettingsInfo | None = None,
               docker: DockerEngineInfo = DOCKER_CE) -> None:
    with on_host():
        pf.warn_wsl_memory(c, mem_total, settings, docker)


def warning(capsys: Any) -> str:
    return capsys.readouterr().err.strip()


def test_the_wsl2_memory_warning_at_its_line_and_in_its_words(capsys):
    wsl_memory(cfg(), CUDA_NEED)
    assert warning(capsys) == ""
    wsl_memory(cfg(), CUDA_NEED - 1)
    assert warning(capsys) == (
        "host canned: warning: WSL2 gave this distro 11.4 GiB (MemTotal); the model files "
        "(8.9 GiB, mmapped) and the build (2.5 GiB) want 11.4 GiB, so loads and the build will "
        "be slow; on Windows set `memory=14GB` under `[wsl2]` in %UserProfile%\\.wslconfig, "
        "then `wsl --shutdown`")
    wsl_memory(cfg(), 0)  # MemTotal unread: nothing to judge
    assert warning(capsys) == ""


def test_the_wsl2_memory_warning_names_docker_desktop_and_the_memory_set(capsys):
    wsl_memory(cfg(), 8 * GIB, WslSettingsInfo(memory="8GB"),
               replace(DOCKER_CE, flavour="docker-desktop"))
    assert warning(capsys).startswith(
        "host canned: warning: WSL2 gave this distro 8.0 GiB (MemTotal, shared with Docker "
        "Desktop's engine, now memory=8GB); the model files (8.9 GiB, mmapped) ")
    wsl_memory(cfg(), 8 * GIB, WslSettingsInfo())
    assert "8.0 GiB (MemTotal); the model" in warning(capsys)


def test_a_cpu_build_wants_one_gib_a_job_and_a_shared_file_counts_once(capsys):
    tiny = 253113024  # gemma-3-270m-q4_k_m.gguf
    c = cfg(profile="cpu-tiny")
    wsl_memory(c, tiny + 2 * GIB)
    assert warning(capsys) == ""
    wsl_memory(c, 2 * GIB)
    assert "the model files (0.2 GiB, mmapped) and the build (2.0 GiB) want 2.2 GiB" in \
        warning(capsys)
    two = cfg(services=[{"profile": "cpu-tiny", "port": 8083, "service_name": "llm"},
                        {"profile": "cpu-tiny", "port": 8084, "service_name": "b"}])
    wsl_memory(two, tiny + 2 * GIB)
    assert warning(capsys) == ""


# --- the partial run's other survivors: warn_proxy, check_cpu, warn_wsl_idle -------------

PROXY_LINE = (
    "host canned: warning: this host uses a proxy (/etc/environment sets http_proxy, "
    "https_proxy) but Docker's engine has none, so pulling the base images will fail: give "
    "dockerd the proxy (a drop-in /etc/systemd/system/docker.service.d/http-proxy.conf with "
    "[Service] Environment=HTTPS_PROXY=... NO_PROXY=..., then `systemctl daemon-reload && "
    "systemctl restart docker`), or preload the base images (host data preload_images)")


def proxy_warning(capsys: Any, c: Any, docker: DockerEngineInfo, building: bool,
                  proxy_vars: tuple[str, ...] = ("http_proxy", "https_proxy")) -> str:
    with on_host():
        pf.warn_proxy(c, docker, building, proxy_vars)
    return warning(capsys)


def test_a_build_behind_a_proxy_the_engine_lacks_is_warned_once_in_its_line(capsys):
    assert proxy_warning(capsys, cfg(), DOCKER_CE, True) == PROXY_LINE
    # each way out of it: no build, no proxy, the engine's own, images preloaded, Desktop
    assert proxy_warning(capsys, cfg(), DOCKER_CE, False) == ""
    assert proxy_warning(capsys, cfg(), DOCKER_CE, True, ()) == ""
    assert proxy_warning(capsys, cfg(), replace(DOCKER_CE, proxy=True), True) == ""
    assert proxy_warning(capsys, cfg(preload_images={"nvidia/cuda:13.2.1-devel-ubuntu24.04":
                                                     "/srv/images/devel.tar"}),
                         DOCKER_CE, True) == ""
    assert proxy_warning(capsys, cfg(), replace(DOCKER_CE, flavour="docker-desktop"),
                         True) == ""


def test_a_cpu_without_the_baseline_is_refused_naming_what_it_lacks():
    old = Resources(cpus=4, mem_total_bytes=8 * GIB, machine="x86_64",
                    cpu_flags=frozenset({"sse4_2", "avx", "f16c"}),
                    cpu_model="Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz")
    assert refused(pf.check_cpu, old) == (
        "the host's CPU (Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz) lacks avx2, fma, bmi2: the "
        "server is built for x86-64-v3 (sse4_2 avx avx2 fma f16c bmi2); deploy to a host with "
        "a newer CPU, or, in a VM, pass the host CPU's flags through (e.g. `-cpu host`)")
    assert refused(pf.check_cpu, replace(old, cpu_model="")).startswith(
        "the host's CPU lacks avx2, fma, bmi2: ")
    pf.check_cpu(RES)  # a Ryzen 9 7950X's flags


def test_the_wsl2_idle_warning_names_this_wsls_version_and_the_distro(capsys):
    with on_host():
        pf.warn_wsl_idle(WslSettingsInfo(wsl_version="2.4.13", distro="Ubuntu-24.04"))
    assert warning(capsys) == (
        "host canned: warning: WSL2 stops this distro, and the server with it, seconds after "
        "its last terminal closes (systemd services do not keep it up: microsoft/WSL#9667, by "
        "design), and does not start it when Windows starts; on Windows, both: add "
        "`instanceIdleTimeout=-1` under `[general]` in %UserProfile%\\.wslconfig (WSL 2.5.7 "
        "or newer (this WSL: 2.4.13); `wsl --update`) and run `wsl --shutdown`, which keeps a "
        "started distro up, and a logon task that starts it after each reboot: schtasks "
        "/create /tn beekeeper-start /sc onlogon /tr \"wsl.exe -d Ubuntu-24.04 --exec "
        "/bin/true\"; before WSL 2.5.7, one logon task starts it and keeps it up: schtasks "
        "/create /tn beekeeper-keepalive /sc onlogon /tr \"wsl.exe -d Ubuntu-24.04 --exec "
        "sleep infinity\"")
    with on_host():
        pf.warn_wsl_idle(None)  # nothing read: no version, the distro as wsl.exe lists it
    line = warning(capsys)
    assert "(WSL 2.5.7 or newer; `wsl --update`)" in line
    assert "wsl.exe -d <the distro `wsl.exe -l -v` lists> --exec /bin/true" in line


# --- download_bytes: what the model stage still has to download ---------------------------

TINY, SMOL = 253113024, 98362432  # gemma-3-270m-q4_k_m.gguf, SmolLM2-135M-Instruct.Q4_1.gguf
CPU_TWO = [{"profile": "cpu-tiny", "port": 8083, "service_name": "llm"},
           {"profile": "cpu-smollm", "port": 8084, "service_name": "b"}]


def placed(c: Any, *there: str) -> Any:
    """The Sha256File fact of a host holding these model files, read through the kit's
    stamps in its state dir (another stamps folder, or none, reads nothing)."""
    sha = {f"{c.data.model_dir}/{m.filename}": m.sha256 for s in c.services for m in s.models()
           if m.filename in there}
    return lambda path, stamps: sha.get(path) if stamps == sha256_stamps(c.data.state_dir) else None


def test_the_download_is_each_model_not_there_once_less_what_a_partial_file_holds():
    c = cfg(services=CPU_TWO)
    with on_host(Sha256File=placed(c)):
        assert pf.download_bytes(c) == TINY + SMOL
    # the first model there: the second is still downloaded
    with on_host(Sha256File=placed(c, "gemma-3-270m-q4_k_m.gguf")):
        assert pf.download_bytes(c) == SMOL
    with on_host(Sha256File=placed(c, "gemma-3-270m-q4_k_m.gguf",
                                   "SmolLM2-135M-Instruct.Q4_1.gguf")):
        assert pf.download_bytes(c) == 0
    # a partial download is resumed: only the rest counts
    partial = f"{c.data.model_dir}/SmolLM2-135M-Instruct.Q4_1.gguf.partial"
    with on_host(Sha256File=placed(c), File=lambda path: {"size": 1000}
                 if path == partial else None):
        assert pf.download_bytes(c) == TINY + SMOL - 1000
    # without the model stage there is nothing to download
    with on_host(Sha256File=placed(c)):
        assert pf.download_bytes(cfg(services=CPU_TWO, stages=["provision", "build"])) == 0


def test_a_file_two_services_serve_is_downloaded_once():
    c = cfg(services=[{"profile": "cpu-tiny", "port": 8083, "service_name": "llm"},
                      {"profile": "cpu-tiny", "port": 8084, "service_name": "b"}])
    with on_host(Sha256File=placed(c)):
        assert pf.download_bytes(c) == TINY


def test_a_model_served_where_it_is_on_the_host_is_not_downloaded_but_its_draft_is():
    c = cfg(profile="q8-dflash-32k", mode="native", model_host_path="/workspace/m/9b.gguf",
            model_sha256="ab" * 32)
    with on_host():  # the model's own file is not even looked at
        assert pf.download_bytes(c) == 1100000000  # Qwen3.5-9B-DFlash-q8_0.gguf


def test_a_partial_file_as_large_as_the_model_leaves_nothing_to_download():
    c = cfg(profile="cpu-smollm")
    partial = f"{c.data.model_dir}/SmolLM2-135M-Instruct.Q4_1.gguf.partial"
    with on_host(Sha256File=placed(c), File=lambda path: {"size": SMOL}
                 if path == partial else None):
        assert pf.download_bytes(c) == 0


# --- the partial run's last: local_head, check_gguf, warn_supervisor_restart ---------------

def test_a_controllers_model_is_read_for_its_head_only(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 4096)  # a model's GiBs, in short
    assert pf.local_head(str(model)) == b"GGUF\x03\x00\x00\x00"
    assert pf.local_head(str(tmp_path / "gone.gguf")) is None
    # a head that could not be read is left to the checks after this one
    pf.check_gguf("model_path", str(tmp_path / "gone.gguf"), None)
    assert refused(pf.check_gguf, "model_path", str(model), b"<html>\n<").startswith(
        f"host data `model_path`: {model} is not a GGUF model file: ")


def test_a_pod_without_systemd_is_told_the_start_command_for_its_supervisord(capsys):
    from beekeeper.facts.host import InitInfo

    with on_host():
        pf.warn_supervisor_restart(InitInfo(pid1="process_api", systemd=False, state=""),
                                   "/workspace/beekeeper")
    assert warning(capsys) == (
        "host canned: warning: PID 1 is 'process_api', not systemd: the server runs under the "
        "kit's supervisord, and nothing starts it again when this container restarts until "
        "the container's start command runs `/workspace/beekeeper/start` (the kit kept under "
        "/workspace/beekeeper; RunPod: `bash -c '[ -x /workspace/beekeeper/start ] && exec "
        "/workspace/beekeeper/start -- /start.sh; exec /start.sh'`; the line per provider: "
        "docs/gpu-containers.md)")
    with on_host():
        pf.warn_supervisor_restart(InitInfo(pid1="systemd", systemd=True, state="running"))
    assert warning(capsys) == (
        "host canned: warning: runtime 'supervisor' (host data): the server runs under the "
        "kit's supervisord, which systemd does not start, so nothing starts it again when this "
        "host restarts until `/usr/local/sbin/beekeeper-start` runs (a unit of yours, or "
        "`@reboot /usr/local/sbin/beekeeper-start` in root's crontab; or remove `runtime`: a "
        "systemd unit then runs the server)")
    with on_host():
        pf.warn_supervisor_restart(InitInfo(pid1="tini", systemd=False, state=""))
    assert "runs `/usr/local/sbin/beekeeper-start` (no persistent root: the standard " \
        "layout; RunPod" in warning(capsys)


# --- check_free_space: room in model_dir for the download and 1 GiB ----------------------

def test_model_dir_needs_room_for_the_download_and_1_gib_to_spare():
    c = cfg(services=CPU_TWO)
    need = TINY + SMOL
    with on_host(Sha256File=placed(c)):
        pf.check_free_space(c, need + GIB)  # exactly enough
        pf.check_free_space(c, None)  # the free space not read: not judged
        line = refused(pf.check_free_space, c, need + GIB - 1)
    assert line == (f"model_dir {c.data.model_dir} has {(need + GIB - 1) / GIB:.1f} GiB free; the "
                    f"model files still to download or upload need {need / GIB:.1f} GiB plus 1 "
                    "GiB margin: free space or set model_dir elsewhere")
    # every model there already: nothing to download, no room needed
    with on_host(Sha256File=placed(c, "gemma-3-270m-q4_k_m.gguf",
                                   "SmolLM2-135M-Instruct.Q4_1.gguf")):
        pf.check_free_space(c, 0)


def test_a_model_target_the_host_could_not_read_is_nothing_there():
    """ModelTarget's default, what pyinfra gives where its command failed, is "", as for a
    path that names nothing: check_own_model then checks the path given as it is (`or
    path`), not a link target no one read (`xǁModelTargetǁdefault__mutmut_1`: no test
    called it)."""
    assert pf.ModelTarget.default() == ""
    assert pf.ModelTarget().process([]) == ""
    assert pf.ModelTarget().process(["/srv/blobs/9f3c\n"]) == "/srv/blobs/9f3c"


# --- check_own_model: a model file already on the host ------------------------------------

def test_a_model_on_the_host_is_checked_when_the_deploy_reaches_the_model_or_the_service():
    """A deploy that stops at the model stage checks the file (not there: refused), as one
    that goes on to the service does; one that stops before (provision, build) never looks
    at it (host data's stages are a prefix of provision, build, model, service)."""
    def own(*stages: str) -> Any:
        return cfg(profile="q8-turbo4-64k", mode="native", model_host_path="/srv/m/mine.gguf",
                   model_sha256="ab" * 32, stages=list(stages))

    for stages in (("provision", "build", "model"), ("provision", "build", "model", "service")):
        with on_host(ModelTarget="", File=None):
            assert refused(pf.check_own_model, own(*stages), runtime_of("native", "systemd")) == (
                "host data `model_host_path`: /srv/m/mine.gguf is not a file on the host; fix: "
                "give the path of the .gguf there (or a symlink to it), or model_path for a "
                "file on the controller")
    with on_host():  # no fact given: one read would be a KeyError
        pf.check_own_model(own("provision", "build"), runtime_of("native", "systemd"))
