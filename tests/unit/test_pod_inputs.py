"""
A rented pod's own inputs, refused or resolved before any change: who holds the service's
port (the kit's supervised server, an orphan of the kit's, anything else), a model file that
is not a GGUF, container mode where there is neither Docker nor systemd, the model's name
for clients (`model_alias`), the persistent root on the pod's volume, and what the pod
inventory reads from the environment. Fact output is the text the fact commands print on
such hosts; preflight runs on canned facts (tests/unit/harness.py).
"""

from __future__ import annotations

import re
import runpy
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import BeekeeperError, ConfigError, PreflightError
from beekeeper.core.planner import gguf_problem
from beekeeper.facts.gguf import FileHead, parse_head_hex
from beekeeper.facts.host import PortOwner, PortOwnersInfo, parse_port_owners
from beekeeper.facts.hostfacts import HostFacts
from beekeeper.facts.volume import FsInfo, FsOf, parse_fs_of

from .harness import (
    DEFAULTS,
    DOCKER_PROXY,
    MODEL,
    NATIVE,
    POD_DATA,
    facts,
    pod,
    port_owners,
    run_deploy,
    runtime_named,
)

ROOT = Path(__file__).resolve().parents[2]
BUILD = "/opt/beekeeper/llama-server/beellama-ba1fdce591f5-cuda13.0-sm90-x86-64-v3"
SERVER = f"{BUILD}/bin/llama-server"


def deploy_facts(data: dict[str, Any], canned: dict[str, Any]) -> HostFacts:
    """Queue deploy.py on canned facts; what preflight returned."""
    from beekeeper.tasks import preflight

    real, got = preflight.check, []

    def spy(cfg: Any, *args: Any) -> HostFacts:
        got.append(real(cfg, *args))
        return got[-1]
    with mock.patch.object(preflight, "check", spy):
        run_deploy(data, canned)
    return got[0]


# ------------------------------------------------------------------ who holds the port

# The PortOwners command's output on the H200 pod (PID 1 process_api, cgroup v1 as that
# box has it) after `kill -9` of the kit's supervisord: the server was re-parented to PID 1
# and holds the port on 127.0.0.1 (tcp) only; the pidfile names a pid that is gone.
ORPHAN_TEXT = """native_prefix=/workspace/beekeeper/opt/llama-server
socket=2186331
pid=48213
ppid=1
user=beekeeper
exe=/workspace/beekeeper/opt/llama-server/beellama-ba1fdce591f5-cuda13.0-sm90-x86-64-v3/bin/llama-server
comm=llama-server
ancestors=
cgroup=12:pids:/ 11:memory:/process_api/dc1fab757e21 1:cpu:/ 0::/
""".splitlines()

# The supervised server: a child of the kit's supervisord (python3 ... supervisord), through
# `/bin/sh -c` exec'ing setpriv, which exec'd llama-server; it listens on 0.0.0.0 and ::
# (tcp and tcp6): one process holding two sockets.
SUPERVISED_TEXT = f"""supervisord=311
native_prefix=/opt/beekeeper/llama-server
socket=918273
pid=4242
ppid=311
user=beekeeper
exe={SERVER}
comm=llama-server
ancestors= 311
cgroup=0::/
socket=918274
pid=4242
ppid=311
user=beekeeper
exe={SERVER}
comm=llama-server
ancestors= 311
cgroup=0::/
""".splitlines()

# A llama-server a user started by hand from their own build, in their shell (a child of
# bash, of sshd), on the same port: not the kit's, whatever its name.
BY_HAND_TEXT = """native_prefix=/opt/beekeeper/llama-server
socket=77120
pid=9001
ppid=8990
user=root
exe=/workspace/llama.cpp/build/bin/llama-server
comm=llama-server
ancestors= 8990 8802 7
cgroup=0::/
""".splitlines()

# A native server under systemd (cgroup v2): its unit's cgroup names it; the binary was
# replaced by a newer build since it started.
SYSTEMD_TEXT = f"""native_prefix=/opt/beekeeper/llama-server
socket=51515
pid=2077
ppid=1
user=beekeeper
exe={SERVER} (deleted)
comm=llama-server
ancestors=
cgroup=0::/system.slice/beekeeper-llm.service
""".splitlines()


def test_the_port_owners_text_is_read_whole():
    orphan = parse_port_owners(ORPHAN_TEXT)
    assert orphan.supervisord is None
    assert orphan.native_prefix_real == "/workspace/beekeeper/opt/llama-server"
    (o,) = orphan.owners
    assert (o.pid, o.ppid, o.user, o.comm, o.ancestors, o.inode) == \
        (48213, 1, "beekeeper", "llama-server", (), "2186331")
    assert o.exe.endswith("-sm90-x86-64-v3/bin/llama-server")
    assert o.cgroups == ("/", "/process_api/dc1fab757e21", "/", "/")
    sup = parse_port_owners(SUPERVISED_TEXT)
    assert sup.supervisord == 311 and [x.pid for x in sup.owners] == [4242]  # tcp + tcp6
    assert sup.owners[0].ancestors == (311,)
    assert parse_port_owners(SYSTEMD_TEXT).owners[0].exe == SERVER  # " (deleted)" cut
    assert parse_port_owners(SYSTEMD_TEXT).owners[0].cgroups == (
        "/system.slice/beekeeper-llm.service",)


def test_a_listener_whose_process_proc_does_not_show_is_kept_as_unknown():
    text = ["native_prefix=", "socket=1234", "socket=1235", "pid=77", "ppid=1", "user=root",
            "exe=/usr/sbin/nginx", "comm=nginx", "ancestors=", "cgroup=0::/"]
    owners = parse_port_owners(text).owners
    assert owners[0] == PortOwner(pid=None, inode="1234")
    assert owners[1].pid == 77 and owners[1].program == "/usr/sbin/nginx"
    assert parse_port_owners(["native_prefix=/x", "socket=9"]).owners == (
        PortOwner(pid=None, inode="9"),)
    assert parse_port_owners([]) == PortOwnersInfo()


@pytest.mark.parametrize(("text", "runtime", "kind"), [
    (SUPERVISED_TEXT, "supervisor", "supervised"),
    (ORPHAN_TEXT, "supervisor", "orphan"),  # through the persistent root's real path
    (BY_HAND_TEXT, "supervisor", "foreign"),
    (SYSTEMD_TEXT, "systemd", "supervised"),
    (SYSTEMD_TEXT, "supervisor", "foreign"),  # another runtime's unit: not ended by the kit
    (SUPERVISED_TEXT, "systemd", "foreign"),  # supervisord restarts what is ended
    (ORPHAN_TEXT, "systemd", "orphan"),
])
def test_a_listener_is_the_kits_supervised_server_an_orphan_or_foreign(text, runtime, kind):
    from beekeeper.tasks.preflight import classify_port_owner

    info = parse_port_owners(text)
    assert classify_port_owner(info.owners[0], info, runtime_named(runtime),
                               frozenset({"llm"}), False) == kind


def test_an_orphan_is_recognised_by_the_kits_prefix_as_written_and_as_resolved():
    from beekeeper.tasks.preflight import classify_port_owner

    info = parse_port_owners(ORPHAN_TEXT)
    o = info.owners[0]
    as_written = replace(o, exe=SERVER)
    elsewhere = replace(o, exe="/workspace/other/bin/llama-server")
    other_user = replace(o, user="ubuntu")
    other_unit = replace(o, cgroups=("/system.slice/beekeeper-chat.service",))

    def check(owner: PortOwner, info: PortOwnersInfo, runtime: str, units: frozenset[str],
              docker_ours: bool) -> str:
        return classify_port_owner(owner, info, runtime_named(runtime), units, docker_ours)

    assert check(as_written, replace(info, native_prefix_real=""), "supervisor",
                 frozenset({"llm"}), False) == "orphan"
    assert check(elsewhere, info, "supervisor", frozenset({"llm"}), False) == "foreign"
    assert check(other_user, info, "supervisor", frozenset({"llm"}), False) == "foreign"
    assert check(other_unit, info, "systemd", frozenset({"llm"}), False) == "foreign"
    # a service this deploy removes first may hold the port
    assert check(other_unit, info, "systemd", frozenset({"llm", "chat"}), False) == \
        "supervised"
    proxy = port_owners(DOCKER_PROXY)
    assert check(DOCKER_PROXY, proxy, "systemd", frozenset({"llm"}), True) == "supervised"
    assert check(DOCKER_PROXY, proxy, "systemd", frozenset({"llm"}), False) == "foreign"


def test_the_kits_supervised_server_on_its_port_passes_and_ends_nothing():
    hf = deploy_facts(POD_DATA, pod(PortOwners=parse_port_owners(SUPERVISED_TEXT)))
    assert hf.port_orphans == ()


def test_an_orphan_of_the_kits_is_told_and_handed_to_the_deploy_to_end(capsys):
    hf = deploy_facts(POD_DATA, pod(PortOwners=parse_port_owners(ORPHAN_TEXT)))
    assert hf.port_orphans == (48213,)
    err = capsys.readouterr().err
    assert "port 8083 is held by pid 48213" in err
    assert "a server of the kit's that no supervisor owns" in err
    assert "the deploy ends it and starts beekeeper-llm under supervision" in err


def test_a_llama_server_started_by_hand_is_refused_naming_pid_user_and_program():
    with pytest.raises(PreflightError) as e:
        run_deploy(POD_DATA, pod(PortOwners=parse_port_owners(BY_HAND_TEXT)))
    assert str(e.value).endswith(
        "port 8083 on the host is in use by pid 9001 (user root, program "
        "/workspace/llama.cpp/build/bin/llama-server), not by this service's server: stop it "
        "(kill 9001), or set `port` to a free port")


def test_a_server_of_another_service_of_the_kits_is_refused_naming_its_unit():
    text = [line.replace("beekeeper-llm.service", "beekeeper-chat.service")
            for line in SYSTEMD_TEXT]
    with pytest.raises(PreflightError, match=re.escape(
            "(user beekeeper, program " + SERVER + ", in beekeeper-chat.service)")):
        run_deploy({**DEFAULTS, "mode": "native"},
                   facts(Wsl=NATIVE, PortOwners=parse_port_owners(text)))


def test_the_native_units_own_server_passes_under_systemd():
    hf = deploy_facts({**DEFAULTS, "mode": "native"},
                      facts(Wsl=NATIVE, PortOwners=parse_port_owners(SYSTEMD_TEXT)))
    assert hf.port_orphans == () and hf.persistent_root is None


def test_a_listener_proc_does_not_show_is_refused_unless_the_service_ran_there():
    unseen = PortOwnersInfo(owners=(PortOwner(pid=None, inode="4711"),))
    with pytest.raises(PreflightError, match="a process /proc does not show "
                       r"\(listening socket inode 4711"):
        run_deploy(POD_DATA, pod(PortOwners=unseen))


# ------------------------------------------------------------------ the model is a GGUF

@pytest.mark.parametrize(("head", "problem"), [
    (b"GGUF\x03\x00\x00\x00", None),
    (b"GGUF\x02\x00\x00\x00", None),
    (b"GGUF\x01\x00\x00\x00", "it is GGUF version 1, and the server reads versions 2 and 3"),
    (b"GGUF\x00\x00\x00\x03", "it is GGUF version 50331648"),  # big-endian: not GGUF's
    (b"not a m", "it does not start with GGUF's magic b'GGUF' (its first 7 bytes are "
     "b'not a m')"),
    (b"GGUF", "it is 4 bytes long, shorter than a GGUF header"),
    (b"", "it is empty"),
])
def test_a_gguf_is_its_magic_and_version_2_or_3(head, problem):
    got = gguf_problem(head)
    assert got == problem if problem is None or head[:4] != b"GGUF" or len(head) < 8 \
        else got is not None and got.startswith(problem)


def test_the_file_head_fact_reads_the_first_eight_bytes(tmp_path):
    import subprocess

    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 100)
    text = tmp_path / "t.gguf"
    text.write_text("version https://git-lfs.github.com/spec/v1\n")  # an LFS pointer
    for path, want in ((f, b"GGUF\x03\x00\x00\x00"), (text, b"version "),
                       (tmp_path / "none.gguf", None)):
        out = subprocess.run(["sh", "-c", FileHead().command(str(path))], capture_output=True,
                             text=True).stdout.splitlines()
        assert FileHead().process(out) == want
    assert parse_head_hex([" 47 47 55 46 03 00 00 00", ""]) == b"GGUF\x03\x00\x00\x00"
    assert parse_head_hex(["unreadable"]) is None


def test_a_model_host_path_that_is_not_a_gguf_is_refused_before_any_change():
    with pytest.raises(PreflightError) as e:
        run_deploy(POD_DATA, pod(FileHead=b"hello wo"))
    assert str(e.value).endswith(
        f"host data `model_host_path`: {MODEL} is not a GGUF model file: it does not start "
        "with GGUF's magic b'GGUF' (its first 8 bytes are b'hello wo'); fix: give the path "
        "of a GGUF model file (version 2 or 3, as llama.cpp's convert_hf_to_gguf.py and the "
        "Hub's GGUF repositories have them)")


def test_a_model_path_on_the_controller_that_is_not_a_gguf_is_refused(tmp_path):
    model = tmp_path / "mine.gguf"
    model.write_text("not a model at all\n")
    data = {**DEFAULTS, "profile": "cpu-tiny", "model_path": str(model),
            "model_sha256": "ab" * 32}
    with pytest.raises(PreflightError, match=re.escape(
            f"host data `model_path`: {model} is not a GGUF model file: it does not start "
            "with GGUF's magic")):
        run_deploy(data, facts(Wsl=NATIVE, GpuInfo=None))
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    run_deploy(data, facts(Wsl=NATIVE, GpuInfo=None))


# ------------------------------------------------------------------ container mode on a pod

def test_container_mode_on_a_pod_is_refused_for_docker_and_systemd_before_model_dir():
    """The model lies in /workspace, outside model_dir, which container mode would refuse
    too: the refusal that comes is the one whose fix works (mode = "native")."""
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, "mode": "container", "model_sha256": "ab" * 32}, pod())
    assert "host data `mode`" in str(e.value) and 'fix: set mode = "native"' in str(e.value)
    assert "model_dir" not in str(e.value)


def test_a_model_outside_model_dir_in_container_mode_is_still_refused_on_a_docker_host():
    from .harness import DOCKER_CE

    data = {**DEFAULTS, "model_host_path": MODEL, "model_sha256": "ab" * 32}
    with pytest.raises(ConfigError, match=re.escape(
            f"host data `model_host_path`: {MODEL} is outside model_dir /srv/beekeeper/models, "
            "the one folder the server's container mounts")):
        run_deploy(data, facts(Wsl=NATIVE, DockerEngine=DOCKER_CE))


# ------------------------------------------------------------------ model_alias

def test_the_alias_is_the_profiles_name_unless_host_data_names_one():
    base = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "x1"}}
    assert load_host_config(base).service.alias == "cpu-tiny"
    assert load_host_config({**base, "model_alias": "qwen3.5-9b"}).service.alias == \
        "qwen3.5-9b"
    two = load_host_config({"source": base["source"], "services": [
        {"profile": "cpu-tiny", "model_alias": "org/tiny:q8"},
        {"service_name": "b", "profile": "cpu-tiny", "port": 8084}]})
    assert [s.alias for s in two.services] == ["org/tiny:q8", "cpu-tiny"]


@pytest.mark.parametrize(("alias", "words"), [
    ("", "host data `model_alias`: empty; fix: give one word"),
    ("my model", "holds a space (' ')"),
    ("a\tb", "holds whitespace ('\\t')"),
    ("a\x07b", "holds a control character ('\\x07')"),
    ("a\u3000b", "holds whitespace ('\\u3000')"),
    ("a\x00b", "holds a control character"),
    ("x" * 65, "is 65 characters long"),
    ("-flag", "does not start with a letter or digit"),
    ("qwen\u00e9", "holds 'é'"),
    ("a;rm", "holds ';'"),
    (7, "7 is a number, not a name"),
])
def test_a_model_alias_clients_cannot_send_is_refused_in_one_line(alias, words):
    base = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "x1"}}
    with pytest.raises(ConfigError) as e:
        load_host_config({**base, "model_alias": alias})
    assert words in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith("host data `model_alias`: ")


def test_a_64_character_alias_of_the_charset_is_taken():
    base = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "x1"}}
    alias = "Org_1/model-9.5b+q8:" + "x" * 44
    assert len(alias) == 64
    assert load_host_config({**base, "model_alias": alias}).service.alias == alias


# ------------------------------------------------------------------ the persistent root

# `FsOf`'s output on the hosts it is for: RunPod's volume at /workspace (its network
# volume is a FUSE mount; a pod volume is the machine's disk), the container's own layer
# where /workspace is a plain folder of the image (Vast.ai's templates), a host with no
# findmnt (BusyBox, util-linux missing) where stat -f tells the type.
RUNPOD_VOLUME = ["existing=/workspace", "findmnt=fuse   /workspace",
                 "statf=fuseblk"]
OVERLAY = ["existing=/workspace", "findmnt=overlay /", "statf=overlayfs"]
STAT_ONLY = ["existing=/workspace/beekeeper", "findmnt=", "statf=overlayfs"]


def test_the_file_system_of_a_path_is_read_from_findmnt_or_stat():
    assert parse_fs_of(RUNPOD_VOLUME) == FsInfo("/workspace", "fuse", "/workspace")
    assert parse_fs_of(OVERLAY) == FsInfo("/workspace", "overlay", "/")
    assert parse_fs_of(OVERLAY).overlay and parse_fs_of(STAT_ONLY).overlay
    assert not parse_fs_of(RUNPOD_VOLUME).overlay
    assert parse_fs_of(["existing=/x", "findmnt=", "statf="]) is None


def test_the_fs_fact_reads_the_nearest_existing_folder(tmp_path):
    import subprocess

    out = subprocess.run(["sh", "-c", FsOf().command(str(tmp_path / "a" / "b"))],
                         capture_output=True, text=True).stdout.splitlines()
    info = FsOf().process(out)
    assert info is not None and info.existing == str(tmp_path) and info.fstype


def _fs(table: dict[str, list[str]]) -> Any:
    def fact(path: str | None = None, **_: Any) -> FsInfo | None:
        lines = next((v for k, v in table.items() if path and path.startswith(k)), None)
        return parse_fs_of(lines) if lines else None
    return fact


def _workspace(path: str | None = None, **_: Any) -> dict | None:
    return {"mode": 755} if path == "/workspace" else None


def test_the_persistent_root_is_the_pods_volume_by_default(capsys):
    hf = deploy_facts(POD_DATA, pod(Directory=_workspace,
                                    FsOf=_fs({"/workspace": RUNPOD_VOLUME})))
    assert hf.persistent_root == "/workspace/beekeeper"
    # the line for the pod's start command is the root's start script
    err = capsys.readouterr().err
    assert "until the container's start command runs `/workspace/beekeeper/start` (the kit " \
        "kept under /workspace/beekeeper; RunPod: `bash -c '[ -x /workspace/beekeeper/start ] " \
        "&& exec /workspace/beekeeper/start -- /start.sh; exec /start.sh'`" in err


def test_without_a_workspace_folder_the_standard_layout_stays(capsys):
    assert deploy_facts(POD_DATA, pod()).persistent_root is None
    assert "start command runs `/usr/local/sbin/beekeeper-start` (no persistent root" in \
        capsys.readouterr().err


def test_a_workspace_on_the_containers_layer_keeps_the_standard_layout_with_a_warning(capsys):
    hf = deploy_facts(POD_DATA, pod(Directory=_workspace, FsOf=_fs({"/workspace": OVERLAY})))
    assert hf.persistent_root is None
    err = capsys.readouterr().err
    assert "/workspace is on the container's own layer (overlay), not a volume" in err


def test_no_workspace_on_a_containers_layer_warns_that_a_restart_clears_it(capsys):
    """A pod whose volume is mounted elsewhere than /workspace: the kit went on with the
    standard layout on the container's disk, silently, and printed a start line that a
    restart (which clears that disk) could never run."""
    hf = deploy_facts(POD_DATA, pod(FsOf=_fs({"/": OVERLAY})))
    assert hf.persistent_root is None
    err = capsys.readouterr().err
    assert "this container has no /workspace, and its own disk is its layer (overlay): the " \
        "kit keeps the standard layout" in err
    assert "BEEKEEPER_PERSISTENT_ROOT" in err


def test_persistent_root_none_keeps_the_standard_layout_silently(capsys):
    hf = deploy_facts({**POD_DATA, "persistent_root": "none"},
                      pod(Directory=_workspace, FsOf=_fs({"/workspace": OVERLAY})))
    assert hf.persistent_root is None
    assert "own layer" not in capsys.readouterr().err


def test_a_persistent_root_given_on_the_volume_is_taken():
    hf = deploy_facts({**POD_DATA, "persistent_root": "/data/kit"},
                      pod(FsOf=_fs({"/data": ["existing=/data", "findmnt=ext4 /data"]})))
    assert hf.persistent_root == "/data/kit"


@pytest.mark.parametrize(("data", "over", "line"), [
    ({"persistent_root": "/workspace/kit"}, {"FsOf": _fs({"/workspace": OVERLAY})},
     "host data `persistent_root`: /workspace/kit is on the container's own layer (/workspace, "
     "file system overlay mounted at /), which RunPod and Kubernetes clear when the pod "
     "restarts; fix: give a folder on the pod's volume, e.g. persistent_root = "
     "'/workspace/beekeeper', or persistent_root = 'none' where the container's own disk is "
     "kept (Vast.ai)"),
    ({"persistent_root": "/opt/beekeeper/keep"}, {},
     "host data `persistent_root`: /opt/beekeeper/keep is inside /opt/beekeeper, one of the "
     "folders the kit keeps under the root itself"),
])
def test_a_persistent_root_that_would_not_persist_is_refused_before_any_change(data, over,
                                                                                line):
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, **data}, pod(**over))
    assert line in str(e.value)


def test_a_persistent_root_on_a_systemd_host_is_refused():
    with pytest.raises(PreflightError, match=re.escape(
            "host data `persistent_root`: /workspace/beekeeper keeps the server of runtime "
            "supervisor (a GPU container, PID 1 not systemd), and this host runs it under "
            "systemd (PID 1 is 'systemd'), which keeps the standard layout; fix: remove "
            "persistent_root")):
        run_deploy({**DEFAULTS, "mode": "native", "persistent_root": "/workspace/beekeeper"},
                   facts(Wsl=NATIVE))
    hf = deploy_facts({**DEFAULTS, "mode": "native", "persistent_root": "none"},
                      facts(Wsl=NATIVE))
    assert hf.persistent_root is None


@pytest.mark.parametrize(("value", "words"), [
    ("workspace/beekeeper", "'workspace/beekeeper' is not an absolute path; fix: give a "
     "folder on the pod's volume"),
    ("None", "write persistent_root = 'none' (lowercase)"),
    ("/workspace/../beekeeper", "is not a normalized path"),
    ("~/keep", "relative to a home folder"),
    ("", "empty; fix: give a folder on the pod's volume"),
    (5, "5 is a number, not a path"),
])
def test_a_persistent_root_that_is_not_a_folder_is_refused_by_host_data(value, words):
    with pytest.raises(ConfigError) as e:
        load_host_config({**POD_DATA, "persistent_root": value})
    assert str(e.value).startswith("host data `persistent_root`: ") and words in str(e.value)


# ------------------------------------------------------------------ the pod inventory

def _inventory(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    for k in list(__import__("os").environ):
        if k.startswith("BEEKEEPER_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    ns = runpy.run_path(str(ROOT / "inventories" / "gpu-container.py"))
    (name, data), = ns["gpu_containers"]
    return {**DEFAULTS, **data}


def test_the_pod_inventory_reads_its_keys_from_the_environment(monkeypatch, tmp_path):
    key = tmp_path / "api_key"
    key.write_text("s3cret\n")
    key.chmod(0o600)
    data = _inventory(monkeypatch, BEEKEEPER_BIND_ADDRESS="0.0.0.0",
                      BEEKEEPER_API_KEY_FILE=str(key), BEEKEEPER_VRAM_BUDGET_GIB="22.5",
                      BEEKEEPER_MODEL_ALIAS="qwen3.5-9b",
                      BEEKEEPER_PERSISTENT_ROOT="/workspace/kit", BEEKEEPER_PORT="8090")
    cfg = load_host_config(data)
    svc = cfg.service
    assert (svc.data.bind_address, svc.data.api_key_file, svc.alias, svc.data.port) == \
        ("0.0.0.0", str(key), "qwen3.5-9b", 8090)
    assert cfg.data.vram_budget_gib == 22.5 and cfg.data.persistent_root == "/workspace/kit"
    plain = load_host_config(_inventory(monkeypatch))
    assert plain.data.persistent_root is None and plain.service.alias == "q8-turbo4-64k"


@pytest.mark.parametrize(("env", "line"), [
    ({"BEEKEEPER_VRAM_BUDGET_GIB": "lots"}, "host data `vram_budget_gib`: 'lots' is not a "
     "number of GiB above 0 and up to 4096"),
    ({"BEEKEEPER_VRAM_BUDGET_GIB": "-3"}, "host data `vram_budget_gib`: -3.0 is not a number"),
    ({"BEEKEEPER_PORT": "http"}, "host data `port`: 'http' is not a TCP port"),
    ({"BEEKEEPER_BIND_ADDRESS": "any"}, "host data `bind_address`: 'any' is not an IP address"),
    ({"BEEKEEPER_BIND_ADDRESS": "0.0.0.0"}, "host data `bind_address`: 0.0.0.0 is not "
     "loopback and no API key is set"),
    ({"BEEKEEPER_API_KEY_FILE": "/nonexistent/key"}, "host data `api_key_file`: "
     "/nonexistent/key is missing or empty"),
    ({"BEEKEEPER_MODEL_ALIAS": "my model"}, "host data `model_alias`: 'my model' holds a space"),
    ({"BEEKEEPER_PERSISTENT_ROOT": "workspace"}, "host data `persistent_root`: 'workspace' "
     "is not an absolute path"),
])
def test_a_bad_value_in_the_pod_environment_is_refused_in_one_line(monkeypatch, env, line):
    with pytest.raises(BeekeeperError) as e:
        load_host_config(_inventory(monkeypatch, **env))
    assert str(e.value).startswith(line) and "\n" not in str(e.value)


def test_a_pod_whose_folders_move_onto_its_root_keeps_serving_through_the_build():
    """An older kit's pod (its folders real folders, supervisord running): supervisord is
    stopped for the move and started again from the links before the build, so a build or
    an engine check that fails leaves the old server serving, not stopped (review of
    df93f55: the stop lasted until the service stage)."""
    from beekeeper.facts.persist import PathKind

    ops = run_deploy(POD_DATA, pod(
        Directory=_workspace, FsOf=_fs({"/workspace": RUNPOD_VOLUME}),
        PathKinds=lambda paths=(), **_: {p: PathKind("file" if "/sbin/" in p else "dir")
                                         for p in paths},
        SupervisorPrograms={"beekeeper-llm": "RUNNING"}))
    names = [n for n, _ in ops]
    stop = names.index("Stop the kit's supervisord while its folders move onto the persistent "
                       "root")
    again = names.index("Start the kit's supervisord again, its folders on the persistent root")
    links = [k for k, n in enumerate(names) if n.startswith("Keep ")]
    build = next(k for k, n in enumerate(names) if n.startswith("Build llama-server"))
    assert stop < min(links) and max(links) < again < build
    assert any("supervisord" in c for c in dict(ops)[names[again]])
