"""
Host data validation: turn pyinfra host data into a typed HostConfig, or fail
with one line that names the key and the fix, before any operation runs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import ConfigError
from .profiles import PROFILES, SHA256_RE, HfSource, ModelFile, Profile

MODES = ("container", "native")
# provision: engine, driver, toolkits; build: image or native build; model; service: unit,
# start, smoke. Host data `stages` picks a prefix of this chain.
STAGES = ("provision", "build", "model", "service")
# host data read by single tasks, passed through as they are
EXTRA_KEYS = ("nvidia_repos", "driver_branch", "container_toolkit_version",
              "install_cuda_toolkit", "hf_token_file", "allow_reboot", "use_docker_desktop")
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

    @property
    def model_sha256(self) -> str | None:
        return self.model.sha256

    def models(self) -> list[ModelFile]:
        return [self.model] + ([self.draft] if self.draft else [])


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
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def service(self) -> ServiceConfig:
        return self.services[0]


def _fail(key: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"host data `{key}`: {problem}; fix: {fix}")


def _port(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise _fail(key, f"{value!r} is not a TCP port", "use an integer from 1 to 65535")
    return value


def _profile(key: str, value: Any) -> Profile:
    if value not in PROFILES:
        names = ", ".join(sorted(PROFILES))
        raise _fail(key, f"unknown profile {value!r}", f"use one of: {names}")
    return PROFILES[value]


def _bind(key: str, value: Any) -> str:
    try:
        ipaddress.ip_address(value)
    except (ValueError, TypeError):
        raise _fail(key, f"{value!r} is not an IP address", "use 127.0.0.1") from None
    return str(value)


def _service(prefix: str, raw: Mapping[str, Any], data: Mapping[str, Any]) -> ServiceConfig:
    def get(key: str, default: Any = None) -> Any:
        return raw.get(key, data.get(key, default))

    name = get("service_name", "llm")
    if not isinstance(name, str) or not SERVICE_NAME_RE.match(name):
        raise _fail(f"{prefix}service_name", f"{name!r} is not a valid name",
                    "use lowercase letters, digits and dashes, starting with a letter")
    if get("profile") is None:
        raise _fail(f"{prefix}profile", "missing", "set profile = 'cpu-tiny' or another profile")
    profile = _profile(f"{prefix}profile", get("profile"))
    port = _port(f"{prefix}port", get("port", 8083))
    bind = _bind(f"{prefix}bind_address", get("bind_address", "127.0.0.1"))
    api_key_file = get("api_key_file")
    if api_key_file is not None:
        from pathlib import Path

        key_path = Path(str(api_key_file))
        if not key_path.is_file() or not key_path.read_text().strip():
            raise _fail(f"{prefix}api_key_file", f"{api_key_file} is missing or empty",
                        "point it at a file on the controller that holds the key")
        if key_path.stat().st_mode & 0o077:
            raise _fail(f"{prefix}api_key_file", f"{api_key_file} is readable by others",
                        f"chmod 600 {api_key_file}")
    if not ipaddress.ip_address(bind).is_loopback and not api_key_file:
        raise _fail(f"{prefix}bind_address", f"{bind} is not loopback and no API key is set",
                    "set api_key_file to a file holding the key, or bind 127.0.0.1")
    model = _model_file(prefix, "model", profile.model, get)
    draft = profile.server.draft_model
    if draft is not None:
        draft = _model_file(prefix, "draft", draft, get)
    ctx = get("ctx_size")
    if ctx is not None and (not isinstance(ctx, int) or ctx > profile.model.n_ctx_train):
        raise _fail(f"{prefix}ctx_size", f"{ctx!r} exceeds the model's trained context "
                    f"{profile.model.n_ctx_train}", "lower ctx_size or remove it")
    extra = get("server_extra_args", [])
    if not isinstance(extra, list | tuple) or not all(isinstance(a, str) for a in extra):
        raise _fail(f"{prefix}server_extra_args", f"{extra!r} is not a list of strings",
                    "e.g. ['--threads', '8']")
    return ServiceConfig(name=name, profile=profile, port=port, bind_address=bind,
                         api_key_file=api_key_file, model=model, draft=draft,
                         extra_args=tuple(extra))


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


def _source(data: Mapping[str, Any], profile: Profile) -> SourceSpec:
    raw = data.get("source")
    if not isinstance(raw, Mapping):
        raise _fail("source", f"{raw!r} is not a mapping",
                    "set source = {'git': URL, 'ref': COMMIT} or {'path': DIR, 'ref': NAME}")
    ref = raw.get("ref")
    if not isinstance(ref, str) or not ref:
        raise _fail("source.ref", "missing", "pin the source to a commit or a named snapshot")
    if "git" in raw:
        if not GIT_SHA_RE.match(ref):
            raise _fail("source.ref", f"{ref!r} is not a full commit hash (40 hex digits)",
                        f"`git rev-parse {ref}` in a clone of {raw['git']} prints the full hash "
                        "to pin (a branch, tag or short hash cannot be fetched by commit)")
        return SourceSpec(kind="git", ref=ref, url=str(raw["git"]))
    if "path" in raw:
        return SourceSpec(kind="local", ref=ref, path=str(raw["path"]))
    raise _fail("source", "neither `git` nor `path` given", "add one of them")


def load_host_config(data: Any) -> HostConfig:
    """Validate host data (pyinfra host.data or a plain dict) into a HostConfig.

    `data` needs only `.get(key, default)`.
    """
    mode = data.get("mode", "container")
    if mode not in MODES:
        raise _fail("mode", f"{mode!r} is not a mode", "use 'container' or 'native'")

    raw_services = data.get("services")
    services: tuple[ServiceConfig, ...]
    if raw_services is None:
        services = (_service("", {}, data),)
    else:
        if not isinstance(raw_services, list) or not raw_services:
            raise _fail("services", "must be a non-empty list of dicts",
                        "give one dict per service, or drop `services`")
        services = tuple(_service(f"services[{i}].", s, {}) for i, s in enumerate(raw_services))
    ports = [s.port for s in services]
    if len(set(ports)) != len(ports):
        raise _fail("services", f"two services share a port ({ports})", "give each its own port")
    names = [s.name for s in services]
    if len(set(names)) != len(names):
        raise _fail("services", f"two services share a name ({names})", "name them apart")

    model_dir = data.get("model_dir", "/srv/beekeeper/models")
    if not isinstance(model_dir, str) or not model_dir.startswith("/"):
        raise _fail("model_dir", f"{model_dir!r} is not an absolute path",
                    "use an absolute path such as /srv/beekeeper/models")
    budget = data.get("vram_budget_gib", 10.0)
    if not isinstance(budget, int | float) or budget <= 0:
        raise _fail("vram_budget_gib", f"{budget!r} is not a positive number", "e.g. 10")
    arch = data.get("cuda_arch")
    if arch is not None and not re.match(r"^\d{2,3}[a-z]?(;\d{2,3}[a-z]?)*$", str(arch)):
        raise _fail("cuda_arch", f"{arch!r} is not a CUDA arch list", "e.g. '89' or '89;120'")
    timeout = data.get("health_timeout_s", 300)
    if not isinstance(timeout, int) or timeout < 10:
        raise _fail("health_timeout_s", f"{timeout!r} is too small", "use 10 or more seconds")
    jobs = data.get("build_jobs")
    if jobs is not None and (not isinstance(jobs, int) or jobs < 1):
        raise _fail("build_jobs", f"{jobs!r} is not a positive integer", "e.g. 4, or remove it")

    stages = data.get("stages", list(STAGES))
    if not isinstance(stages, list | tuple) or not stages or \
            tuple(stages) != STAGES[:len(stages)]:
        raise _fail("stages", f"{stages!r} is not a prefix of {list(STAGES)}",
                    "e.g. ['provision'] or ['provision', 'build']")
    endpoint = data.get("hf_endpoint", DEFAULT_HF_ENDPOINT)
    if not isinstance(endpoint, str) or not re.match(r"^https?://[^\s'\"]+$", endpoint):
        raise _fail("hf_endpoint", f"{endpoint!r} is not an http(s) URL",
                    f"remove it (the Hub, {DEFAULT_HF_ENDPOINT}) or give a mirror's URL")
    webui = data.get("server_webui", False)
    if not isinstance(webui, bool):
        raise _fail("server_webui", f"{webui!r} is not True or False", "set True or False")
    return HostConfig(
        stages=tuple(stages),
        webui=webui,
        hf_endpoint=endpoint.rstrip("/"),
        mode=mode,
        services=services,
        model_dir=model_dir.rstrip("/"),
        state_dir=str(data.get("state_dir", "/var/lib/beekeeper")),
        source=_source(data, services[0].profile),
        cuda_version=str(data.get("cuda_version", "13.2.1")),
        cuda_arch=str(arch) if arch is not None else None,
        vram_budget_gib=float(budget),
        health_timeout_s=timeout,
        build_jobs=jobs,
        base_images=dict(data.get("base_images") or {}),
        preload_images=dict(data.get("preload_images") or {}),
        install_docker=bool(data.get("install_docker", True)),
        extra={k: data.get(k) for k in EXTRA_KEYS if data.get(k) is not None},
    )
