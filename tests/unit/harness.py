"""
Run deploy.py against canned facts: the operations it queues, in order, with the
commands each would run. No host is touched; facts come from the case.

Below that, every helper (function, constant) that more than one test module uses: a test
module imports only from here (and conftest.py's fixtures), never from another test module.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import runpy
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.context import ctx_host, ctx_state

from beekeeper import cli, hostverify, verify_main
from beekeeper.core.build import BuildSpec, build_spec
from beekeeper.core.config import HostConfig, load_host_config
from beekeeper.core.deployed import DeployedService
from beekeeper.core.distro import apt_wait
from beekeeper.core.errors import ConfigError
from beekeeper.core.paths import ServicePaths
from beekeeper.core.profiles import PROFILES
from beekeeper.core.runtime import Runtime, runtime_of, ways_named
from beekeeper.facts.docker import DockerEngineInfo
from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo, PciNvidiaDevices
from beekeeper.facts.host import (
    AptPolicyInfo,
    DiskInfo,
    InitInfo,
    OsReleaseInfo,
    PortOwner,
    PortOwnersInfo,
    Resources,
    WslInfo,
)
from beekeeper.facts.lifecycle import parse_apt_history
from beekeeper.facts.toolchain import HostToolsInfo, parse_host_tools
from beekeeper.verify.client import RequestRecord, StreamEvent
from beekeeper.verify.engine import BenchTest, EngineBaseline
from beekeeper.verify.results import (
    DecodeResult,
    EngineRun,
    NiahCase,
    NiahResult,
    TtftResult,
)
from beekeeper.verify_main import Keys, host_command

ROOT = Path(__file__).resolve().parents[2]


def requested_runtime(cfg: HostConfig) -> Runtime:
    """The way host data asks the server be run, where no preflight resolved it (a host
    whose PID 1 is systemd: HostFacts.runtime is this there)."""
    return runtime_of(cfg.data.mode, cfg.requested_way.runtime)


def runtime_named(runtime: str) -> Runtime:
    """The first way host data's `runtime` names (the docker unit for "systemd"), for the
    checks that ask only whether systemd or the kit's supervisord runs the server (the
    port's owner)."""
    return ways_named(runtime)[0]


def requested_build(cfg: HostConfig, compute_cap: str | None, *args: Any,
                    **kw: Any) -> BuildSpec:
    """build_spec for the CUDA release and archs host data asks, where no preflight resolved
    them (HostFacts.cuda_version and cuda_arch: these, on a host of one card whose driver
    runs the release)."""
    return build_spec(cfg, compute_cap, *args, cuda_version=cfg.data.cuda_version,
                      cuda_arch=cfg.data.cuda_arch, **kw)

# Facts of pyinfra's own operations, for a host where none of the kit's files exist yet.
BUILTIN_DEFAULTS: dict[str, Any] = {
    # a systemd host (the gateway-only hosts' tests give no InitSystem)
    "InitSystem": InitInfo(pid1="systemd", systemd=True, state="running"),
    "DebPackages": {"python3": ["3.12"], "ca-certificates": ["1"]},
    "File": None, "Directory": None, "Link": None, "Sha1File": None, "Sha256File": None,
    "PresentPaths": {},
    "GpgKeyrings": {}, "Users": {}, "Groups": [], "FindInFile": None,
    "SystemdStatus": {}, "SystemdEnabled": {}, "AptSources": [], "DebArch": "amd64",
    "Os": "Linux", "Which": lambda command: f"/usr/sbin/{command}", "Command": "",
    "FileContents": None, "ImageTags": [], "PortContainers": [], "ComposeVersion": None,
    "Home": "/root", "Date": None, "TmpDir": "/var/lib/canned", "PipPackages": {},
    "PythonVersion": None, "LinuxName": "Ubuntu",
    "Hostname": "canned", "Uptime": 100, "SourceTreeId": None,
    # a Ryzen 9 7950X's /proc/cpuinfo flags, those the kit's x86-64-v3 build needs among them
    "BuildResources": Resources(cpus=16, mem_total_bytes=64 * 2**30, machine="x86_64",
                                cpu_flags=frozenset("sse4_2 avx avx2 fma f16c bmi2 avx512f"
                                                    .split())),
    "DeployedServices": [], "FileSizes": {}, "FolderEntries": [],  # empty kit folders
    "SecureBoot": None, "NvidiaKernelModule": None, "WslSettings": None,  # read: unknown
    "DiskOf": None, "DebianComponents": [], "ProxyVars": (),  # unknown; none; no proxy
    "PciListing": (),  # no NVIDIA function on PCI (WSL2): see PCI_FACTS below
    "AptPolicy": AptPolicyInfo(installed=None, candidate="3.0.11-1"),
    # a stock Ubuntu host with the build tools, no CUDA toolkit, apt's lists there
    "HostTools": HostToolsInfo(tools=(("cmake", "/usr/bin/cmake"), ("c++", "/usr/bin/c++"),
                                      ("make", "/usr/bin/make"), ("git", "/usr/bin/git")),
                               python3="/usr/bin/python3", python3_version=(3, 12),
                               setpriv="/usr/bin/setpriv", apt_lists=6),
    "SupervisorPrograms": None, "OthersCannotRead": "",  # no supervisord; files readable
    "ServerHelp": None,  # a built server's --help: none read (tasks/engine.py checks none)
    "ModelTarget": lambda path=None, **_: path,  # a model path is no symlink
    "LinkTexts": (),  # ... and so no link on the way to its file
    "PathKinds": {},  # none of the kit's folders is a link into a persistent root
    # nothing listens on the port; a model file on the host is a GGUF (version 3); no
    # file system read (no persistent root is refused for its overlay)
    "PortOwners": PortOwnersInfo(), "FileHead": b"GGUF\x03\x00\x00\x00", "FsOf": None,
}


# Listeners on a port as the PortOwners fact reads them off /proc: Docker's userland proxy
# publishing a container's port (a child of dockerd, in docker.service's cgroup)
DOCKER_PROXY = PortOwner(pid=812, ppid=790, user="root", exe="/usr/bin/docker-proxy",
                         comm="docker-proxy", ancestors=(790,),
                         cgroups=("/system.slice/docker.service",), inode="40112")


def port_owners(*owners: PortOwner, supervisord: int | None = None) -> PortOwnersInfo:
    """The PortOwners fact of a host where `owners` listen on the port."""
    return PortOwnersInfo(owners=owners, supervisord=supervisord,
                          native_prefix_real="/opt/beekeeper/llama-server")


# What PciNvidiaDevices' command prints (facts/gpu.py): `<class> <device>` of each NVIDIA PCI
# function, as sysfs spells them. A case gives this listing as the fact "PciListing", and
# the PCI fact is the real fact's parse of it, so a case cannot give ids that are not GPUs,
# nor ids the listing does not hold.
PCI_FACTS = (PciNvidiaDevices,)
PCI_RTX4090 = ("0x030000 0x2684", "0x040300 0x22ba")  # AD102 (VGA) and its HDMI audio
PCI_GTX1080 = ("0x030000 0x1b80", "0x040300 0x10f0")  # GP104 (Pascal) and its audio
PCI_H200 = ("0x030200 0x2335",)  # GH100 SXM: a 3D controller (class 0x0302), no display
PCI_A100 = ("0x030200 0x20b0",)  # GA100 SXM4 40GB, a 3D controller
PCI_V100 = ("0x030200 0x1db4",)  # GV100 PCIe 16GB (Volta: pre-Turing), a 3D controller


def pci_facts(listing: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The PCI facts a host with this sysfs listing has, parsed by the facts themselves."""
    return {cls.__name__: cls().process(list(listing)) for cls in PCI_FACTS}


def require_tools(*tools: str, why: str) -> None:
    """A test that runs these programs (real dpkg-query, apt-get...) and may be the only
    test of what it checks: it skips where one is missing, except under CI (CI=true), where it
    fails naming them (scripts/setup.sh test, which CI runs, has them on Debian and Ubuntu),
    so a check nobody reads is never a skip in CI."""
    missing = [t for t in tools if shutil.which(t) is None]
    if not missing:
        return
    line = f"needs {', '.join(missing)} ({why}), not found on PATH"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{line}: CI must run this test (scripts/setup.sh test)")
    pytest.skip(line)


def _show(cmd: Any) -> str:
    """A command as text; an upload of in-memory content shows that content."""
    src = getattr(cmd, "src", None)
    if hasattr(src, "getvalue"):
        return f"upload {cmd.dest}:\n{src.getvalue()}"
    return str(cmd)


def run_deploy(data: dict[str, Any], facts: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Queue deploy.py for one host with `data`; return [(op name, commands)] in order."""
    return [(name, cmds) for name, cmds, _ in run_deploy_stdin(data, facts)]


def run_deploy_stdin(data: dict[str, Any],
                     facts: dict[str, Any]) -> list[tuple[str, list[str], str]]:
    """As run_deploy, with what each operation sends on its commands' stdin ('' if none)."""
    return _run({"canned": (data, facts)}, activate=False)[1]["canned"]


Op = tuple[str, list[str], str]  # (op name, commands, stdin)


def run_deploy_hosts(cases: dict[str, tuple[dict[str, Any], dict[str, Any]]]
                     ) -> tuple[set[str], dict[str, list[str]]]:
    """Queue deploy.py for several hosts of one inventory, as pyinfra does (one host after
    another, one State): `cases` maps a host name to its (data, facts). Returns the names
    of the hosts pyinfra marked failed and, per host, the names of the operations queued."""
    failed, ops = run_deploy_hosts_stdin(cases)
    return failed, {name: [n for n, _, _ in host_ops] for name, host_ops in ops.items()}


def run_deploy_hosts_stdin(cases: dict[str, tuple[dict[str, Any], dict[str, Any]]]
                           ) -> tuple[set[str], dict[str, list[Op]]]:
    """As run_deploy_hosts, with each host's operations as run_deploy_stdin gives them:
    (op name, commands, stdin). A host that fails while the others are still active is
    marked failed (its line goes to stderr); the last host left raises, as with one host."""
    return _run(cases, activate=True)


def _run(cases: dict[str, tuple[dict[str, Any], dict[str, Any]]],
         activate: bool) -> tuple[set[str], dict[str, list[Op]]]:
    inventory = Inventory((list((n, d) for n, (d, _) in cases.items()), {}))
    state = State(inventory, Config())
    code = compile((ROOT / "deploy.py").read_text(), str(ROOT / "deploy.py"), "exec")
    for name in cases:
        h = inventory.get_host(name)
        h.connected = True
        if activate:
            state.activate_host(h)
    with ctx_state.use(state), ExitStack() as patches:
        for name, (_, facts) in cases.items():  # commands are generated after, with facts
            h = inventory.get_host(name)
            patches.enter_context(mock.patch.object(h, "get_fact", side_effect=_canned(facts)))
            with ctx_host.use(h):
                exec(code, {"__name__": "deploy"})
        ops: dict[str, list[Op]] = {}
        for name in cases:  # each host's commands, generated as that host (pyinfra's proxy)
            h = inventory.get_host(name)
            with ctx_host.use(h):
                ops[name] = [_op(state, h, op_hash) for op_hash in state.get_op_order()
                             if op_hash in state.ops.get(h, {})]
    return {h.name for h in state.failed_hosts}, ops


def _canned(facts: dict[str, Any]) -> Any:
    values = {**BUILTIN_DEFAULTS, **facts}
    pci = pci_facts(values["PciListing"])
    # a PCI fact given by name must be what the listing gives (0 GPUs beside no listing):
    # anything else is a host that cannot exist
    wrong = {k: v for k, v in facts.items() if k in pci and v != pci[k]}
    if wrong:
        raise ValueError(f"canned facts set {wrong}, which the PCI listing "
                         f"{tuple(values['PciListing'])} does not give ({pci}): give the "
                         "listing (PciListing, e.g. harness.PCI_RTX4090) instead")
    values.update(pci)

    def get_fact(cls, *args, **kwargs):
        name = cls.__name__
        if name not in values:
            raise KeyError(f"canned facts lack {name} ({kwargs})")
        v = values[name]
        return v(**kwargs) if callable(v) else v
    return get_fact


def _op(state: State, host: Any, op_hash: str) -> Op:
    # outside pyinfra's CLI an op's hash is its place in each host's queue (the nth op of
    # every host shares one, with every host's name in its meta): the name is this host's
    op_data = state.get_op_data_for_host(host, op_hash)
    name = op_data.global_arguments.get("name") or next(iter(state.get_op_meta(op_hash).names))
    cmds = [_show(c) for c in op_data.command_generator()]
    stdin = op_data.global_arguments.get("_stdin") or ""
    return (name, cmds, stdin if isinstance(stdin, str) else "".join(stdin))


def prepare_each_host(state: State, entry: str, facts_of: Any,
                      skip: frozenset[str] = frozenset()) -> dict[str, Exception]:
    """An entry point (deploy.py, uninstall.py) prepared for each host of `state`'s
    inventory in turn, as pyinfra prepares them, each with its canned facts
    (`facts_of(name)`); hosts in `skip` are left out (unreachable). Returns what each host
    raised out of the entry point."""
    code = compile((ROOT / entry).read_text(), str(ROOT / entry), "exec")
    errors: dict[str, Exception] = {}
    for h in state.inventory:
        if h.name in skip:
            continue
        h.connected = True
        values = {**BUILTIN_DEFAULTS, **facts_of(h.name)}

        def get_fact(cls, *args, values=values, **kwargs):
            v = values[cls.__name__]
            return v(**kwargs) if callable(v) else v

        with ctx_state.use(state), ctx_host.use(h), \
                mock.patch.object(h, "get_fact", side_effect=get_fact):
            try:
                exec(code, {"__name__": entry.removesuffix(".py")})
            except Exception as e:  # noqa: BLE001 - the test reports which host raised
                errors[h.name] = e
    return errors


# The reference box (WSL2 Ubuntu 24.04, Windows driver 596.21 / CUDA 13.2, RTX 4090) and
# its neighbours as canned facts, the group_data defaults, and readers of a run's steps:
# shared by every test that runs deploy.py on canned facts.
DEFAULTS = {k: v for k, v in runpy.run_path(str(ROOT / "group_data" / "all.py")).items()
            if not k.startswith("_")}

RTX4090 = NvidiaSmiInfo(path="/usr/lib/wsl/lib/nvidia-smi", cuda_version="13.2",
                        driver_version="596.21", driver_branch=596,
                        gpus=(GpuCard(name="NVIDIA GeForce RTX 4090", driver_version="596.21",
                                      compute_cap="8.9", memory_total_mib=24564),))
UBUNTU2404 = OsReleaseInfo(id="ubuntu", version_id="24.04")
WSL = WslInfo(kernel_release="6.6.87.2-microsoft-standard-WSL2", is_wsl2=True, dxg=True,
              wsl_conf_systemd=True)
NATIVE = WslInfo(kernel_release="6.8.0-45-generic", is_wsl2=False, dxg=False,
                 wsl_conf_systemd=False)
DOCKER_CE = DockerEngineInfo(present=True, path="/usr/bin/docker", flavour="docker-ce",
                             server_version="28.0", nvidia_runtime=False)
NO_DOCKER = DockerEngineInfo(present=False, path=None, flavour=None,
                             server_version=None, nvidia_runtime=False)
SYSTEMD = InitInfo(pid1="systemd", systemd=True, state="running")

NO_DRIVER = {"Wsl": NATIVE, "GpuInfo": None, "PciListing": PCI_RTX4090}  # no driver yet


def facts(**over):
    base = {"InitSystem": SYSTEMD, "Wsl": WSL, "OsRelease": UBUNTU2404, "DockerEngine": DOCKER_CE,
            "GpuInfo": RTX4090, "DiskOf": DiskInfo(mount="/", free_bytes=500 * 2**30),
            "LinuxDriverPackages": [], "PortListeners": [], "DockerImageId": None,
            "AptHolds": [], "GpuInContainer": None, "ServerSmoke": None, "AptSourcesFor": []}
    return {**base, **over}


def names(ops):
    return [n for n, _ in ops]


def commands(ops, prefix):
    """The commands of the first operation named `prefix...`, the wait for apt's locks that
    the kit's apt steps run first left out (distro.apt_wait: tests/unit/test_apt_wait.py)."""
    return [c for c in next(c for n, c in ops if n.startswith(prefix)) if c != apt_wait()]


def uploaded(ops, prefix):
    """The content an operation uploads (the harness shows it after 'upload DEST:')."""
    return next(c for c in commands(ops, prefix) if c.startswith("upload ")).split("\n", 1)[1]


@contextmanager
def on_host(**facts: Any) -> Iterator[None]:
    """Preflight's rules run as the host "canned", reading these facts (the harness's
    defaults under them; a fact neither gives is a KeyError, so a rule that reads one it
    should not fails the test)."""
    inventory = Inventory(([("canned", {})], {}))
    state = State(inventory, Config())
    h = inventory.get_host("canned")
    with ctx_state.use(state), ctx_host.use(h), \
            mock.patch.object(h, "get_fact", side_effect=_canned(facts)):
        yield


# --- first written for test_architecture.py, used by other test modules too

# where each installed package lives in the checkout (pyproject.toml's package-dir)
# pyproject.toml's package-dir: the checkout's folders by their installed package names
PACKAGE_DIRS = {pkg: ROOT / folder for pkg, folder in tomllib.loads(
    (ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].items()} | {
    "beekeeper": ROOT / "beekeeper"}


def modules() -> dict[str, Path]:
    """Every module of the kit by its installed name, and deploy.py."""
    out: dict[str, Path] = {"deploy": ROOT / "deploy.py"}
    for pkg, folder in PACKAGE_DIRS.items():
        for f in folder.rglob("*.py"):
            rel = f.relative_to(folder).with_suffix("")
            name = ".".join([pkg, *rel.parts]).removesuffix(".__init__")
            if pkg == "beekeeper" and rel.parts[0] in ("core", "hostside"):
                name = ".".join(["beekeeper", *rel.parts]).removesuffix(".__init__")
            out.setdefault(name, f)
    return out


def _python310() -> str | None:
    """A Python 3.10 interpreter (Ubuntu 22.04's python3): $BEEKEEPER_PYTHON310, else pyenv's
    or one on PATH."""
    import shutil

    candidates = [os.environ.get("BEEKEEPER_PYTHON310"),
                  *sorted(Path.home().glob(".pyenv/versions/3.10.*/bin/python3.10")),
                  shutil.which("python3.10")]
    for c in candidates:  # a pyenv shim on PATH may name a version it cannot run
        if c and subprocess.run([str(c), "-c", "import sys; assert sys.version_info[:2] == "
                                 "(3, 10)"], capture_output=True).returncode == 0:
            return str(c)
    return None


# --- first written for test_driver_preflight_rules.py, used by other test modules too
# its H200 is H200_CARD here (H200 is a pod's nvidia-smi); its cfg is test_preflight_mutants' too

def cfg(**over: Any):
    return load_host_config({**DEFAULTS, **over})


def card(name="NVIDIA GeForce RTX 4090", cap="8.9", mem=24564):
    return GpuCard(name=name, driver_version="x", compute_cap=cap, memory_total_mib=mem)


def smi(*cards, branch=595, cuda="13.2", brand="GeForce", path="/usr/bin/nvidia-smi"):
    return NvidiaSmiInfo(path=path, cuda_version=cuda, driver_version=f"{branch}.95.05",
                         driver_branch=branch, gpus=cards or (card(),), brand=brand)


H200_CARD = card(name="NVIDIA H200", cap="9.0", mem=143771)
V100 = card(name="Tesla V100-SXM2-16GB", cap="7.0", mem=16384)


# --- first written for test_engine_runtimes.py, used by other test modules too

def written_manifest(data, host_facts) -> str:
    """The deployed.json the deploy uploads for this host."""
    ops = run_deploy(data, host_facts)
    text = first_upload(ops, "Record what beekeeper-llm")
    return text.split("\n", 1)[1]


class HostWithManifest:
    """The host as the engine suite sees it through its shell: `cat` of the manifest
    answers with what the deploy wrote; every other line is recorded and succeeds."""

    label = "the pod"

    def __init__(self, manifest: str):
        self.manifest, self.ran = manifest, []

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess:
        self.ran.append(script)
        out = self.manifest if script == f"cat {ServicePaths('llm').manifest}" else ""
        return subprocess.CompletedProcess(script, 0, out, "")


# --- first written for test_gateway.py, used by other test modules too
# its GOOD and with_ are GATEWAY_GOOD and gateway_with here; its keys fixture is conftest.py's

GATEWAY_GOOD = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}


def gateway_with(**kw):
    """GATEWAY_GOOD with `kw`; with `services`, less GATEWAY_GOOD's top-level profile (each
    entry names its own: a top-level one beside them is refused)."""
    base = {k: v for k, v in GATEWAY_GOOD.items() if not ("services" in kw and k == "profile")}
    return {**base, **kw}


def _backend(keys):
    """An inventory host with a service the gateway can reach (wildcard bind with a key, its
    address named), and canned facts a deploy of it passes preflight with."""
    data = {**DEFAULTS, "gateway_address": "gpu.lan",
            "services": [{"service_name": "tiny", "profile": "cpu-tiny",
                          "bind_address": "0.0.0.0", "api_key_file": keys["be"]}]}
    return data, facts(Wsl=NATIVE, GpuInfo=NvidiaSmiInfo(path="/usr/bin/nvidia-smi"))


# --- first written for test_gpu_containers.py, used by other test modules too
# its uploaded is first_upload here (uploaded above gives the content alone)

H200 = NvidiaSmiInfo(path="/usr/bin/nvidia-smi", cuda_version="13.0", driver_version="580.159.04",
                     driver_branch=580, brand="NVIDIA",
                     gpus=(GpuCard(name="NVIDIA H200", driver_version="580.159.04",
                                   compute_cap="9.0", memory_total_mib=143771),))
PROCESS_API = InitInfo(pid1="process_api", systemd=False, state="offline")


# as `HostTools` printed it there: nvcc from /usr/local/cuda, cmake from a venv on PATH
POD_TOOLS = parse_host_tools([
    "nvcc=/usr/local/cuda/bin/nvcc", "nvcc_release=release 13.0, V13.0.88",
    "tool:cmake=/opt/venv/bin/cmake", "tool:c++=/usr/bin/c++", "tool:make=/usr/bin/make",
    "tool:git=/usr/bin/git", "python3=/usr/bin/python3", "python3_version=3.12",
    "setpriv=/usr/bin/setpriv", "apt_lists=0"])
MODEL = "/workspace/models/Qwen3.5-9B-Q8_0.gguf"
SHA = "ab" * 32
POD_DATA = {**DEFAULTS, "mode": "native", "model_host_path": MODEL, "model_sha256": SHA,
            "source": {"path": __file__, "ref": "ba1fdce591f5"}}


def pod(**over):
    return facts(**{"InitSystem": PROCESS_API, "Wsl": NATIVE, "DockerEngine": NO_DOCKER,
                    "GpuInfo": H200, "HostTools": POD_TOOLS,
                    "OsRelease": OsReleaseInfo(id="ubuntu", version_id="24.04"),
                    "DebPackages": {"python3": ["3.12"]},
                    "Sha256File": lambda path=None, **_: SHA if path == MODEL else None,
                    "File": lambda path=None, **_: {"size": 1} if path == MODEL else None,
                    **over})


def first_upload(ops, prefix):
    """What the first operation named `prefix...` uploads (files.put of rendered text), as
    the harness shows it: 'upload DEST:' and the content (uploaded: the content alone)."""
    return next(c for n, cmds in ops if n.startswith(prefix) for c in cmds
                if c.startswith("upload "))


# --- first written for test_host_checks.py, used by other test modules too

@dataclass
class Out:
    rc: int
    stdout: str
    stderr: str = ""


# --- first written for test_host_data.py, used by other test modules too

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}


# for whole deploys on canned facts (a local source must exist on the controller)
CPU_GIT = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": "a" * 40}}


def with_(**kw):
    return {**CPU, **kw}


def refused(data, key):
    """The one line for `data`: a ConfigError naming `key` and a fix, nothing else."""
    with pytest.raises(ConfigError) as e:
        load_host_config(data)
    msg = str(e.value)
    assert f"host data `{key}`" in msg, msg
    assert "; fix: " in msg, msg
    assert "\n" not in msg and "\r" not in msg, msg
    return msg


CPU_HOST = {"Wsl": NATIVE, "GpuInfo": None,
            "DiskOf": DiskInfo(mount="/", free_bytes=10 * 2**30)}


def run_rollback(tmp_path, files: dict[str, str], restore: bool, healthy: bool = True,
                 listening: int | None = None, on_stdin: bool = False,
                 python: str = sys.executable):
    """hostside/rollback.py on a folder standing in for the host: its files by short name
    (unit, deployed.json, compose.yaml and their .prev), `systemctl` a recorder on PATH and
    the health check a script that records its arguments (hostcheck_calls) and passes when
    `healthy` and, if `listening` is given, it was asked for that port only; `on_stdin`: the
    script read from stdin, as `beekeeper rollback` sends it; `python`: the host's python3.
    Returns (exit, files after, output)."""
    from beekeeper import hostside

    root = tmp_path / "host"
    if root.exists():
        import shutil

        shutil.rmtree(root)
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/systemctl.log\n")
    (bin_dir / "systemctl").chmod(0o755)
    check = tmp_path / "hostcheck.py"
    check.write_text(
        "import json, sys\n"
        f"with open({str(tmp_path / 'hostcheck.log')!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "port = sys.argv[sys.argv.index('--port') + 1] if '--port' in sys.argv else None\n"
        f"sys.exit(0 if {healthy} and {listening!r} in (None, port and int(port)) else 1)\n")
    # the script as the host gets it, run with nothing of the kit importable (-I)
    (script := tmp_path / "rollback.py").write_text(hostside.text("rollback.py"))
    p = subprocess.run(
        [python, "-I", "-" if on_stdin else str(script), "--unit", str(root / "unit"),
         "--manifest", str(root / "deployed.json"), "--compose", str(root / "compose.yaml"),
         "--hostcheck", str(check), "--prev-suffix", ".prev", "--timeout", "5"]
        + (["--restore"] if restore else []),
        capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        input=script.read_text() if on_stdin else None)
    after = {f.name: f.read_text() for f in root.iterdir()}
    return p.returncode, after, p.stderr


def _deploy_hosts(hosts, fx, unreachable=()):
    """deploy.py for each host of a multi-host inventory, as pyinfra prepares them (those
    in `unreachable` failed to connect, as pyinfra's connect_all leaves them)."""

    inventory = Inventory((hosts, {}))
    state = State(inventory, Config())
    for h in inventory:
        state.activate_host(h)
    state.fail_hosts({h for h in inventory if h.name in unreachable})
    errors = prepare_each_host(state, "deploy.py", lambda _name: fx,
                               skip=frozenset(unreachable))
    return state, errors


# --- first written for test_host_states.py, used by other test modules too
# its _run is _run_sh here (_run above queues deploy.py)

def _stub(folder: Path, name: str, body: str) -> None:
    p = folder / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)


def _tools(folder: Path, *names: str) -> None:
    """Real binaries the fact commands need, linked into a PATH of stand-ins."""
    for n in names:
        real = next(Path(d) / n for d in ("/usr/bin", "/bin") if (Path(d) / n).exists())
        (folder / n).symlink_to(real)


def _run_sh(command: str, path: Path) -> list[str]:
    out = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                         env={"PATH": str(path), "HOME": "/nonexistent"}, timeout=30)
    return out.stdout.splitlines()


# mokutil --sb-state's lines, as lcp/mokutil src/mokutil.c (9ae73db) prints them
SB_ENABLED = ["efi=1", "SecureBoot enabled"]


# --- first written for test_hosts_found.py, used by other test modules too

def _rtx3090_570():
    from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo

    # Ubuntu's nvidia-driver-570 on an RTX 3090 (values typed by hand; 570 reports 12.8)
    return NvidiaSmiInfo(path="/usr/bin/nvidia-smi", cuda_version="12.8",
                         driver_version="570.172.08", driver_branch=570, brand="GeForce",
                         gpus=(GpuCard(name="NVIDIA GeForce RTX 3090",
                                       driver_version="570.172.08", compute_cap="8.6",
                                       memory_total_mib=24576),))


UBUNTU_570 = ["libnvidia-compute-570", "nvidia-dkms-570", "nvidia-driver-570",
              "nvidia-utils-570"]  # Ubuntu's package names for the 570 branch


# --- first written for test_judge_rules.py, used by other test modules too
# its CPU is CPU_EXPECTED here (CPU is host data); its bench is test_noise's too

CPU_EXPECTED = PROFILES["cpu-tiny"].expected  # no reference-card figures: nothing judged by them
PROD = PROFILES["q8-turbo4-64k"].expected  # NIAH: 10 of 10 needed


def bench(n_prompt: int, n_gen: int, depth: int, tok_s: float, stddev: float = 0.5,
          samples: int = 3) -> BenchTest:
    n = n_prompt or n_gen
    return BenchTest(n_prompt, n_gen, depth, tok_s, stddev, n / tok_s, [n / tok_s] * samples,
                     2, "f16", "f16", 0, "1", "CPU", "")


def engine(idle_used_mib: float | None = None) -> EngineRun:
    """A quiet llama-bench: 50 tok/s decode at 1024 ctx, 512 tokens prefilled in 1.0 s
    (TTFT expectation 1.02 s)."""
    return EngineRun(requested=True, baseline=EngineBaseline(
        placement="recorded", commands=[], decode=[bench(0, 160, 1024, 50.0)],
        prefill=bench(512, 0, 0, 512.0), idle_used_mib=idle_used_mib))


def record(*, ok: bool = True, error: str | None = None, ttft_s: float = 1.0,
           completion_tokens: int = 160, cache_n: int = 0) -> RequestRecord:
    return RequestRecord(ok=ok, status_code=200 if ok else 500, error=error, t_send_s=0.0,
                         events=[StreamEvent(ttft_s, "content", 4)] if ok else [],
                         usage={"completion_tokens": completion_tokens} if ok else None,
                         timings={"predicted_n": completion_tokens, "cache_n": cache_n}
                         if ok else None)


def decode_run(samples_tok_s: list[float], settle: dict | None = None,
               rec: RequestRecord | None = None) -> DecodeResult:
    return DecodeResult(ctx_tokens=1024, out_tokens_requested=160,
                        decode_tok_s=sorted(samples_tok_s)[len(samples_tok_s) // 2],
                        server_predicted_per_second=None, windowed_tok_s=[],
                        record=rec or record(), samples_tok_s=samples_tok_s, settle=settle)


def ttft_run(ttfts_s: list[float], settle: dict | None = None,
             extra: list[RequestRecord] = ()) -> TtftResult:
    recs = [record(ttft_s=t) for t in ttfts_s] + list(extra)
    return TtftResult(target_tokens=512, prompt_tokens=[512] * len(recs), records=recs,
                      settle=settle)


def busy_settle(samples: list[float]) -> dict:
    """verify/settle.py's record of a figure measured while other processes used 1.6 of the
    host's 2 CPUs, round after round (stop "busy")."""
    busy = {"repeats": len(samples), "wall_s": 10.0, "used": False, "load_share": 0.8,
            "busy": True, "other_cpu_s": 16.0, "capacity_s": 20.0, "cpus": 2}
    return {"samples": [], "set_aside": samples * 2, "rounds": [busy, busy], "stop": "busy",
            "wall_s": 20.0}


def niah(passed: int, n: int = 10, tokens: int = 60000, error: str | None = None
         ) -> NiahResult:
    cases = [NiahCase(seed=i, depth=i / n, prompt_tokens=tokens, fitted_tokens=60000,
                      expected="7281", answer="7281" if i < passed else "",
                      found=[], passed=i < passed,
                      error=error if i == n - 1 and i >= passed else None)
             for i in range(n)]
    return NiahResult(target_tokens=60000, cases=cases)


# --- first written for test_lifecycle.py, used by other test modules too
# its MODEL is TINY_MODEL here (MODEL is the pod's)

REF_A, REF_B, REF_C = ("a" * 40), ("b" * 40), ("c" * 40)
VARIANT = "cpu-x86-64-v3"
SLUG = {r: f"{r[:12]}-{VARIANT}-{r[:8]}" for r in (REF_A, REF_B, REF_C)}
LLM = ServicePaths("llm")


def run_queued(fn, data: dict[str, Any], facts: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """As harness.run_deploy, for one task function `fn(cfg)` instead of deploy.py (or, with
    `fn=None`, for uninstall.py)."""
    inventory = Inventory(([("canned", data)], {}))
    state = State(inventory, Config())
    host = inventory.get_host("canned")
    host.connected = True
    values = {**BUILTIN_DEFAULTS, **facts}

    def get_fact(cls, *args, **kwargs):
        v = values[cls.__name__]
        return v(**kwargs) if callable(v) else v

    with ctx_state.use(state), ctx_host.use(host), \
            mock.patch.object(host, "get_fact", side_effect=get_fact):
        if fn is None:
            code = compile((ROOT / "uninstall.py").read_text(), str(ROOT / "uninstall.py"), "exec")
            exec(code, {"__name__": "uninstall"})
        else:
            fn(load_host_config(data))
        out = []
        for op_hash in state.get_op_order():
            names = state.get_op_meta(op_hash).names
            op_data = state.get_op_data_for_host(host, op_hash)
            out.append((next(iter(names)), [_show(c) for c in op_data.command_generator()]))
    return out


DATA = Path(__file__).parent / "data"
HISTORY = (DATA / "apt-history-kit-written-by-hand.log").read_text().splitlines()
IMAGE = f"beekeeper/llama-server:{SLUG[REF_B]}"
MODEL_DIR = "/srv/beekeeper/models"
TINY_MODEL = f"{MODEL_DIR}/gemma-3-270m-it-Q4_K_M.gguf"
KIT_DIRS = ["/etc/beekeeper", "/var/lib/beekeeper", "/var/log/beekeeper",
            "/opt/beekeeper/venv", "/usr/local/lib/beekeeper",
            "/etc/apt/keyrings/nvidia-container-toolkit.gpg", "/opt/beekeeper",
            "/srv/beekeeper/models", "/srv/beekeeper", TINY_MODEL, LLM.unit]


# what the host had before the kit (python3, ca-certificates) and since (curl, nginx by
# another pyinfra deploy): never the kit's to remove
INSTALLED = ["ca-certificates", "containerd", "curl", "docker.io", "git", "git-man",
             "iptables", "libcurl4", "liberror-perl", "nginx", "nginx-common", "python3",
             "runc", "tini"]


def deployed_host(**over: Any) -> dict[str, Any]:
    """A host after a container deploy of cpu-tiny (as read by the facts)."""
    manifest = DeployedService(service="llm", image=IMAGE, model_path=TINY_MODEL).to_json()
    files = {LLM.manifest: manifest}
    base = {
        "DeployedServices": ["llm"],
        "FileContents": lambda path: files[path].splitlines() if path in files else None,
        "FolderEntries": lambda path: [],
        "PresentPaths": lambda paths: {p: 1024 for p in paths if p in KIT_DIRS},
        "ImageTags": [IMAGE], "AptHistory": parse_apt_history(HISTORY),
        "InstalledPackages": INSTALLED, "AptPurgeWould": lambda packages: packages,
        "AptHolds": [], "Users": {}, "Groups": [], "KitComponents": [],
        "FileSizes": lambda path: {TINY_MODEL.rsplit("/", 1)[1]: 253_113_024}
        if path == MODEL_DIR else {},
    }
    return {**base, **over}


# --- first written for test_model_placement.py, used by other test modules too

def queued(deploy: Callable[[], Any], facts: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The operations `deploy` queues for one host with these facts: [(name, commands)]."""
    inventory = Inventory((["canned"], {}))
    state = State(inventory, Config())
    h = inventory.get_host("canned")
    h.connected = True
    with ctx_state.use(state), mock.patch.object(h, "get_fact", side_effect=_canned(facts)), \
            ctx_host.use(h):
        deploy()
        return [(name, cmds) for name, cmds, _ in
                (_op(state, h, op_hash) for op_hash in state.get_op_order()
                 if op_hash in state.ops.get(h, {}))]


# --- first written for test_noise.py, used by other test modules too

def served(depth: int, tok_s: list[float]) -> DecodeResult:
    rec = RequestRecord(ok=True, status_code=200, error=None, t_send_s=0.0,
                        usage={"completion_tokens": 160},
                        timings={"predicted_n": 160, "cache_n": 0})
    return DecodeResult(ctx_tokens=depth, out_tokens_requested=160,
                        decode_tok_s=statistics.median(tok_s), server_predicted_per_second=None,
                        windowed_tok_s=[], record=rec, samples_tok_s=tok_s)


# --- first written for test_preflight_mutants.py, used by other test modules too

RES = BUILTIN_DEFAULTS["BuildResources"]


def images(*tags: str) -> Any:
    """The DockerImageId fact of a host holding these images (by tag)."""
    return lambda tag: "sha256:" + "1" * 64 if tag in tags else None


# --- first written for test_readme.py, used by other test modules too
# its commands is shell_commands here (commands above reads queued operations)

VENV_BIN = ROOT / ".venv" / "bin"
SHELL_TAGS = {"", "sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(\s*)```\s*([\w-]*)\s*$")


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _strip(line: str) -> str:
    line = line.strip()
    line = line[2:] if line.startswith("$ ") else line
    return re.sub(r"\s+#\s.*$", "", line).strip()


def blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(tag, first line number, lines) of every fenced block."""
    out: list[tuple[str, int, list[str]]] = []
    open_at: tuple[str, int] | None = None
    body: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m and open_at is None:
            open_at, body = (m.group(2), n + 1), []
        elif m and not m.group(2):
            assert open_at is not None
            out.append((open_at[0], open_at[1], body))
            open_at = None
        elif open_at is not None:
            body.append(line)
    assert open_at is None, f"a fence opened at line {open_at[1] - 1} is never closed"
    return out


def shell_commands(page: Path) -> list[Command]:
    out: list[Command] = []
    for tag, first, body in blocks(page.read_text()):
        if tag not in SHELL_TAGS:
            continue
        pending, start = "", first
        for n, raw in enumerate(body, first):
            if not pending:
                start = n
            if raw.rstrip().endswith("\\"):
                pending += raw.rstrip()[:-1].strip() + " "
                continue
            text = _strip(pending + raw)
            pending = ""
            if text and not text.startswith("#"):
                out.append(Command(page.relative_to(ROOT).as_posix(), start, text))
    return out


def page_commands(page: str) -> list[str]:
    """A docs page's copy-paste commands, in order (shell_commands' texts)."""
    return [c.text for c in shell_commands(ROOT / "docs" / page)]


def python_blocks(page: str) -> list[str]:
    """A docs page's python blocks."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)


# a command's leading VAR=value words, and the rest
ENV_PREFIX = re.compile(r"^((?:[A-Z_][A-Z0-9_]*=\S+ )*)(.*)$")


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


@functools.cache
def help_text(*args: str) -> str:
    done = subprocess.run([*args, "--help"], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"{' '.join(args)} --help failed: {done.stderr}"
    return done.stdout


def subcommands() -> set[str]:
    m = re.search(r"\{([a-z,]+)\}", help_text("beekeeper"))
    assert m, "beekeeper --help lists no sub-commands"
    return set(m.group(1).split(","))


def flags_of(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


# --- first written for test_report.py, used by other test modules too

def _incomplete_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    """run_suites writes the report of a decode run with no engine baseline (nothing failed,
    decode not judged: INCOMPLETE, exit 3), against fake_server, the llama-server stand-in (a
    hand-written httpx transport: one token a word)."""
    import httpx

    from beekeeper.core.profiles import PROFILES
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.suites import Sizes, run_suites

    sizes = Sizes(decode_ctx_tokens=[200], decode_out_tokens=40, ttft_tokens=100,
                  ttft_requests=2, niah_tokens=150)
    names = ["smoke", "decode"]
    with ServerClient("http://server", transport=httpx.MockTransport(fake_server)) as c:
        rep = run_suites(c, PROFILES["cpu-tiny"], names, out_dir=str(tmp_path), sizes=sizes)
    assert rep.coverage.exit_status == 3
    console = capsys.readouterr().out
    data = json.loads((Path(rep.out_dir or "") / "report.json").read_text())
    assert data["out_dir"] == rep.out_dir  # where it was written, said inside it
    return data, console


# --- first written for test_suites.py, used by other test modules too

def fake_server(req: httpx.Request) -> httpx.Response:
    """A llama-server stand-in: one token per word, the needle echoed back."""
    path = req.url.path
    if path == "/health":
        return httpx.Response(200)
    if path == "/v1/models":
        return httpx.Response(200, json={"data": [{"id": "m"}]})
    if path == "/props":
        return httpx.Response(200, json={"n_ctx": 1024})
    body = json.loads(req.content or b"{}")
    if path == "/apply-template":
        return httpx.Response(200, json={"prompt": " ".join(m["content"]
                                                            for m in body["messages"])})
    if path == "/tokenize":
        return httpx.Response(200, json={"tokens": body["content"].split()})
    text = " ".join(m["content"] for m in body["messages"])
    n = body["max_tokens"]
    words = (re.findall(r"(?<!\d)\d{7}(?!\d)", text)[:1] + ["w"] * n)[:n]
    chunks = [{"choices": [{"delta": {"content": w + " "}}]} for w in words]
    chunks.append({"choices": [{"delta": {}, "finish_reason": "length"}],
                   "timings": {"predicted_n": n, "cache_n": 0, "prompt_ms": 1.0,
                               "predicted_per_second": 50.0}})
    chunks.append({"choices": [], "usage": {"completion_tokens": n,
                                            "prompt_tokens": len(text.split())}})
    sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})


# --- first written for test_url_secrets.py, used by other test modules too

COMMIT = "a" * 40


def place(key: str, url: str) -> dict:
    """Host data giving `url` to `key`."""
    if key == "source.git":
        return {"source": {"git": url, "ref": COMMIT}}
    if key.startswith("nvidia_repos."):
        return {"nvidia_repos": {key.split(".")[1]: url}}
    if key == "server_extra_args":
        return {"server_extra_args": ["--mmproj-url", url]}
    return {key: url}


# --- first written for test_verify_options.py, used by other test modules too
# its on_host is verify_on_host here (on_host above runs preflight's rules)

def verify_on_host(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> dict[str, Any]:
    """`beekeeper verify --on-host --ssh gpu-box ARGV` up to SSH: what run_on_host gets."""
    seen: dict[str, Any] = {}

    def run_on_host(ssh: list[str], label: str, args: argparse.Namespace, port: int,
                    out_root: Path, keys: Keys) -> tuple[int, Path]:
        seen.update(ssh=ssh, label=label, args=args, port=port, keys=keys)
        return 3, out_root

    monkeypatch.setattr(hostverify, "run_on_host", run_on_host)
    # the host's answer to the record's read: none there (cat's exit 1), with no SSH
    monkeypatch.setattr(cli, "_cat_manifest", lambda ssh, service, root=True:
                        subprocess.CompletedProcess(["ssh"], 1, "", "No such file"))
    assert cli.main(["verify", "--on-host", "--ssh", "-p 2201 me@gpu-box", *argv]) == 3
    return seen


def host_args(seen: dict[str, Any]) -> argparse.Namespace:
    line = host_command(seen["args"], "/opt/beekeeper/verify-venv/bin/python", seen["port"],
                        "/var/lib/beekeeper/reports/T", seen["label"], seen["keys"])
    argv = shlex.split(line)
    assert argv[:3] == ["/opt/beekeeper/verify-venv/bin/python", "-m",
                        "beekeeper.verify_main"]
    return verify_main.parser().parse_args(argv[3:])


# --- first written for test_vram_plan_of_own_model.py, used by other test modules too

def _gguf(path, kv: dict, tokens: int = 1000, weights_bytes: int = 0):
    """A GGUF header with the numbers the planner reads (qwen2: attention only)."""
    def s(t: str) -> bytes:
        return struct.pack("<Q", len(t)) + t.encode()

    arch = "qwen2"
    meta = [(b"general.architecture", 8, s(arch))]
    for k, v in kv.items():
        meta.append((f"{arch}.{k}".encode(), 4, struct.pack("<I", v)))
    out = b"GGUF" + struct.pack("<I", 3) + struct.pack("<Q", 0) + struct.pack("<Q", len(meta) + 1)
    for key, typ, val in meta:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", typ) + val
    key = b"tokenizer.ggml.tokens"
    out += struct.pack("<Q", len(key)) + key + struct.pack("<I", 9) + struct.pack("<I", 8)
    out += struct.pack("<Q", tokens) + b"".join(s(f"t{i}") for i in range(tokens))
    path.write_bytes(out + b"\0" * weights_bytes)
    return path


class HealthOK(http.server.BaseHTTPRequestHandler):
    """A server whose /health (any GET) answers 200, and nothing else: a stand-in for the
    check's first step, not a llama-server."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


# --- first written for test_verify_stops_answering.py, used by other test modules too

@dataclass
class FakeLlama:
    """How `loopback_llama`'s server answers: llama-server's API (one token a word), with
    the failures verify must report."""

    key: str | None = None  # wanted (Bearer) on every path but /health and /v1/models: 401
    stop_after_chats: int | None = None  # after this many chat completions, every request ...
    stop: str | int = "drop"  # ... is dropped without an answer, or answered with this status
    tokens_field: str = "tokens"  # /tokenize's answer names its token list so
    tokens_per_word: int = 1
    on_template: Callable[[], None] | None = None  # run at each /apply-template (a Ctrl-C)
    chats: int = 0
    seen: list[str] = field(default_factory=list)

    def stopped(self) -> bool:
        return self.stop_after_chats is not None and self.chats >= self.stop_after_chats


def _fake_answer(fake: FakeLlama, h: http.server.BaseHTTPRequestHandler) -> None:
    path = h.path.split("?")[0]
    fake.seen.append(path)
    body = json.loads(h.rfile.read(int(h.headers.get("Content-Length") or 0)) or b"{}")
    code, answer = 200, None
    if fake.stopped():
        if fake.stop == "drop":
            h.close_connection = True  # no status line: the client sees the connection end
            return
        code, answer = int(fake.stop), {"error": "stopped"}
    elif path == "/health":
        answer = {"status": "ok"}
    elif path == "/v1/models":
        answer = {"data": [{"id": "cpu-tiny"}]}
    elif fake.key and h.headers.get("Authorization") != f"Bearer {fake.key}":
        code, answer = 401, {"error": {"code": 401, "message": "Invalid API Key"}}
    elif path == "/apply-template":
        if fake.on_template:
            fake.on_template()
        answer = {"prompt": " ".join(m["content"] for m in body["messages"])}
    elif path == "/tokenize":
        words = body["content"].split() * fake.tokens_per_word
        answer = {fake.tokens_field: list(range(len(words)))}
    elif path == "/props":
        answer = {"model_path": "/models/cpu-tiny.gguf"}
    if answer is None and path == "/v1/chat/completions":
        fake.chats += 1
        return _fake_stream(h, int(body.get("max_tokens") or 1))
    data = json.dumps(answer if answer is not None else {"error": "not found"}).encode()
    h.send_response(code if answer is not None else 404)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _fake_stream(h: http.server.BaseHTTPRequestHandler, n: int) -> None:
    """A chat completion's event stream of `n` tokens, then usage, timings and [DONE]."""
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.end_headers()
    chunks = [{"choices": [{"delta": {"content": " w"}}]} for _ in range(n)]
    chunks.append({"choices": [{"delta": {}, "finish_reason": "length"}],
                   "timings": {"predicted_n": n, "cache_n": 0, "prompt_ms": 1.0,
                               "predicted_per_second": 50.0},
                   "usage": {"completion_tokens": n, "prompt_tokens": 10}})
    for c in chunks:
        h.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
    h.wfile.write(b"data: [DONE]\n\n")


@contextmanager
def loopback_llama(fake: FakeLlama) -> Iterator[str]:
    """A llama-server stand-in on 127.0.0.1 (a free port) answering as `fake` says; its
    base URL."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            _fake_answer(fake, self)

        do_GET = do_POST = answer  # noqa: N815 (http.server's names)

        def log_message(self, *a: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, *a: object) -> None:
            pass  # a client gone mid-answer (verify stopped): not the test's subject

    srv = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
