"""
Run deploy.py against canned facts: the operations it queues, in order, with the
commands each would run. No host is touched; facts come from the case.
"""

from __future__ import annotations

import os
import runpy
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.context import ctx_host, ctx_state

from beekeeper.core.build import BuildSpec, build_spec
from beekeeper.core.config import HostConfig
from beekeeper.core.runtime import Runtime, runtime_of
from beekeeper.facts.docker import DockerEngineInfo
from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo, PciNvidiaDevices, PciNvidiaGpus
from beekeeper.facts.host import (
    AptPolicyInfo,
    InitInfo,
    OsReleaseInfo,
    PortOwner,
    PortOwnersInfo,
    Resources,
    WslInfo,
)
from beekeeper.facts.toolchain import HostToolsInfo

ROOT = Path(__file__).resolve().parents[2]


def requested_runtime(cfg: HostConfig) -> Runtime:
    """The way host data asks the server be run, where no preflight resolved it (a host
    whose PID 1 is systemd: HostFacts.runtime is this there)."""
    return runtime_of(cfg.mode, cfg.requested_runtime)


def requested_build(cfg: HostConfig, compute_cap: str | None, *args: Any,
                    **kw: Any) -> BuildSpec:
    """build_spec for the CUDA release and archs host data asks, where no preflight resolved
    them (HostFacts.cuda_version and cuda_arch: these, on a host of one card whose driver
    runs the release)."""
    return build_spec(cfg, compute_cap, *args, cuda_version=cfg.requested_cuda_version,
                      cuda_arch=cfg.requested_cuda_arch, **kw)

# Facts of pyinfra's own operations, for a host where none of the kit's files exist yet.
BUILTIN_DEFAULTS: dict[str, Any] = {
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
    "DeployedServices": [], "FolderFiles": [], "FolderEntries": [],  # empty kit folders
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


# What PCI_NVIDIA_COMMAND prints (facts/gpu.py): `<class> <device>` of each NVIDIA PCI
# function, as sysfs spells them. A case gives this listing as the fact "PciListing", and
# both PCI facts are the real facts' parse of it (one command on the host), so a case cannot
# say "one GPU" with no device id, or ids that are not GPUs.
PCI_FACTS = (PciNvidiaGpus, PciNvidiaDevices)
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
                             active=True, server_version="28.0", runtimes=("runc",),
                             nvidia_runtime=False)
NO_DOCKER = DockerEngineInfo(present=False, path=None, flavour=None, active=False,
                             server_version=None, runtimes=(), nvidia_runtime=False)
SYSTEMD = InitInfo(pid1="systemd", systemd=True, state="running")

NO_DRIVER = {"Wsl": NATIVE, "GpuInfo": None, "PciListing": PCI_RTX4090}  # no driver yet


def facts(**over):
    base = {"InitSystem": SYSTEMD, "Wsl": WSL, "OsRelease": UBUNTU2404, "DockerEngine": DOCKER_CE,
            "GpuInfo": RTX4090, "FreeDiskBytes": 500 * 2**30,
            "LinuxDriverPackages": [], "PortListeners": [], "DockerImageId": None,
            "AptHolds": [], "GpuInContainer": None, "ServerSmoke": None, "AptSourcesFor": []}
    return {**base, **over}


def names(ops):
    return [n for n, _ in ops]


def commands(ops, prefix):
    return next(c for n, c in ops if n.startswith(prefix))


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
