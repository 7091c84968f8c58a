"""
deploy.py on canned facts read off a rented GPU container (the H200 box the project has:
PID 1 `process_api`, no Docker, no apt lists, a CUDA 13.0 toolkit in /usr/local/cuda, driver
580.159.04): the kit picks runtime supervisor, builds with the host's toolkit, installs
nothing with apt, serves a model file already there, and refuses what cannot work there
before any change.
"""

import re
from dataclasses import replace

import pytest

from beekeeper.core.errors import BeekeeperError, PreflightError
from beekeeper.facts.gpu import GpuCard
from beekeeper.facts.toolchain import HostToolsInfo

from .harness import (
    H200,
    MODEL,
    PCI_H200,
    POD_DATA,
    POD_TOOLS,
    first_upload as uploaded,
    pod,
    require_tools,
    run_deploy,
)


def test_the_nvcc_line_of_cuda_13_0_is_read():
    assert POD_TOOLS.nvcc_version == "13.0.88" and POD_TOOLS.apt_lists == 0
    assert POD_TOOLS.path("cmake") == "/opt/venv/bin/cmake" and POD_TOOLS.missing() == []


def test_the_h200_pod_deploys_under_supervisor_with_its_own_toolkit_and_no_apt():
    ops = run_deploy(POD_DATA, pod())
    names = [n for n, _ in ops]
    every = "\n".join(c for _, cmds in ops for c in cmds)
    # nothing from apt (no lists, offline) and no CUDA toolkit install: the host's builds
    assert not any("apt-get" in c or "apt " in c for _, cmds in ops for c in cmds), names
    assert not any("CUDA toolkit" in n or "NVIDIA" in n and "repository" in n for n in names)
    build = next(c for n, cmds in ops if n.startswith("Build llama-server") for c in cmds)
    assert "export PATH=/usr/local/cuda/bin:$PATH" in build
    assert "cuda13.0-sm90" in build and "-DCMAKE_CUDA_ARCHITECTURES=90" in build
    # supervisord from the controller's package, then the program, then the smoke check
    i = names.index("Start supervisord")
    prog = next(k for k, n in enumerate(names) if n.startswith("Render supervisord program"))
    smoke = next(k for k, n in enumerate(names) if n.startswith("Wait for /health"))
    assert i < prog < smoke
    assert not any("systemd" in n and "unit" in n for n in names), names
    conf = uploaded(ops, "Render supervisord program")
    assert "[program:beekeeper-llm]" in conf and f" -m {MODEL} " in conf
    assert "setpriv --reuid=beekeeper" in conf
    # the server dies with supervisord: never left running unsupervised
    assert "--pdeathsig KILL" in conf
    assert "/var/log/beekeeper/beekeeper-llm.log" in conf
    # the model is yours, checked where it is: never downloaded, copied or moved
    assert any(n.startswith(f"Check model {MODEL} (yours") for n in names)
    assert "huggingface" not in every and "Download model" not in every
    smoke_cmd = next(c for n, cmds in ops if n.startswith("Wait for /health") for c in cmds)
    assert "--program beekeeper-llm" in smoke_cmd and "journalctl" not in smoke_cmd
    # the gate passes only for the program's own process, listing the deployed model
    assert "--model q8-turbo4-64k" in smoke_cmd


@pytest.mark.parametrize("state", ["RUNNING", "STARTING"])
def test_a_second_run_with_supervisord_and_the_program_running_restarts_nothing(state):
    """RUNNING, or STARTING (supervisord started by this run starts it): no command, as the
    start command would do nothing either (a kill -9 of supervisord, then a deploy, saw
    it STARTING on the GPU box and said "changed")."""
    from beekeeper.core.render import render  # noqa: F401 - the same templates
    first = run_deploy(POD_DATA, pod())
    conf = uploaded(first, "Render supervisord program").split("\n", 1)[1]
    import hashlib

    program = "/etc/beekeeper/supervisor/programs/beekeeper-llm.conf"

    def sha1(path=None, **_):
        return hashlib.sha1(conf.encode()).hexdigest() if path == program else None

    def file(path=None, **_):
        return {"size": 1, "mode": 644} if path in (program, MODEL) else None
    # the second run finds what the first made: the program file and the kit's folders
    again = run_deploy(POD_DATA, pod(Sha1File=sha1, File=file,
                                     Directory=lambda path=None, **_: {"mode": 755}
                                     if path == program.rsplit("/", 1)[0] else None,
                                     SupervisorPrograms={"beekeeper-llm": state}))
    start = next(cmds for n, cmds in again if n.startswith("Start beekeeper-llm under"))
    assert start == [], start  # running, its file unchanged: no restart
    assert not any("(restart: inputs changed)" in n for n, _ in again)


@pytest.mark.parametrize(("data", "over", "words"), [
    ({"mode": "container"}, {},  # before model_dir's refusal (the model is in /workspace)
     "host data `mode`: 'container' runs the server in a Docker container, and this host has "
     "no Docker engine and no systemd (PID 1 is 'process_api': a container) to run one; fix: "
     "set mode = \"native\""),
    ({"runtime": "systemd"}, {}, "needs systemd as PID 1"),
    ({}, {"HostTools": replace(POD_TOOLS, setpriv=None)}, "setpriv"),
    ({"gateway": {"port": 4000}}, {}, "the gateway runs HAProxy as a systemd unit"),
    ({}, {"HostTools": replace(POD_TOOLS, python3=None, python3_version=None)}, "python3"),
    ({}, {"HostTools": replace(POD_TOOLS, tools=(("c++", "/usr/bin/c++"),
                                                  ("make", "/usr/bin/make")))},
     "needs cmake, which this host lacks, and apt has no package lists"),
    ({}, {"Sha256File": lambda path=None, **_: "cd" * 32}, "has sha256 cdcd"),
    ({}, {"File": lambda path=None, **_: None}, "is not a file on the host"),
    ({}, {"OthersCannotRead": "folder /workspace is mode 700, others cannot pass through it"},
     "cannot read /workspace/models/Qwen3.5-9B-Q8_0.gguf (folder /workspace is mode 700"),
])
def test_what_cannot_work_in_the_pod_is_refused_before_any_change(data, over, words):
    with pytest.raises(BeekeeperError) as e:
        run_deploy({**POD_DATA, **data}, pod(**over))
    assert words in str(e.value)


def test_a_toolkit_that_cannot_build_for_the_card_is_not_used():
    old = replace(POD_TOOLS, nvcc_version="11.7.99")  # sm_90 needs CUDA 11.8
    ops = run_deploy({**POD_DATA, "source": POD_DATA["source"]}, pod(HostTools=old))
    names = [n for n, _ in ops]
    assert any(n.startswith("Install the CUDA toolkit (cuda-toolkit-13-2") for n in names), names


def test_a_missing_tool_is_installed_when_apt_has_lists():
    tools = replace(POD_TOOLS, tools=(("c++", "/usr/bin/c++"), ("make", "/usr/bin/make")),
                    apt_lists=7)
    ops = run_deploy(POD_DATA, pod(HostTools=tools))
    inst = next(c for n, cmds in ops if n.startswith("Install the build tools the host lacks")
                for c in cmds if " install " in c)
    assert "cmake" in inst and "g++" not in inst


def test_host_tools_default_state_is_unknown():
    assert HostToolsInfo().missing() == ["cmake", "c++", "make", "git"]


def test_a_listener_is_read_off_proc_where_the_host_has_no_ss(tmp_path):
    """The H200 box has no `ss` (no iproute2): the port check reads the kernel's socket table
    and each process's open files, finds the listener's pid, user and program, and refuses a
    port another process holds, naming them."""
    import os
    import shutil
    import socket
    import subprocess
    import sys

    from beekeeper.core.paths import NATIVE_PREFIX, SUPERVISOR_PIDFILE
    from beekeeper.facts.host import PortOwners, parse_port_owners

    require_tools("awk", "find", "stat", "readlink", why="the PortOwners fact's command")
    for tool in ("awk", "sh", "find", "cut", "sort", "cat", "tr", "grep", "readlink", "stat"):
        (tmp_path / tool).symlink_to(shutil.which(tool))  # what such a host has: no ss
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        cmd = PortOwners().command(port, SUPERVISOR_PIDFILE, NATIVE_PREFIX)
        out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True,
                             env={"PATH": str(tmp_path)}).stdout.splitlines()
    info = parse_port_owners(out)
    me = next(o for o in info.owners if o.pid == os.getpid())
    assert os.path.realpath(me.exe) == os.path.realpath(sys.executable)
    # the chain of parents stops before PID 1 (a test run started detached has PID 1 as its
    # parent: no ancestors then)
    parent = os.getppid()
    assert me.ppid == parent and me.ancestors[:1] == ((parent,) if parent > 1 else ())
    assert me.comm and me.user and me.inode.isdigit()
    with pytest.raises(BeekeeperError, match=re.escape(
            f"port 8083 on the host is in use by pid {me.pid} (user {me.user}, program "
            f"{me.exe}), not by this service's server: stop it (kill {me.pid}), or set "
            "`port` to a free port")):
        run_deploy(POD_DATA, pod(PortOwners=info))


def test_the_server_users_home_is_named_never_made():
    """The beekeeper user's home is /nonexistent, and nothing makes it: pyinfra's server.user
    makes a home it names unless told not to (ensure_home), and the uninstall, which removes
    the user, left the folder behind (the pod test's before/after snapshot found it)."""
    ops = run_deploy(POD_DATA, pod())
    user = next(cmds for n, cmds in ops if n == "Create the beekeeper user")
    assert any("useradd" in c and "/nonexistent" in c for c in user), user
    assert not any("mkdir" in c or "chown" in c for c in user), user


def test_a_first_start_under_supervisord_is_named_as_what_it_is():
    """A first deploy starts the program (no "restart"), keeps no rollback copy of a unit
    it does not have, and removes no compose file that was never there."""
    names = [n for n, _ in run_deploy(POD_DATA, pod())]
    assert "Start beekeeper-llm under supervisord" in names, names
    assert "Remove a stale rollback copy of beekeeper-llm.conf (none runs yet)" in names
    assert not any("beekeeper-llm.service" in n or "compose.yaml" in n for n in names), names


def _restarted_pod(linked: bool, kept_libs: bool = True,
                   nvcc: bool = True) -> list[tuple[str, list[str]]]:
    """The next deploy of a pod restarted after a whole deploy: the container disk cleared
    (cmake and apt's lists gone), the build and the kit's folders on the volume; `linked`:
    the start script ran (the kit's folders are links into the root again), else the start
    command is not set yet and /opt/beekeeper is no more; `nvcc`: the image's own toolkit,
    else the one the kit installed is gone too."""
    from beekeeper.core.paths import NATIVE_PREFIX, PERSISTED
    from beekeeper.facts.persist import PathKind
    from beekeeper.facts.volume import FsInfo

    root = "/workspace/beekeeper"
    no_cmake = replace(POD_TOOLS, tools=(("c++", "/usr/bin/c++"), ("make", "/usr/bin/make")),
                       apt_lists=0, **({} if nvcc else {"nvcc": None, "nvcc_version": None}))
    builds = NATIVE_PREFIX if linked else f"{root}/opt/llama-server"

    def file(path=None, **_):  # the model, and the build on the volume (both its targets
        # and the list of the toolkit libraries kept beside them, in the folder named as the
        # build is: <ref's 12 characters>-<variant>-<hash>)
        there = path == MODEL or re.fullmatch(
            rf"{builds}/[0-9a-f]{{12}}-cuda[^/:]+-[0-9a-f]{{8}}/"
            r"(llama-server|llama-bench" + (r"|toolkit-libs\.txt)" if kept_libs else ")"),
            path or "") is not None
        return {"size": 1, "mode": 755} if there else None
    return run_deploy(POD_DATA, pod(
        HostTools=no_cmake, File=file,
        Directory=lambda path=None, **_: {"mode": 755} if path == "/workspace" else None,
        FsOf=lambda path=None, **_: FsInfo(existing="/workspace", fstype="ext4",
                                           target="/workspace"),
        PathKinds=lambda paths=(), **_: {p: PathKind("link", f"{root}/{n}")
                                         for p, n in PERSISTED if p in paths} if linked else {},
        SupervisorPrograms={"beekeeper-llm": "RUNNING"} if linked else None))


@pytest.mark.parametrize("linked", [True, False], ids=["start-script-ran", "no-start-command"])
def test_a_pod_restarted_deploys_again_without_build_tools_its_build_no_longer_needs(linked):
    """A pod's restart clears the container disk: build tools the kit installed with apt, or
    the user did as preflight told them (`apt-get update && apt-get install cmake`), are gone
    with apt's lists, while the build is on the volume. The next deploy (a second service,
    a changed flag, or the start services before the start command is set) builds nothing:
    it is not refused for cmake, installs none, and fetches no source (no network on most
    pods); where the start command is not set, the build is found on the root before the
    deploy links /opt/beekeeper to it again."""
    ops = _restarted_pod(linked)
    names = [n for n, _ in ops]
    build = next(cmds for n, cmds in ops if n.startswith("Build llama-server"))
    assert build == [], build  # built: the binary is on the volume
    assert not any(n.startswith("Install the build tools") for n in names), names
    # nor the CUDA toolkit the kit had installed on the container disk (this pod's image has
    # its own: below, the kit's install cleared with the disk)
    assert not any("CUDA toolkit" in n for n in names), names


def test_a_restarted_pod_whose_toolkit_the_kit_installed_does_not_install_it_again():
    """The kit installed cuda_version's toolkit on the container disk (the image had none),
    the pod's restart cleared it; the build on the volume keeps the libraries it loads, so
    the next deploy installs no toolkit (several GB, from NVIDIA's repository, on a disk the
    next restart clears again)."""
    ops = _restarted_pod(linked=True, nvcc=False)
    names = [n for n, _ in ops]
    assert next(cmds for n, cmds in ops if n.startswith("Build llama-server")) == []
    assert not any("CUDA toolkit" in n or "CUDA libraries" in n for n in names), names
    assert not any(n.startswith(("Create the source folder", "Fetch the server source",
                                 "Upload source tree")) for n in names), names


# the H200 pod's GPU on PCI (sysfs shows the machine's devices inside a container)
OLD_DRIVER_POD = {"GpuInfo": replace(H200, cuda_version="12.8", driver_version="570.133.20",
                                     driver_branch=570),
                  "HostTools": replace(POD_TOOLS, nvcc=None, nvcc_version=None, apt_lists=5)}


@pytest.mark.parametrize(("data", "over"), [
    # started without its GPU (no --gpus, the provider's CPU option): no nvidia-smi
    ({}, {"GpuInfo": None}),
    # the machine's driver too old for cuda_version, with or without upgrade_driver
    ({"upgrade_driver": True}, OLD_DRIVER_POD),
])
def test_a_pod_never_gets_a_kernel_driver_installed_inside_it(data, over):
    """The driver of a container is the machine's outside it: a kernel module is neither
    built for nor loaded from inside the container, and a "reboot" restarts the pod into the
    same state. Refused before any change, not planned as an install and a reboot."""
    try:
        ops = run_deploy({**POD_DATA, **data}, pod(PciListing=PCI_H200, **over))
    except BeekeeperError as e:
        assert "container" in str(e), e
        return
    driver = [n for n, _ in ops if "NVIDIA driver" in n or "kernel headers" in n]
    pytest.fail(f"a driver is installed inside the container: {driver}")


def test_an_old_driver_in_a_pod_is_not_offered_upgrade_driver():
    with pytest.raises(BeekeeperError) as e:
        run_deploy(POD_DATA, pod(PciListing=PCI_H200, **OLD_DRIVER_POD))
    assert "upgrade_driver" not in str(e.value), e.value


def test_a_pods_driver_refusals_are_whole_lines():
    """What a GPU container is told, word for word: its GPU not passed in (nvidia-smi missing,
    or listing none), and the machine's driver too old (no upgrade_driver offered)."""
    lines = []
    for over in ({"GpuInfo": None}, {"GpuInfo": replace(H200, gpus=[])}, OLD_DRIVER_POD):
        with pytest.raises(BeekeeperError) as e:
            run_deploy(POD_DATA, pod(PciListing=PCI_H200, **over))
        lines.append(str(e.value))
    gpu_not_in = ("host canned: no NVIDIA GPU is visible in this container (the PCI bus shows 1, "
                  "nvidia-smi {}); a container's driver is the machine's, never installed "
                  "inside it: start the container with its GPU (`docker run --gpus all`, or the "
                  "provider's GPU option), or choose a CPU profile such as cpu-tiny")
    assert lines == [
        gpu_not_in.format("is missing"), gpu_not_in.format("lists none"),
        "host canned: driver 570.133.20 is older than 580, which CUDA 13.2.1 needs: the driver "
        "is the machine's, outside this container, and the kit cannot replace it: run on a "
        "machine (or a provider's template) with driver branch 595 or newer, or set "
        "cuda_version = '12.8.1'"]


def test_a_pods_build_from_before_the_kept_toolkit_libraries_is_built_again():
    """A pod's build that holds both targets but no kept toolkit libraries (an older kit's)
    would not start after the restart cleared the toolkit: the deploy builds it again, with
    the run path to the copies and the copies."""
    from beekeeper.core.paths import NATIVE_PREFIX
    from beekeeper.facts.volume import FsInfo

    def file(path=None, **_):  # both targets in the build's folder, no toolkit-libs.txt
        there = path == MODEL or re.fullmatch(
            rf"{NATIVE_PREFIX}/[0-9a-f]{{12}}-cuda[^/:]+-[0-9a-f]{{8}}/llama-(server|bench)",
            path or "") is not None
        return {"size": 1, "mode": 755} if there else None
    ops = run_deploy(POD_DATA, pod(
        File=file, Directory=lambda path=None, **_: {"mode": 755} if path == "/workspace" else None,
        FsOf=lambda path=None, **_: FsInfo(existing="/workspace", fstype="ext4",
                                           target="/workspace")))
    build = next(cmds for n, cmds in ops if n.startswith("Build llama-server"))
    assert build and "-DCMAKE_BUILD_RPATH=$ORIGIN/lib" in build[0], build
    assert "toolkit-libs.txt" in build[0], build


def test_a_restarted_pods_build_without_kept_libraries_needs_the_build_tools_again():
    """An older kit's build on the volume (no kept toolkit libraries) is built again, so
    preflight judges the build tools as for a build: the pod restarted without cmake or apt's
    lists is refused for cmake in one line, before any change (not taken as built, which
    would skip the check and fail in the build)."""
    with pytest.raises(PreflightError) as e:
        _restarted_pod(linked=True, kept_libs=False)
    assert "cmake" in str(e.value) and "\n" not in str(e.value), str(e.value)


GIB = 2**30


def _volume(free_gib: float, model_there: bool = True):
    """A pod with its volume at /workspace (`free_gib` free there; the model on it, or
    already placed), the container disk roomy."""
    from beekeeper.facts.host import DiskInfo
    from beekeeper.facts.volume import FsInfo

    def disk(path=None, **_):
        on_volume = (path or "").startswith("/workspace")
        return DiskInfo(mount="/workspace" if on_volume else "/",
                        free_bytes=int((free_gib if on_volume else 100) * GIB))
    return pod(DiskOf=disk,
               Directory=lambda path=None, **_: {"mode": 755} if path == "/workspace" else None,
               FsOf=lambda path=None, **_: FsInfo(existing="/workspace", fstype="ext4",
                                                  target="/workspace"))


def test_a_pod_volume_without_room_for_the_native_build_is_refused_before_any_change():
    """The pod's native build goes on its volume (the trees, the binaries and the CUDA
    libraries it keeps: 1,308 MiB measured for sm_90); a volume that cannot hold it and 1
    GiB to spare is one line before anything changes, not a build that fails half-way."""
    with pytest.raises(PreflightError) as e:
        run_deploy(POD_DATA, _volume(2.5 - 1 / GIB))
    assert str(e.value) == (
        "host canned: persistent_root /workspace/beekeeper (file system /workspace) has 2.5 GiB "
        "free; building the CUDA server natively takes about 1.5 GiB (the source and build trees, "
        "the binaries, the CUDA libraries it keeps), and 1 GiB margin: free space on the "
        "pod's volume, or give the pod a larger volume")
    names = [n for n, _ in run_deploy(POD_DATA, _volume(2.5))]
    assert any(n.startswith("Build llama-server") for n in names), names


def test_a_native_build_off_a_pod_is_checked_on_state_dirs_disk_with_the_download():
    """Off a pod the trees go to state_dir; where the model's download lands on the same
    file system, it counts too."""
    data = {k: v for k, v in POD_DATA.items() if k not in ("model_host_path", "model_sha256")}
    data.update(persistent_root="none", profile="cpu-tiny")
    from beekeeper.core.profiles import PROFILES
    from beekeeper.facts.host import DiskInfo
    need = 1.25 * GIB + PROFILES["cpu-tiny"].model.size_bytes
    free = {"free": need - 1}
    canned = pod(DiskOf=lambda path=None, **_: DiskInfo(mount="/", free_bytes=int(free["free"])))
    with pytest.raises(PreflightError) as e:
        run_deploy(data, canned)
    assert re.fullmatch(
        r"host canned: state_dir /var/lib/beekeeper \(file system /\) has [0-9.]+ GiB free; "
        r"building the CPU server natively takes about 0\.25 GiB \(the source and build trees, the "
        r"binaries\) plus the model download [0-9.]+ GiB \(model_dir /srv/beekeeper/models is "
        r"on the same file system\), and 1 GiB margin: free space on it, or set state_dir to "
        r"a folder on a larger disk", str(e.value)), e.value
    free["free"] = need
    names = [n for n, _ in run_deploy(data, canned)]
    assert any(n.startswith("Build llama-server") for n in names), names


def test_a_fresh_pods_volume_counts_the_model_download_the_deploy_puts_there():
    """On a fresh pod model_dir is not linked yet (df of /srv/beekeeper/models would read the
    container disk), but the deploy links it onto the volume before the download: the
    volume must hold the build and the download."""
    data = {k: v for k, v in POD_DATA.items() if k not in ("model_host_path", "model_sha256")}
    fresh = {"Sha256File": lambda **_: None, "File": lambda **_: None}
    need = 2.5 + 9527501312 / GIB  # the build, the margin, Qwen3.5-9B-Q8_0.gguf
    with pytest.raises(PreflightError) as e:
        run_deploy(data, {**_volume(need - 1 / GIB), **fresh})
    assert str(e.value).startswith(
        "host canned: persistent_root /workspace/beekeeper (file system /workspace) has 11.4 "
        "GiB free; building the CUDA server natively takes about 1.5 GiB (the source and "
        "build trees, the binaries, the CUDA libraries it keeps) plus the model download 8.9 "
        "GiB (model_dir /srv/beekeeper/models is on the same file system), and 1 GiB margin"), \
        e.value
    names = [n for n, _ in run_deploy(data, {**_volume(need), **fresh})]
    assert any(n.startswith("Download model") for n in names), names


def test_a_pods_own_state_dir_off_the_volume_is_checked_where_the_trees_go():
    """state_dir set elsewhere on a pod is not kept on the root: the build's trees go there,
    so that is where the room must be."""
    from beekeeper.facts.host import DiskInfo

    def disk(path=None, **_):
        mount = "/data" if (path or "").startswith("/data") else "/workspace"
        return DiskInfo(mount=mount, free_bytes=GIB // 4 if mount == "/data" else 100 * GIB)
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, "state_dir": "/data/bk"}, {**_volume(100), "DiskOf": disk})
    assert str(e.value).startswith(
        "host canned: state_dir /data/bk (file system /data) has 0.2 GiB free; building the "
        "CUDA server natively takes about 1.5 GiB"), e.value


def test_a_cuda_build_off_a_pod_keeps_no_toolkit_libraries_and_says_none():
    """Only a pod's CUDA build keeps its toolkit libraries (a restart clears the toolkit
    there); off a pod the room named is the trees' and the binaries'."""
    from beekeeper.facts.host import DiskInfo

    canned = pod(DiskOf=lambda path=None, **_: DiskInfo(mount="/", free_bytes=GIB))
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, "persistent_root": "none"}, canned)
    assert str(e.value).startswith(
        "host canned: state_dir /var/lib/beekeeper (file system /) has 1.0 GiB free; building "
        "the CUDA server natively takes about 1.5 GiB (the source and build trees, the "
        "binaries), and 1 GiB margin"), e.value


def test_the_host_toolkit_names_the_cards_archs_in_number_order(capsys):
    """Mutant (as it was): check_host_toolkit sorted the cards' archs as strings ("100" before
    "90") where the build's arch list (driver_preflight.archs_of_cards) sorts them as numbers:
    one rule, core/build.card_archs, for both. A pod with an H200 and a B200 (sm_100, which
    CUDA 13.0 builds for) uses its own toolkit and says so in number order."""
    b200 = GpuCard(name="NVIDIA B200", driver_version="580.159.04", compute_cap="10.0",
                   memory_total_mib=183359)
    two = replace(H200, gpus=(b200, *H200.gpus))
    run_deploy(POD_DATA, pod(GpuInfo=two))
    err = capsys.readouterr().err
    assert "builds for sm_90, sm_100 and runs on driver branch 580: used" in err, err


def test_a_refused_cuda_release_comes_without_the_host_toolkit_warning_before_it(capsys):
    """cuda_arch '61;90' on the pod: its nvcc 13.0 cannot build sm_61, and neither can the
    kit's CUDA 13.2.1; the refusal alone, not the warning that the kit would install 13.2.1's
    toolkit instead (seen on an H100, 2026-12-07: the warning, then the refusal that made it
    moot).
    Mutant (as it was): check_host_toolkit warned as it chose."""
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, "cuda_arch": "61;90"}, pod())
    assert str(e.value).startswith("host canned: host data `cuda_arch`: '61;90' asks for "
                                   "sm_61"), e.value
    assert "toolkit instead" not in capsys.readouterr().err


def test_the_host_toolkit_not_used_is_said_once_the_release_passed(capsys):
    """A pod whose nvcc (11.8) is older than the kit builds with: the deploy goes on with
    the kit's CUDA 13.2.1, and says once why its own toolkit is not used."""
    old = replace(POD_TOOLS, nvcc_version="11.8")
    run_deploy(POD_DATA, pod(HostTools=old))
    err = capsys.readouterr().err
    assert err.count("the host's CUDA toolkit 11.8 is older than") == 1, err
    assert "the kit installs CUDA 13.2.1's toolkit instead" in err, err
