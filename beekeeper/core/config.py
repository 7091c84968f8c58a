"""
Host data validation: turn pyinfra host data into a typed HostConfig, or fail
with one line that names the key and the fix, before any operation runs.
"""

from __future__ import annotations

import difflib
import functools
import ipaddress
import math
import os.path
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import ConfigError
from .paths import HF_TOKEN, MODEL_DIR, STATE_DIR
from .profiles import PROFILES, SHA256_RE, HfSource, ModelFile, Profile, with_ctx_size

MODES = ("container", "native")
# what runs the server container: a systemd unit around `docker run`, or a compose file
# whose project a systemd unit brings up and down (README, "Choosing a runtime")
RUNTIMES = ("systemd", "compose")
# provision: engine, driver, toolkits; build: image or native build; model; service: unit,
# start, smoke. Host data `stages` picks a prefix of this chain.
STAGES = ("provision", "build", "model", "service")
# host data read by single tasks: HostConfig fields of the same names
TASK_KEYS = ("nvidia_repos", "driver_branch", "container_toolkit_version",
             "install_cuda_toolkit", "hf_token_file", "allow_reboot", "use_docker_desktop",
             "upgrade_driver", "cuda_follows_driver", "driver_flavour")
# the keys one service reads: at the top level of host data, or inside a `services` entry
SERVICE_KEYS = ("service_name", "profile", "port", "bind_address", "api_key_file", "ctx_size",
                "server_extra_args", "state", "gateway_port",
                *(f"{role}_{part}" for role in ("model", "draft")
                  for part in ("repo", "file", "revision", "sha256")))
HOST_KEYS = ("mode", "runtime", "services", "model_dir", "state_dir", "source", "cuda_version",
             "cuda_arch", "vram_budget_gib", "health_timeout_s", "build_jobs", "base_images",
             "preload_images", "install_docker", "stages", "hf_endpoint", "server_webui",
             "gateway", "gateway_address", *TASK_KEYS)
KIT_KEYS = frozenset(SERVICE_KEYS + HOST_KEYS)
# pyinfra's own host data when pyinfra cannot be imported (the list in pyinfra 3.10's
# api/arguments.py and the connectors' data_meta); with pyinfra the live lists are used
_PYINFRA_FALLBACK = (
    "_chdir", "_continue_on_error", "_doas", "_doas_user", "_dzdo", "_dzdo_user", "_env",
    "_get_pty", "_if", "_ignore_errors", "_parallel", "_preserve_su_env", "_preserve_sudo_env",
    "_retries", "_retry_delay", "_retry_until", "_run_once", "_serial", "_shell_executable",
    "_stdin", "_su_password", "_su_shell", "_su_user", "_success_exit_codes", "_sudo",
    "_sudo_password", "_sudo_user", "_temp_dir", "_timeout", "_use_su_login",
    "_use_sudo_login", "docker_architecture", "docker_identifier", "docker_platform",
    "ssh_allow_agent", "ssh_config_file", "ssh_connect_retries", "ssh_connect_retry_max_delay",
    "ssh_connect_retry_min_delay", "ssh_file_transfer_protocol", "ssh_forward_agent",
    "ssh_hostname", "ssh_key", "ssh_key_password", "ssh_known_hosts_file",
    "ssh_look_for_keys", "ssh_paramiko_connect_kwargs", "ssh_password", "ssh_port",
    "ssh_strict_host_key_checking", "ssh_user",
)
# read straight from host data by pyinfra's chroot and dockerssh connectors
_PYINFRA_CONNECTOR_EXTRA = ("chroot_directory", "docker_image", "docker_container_id")
MIN_CTX_SIZE = 256
MAX_PATH_LEN = 1024
IMAGE_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
LOCAL_REF_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
CUDA_VERSION_RE = re.compile(r"^\d{2}\.\d{1,2}(\.\d{1,2})?$")
SERVICE_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
# Git fetches an object by its full name only (GitHub allows any reachable commit); an
# abbreviated hash is taken for a ref name and fails with "couldn't find remote ref".
GIT_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
HF_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
HF_FILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.gguf$")
DEFAULT_HF_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class SourceSpec:
    """Where the server is built from: a git URL at a pinned commit, or a local tree."""

    kind: str  # "git" | "local"
    ref: str
    url: str | None = None
    path: str | None = None


@dataclass(frozen=True)
class ServiceConfig:
    """One model service on a host."""

    name: str
    profile: Profile
    port: int
    bind_address: str
    api_key_file: str | None
    # the profile's model (and draft), with host data's repo/file/revision/sha256 applied;
    # beekeeper.pins fills in a commit and a sha256 where they are left out
    model: ModelFile
    draft: ModelFile | None = None
    extra_args: tuple[str, ...] = ()
    # the port the gateway reaches this service on, when not `port` (an SSH forward)
    gateway_port: int | None = None

    @property
    def model_sha256(self) -> str | None:
        return self.model.sha256

    def models(self) -> list[ModelFile]:
        return [self.model] + ([self.draft] if self.draft else [])


@dataclass(frozen=True)
class GatewayConfig:
    """The gateway role (host data `gateway = {...}`): one OpenAI endpoint in front of every
    service of every inventory host, on the distro's HAProxy (tasks/gateway.py)."""

    port: int = 4000
    bind_address: str = "127.0.0.1"
    api_key_file: str | None = None
    # active health checks on each backend's /health: every `check_interval_s`, out after
    # 2 failures, back after 2 successes
    check_interval_s: int = 2
    # request bodies are read whole (up to this size) to find their `model`
    max_body_kib: int = 1024
    # the longest a request (a long generation) may take
    timeout_s: int = 600


GATEWAY_KEYS = tuple(GatewayConfig.__dataclass_fields__)


@dataclass(frozen=True)
class HostConfig:
    """Validated settings for one inventory host."""

    mode: str
    services: tuple[ServiceConfig, ...]
    model_dir: str
    state_dir: str
    source: SourceSpec
    cuda_version: str
    cuda_arch: str | None
    vram_budget_gib: float
    health_timeout_s: int
    build_jobs: int | None
    base_images: Mapping[str, str]
    preload_images: Mapping[str, str]
    install_docker: bool
    image_repo: str = "beekeeper/llama-server"
    stages: tuple[str, ...] = STAGES
    # the Hugging Face Hub, or a mirror of it (HF_ENDPOINT for huggingface_hub)
    hf_endpoint: str = DEFAULT_HF_ENDPOINT
    # build beellama's embedded web UI into the server (off: the kit serves the API)
    webui: bool = False
    runtime: str = "systemd"
    # services this host had and must not have any more (`state = "absent"`): see
    # tasks/prune.py, which also removes those the inventory no longer names
    absent: tuple[str, ...] = ()
    # this host's gateway role (host data `gateway`), and the address a gateway on another
    # host reaches this host's services at (host data `gateway_address`)
    gateway: GatewayConfig | None = None
    gateway_address: str | None = None
    # services that other inventory hosts on this host's machine keep (beekeeper/machines.py),
    # never removed by this host's deploy; None when one of them has bad data and what it
    # keeps is unknown: then this deploy removes no service at all
    kept_by_neighbours: frozenset[str] | None = frozenset()
    # host data read by single tasks (TASK_KEYS)
    # mirrors of NVIDIA's repositories: keys cuda, cuda_key, toolkit, toolkit_key
    nvidia_repos: Mapping[str, str] = field(default_factory=dict)
    # the driver branch to install on native Linux (None: the one shipped with cuda_version)
    driver_branch: int | None = None
    # the Container Toolkit's apt version (None: tasks/container_toolkit.py's pin)
    container_toolkit_version: str | None = None
    # install the CUDA toolkit in container mode too (native mode always does)
    install_cuda_toolkit: bool = False
    # a Hugging Face token on the controller, for gated models
    hf_token_file: str | None = None
    # reboot after installing the NVIDIA driver, instead of stopping
    allow_reboot: bool = False
    # use Docker Desktop's WSL integration as the engine
    use_docker_desktop: bool = False
    # native Linux with a driver older than cuda_version needs: replace it with the pinned
    # branch (the distro's driver packages purged first), instead of stopping
    upgrade_driver: bool = False
    # build the image for the newest CUDA the installed driver runs, instead of cuda_version
    cuda_follows_driver: bool = False
    # the kernel modules the kit installs: NVIDIA's open modules (Turing and newer, required
    # for Blackwell) or the proprietary ones (needed before Turing)
    driver_flavour: str = "open"

    @property
    def service(self) -> ServiceConfig:
        return self.services[0]


def _fail(key: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"host data `{key}`: {problem}; fix: {fix}")


@functools.cache  # the same for every host of a run
def pyinfra_keys() -> frozenset[str]:
    """Host data keys pyinfra itself reads: global arguments (`_sudo`, `_env`, ...) and
    every installed connector's data (`ssh_*`, `docker_*`, ...)."""
    try:
        from pyinfra.api.arguments import all_argument_meta
        from pyinfra.api.connectors import get_all_connectors
    except ImportError:  # pragma: no cover - hosts that only run verify/
        return frozenset(_PYINFRA_FALLBACK + _PYINFRA_CONNECTOR_EXTRA)
    keys = {k for k in all_argument_meta if k.startswith("_")}
    for connector in get_all_connectors().values():
        keys |= set(getattr(connector, "data_meta", None) or {})
    return frozenset(keys | set(_PYINFRA_CONNECTOR_EXTRA))


def host_data_keys(data: Any) -> list[str]:
    """Every key set in host data: a plain mapping, or pyinfra's HostData (its layers:
    --data overrides, the inventory's host data, group data such as group_data/all.py)."""
    if isinstance(data, Mapping):
        return [str(k) for k in data]
    keys: dict[str, None] = {}
    for layer in getattr(data, "datas", ()):
        layer = layer() if callable(layer) else layer
        keys.update((str(k), None) for k in layer)
    return list(keys)


def _type_name(value: Any) -> str:
    return "a string" if isinstance(value, str) else f"a {type(value).__name__}"


def check_keys(keys: Iterable[str], known: Iterable[str], prefix: str = "",
               extra_known: Iterable[str] = ()) -> None:
    """Refuse a key the kit (or pyinfra) does not read, with the closest known one."""
    known = sorted(set(known))
    allowed = set(known) | set(extra_known)
    for key in keys:
        if key in allowed or key.startswith("__"):
            continue
        close = difflib.get_close_matches(key, known + sorted(set(extra_known) - set(known)),
                                          n=1, cutoff=0.75)
        hint = f"did you mean `{prefix}{close[0]}`? (or remove it)" if close else \
            "remove it (the keys the kit reads are listed in the README, Host data keys)"
        raise _fail(f"{prefix}{key}", "unknown key: beekeeper and pyinfra do not read it",
                    hint)


def safe_text(key: str, value: str, what: str) -> None:
    """Refuse control and other non-printable characters (newline, tab, NUL, U+2028 ...):
    no shell line or unit file can carry them safely."""
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        raise _fail(key, f"{value!r} holds the control character {bad!r}",
                    f"give {what} without control or non-printable characters")


def abs_path(key: str, value: Any, example: str) -> str:
    """An absolute, normalized path that a shell line and a unit can carry quoted."""
    if not isinstance(value, str):
        raise _fail(key, f"{value!r} is {_type_name(value)}, not a path",
                    f"give an absolute path as a string, e.g. {example!r}")
    if not value:
        raise _fail(key, "empty", f"give an absolute path, e.g. {example!r}")
    if value.startswith("~"):
        raise _fail(key, f"{value!r} is relative to a home folder (nothing expands ~ here)",
                    f"spell the folder out, e.g. {example!r}")
    if not value.startswith("/"):
        raise _fail(key, f"{value!r} is not an absolute path",
                    f"use an absolute path such as {example!r}")
    safe_text(key, value, "the path")
    if len(value) > MAX_PATH_LEN:
        raise _fail(key, f"the path is {len(value)} characters long",
                    f"use a path of at most {MAX_PATH_LEN} characters")
    norm = os.path.normpath(value)
    if norm in ("/", "//"):
        raise _fail(key, f"{value!r} is the root folder", f"use a folder such as {example!r}")
    if norm != value.rstrip("/") or value.startswith("//"):
        raise _fail(key, f"{value!r} is not a normalized path (`.`, `..` or `//` in it)",
                    f"write it as {norm!r}")
    return norm


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(key, f"{value!r} is {_type_name(value)}, not True or False",
                    f"write {key} = True or {key} = False (no quotes)")
    return value


def _str_map(key: str, value: Any, example: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _fail(key, f"{value!r} is not a mapping of strings to strings",
                    f"e.g. {key} = {example}")
    for k, v in value.items():
        safe_text(f"{key}[{k!r}]", k, "the name")
        safe_text(f"{key}[{k!r}]", v, "the value")
    return dict(value)


def _port(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise _fail(key, f"{value!r} is not a TCP port", "use an integer from 1 to 65535")
    return value


def _profile(key: str, value: Any) -> Profile:
    if not isinstance(value, str) or value not in PROFILES:
        names = ", ".join(sorted(PROFILES))
        raise _fail(key, f"unknown profile {value!r}", f"use one of: {names}")
    return PROFILES[value]


def _bind(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _fail(key, f"{value!r} is {_type_name(value)}, not an IP address",
                    "write it as a string, e.g. '127.0.0.1'")
    try:
        ipaddress.ip_address(value)
    except (ValueError, TypeError):
        raise _fail(key, f"{value!r} is not an IP address", "use 127.0.0.1") from None
    return str(value)


def _ctx_size(key: str, value: Any, profile: Profile) -> int:
    """ctx_size: an integer from MIN_CTX_SIZE to the model's trained context."""
    if isinstance(value, str):
        raise _fail(key, f"{value!r} is a string, not a number",
                    f"write ctx_size = {value.strip() if value.strip().isdigit() else 8192}"
                    " without quotes")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(key, f"{value!r} is {_type_name(value)}, not a whole number",
                    "give a number of tokens, e.g. ctx_size = 8192")
    train = profile.model.n_ctx_train
    if value > train:
        raise _fail(key, f"{value!r} exceeds the model's trained context {train}",
                    f"lower ctx_size to {train} or less, or remove it")
    floor = MIN_CTX_SIZE * profile.server.parallel
    if value < floor:
        raise _fail(key, f"{value!r} is below {floor} tokens ({MIN_CTX_SIZE} per slot, "
                    f"{profile.server.parallel} slot(s))",
                    f"raise ctx_size to {floor} or more, or remove it "
                    f"(the profile's is {profile.server.ctx_size})")
    return value


def _service(prefix: str, raw: Any, data: Any) -> ServiceConfig:
    if not isinstance(raw, Mapping):
        raise _fail(prefix.rstrip("."), f"{raw!r} is {_type_name(raw)}, not a mapping",
                    "give each service as a dict, e.g. {'service_name': 'llm', "
                    "'profile': 'cpu-tiny', 'port': 8083}")
    if prefix:  # a `services` entry: only per-service keys
        check_keys([str(k) for k in raw], SERVICE_KEYS, prefix)

    def get(key: str, default: Any = None) -> Any:
        return raw.get(key, data.get(key, default))

    name = _service_name(prefix, get("service_name", "llm"))
    if get("profile") is None:
        raise _fail(f"{prefix}profile", "missing", "set profile = 'cpu-tiny' or another profile")
    profile = _profile(f"{prefix}profile", get("profile"))
    port = _port(f"{prefix}port", get("port", 8083))
    bind = _bind(f"{prefix}bind_address", get("bind_address", "127.0.0.1"))
    api_key_file = get("api_key_file")
    if api_key_file is not None:  # a server takes any key; the gateway checks its own rule
        api_key_file = _api_key_file(f"{prefix}api_key_file", api_key_file, one_word_key=False)
    if not ipaddress.ip_address(bind).is_loopback and not api_key_file:
        raise _fail(f"{prefix}bind_address", f"{bind} is not loopback and no API key is set",
                    "set api_key_file to a file holding the key, or bind 127.0.0.1")
    model = _model_file(prefix, "model", profile.model, get)
    draft = profile.server.draft_model
    if draft is not None:
        draft = _model_file(prefix, "draft", draft, get)
    ctx = get("ctx_size")
    if ctx is not None:
        # the server's -c, the planner and the VRAM budget check, and verify's sizes
        profile = with_ctx_size(profile, _ctx_size(f"{prefix}ctx_size", ctx, profile))
    extra = get("server_extra_args", [])
    if not isinstance(extra, list | tuple) or not all(isinstance(a, str) for a in extra):
        raise _fail(f"{prefix}server_extra_args", f"{extra!r} is not a list of strings",
                    "e.g. ['--threads', '8']")
    for arg in extra:
        safe_text(f"{prefix}server_extra_args", arg, "each argument")
    gw_port = get("gateway_port")
    return ServiceConfig(name=name, profile=profile, port=port, bind_address=bind,
                         api_key_file=api_key_file, model=model, draft=draft,
                         extra_args=tuple(extra),
                         gateway_port=None if gw_port is None
                         else _port(f"{prefix}gateway_port", gw_port))


def _model_file(prefix: str, role: str, base: ModelFile, get: Any) -> ModelFile:
    """The profile's model file with host data `<role>_repo/_file/_revision/_sha256` applied.

    Your own model: set `model_repo` and `model_file` (a GGUF in a Hub repo); pin it with
    `model_revision` (a commit) and `model_sha256`, or let the kit resolve and print them.
    """
    repo, file = get(f"{role}_repo"), get(f"{role}_file")
    revision, sha = get(f"{role}_revision"), get(f"{role}_sha256")
    if repo is not None and (not isinstance(repo, str) or not HF_REPO_RE.match(repo)):
        raise _fail(f"{prefix}{role}_repo", f"{repo!r} is not a Hub repository id",
                    "use 'owner/name', e.g. 'unsloth/Qwen3.5-9B-GGUF'")
    if file is not None and (not isinstance(file, str) or not HF_FILE_RE.match(file)):
        raise _fail(f"{prefix}{role}_file", f"{file!r} is not a .gguf file name",
                    "give the file's name in the repository, e.g. 'Qwen3.5-9B-Q8_0.gguf'")
    if revision is not None and (not isinstance(revision, str) or not revision
                                 or any(c.isspace() or ord(c) < 32 for c in revision)):
        raise _fail(f"{prefix}{role}_revision", f"{revision!r} is not a revision",
                    "give a commit (40 hex digits), or a branch or tag the kit pins once")
    if sha is not None and (not isinstance(sha, str) or not SHA256_RE.match(sha)):
        raise _fail(f"{prefix}{role}_sha256", f"{sha!r} is not a sha256",
                    "give 64 lowercase hex digits")
    if repo is None and file is None and revision is None:
        return base if sha is None or sha == base.sha256 else replace(base, sha256=sha)
    if not isinstance(base.source, HfSource) and (repo is None or file is None):
        raise _fail(f"{prefix}{role}_repo", f"the profile's {role} is not on the Hub",
                    f"set {role}_repo and {role}_file together")
    old = base.source if isinstance(base.source, HfSource) else None
    same_file = file in (None, base.filename) and repo in (None, old and old.repo)
    source = HfSource(repo=repo or (old.repo if old else ""),
                      revision=revision or (old.revision if old and same_file else "main"))
    # another file or revision: the profile's hash and size no longer apply
    unchanged = same_file and revision is None
    return ModelFile(filename=file or base.filename, source=source,
                     sha256=sha or (base.sha256 if unchanged else None),
                     size_bytes=base.size_bytes if unchanged else 0,
                     n_ctx_train=base.n_ctx_train)


def _source(data: Any) -> SourceSpec:
    raw = data.get("source")
    if not isinstance(raw, Mapping):
        raise _fail("source", f"{raw!r} is not a mapping",
                    "set source = {'git': URL, 'ref': COMMIT} or {'path': FILE, 'ref': NAME}")
    check_keys([str(k) for k in raw], ("git", "path", "ref"), "source.")
    ref = raw.get("ref")
    if ref is None or ref == "":
        raise _fail("source.ref", "missing", "pin the source to a commit or a named snapshot")
    if not isinstance(ref, str):
        raise _fail("source.ref", f"{ref!r} is {_type_name(ref)}, not a string",
                    "give the commit (40 hex digits) or snapshot name in quotes")
    if "git" in raw and "path" in raw:
        raise _fail("source", "both `git` and `path` given", "keep one of them")
    if "git" in raw:
        url = raw["git"]
        if not isinstance(url, str) or not re.match(r"^(https?|ssh|git|file)://\S+$", url) \
                or any(not c.isprintable() for c in url):
            raise _fail("source.git", f"{url!r} is not a git URL",
                        "give the repository's URL, e.g. 'https://github.com/o/r'")
        if not GIT_SHA_RE.match(ref):
            raise _fail("source.ref", f"{ref!r} is not a full commit hash (40 hex digits)",
                        f"`git rev-parse {ref}` in a clone of {raw['git']} prints the full hash "
                        "to pin (a branch, tag or short hash cannot be fetched by commit)")
        return SourceSpec(kind="git", ref=ref, url=url)
    if "path" in raw:
        path = abs_path("source.path", raw["path"], "/srv/src/llama.cpp.tar.gz")
        if not LOCAL_REF_RE.match(ref):
            raise _fail("source.ref", f"{ref!r} is not a snapshot name",
                        "use letters, digits, '.', '_' and '-' (at most 64), e.g. 'lcp0.3.36'")
        return SourceSpec(kind="local", ref=ref, path=path)
    raise _fail("source", "neither `git` nor `path` given", "add one of them")


def _runtime(data: Any, mode: str) -> str:
    """`runtime`: "systemd" (a unit around `docker run`) or "compose" (a compose file; a unit
    runs `docker compose up`/`down`). Unset: compose with Docker Desktop, which always has
    compose v2, and systemd elsewhere."""
    desktop = data.get("use_docker_desktop") is True
    runtime = data.get("runtime")
    if runtime is None:
        return "compose" if desktop and mode == "container" else "systemd"
    if not isinstance(runtime, str) or runtime not in RUNTIMES:
        raise _fail("runtime", f"{runtime!r} is not a runtime",
                    "use runtime = 'systemd' or runtime = 'compose'")
    if runtime == "compose" and mode != "container":
        raise _fail("runtime", f"'compose' runs a container, but mode is {mode!r}",
                    "set mode = 'container', or runtime = 'systemd' (or remove it)")
    return runtime


def _compose_keys(services: tuple[ServiceConfig, ...], listed: bool) -> None:
    """Compose reads the secrets env file itself (quotes, `$` interpolation): the key goes
    there single-quoted, which compose takes literally unless it holds `'` or `\\`."""
    from pathlib import Path

    for i, svc in enumerate(services):
        if svc.api_key_file and any(c in Path(svc.api_key_file).read_text().strip()
                                    for c in "'\\"):
            key = f"services[{i}].api_key_file" if listed else "api_key_file"
            raise _fail(key, f"the key in {svc.api_key_file} holds ' or \\, which compose's "
                        "env file cannot carry literally",
                        "use a key without them (e.g. `openssl rand -hex 32`), or "
                        "runtime = 'systemd'")


def _task_options(data: Any) -> dict[str, Any]:
    """The host data single tasks read (TASK_KEYS), checked for type here so a task never
    sees a wrong one: HostConfig's typed fields of the same names."""
    out: dict[str, Any] = {}
    for key in ("allow_reboot", "use_docker_desktop", "install_cuda_toolkit",
                "upgrade_driver", "cuda_follows_driver"):
        given = data.get(key)
        out[key] = False if given is None else _bool(key, given)
    flavour = data.get("driver_flavour", "open")
    if flavour not in ("open", "proprietary"):
        raise _fail("driver_flavour", f"{flavour!r} is not a driver flavour",
                    "driver_flavour = 'open' (Turing and newer) or 'proprietary'")
    out["driver_flavour"] = flavour
    branch = data.get("driver_branch")
    if branch is not None and (isinstance(branch, bool) or not isinstance(branch, int)
                               or not 100 <= branch <= 9999):
        raise _fail("driver_branch", f"{branch!r} is not a driver branch",
                    "give the branch as a number, e.g. driver_branch = 595")
    out["driver_branch"] = branch
    version = data.get("container_toolkit_version")
    if version is not None and (not isinstance(version, str)
                                or not re.match(r"^[0-9][0-9A-Za-z.~+-]*$", version)):
        raise _fail("container_toolkit_version", f"{version!r} is not a package version",
                    "e.g. '1.17.8-1', or remove it")
    out["container_toolkit_version"] = version
    repos = _str_map("nvidia_repos", data.get("nvidia_repos"),
                     "{'cuda': 'https://mirror/cuda/repos/ubuntu2404/x86_64'}")
    check_keys(repos, ("cuda", "cuda_key", "toolkit", "toolkit_key"), "nvidia_repos.")
    out["nvidia_repos"] = repos
    token = data.get("hf_token_file")
    out["hf_token_file"] = abs_path("hf_token_file", token, HF_TOKEN) if token is not None \
        else None
    return out


def _services(data: Any, runtime: str) -> tuple[tuple[ServiceConfig, ...], tuple[str, ...]]:
    """The services this host runs and those it must remove (`state = "absent"`)."""
    raw_services = data.get("services")
    services: tuple[ServiceConfig, ...]
    absent: tuple[str, ...]
    if raw_services is None:
        services, absent = _services_of([({}, "", data)])
    else:
        if not isinstance(raw_services, list | tuple):
            raise _fail("services", f"{raw_services!r} is not a list of dicts",
                        "give one dict per service, [] for none, or drop `services`")
        services, absent = _services_of(
            [(s, f"services[{i}].", {}) for i, s in enumerate(raw_services)])
    if runtime == "compose":
        _compose_keys(services, raw_services is not None)
    ports = [s.port for s in services]
    if len(set(ports)) != len(ports):
        raise _fail("services", f"two services share a port ({ports})", "give each its own port")
    names = [s.name for s in services] + list(absent)
    if len(set(names)) != len(names):
        raise _fail("services", f"two services share a name ({names})", "name them apart")
    return services, absent


def _dirs(data: Any) -> tuple[str, str]:
    """model_dir and state_dir."""
    model_dir = abs_path("model_dir", data.get("model_dir", MODEL_DIR), MODEL_DIR)
    if ":" in model_dir:
        raise _fail("model_dir", f"{model_dir!r} holds ':', Docker's --volume separator",
                    "use a folder without ':'")
    return model_dir, abs_path("state_dir", data.get("state_dir", STATE_DIR), STATE_DIR)


def _gpu_build(data: Any) -> dict[str, Any]:
    """The VRAM budget, CUDA release and arch, and the build's parallel jobs."""
    budget = data.get("vram_budget_gib", 10.0)
    if isinstance(budget, bool) or not isinstance(budget, int | float) \
            or not math.isfinite(budget) or not 0 < budget <= 4096:
        raise _fail("vram_budget_gib", f"{budget!r} is not a number of GiB above 0",
                    "e.g. vram_budget_gib = 10 (no quotes)")
    arch = data.get("cuda_arch")
    if arch is not None and (isinstance(arch, bool) or not isinstance(arch, int | str)
                             or not re.match(r"^\d{2,3}[a-z]?(;\d{2,3}[a-z]?)*$", str(arch))):
        raise _fail("cuda_arch", f"{arch!r} is not a CUDA arch list", "e.g. '89' or '89;120'")
    cuda_version = data.get("cuda_version", "13.2.1")
    if isinstance(cuda_version, bool) or not isinstance(cuda_version, str | int | float) \
            or not CUDA_VERSION_RE.match(str(cuda_version)):
        raise _fail("cuda_version", f"{cuda_version!r} is not a CUDA release",
                    "e.g. cuda_version = '13.2.1'")
    jobs = data.get("build_jobs")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int)
                             or not 1 <= jobs <= 1024):
        raise _fail("build_jobs", f"{jobs!r} is not a positive integer", "e.g. 4, or remove it")
    return {"vram_budget_gib": float(budget), "cuda_version": str(cuda_version),
            "cuda_arch": str(arch) if arch is not None else None, "build_jobs": jobs}


def _run_settings(data: Any) -> dict[str, Any]:
    """The health timeout, the stages, the Hub endpoint and the web UI switch."""
    timeout = data.get("health_timeout_s", 300)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 10 <= timeout <= 86400:
        raise _fail("health_timeout_s", f"{timeout!r} is not a whole number of seconds "
                    "from 10 to 86400", "e.g. health_timeout_s = 300 (no quotes)")
    stages = data.get("stages", list(STAGES))
    if not isinstance(stages, list | tuple) or not stages or \
            tuple(stages) != STAGES[:len(stages)]:
        raise _fail("stages", f"{stages!r} is not a prefix of {list(STAGES)}",
                    "e.g. ['provision'] or ['provision', 'build']")
    endpoint = data.get("hf_endpoint", DEFAULT_HF_ENDPOINT)
    if not isinstance(endpoint, str) or not re.match(r"^https?://[^\s'\"]+$", endpoint) \
            or any(not c.isprintable() for c in endpoint):
        raise _fail("hf_endpoint", f"{endpoint!r} is not an http(s) URL",
                    f"remove it (the Hub, {DEFAULT_HF_ENDPOINT}) or give a mirror's URL")
    webui = data.get("server_webui", False)
    if not isinstance(webui, bool):
        raise _fail("server_webui", f"{webui!r} is not True or False", "set True or False")
    return {"health_timeout_s": timeout, "stages": tuple(stages),
            "hf_endpoint": endpoint.rstrip("/"), "webui": webui}


def _images(data: Any) -> tuple[dict[str, str], dict[str, str]]:
    """base_images (build/runtime overrides) and preload_images (image -> tar on the
    controller)."""
    base_images = _str_map("base_images", data.get("base_images"),
                           "{'build': 'debian:bookworm', 'runtime': 'debian:bookworm-slim'}")
    check_keys(base_images, ("build", "runtime"), "base_images.")
    for role, image in base_images.items():
        if not IMAGE_REF_RE.match(image):
            raise _fail(f"base_images.{role}", f"{image!r} is not an image reference",
                        "e.g. 'debian:bookworm' or 'nvidia/cuda:13.2.1-devel-ubuntu24.04'")
    preload = _str_map("preload_images", data.get("preload_images"),
                       "{'debian:bookworm': '/srv/images/debian.tar'}")
    for image, tar in preload.items():
        if not IMAGE_REF_RE.match(image):
            raise _fail("preload_images", f"{image!r} is not an image reference",
                        "name each image as the Dockerfile does, e.g. 'debian:bookworm'")
        abs_path(f"preload_images[{image!r}]", tar, "/srv/images/debian-bookworm.tar")
    return base_images, preload


def load_host_config(data: Any) -> HostConfig:
    """Validate host data (pyinfra host.data or a plain dict) into a HostConfig.

    `data` needs only `.get(key, default)`; its keys are checked when it is a mapping or
    pyinfra's HostData.
    """
    check_keys(host_data_keys(data), KIT_KEYS, extra_known=pyinfra_keys())
    mode = data.get("mode", "container")
    if not isinstance(mode, str) or mode not in MODES:
        raise _fail("mode", f"{mode!r} is not a mode", "use 'container' or 'native'")
    runtime = _runtime(data, mode)
    services, absent = _services(data, runtime)
    model_dir, state_dir = _dirs(data)
    gpu_build, run_settings = _gpu_build(data), _run_settings(data)
    base_images, preload = _images(data)
    gateway = _gateway(data.get("gateway"))
    if gateway is not None and gateway.port in [s.port for s in services]:
        raise _fail("gateway.port", f"{gateway.port} is also a model service's port on this host",
                    "give the gateway a port of its own, e.g. gateway = {'port': 4000}")
    source = _source(data)
    options = _task_options(data)
    return HostConfig(
        mode=mode,
        runtime=runtime,
        services=services,
        model_dir=model_dir,
        state_dir=state_dir,
        source=source,
        base_images=base_images,
        preload_images=preload,
        install_docker=_bool("install_docker", data.get("install_docker", True)),
        absent=absent,
        gateway=gateway,
        gateway_address=_gateway_address(data.get("gateway_address")),
        **gpu_build,
        **run_settings,
        **options,
    )


SERVICE_STATES = ("present", "absent")
HOSTNAME_RE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}(?:\.[A-Za-z0-9][A-Za-z0-9-]{0,62})*$")


def _service_name(prefix: str, name: Any) -> str:
    if not isinstance(name, str) or not SERVICE_NAME_RE.match(name):
        raise _fail(f"{prefix}service_name", f"{name!r} is not a valid name",
                    "use lowercase letters, digits and dashes, starting with a letter")
    if name == "gateway":
        raise _fail(f"{prefix}service_name", "'gateway' is the gateway's own unit "
                    "(beekeeper-gateway.service)", "name the service otherwise, e.g. 'llm'")
    return name


def _services_of(entries: list[tuple[Any, str, Any]]
                 ) -> tuple[tuple[ServiceConfig, ...], tuple[str, ...]]:
    """(raw entry, key prefix, host data it falls back to) -> the services to run, and the
    names of those marked `state = "absent"` (only their name is read)."""
    services: list[ServiceConfig] = []
    absent: list[str] = []
    for raw, prefix, fallback in entries:
        if isinstance(raw, Mapping):
            state = raw.get("state", fallback.get("state", "present") if fallback else "present")
            if state not in SERVICE_STATES:
                raise _fail(f"{prefix}state", f"{state!r} is not a service state",
                            "use 'present', or 'absent' to stop and remove the service on "
                            "the next deploy (its model is kept)")
            if state == "absent":
                if prefix:
                    check_keys([str(k) for k in raw], SERVICE_KEYS, prefix)
                absent.append(_service_name(prefix, raw.get(
                    "service_name", fallback.get("service_name", "llm") if fallback else "llm")))
                continue
        services.append(_service(prefix, raw, fallback))
    return tuple(services), tuple(absent)


def one_word(key_text: str) -> bool:
    """A key the gateway can carry: an HTTP header value and a map line, so no space and no
    control character."""
    return not any(c.isspace() or not c.isprintable() for c in key_text)


def _api_key_file(key: str, value: Any, one_word_key: bool = True) -> str:
    """A key file on the controller: present, not empty, not readable by others, and with
    `one_word_key` one word (the gateway's own key: an HTTP header value)."""
    from pathlib import Path

    if not isinstance(value, str) or not value:
        raise _fail(key, f"{value!r} is not a file name",
                    "point it at a file on the controller that holds the key")
    safe_text(key, value, "the path")
    path = Path(value)
    text = path.read_text().strip() if path.is_file() else ""
    if not text:
        raise _fail(key, f"{value} is missing or empty",
                    "point it at a file on the controller that holds the key")
    if path.stat().st_mode & 0o077:
        raise _fail(key, f"{value} is readable by others", f"chmod 600 {value}")
    if one_word_key and not one_word(text):
        raise _fail(key, f"the key in {value} holds a space or a control character",
                    "use a key of printable characters without spaces, e.g. "
                    "`openssl rand -hex 32`")
    return value


def _int_in(key: str, value: Any, lo: int, hi: int, example: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _fail(key, f"{value!r} is not a whole number from {lo} to {hi}",
                    f"e.g. {key.rsplit('.', 1)[-1]} = {example} (no quotes)")
    return value


def _gateway(raw: Any) -> GatewayConfig | None:
    """Host data `gateway`: None (not a gateway) or a dict of GATEWAY_KEYS."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _fail("gateway", f"{raw!r} is {_type_name(raw)}, not a mapping",
                    "write gateway = {} for the defaults, or e.g. gateway = {'port': 4000}")
    check_keys([str(k) for k in raw], GATEWAY_KEYS, "gateway.")
    d = GatewayConfig()
    bind = _bind("gateway.bind_address", raw.get("bind_address", d.bind_address))
    key = raw.get("api_key_file")
    if key is not None:
        key = _api_key_file("gateway.api_key_file", key)
    if not ipaddress.ip_address(bind).is_loopback and key is None:
        raise _fail("gateway.bind_address", f"{bind} is not loopback and no API key is set",
                    "set gateway['api_key_file'] to a file holding the key, or bind 127.0.0.1")
    return GatewayConfig(
        port=_port("gateway.port", raw.get("port", d.port)), bind_address=bind,
        api_key_file=key,
        check_interval_s=_int_in("gateway.check_interval_s",
                                 raw.get("check_interval_s", d.check_interval_s), 1, 60, 2),
        max_body_kib=_int_in("gateway.max_body_kib", raw.get("max_body_kib", d.max_body_kib),
                             64, 65536, 1024),
        timeout_s=_int_in("gateway.timeout_s", raw.get("timeout_s", d.timeout_s),
                          10, 86400, 600))


def _gateway_address(value: Any) -> str | None:
    """Where a gateway on another host reaches this host's services: an IP or a DNS name."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            if HOSTNAME_RE.match(value) and len(value) <= 253:
                return value
    raise _fail("gateway_address", f"{value!r} is not an IP address or a host name",
                "give the address the gateway reaches this host at, e.g. '10.0.0.5' or "
                "'gpu-box.lan'")
