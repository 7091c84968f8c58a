"""
Where things are: the kit's checkout on the controller, and the host's file layout. Every
path of the host layout is spelled here and nowhere else.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

# the kit's checkout (deploy.py, inventories/, group_data/; .cache/, .sandbox/ and reports/
# are made there): the folder above the `beekeeper` package
KIT_ROOT = Path(__file__).resolve().parents[2]
# the server's port on the host: host data `port`'s default, and what verify and rollback
# reach a server at without its deployed.json
DEFAULT_PORT = 8083
# the account (user and group) the native server runs as; tasks/native.py creates it; a
# plain name: systemd's User= takes it as written (no quoting there)
SERVER_USER = "beekeeper"


def bracketed(address: str) -> str:
    """An address as `host:port` and `--publish` take it: an IPv6 one in brackets."""
    return f"[{address}]" if ":" in address else address


CONF_ROOT = "/etc/beekeeper"  # one folder per service, and the gateway's
UNIT_DIR = "/etc/systemd/system"
STATE_DIR = "/var/lib/beekeeper"  # host data `state_dir` (the default)


def sha256_stamps(state_dir: str) -> str:
    """The folder of model files' sha256 stamps in the state folder (facts.gguf)."""
    return f"{state_dir}/sha256"

REPORTS_DIR = f"{STATE_DIR}/reports"  # smoke results, verify reports on the host
LOG_DIR = "/var/log/beekeeper"  # long steps' logs (builds, fetches)
SUPERVISORD_LOG = f"{LOG_DIR}/supervisord.log"  # supervisord's own log (program starts, exits)
SRV_ROOT = "/srv/beekeeper"
MODEL_DIR = f"{SRV_ROOT}/models"  # host data `model_dir` (the default)
OPT_ROOT = "/opt/beekeeper"  # native builds, host venvs, the verify kit, supervisord
NATIVE_PREFIX = f"{OPT_ROOT}/llama-server"  # native builds, one folder per build
HOSTSIDE_DIR = "/usr/local/lib/beekeeper"  # the host-side scripts (beekeeper/hostside)
HF_TOKEN = f"{CONF_ROOT}/hf_token"
# the packages the kit put an apt hold on, one a line, appended as it holds them: the
# uninstall releases these holds, those on packages the host had before too
HOLDS_RECORD = f"{CONF_ROOT}/apt-holds"
HOST_VENV = f"{OPT_ROOT}/venv"  # huggingface_hub for the model downloader
VERIFY_KIT = f"{OPT_ROOT}/kit"  # `beekeeper verify --on-host`: the suites, unpacked
VERIFY_VENV = f"{OPT_ROOT}/verify-venv"  # and their dependencies
PREV = ".prev"  # the copy of what ran before a deploy, for rollbacks
# runtime "supervisor" (hosts whose PID 1 is not systemd: GPU containers): supervisord from
# the controller's `supervisor` package, its config, one program file per service
SUPERVISOR_HOME = f"{OPT_ROOT}/supervisor"  # lib/ (the package), bin/ (the launchers)
SUPERVISOR_CONF_DIR = f"{CONF_ROOT}/supervisor"
SUPERVISOR_CONF = f"{SUPERVISOR_CONF_DIR}/supervisord.conf"
SUPERVISOR_PROGRAMS = f"{SUPERVISOR_CONF_DIR}/programs"  # <program>.conf, one per service
SUPERVISOR_SOCKET = "/run/beekeeper-supervisor.sock"  # root-only (chmod 0700)
SUPERVISOR_PIDFILE = "/run/beekeeper-supervisord.pid"
# supervisord and the control command the kit, verify and the rollback use: links to the
# launchers in SUPERVISOR_HOME/bin (a pod's start script makes them again after a restart)
SUPERVISORD = "/usr/local/sbin/beekeeper-supervisord"
SUPERVISORCTL = "/usr/local/sbin/beekeeper-supervisorctl"
SUPERVISOR_BIN = f"{SUPERVISOR_HOME}/bin"
# Host data `persistent_root` (runtime supervisor: a GPU pod, whose restart keeps only its
# volume): the kit's folders are links to folders under that root, so nothing the server
# needs is lost; the root's start script makes the links, the launchers and the server's
# user again and starts supervisord. Each kit folder, and its folder's name in the root:
# where a GPU pod's volume is by default (RunPod and most templates mount it there), and
# the persistent root there where host data names none
POD_VOLUME = "/workspace"
AUTO_PERSISTENT_ROOT = f"{POD_VOLUME}/beekeeper"
PERSISTED = ((OPT_ROOT, "opt"), (CONF_ROOT, "etc"), (STATE_DIR, "state"), (LOG_DIR, "log"),
             (HOSTSIDE_DIR, "lib"), (SRV_ROOT, "srv"))
# without a persistent root (a container whose disk is kept, such as Vast.ai's), the start
# script is here
START_SCRIPT = "/usr/local/sbin/beekeeper-start"


def persisted_links(root: str) -> list[tuple[str, str]]:
    """(the kit's folder, the folder under `root` it links to), for a persistent root."""
    return [(path, kept_at(path, root)) for path, _ in PERSISTED]


def kept_at(path: str, root: str | None) -> str:
    """Where the kit's `path` is kept: in its folder's place on the persistent root `root`
    (PERSISTED; what the folder links to once linked), else `path` itself."""
    for folder, name in PERSISTED if root else ():
        if path == folder or path.startswith(folder + "/"):
            return f"{root}/{name}{path[len(folder):]}"
    return path


def start_script(root: str | None) -> str:
    """The line a pod's start command runs after a restart: the persistent root's start
    script, or START_SCRIPT where there is no root."""
    return f"{root}/start" if root else START_SCRIPT


def start_line(root: str | None) -> str:
    """The start script as a shell line runs it (a container's start command, WSL's `[boot]`
    command, a crontab): quoted, whatever the persistent root's name holds."""
    return shlex.quote(start_script(root))


def wsl_boot_command(line: str) -> str:
    """`line` (a shell line) as the value of wsl.conf's `[boot] command =`: WSL's own reader
    takes `"` as quoting, `\\` as an escape and `#` as a comment before sh sees the line, so
    one with any of those or a space is written in double quotes, `\\` and `"` escaped."""
    if re.fullmatch(r"[\w@%+=:,./-]+", line):
        return line
    return '"' + line.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cron_command(line: str) -> str:
    """`line` (a shell line) as a crontab's command: cron turns a `%` not escaped into a
    newline."""
    return line.replace("%", "\\%")


def runpod_start_line(line: str) -> str:
    """RunPod's container start command around `line` (start_line): the kit's start script,
    which execs the pod's own /start.sh (its SSH, Jupyter) after the services; /start.sh
    alone where the script is not there (no persistent root after a restart, before a deploy
    wrote it, after the uninstall). Each `exec` keeps one process: /start.sh runs once,
    whatever its exit."""
    return "bash -c " + shlex.quote(f"[ -x {line} ] && exec {line} -- /start.sh; exec /start.sh")


def owner_mark(root: str) -> str:
    """A folder owned by the server's user: its ids outlive /etc/passwd on a pod's volume."""
    return f"{root}/owner"


def hostside_script(name: str) -> str:
    """Where a host-side script (beekeeper/hostside/<name>) lives on the host."""
    return f"{HOSTSIDE_DIR}/{name}"


def prev(path: str) -> str:
    return path + PREV


class SystemFile(NamedTuple):
    """A file the kit writes in the system's own folders; the uninstall removes it while it
    holds what the kit wrote (`pattern`)."""

    path: str
    text: str  # `{release}`: the CUDA major.minor

    @property
    def pattern(self) -> str:
        """A regular expression that the whole of the text (stripped) matches, written for
        any CUDA release: what a deploy of any release wrote."""
        return re.escape(self.text.strip()).replace(re.escape("{release}"), r"\d+\.\d+")


class AptRepo(NamedTuple):
    """One of NVIDIA's apt repositories as the kit adds it: its own sources file and keyring,
    and beside it the URL its key came from (a changed key URL is fetched again)."""

    sources: str
    keyring: str

    @property
    def key_source(self) -> str:
        return f"{self.keyring}.src"

    @property
    def files(self) -> tuple[str, str, str]:
        """Every file the kit writes for the repository (the uninstall removes them)."""
        return (self.sources, self.keyring, self.key_source)


NOUVEAU_BLACKLIST = SystemFile("/etc/modprobe.d/blacklist-nouveau.conf",
                               "blacklist nouveau\noptions nouveau modeset=0\n")
CUDA_PATH_FILE = SystemFile("/etc/profile.d/cuda.sh",
                            "export PATH=/usr/local/cuda-{release}/bin:$PATH\n")
CUDA_LOADER_FILE = SystemFile("/etc/ld.so.conf.d/cuda.conf", "/usr/local/cuda-{release}/lib64\n")
CUDA_APT = AptRepo("/etc/apt/sources.list.d/nvidia-cuda.sources",
                   "/etc/apt/keyrings/nvidia-cuda.gpg")
TOOLKIT_APT = AptRepo("/etc/apt/sources.list.d/nvidia-container-toolkit.sources",
                      "/etc/apt/keyrings/nvidia-container-toolkit.gpg")


class BuildFolders(NamedTuple):
    """The builds' folders in the state folder (host data `state_dir`); the upgrade cleanup
    (tasks/prune.py) removes from each what no rollback needs."""

    sources: str  # the source trees, one per ref, and uploaded tarballs
    image_builds: str  # one folder per image build: its Dockerfile
    native_builds: str  # cmake's build trees, one folder per native build


def build_folders(state_dir: str) -> BuildFolders:
    return BuildFolders(f"{state_dir}/src", f"{state_dir}/build", f"{state_dir}/native")


@dataclass(frozen=True)
class ServicePaths:
    """The host files of one model service (`beekeeper-<name>.service`)."""

    name: str

    @property
    def unit_name(self) -> str:
        return f"beekeeper-{self.name}.service"

    @property
    def container(self) -> str:  # also the compose project's name
        return f"beekeeper-{self.name}"

    @property
    def unit(self) -> str:
        return f"{UNIT_DIR}/{self.unit_name}"

    @property
    def dropin_dir(self) -> str:  # yours: the kit creates it and never writes into it
        return f"{self.unit}.d"

    @property
    def conf_dir(self) -> str:  # manifest, secrets, and with compose its compose files
        return f"{CONF_ROOT}/{self.name}"

    @property
    def manifest(self) -> str:  # deployed.json: what the unit runs
        return f"{self.conf_dir}/deployed.json"

    @property
    def compose_file(self) -> str:
        return f"{self.conf_dir}/compose.yaml"

    @property
    def compose_override(self) -> str:  # yours: created empty, never written
        return f"{self.conf_dir}/compose.override.yaml"

    @property
    def api_key(self) -> str:
        return f"{self.conf_dir}/api_key"

    @property
    def secrets_env(self) -> str:
        return f"{self.conf_dir}/secrets.env"

    @property
    def smoke_result(self) -> str:
        return f"{REPORTS_DIR}/{self.container}-smoke.json"

    @property
    def program(self) -> str:  # runtime "supervisor": the supervisord program's name
        return self.container

    @property
    def program_conf(self) -> str:  # runtime "supervisor": what the unit is to systemd
        return f"{SUPERVISOR_PROGRAMS}/{self.program}.conf"

    @property
    def server_log(self) -> str:  # runtime "supervisor": the server's stdout and stderr
        return f"{LOG_DIR}/{self.container}.log"

    @property
    def rollback_set(self) -> tuple[str, str, str, str]:
        """What a rollback swaps with its `.prev` copy: unit, manifest, compose file, and
        the supervisor program (the runtime's files that are not there swap as missing)."""
        return (self.unit, self.manifest, self.compose_file, self.program_conf)


def manifest_glob() -> str:
    """Every service's manifest, for a shell glob."""
    return f"{CONF_ROOT}/*/deployed.json"


@dataclass(frozen=True)
class GatewayPaths:
    """The gateway's host files (HAProxy under its own unit)."""

    unit_name: str = "beekeeper-gateway.service"
    conf_dir: str = f"{CONF_ROOT}/gateway"

    @property
    def unit(self) -> str:
        return f"{UNIT_DIR}/{self.unit_name}"

    @property
    def dropin_dir(self) -> str:
        return f"{self.unit}.d"

    @property
    def config(self) -> str:
        return f"{self.conf_dir}/haproxy.cfg"

    @property
    def keys_dir(self) -> str:  # each backend's key (root-only)
        return f"{self.conf_dir}/keys"

    def backend_key(self, backend: str) -> str:
        return f"{self.keys_dir}/{backend}.key"

    @property
    def models_json(self) -> str:  # what /v1/models answers
        return f"{self.conf_dir}/models.json"

    @property
    def client_key(self) -> str:  # the gateway's own key (root-only)
        return f"{self.conf_dir}/client.key"

    @property
    def upstream_keys(self) -> str:  # backend -> its servers' key (root-only)
        return f"{self.conf_dir}/upstream-keys.map"
