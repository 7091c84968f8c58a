"""
Runtime "compose" (issue 16): the compose file and its unit (the container in it is the plain
unit's, one spec: tests/unit/test_container_spec.py), compose v2 from the distro or refused, and
Debian 13 hosts (docker-cli, NVIDIA's debian13 repository). `docker compose config` on a
real compose 2.26 runs on the trixie sandbox host (tests/integration/test_trixie_compose.py).
"""

from __future__ import annotations

import configparser
from dataclasses import replace

import pytest
import yaml

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError, PreflightError
from beekeeper.core.render import yaml_quote
from beekeeper.facts.docker import DockerEngineInfo
from beekeeper.facts.gpu import GpuCard, NvidiaSmiInfo
from beekeeper.facts.host import OsReleaseInfo
from beekeeper.operations.secrets import env_line
from beekeeper.tasks.service import render_compose, render_unit

from .harness import (
    CPU_HOST,
    DEFAULTS,
    NATIVE,
    NO_DOCKER,
    facts,
    names,
    requested_runtime,
    run_deploy,
    uploaded,
)

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/s.tar.gz", "ref": "lcp0.3.36"},
       "runtime": "compose"}
CPU_GIT = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": "a" * 40},
           "runtime": "compose"}
GPU = {**DEFAULTS, "runtime": "compose"}
DEBIAN13 = OsReleaseInfo(id="debian", version_id="13")
DEBIAN12 = OsReleaseInfo(id="debian", version_id="12")
DISTRO_DOCKER = DockerEngineInfo(present=True, path="/usr/bin/docker", flavour="distro",
                                 server_version="26.1.5", nvidia_runtime=False)
TAG = "beekeeper/llama-server:x"


def _key_file(tmp_path, key="k3y-0123456789"):
    path = tmp_path / "api_key"
    path.write_text(key + "\n")
    path.chmod(0o600)
    return str(path)


def _compose(data, image=TAG):
    cfg = load_host_config(data)
    return yaml.safe_load(render_compose(cfg, requested_runtime(cfg), cfg.service, image)), cfg


def _service_of(doc):
    assert list(doc["services"]) == ["server"]
    return doc["services"]["server"]


# ------------------------------------------------------------------ the compose file

def test_compose_file_carries_image_args_port_mount_health_and_restart():
    doc, cfg = _compose(CPU)
    assert doc["name"] == "beekeeper-llm"
    s = _service_of(doc)
    assert s["image"] == TAG and s["pull_policy"] == "never"
    assert s["container_name"] == "beekeeper-llm"
    assert s["command"][:2] == ["-m", "/models/gemma-3-270m-q4_k_m.gguf"]
    assert s["command"][-2:] == ["--alias", "cpu-tiny"]
    assert s["ports"] == [{"target": 8083, "host_ip": "127.0.0.1", "published": "8083",
                           "protocol": "tcp"}]
    assert s["volumes"] == [{"type": "bind", "source": "/srv/beekeeper/models",
                             "target": "/models", "read_only": True}]
    assert s["healthcheck"]["test"][:2] == ["CMD", "bash"] and "/health" in \
        s["healthcheck"]["test"][-1]
    assert s["restart"] == "no"  # systemd restarts it (one owner)
    assert "env_file" not in s and "deploy" not in s  # no key, no GPU
    assert s["labels"] == {"io.beekeeper.service": "llm", "io.beekeeper.profile": "cpu-tiny"}


def test_gpu_is_reserved_through_compose_device_requests():
    s = _service_of(_compose(GPU)[0])
    assert s["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]


@pytest.mark.parametrize("model_dir", ["/srv/bee keeper/mod'els $HOME %h", '/srv/a"b\\c',
                                       "/srv/${X}/$$/ünï"])
def test_odd_paths_reach_compose_as_they_are(model_dir):
    """YAML double quotes, and `$$` for every `$`, which compose reads back as `$`."""
    s = _service_of(_compose({**CPU, "model_dir": model_dir})[0])
    assert s["volumes"][0]["source"].replace("$$", "$") == model_dir
    assert s["volumes"][0]["source"].count("$$") == model_dir.count("$")


def test_yaml_quote_refuses_control_characters():
    with pytest.raises(ValueError, match="control character"):
        yaml_quote("a\nb")


def test_the_api_key_is_never_in_the_compose_file_or_unit(tmp_path):
    key = "k3y-Zq9$x#1 w"
    data = {**CPU, "bind_address": "0.0.0.0", "api_key_file": _key_file(tmp_path, key)}
    cfg = load_host_config(data)
    rt = requested_runtime(cfg)
    text = render_compose(cfg, rt, cfg.service, TAG) + render_unit(cfg, rt, cfg.service, TAG)
    assert key not in text and "Zq9" not in text
    assert _service_of(yaml.safe_load(render_compose(cfg, rt, cfg.service, TAG)))["env_file"] == \
        ["/etc/beekeeper/llm/secrets.env"]
    # compose parses env files (quotes, `$`): single quotes keep the key as it is
    assert env_line(key, requested_runtime(cfg).env_quoted) == f"LLAMA_API_KEY='{key}'\n"
    plain = load_host_config({**data, "runtime": "systemd"})
    assert env_line(key, requested_runtime(plain).env_quoted) == f"LLAMA_API_KEY={key}\n"


# ------------------------------------------------------------------ the unit around it

def test_compose_unit_brings_the_project_up_and_down_and_logs_to_journald():
    cfg = load_host_config(CPU)
    unit = render_unit(cfg, requested_runtime(cfg), cfg.service, TAG)
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    assert parser["Unit"]["Requires"] == "docker.service"
    svc = parser["Service"]
    assert svc["WorkingDirectory"] == "/etc/beekeeper/llm"
    pre = [ln for ln in unit.splitlines() if ln.startswith("ExecStartPre=")]
    assert pre == ["ExecStartPre=-/usr/bin/docker rm -f beekeeper-llm",
                   "ExecStartPre=/usr/bin/docker compose --ansi never --project-directory "
                   "/etc/beekeeper/llm up --detach"]
    assert svc["ExecStart"] == "/usr/bin/docker logs --follow beekeeper-llm"
    assert "down --timeout 20" in svc["ExecStop"]
    assert svc["Restart"] == "always"
    assert parser["Install"]["WantedBy"] == "multi-user.target"


def test_docker_desktop_chooses_compose_and_needs_no_docker_service():
    cfg = load_host_config({**DEFAULTS, "use_docker_desktop": True})
    assert cfg.requested_way.runtime == "compose"
    unit = render_unit(cfg, requested_runtime(cfg), cfg.service, TAG, "docker-desktop")
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    assert "Requires" not in parser["Unit"] and "docker.service" not in parser["Unit"]["After"]
    assert "/usr/bin/docker info" in unit
    assert "compose --ansi never" in unit
    # an explicit choice wins
    assert load_host_config({**DEFAULTS, "use_docker_desktop": True,
                             "runtime": "systemd"}).requested_way.runtime == "systemd"
    assert load_host_config(DEFAULTS).requested_way.runtime == "systemd"


@pytest.mark.parametrize(("data", "problem"), [
    ({**CPU, "runtime": "docker-compose"}, "is not a runtime"),
    ({**CPU, "runtime": True}, "is not a runtime"),
    ({**CPU, "mode": "native"}, "'compose' runs a container, but mode is 'native'"),
])
def test_bad_runtime_is_one_line_with_the_fix(data, problem):
    with pytest.raises(ConfigError) as e:
        load_host_config(data)
    msg = str(e.value)
    assert msg.startswith("host data `runtime`: ") and problem in msg and "; fix: " in msg


# ------------------------------------------------------------------ deploys on canned facts

def _deploy(os_release, docker, compose_version=None, data=None, **more):
    return run_deploy(data or CPU_GIT, facts(**CPU_HOST, OsRelease=os_release,
                                             DockerEngine=docker,
                                             ComposeVersion=compose_version, **more))


def test_debian13_from_nothing_installs_engine_cli_and_compose_from_the_distro():
    ops = _deploy(DEBIAN13, NO_DOCKER)
    assert "Install host packages: docker.io, docker-cli, docker-compose" in names(ops)


def test_debian13_plain_runtime_installs_the_cli_too():
    ops = _deploy(DEBIAN13, NO_DOCKER, data={**CPU_GIT, "runtime": "systemd"})
    assert "Install host packages: docker.io, docker-cli" in names(ops)


@pytest.mark.parametrize(("os_release", "docker", "package"), [
    (OsReleaseInfo(id="ubuntu", version_id="24.04"), NO_DOCKER, "docker-compose-v2"),
    (OsReleaseInfo(id="ubuntu", version_id="22.04"), DISTRO_DOCKER, "docker-compose-v2"),
    (DEBIAN12, replace(DISTRO_DOCKER, flavour="docker-ce"), "docker-compose-plugin"),
])
def test_compose_v2_comes_from_the_hosts_own_sources(os_release, docker, package):
    assert any(n.startswith("Install host packages") and n.endswith(package)
               for n in names(_deploy(os_release, docker)))


def test_compose_already_there_installs_nothing():
    ops = _deploy(DEBIAN13, DISTRO_DOCKER, compose_version="2.26.1",
                  DebPackages={"python3": ["3"], "ca-certificates": ["1"], "docker.io": ["26"],
                               "docker-cli": ["26"]})
    assert not any(n.startswith("Install host packages") for n in names(ops))


@pytest.mark.parametrize(("os_release", "docker", "says"), [
    (DEBIAN12, DISTRO_DOCKER, "debian 12 ships no compose v2"),
    (DEBIAN12, NO_DOCKER, "debian 12 ships no compose v2"),
    (OsReleaseInfo(id="ubuntu", version_id="20.04"), NO_DOCKER,
     "ubuntu 20.04 ships no compose v2"),
    (DEBIAN13, replace(DISTRO_DOCKER, flavour="docker-desktop"), "turn on WSL integration"),
])
def test_no_compose_v2_to_be_had_is_refused_before_any_change(os_release, docker, says):
    with pytest.raises(PreflightError) as e:
        _deploy(os_release, docker, data={**CPU_GIT, "use_docker_desktop": True}
                if docker.flavour == "docker-desktop" else None)
    msg = str(e.value)
    assert msg.startswith("host canned: host data `runtime`: 'compose' needs the compose v2 "
                          "plugin")
    assert says in msg and "runtime = 'systemd'" in msg and "\n" not in msg


def test_compose_deploy_renders_both_files_and_creates_the_override_once():
    ops = _deploy(DEBIAN13, DISTRO_DOCKER, compose_version="2.26.1")
    steps = names(ops)
    override = "Create /etc/beekeeper/llm/compose.override.yaml (yours; created empty, " \
        "never written)"
    assert steps.index(override) < steps.index(
        "Render the compose file /etc/beekeeper/llm/compose.yaml") < \
        steps.index("Render systemd unit beekeeper-llm.service")
    assert dict(ops)[override][-1] == "touch /etc/beekeeper/llm/compose.override.yaml"
    assert yaml.safe_load(uploaded(ops, "Render the compose file"))["name"] == "beekeeper-llm"
    # an override that is there is left alone, whatever it holds
    again = _deploy(DEBIAN13, DISTRO_DOCKER, compose_version="2.26.1",
                    File=lambda path: {"mode": 600, "size": 99} if path.endswith(
                        "compose.override.yaml") else None)
    assert dict(again)[override] == []
    manifest = uploaded(ops, "Record what beekeeper-llm.service runs")
    assert '"runtime": "compose"' in manifest
    assert '"compose_file": "/etc/beekeeper/llm/compose.yaml"' in manifest


def test_plain_runtime_removes_a_compose_file_left_from_compose():
    compose = "/etc/beekeeper/llm/compose.yaml"
    ops = _deploy(DEBIAN13, DISTRO_DOCKER, data={**CPU_GIT, "runtime": "systemd"},
                  Sha1File=lambda path: "0" * 40 if path == compose else None)
    assert f"Remove {compose} (runtime systemd)" in names(ops)
    assert not any("compose.override" in n for n in names(ops))
    # with none there (every host that never ran compose), no step says it removes one
    fresh = _deploy(DEBIAN13, DISTRO_DOCKER, data={**CPU_GIT, "runtime": "systemd"})
    assert not any(n.startswith(f"Remove {compose}") for n in names(fresh))


def test_rollback_copies_and_restores_the_compose_file():
    unit = "/etc/systemd/system/beekeeper-llm.service"
    ops = _deploy(DEBIAN13, DISTRO_DOCKER, compose_version="2.26.1",
                  Sha1File=lambda path: "0" * 40 if path == unit else None)
    keep = dict(ops)["Keep the running beekeeper-llm.service for rollback "
                     "(beekeeper-llm.service.prev)"][0]
    assert "cp -p /etc/beekeeper/llm/compose.yaml /etc/beekeeper/llm/compose.yaml.prev" in keep
    smoke = dict(ops)["Wait for /health on port 8083 and smoke-check the API"][0]
    # the one rollback (hostside/rollback.py), given the compose file among what it swaps
    assert "rollback.py" in smoke and "--restore" in smoke
    assert "--compose /etc/beekeeper/llm/compose.yaml" in smoke


def test_only_the_compose_file_changing_restarts_the_service():
    """The unit is the same for every image and flag; the compose file carries them."""
    ops = _deploy(DEBIAN13, DISTRO_DOCKER, compose_version="2.26.1")
    import hashlib

    def sha(text):
        return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()

    unit_sha = sha(uploaded(ops, "Render systemd unit"))
    compose_sha = sha(uploaded(ops, "Render the compose file"))
    model = load_host_config(CPU).service.model.sha256
    paths = {"/etc/systemd/system/beekeeper-llm.service": unit_sha,
             "/etc/beekeeper/llm/compose.yaml": compose_sha}
    common = dict(Sha1File=lambda path: paths.get(path),
                  Sha256File=lambda path, stamps: model if path.endswith(".gguf") else None,
                  Directory=lambda path: {"mode": 755, "user": "root", "group": "root"}
                  if path == "/srv/beekeeper/models" else None)
    same = _deploy(DEBIAN13, DISTRO_DOCKER, "2.26.1", **common)
    assert "Start and enable beekeeper-llm.service" in names(same)
    paths["/etc/beekeeper/llm/compose.yaml"] = "1" * 40  # say, another image tag
    other = _deploy(DEBIAN13, DISTRO_DOCKER, "2.26.1", **common)
    assert "Start and enable beekeeper-llm.service (restart: inputs changed)" in names(other)


# ------------------------------------------------------------------ NVIDIA on Debian 13

def test_debian13_uses_nvidia_debian13_repository_and_its_own_key():
    driver = NvidiaSmiInfo(path="/usr/bin/nvidia-smi", cuda_version="13.2",
                           driver_version="595.58", driver_branch=595,
                           gpus=(GpuCard(name="NVIDIA GeForce RTX 4090", driver_version="595.58",
                                         compute_cap="8.9", memory_total_mib=24564),))
    ops = run_deploy({**DEFAULTS, "mode": "native"},
                     facts(Wsl=NATIVE, OsRelease=DEBIAN13, GpuInfo=driver))
    key = " ".join(next(c for n, c in ops if n.startswith("Add NVIDIA's CUDA repository key")))
    assert "/repos/debian13/x86_64/8793F200.pub" in key
    src = " ".join(next(c for n, c in ops if n.startswith("Add NVIDIA's CUDA repository (")))
    assert "/repos/debian13/x86_64/" in src


def test_a_debian_nvidia_does_not_serve_is_refused_with_the_ones_it_does():
    with pytest.raises(PreflightError, match=r"no NVIDIA CUDA repository for debian 11: .*"
                                             r"Debian 12/13"):
        run_deploy({**DEFAULTS, "mode": "native"},
                   facts(Wsl=NATIVE, OsRelease=OsReleaseInfo(id="debian", version_id="11")))


def test_rollback_swaps_the_compose_file_on_either_side(tmp_path):
    """The one rollback (hostside/rollback.py), run on a folder standing in for the host:
    unit, manifest and compose file swap with their `.prev` copies; run twice, it is back."""
    from .harness import run_rollback

    files = {"unit": "unit new", "unit.prev": "unit old", "deployed.json": "manifest new",
             "deployed.json.prev": "manifest old", "compose.yaml": "compose new"}
    start = {k: v for k, v in files.items()}
    once = run_rollback(tmp_path, files, restore=False)[1]
    assert once["unit"] == "unit old" and once["deployed.json"] == "manifest old"
    # the previous deploy ran the plain unit: no compose file then, none now
    assert "compose.yaml" not in once and once["compose.yaml.prev"] == "compose new"
    assert run_rollback(tmp_path, once, restore=False)[1] == start
