"""
Post-deploy host checks (pytest-testinfra), run against any inventory host:

    pytest verify/test_host.py --hosts=ssh://gpu-box
    pytest verify/test_host.py --hosts=ssh://sandbox --ssh-config=.sandbox/ssh_config

Each service deployed by beekeeper leaves /etc/beekeeper/<name>/deployed.json on the host;
every check below runs once per service found there.
"""

from __future__ import annotations

import json
import shlex
import warnings
from typing import Any

import pytest

from beekeeper.core.container import gpu_in_container_command
from beekeeper.core.deployed import DeployedService, RecordError
from beekeeper.core.docker_info import is_docker_desktop, parse_docker_info
from beekeeper.core.paths import ServicePaths, manifest_glob
from beekeeper.verify import host_checks
from beekeeper.verify.host_checks import Applies


def records_script(pattern: str) -> str:
    """A POSIX sh script printing every record matching the glob `pattern` as one JSON object,
    {path: record}: parsed by jq where the host has it and every record is JSON, else
    {path: its text} by python3 (a record that is not JSON is then refused by its path)."""
    jq = "reduce inputs as $r ({}; . + {(input_filename): $r})"
    py = ("import glob,json,sys; print(json.dumps({p: open(p).read() "
          "for p in sorted(glob.glob(sys.argv[1]))}))")
    return (f"out=$(jq -n {shlex.quote(jq)} {pattern} 2>/dev/null) && printf '%s\\n' \"$out\" "
            f"|| python3 -c {shlex.quote(py)} {shlex.quote(pattern)}")


def read_records(found: dict[str, Any]) -> list[DeployedService]:
    """The records of `records_script`'s output, by attribute; a refused one fails the checks
    in one line naming its path, the key and the fix (beekeeper/core/deployed.py)."""
    try:
        return [DeployedService.from_json(d, path) for path, d in found.items()]
    except RecordError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def services(host) -> list[DeployedService]:
    out = host.run("sh -c %s", records_script(manifest_glob()))
    found = read_records(json.loads(out.stdout or "{}"))
    assert found, f"no beekeeper service on this host ({manifest_glob()})"
    return found


def _applies(found: Applies) -> tuple:
    """What a check looks at, as verify/host_checks.py decided; else a skip with its reason."""
    if found.skip:
        pytest.skip(found.skip)
    return found.items


def docker_info(host) -> dict[str, str] | None:
    """The top-level fields of `docker info`'s Server section (core/docker_info.py, as the
    deploy's DockerEngine fact reads them); None when no engine answers."""
    out = host.run("docker info 2>/dev/null")
    if out.rc != 0:
        return None
    return parse_docker_info(out.stdout.splitlines())


def test_docker_engine_running_and_enabled(host, services):
    """docker.service running and enabled where the distro runs its own engine; Docker
    Desktop (WSL integration) has none in the distro, so there the engine that answers is
    the check. Which it is, the engine says (`docker info`), not /mnt/wsl/docker-desktop,
    which a WSL2 distro sees whether or not it uses Desktop."""
    _applies(host_checks.containers(services))
    info = docker_info(host)
    if is_docker_desktop(info):
        return  # Docker Desktop's engine answered: the engine the units use is up
    docker = host.service("docker")
    assert info is not None or docker.is_running, (
        "no Docker engine answers `docker info`: start the distro's engine (systemctl "
        "enable --now docker), or Docker Desktop with WSL integration for this distro")
    assert docker.is_running, "docker.service is not running (systemctl start docker)"
    assert docker.is_enabled, ("docker.service is not enabled, so the server will not come "
                               "back after a reboot (systemctl enable docker)")


def test_units_enabled_and_active(host, services):
    for s in services:
        unit = host.service(s.unit)
        assert unit.is_enabled, f"{s.unit} is not enabled"
        assert unit.is_running, f"{s.unit} is not active"


def test_server_listens_on_the_expected_address_only(host, services):
    for s in services:
        assert host.socket(f"tcp://{s.bind_address}:{s.port}").is_listening
        listeners = [addr for addr in host.socket.get_listening_sockets()
                     if addr.endswith(f":{s.port}")]
        assert listeners == [f"tcp://{s.bind_address}:{s.port}"], listeners


def test_image_tag_present(host, services):
    for s in _applies(host_checks.containers(services)):
        assert host.run(f"docker image inspect {s.image}").rc == 0, s.image


def test_gpu_visible_inside_a_container(host, services):
    """Container mode with a CUDA profile: the GPU is seen from inside a container of the
    server image, on the host's own engine (NVIDIA Container Toolkit) or Docker Desktop's
    (its own GPU support on WSL2) alike."""
    for s in _applies(host_checks.gpu_checked(services)):
        out = host.run(gpu_in_container_command(s.image))
        seen = out.stdout.strip() if out.rc == 0 else ""
        assert seen, (
            f"no GPU inside a container of {s.image} (exit {out.rc}: "
            f"{(out.stderr or out.stdout).strip()[-300:]}): check the NVIDIA Container "
            "Toolkit (`docker info | grep -i runtime` lists nvidia), or on Docker Desktop "
            "the Windows NVIDIA driver")


def test_container_runs_hardened(host, services):
    for s in _applies(host_checks.containers(services)):
        info = json.loads(host.check_output(f"docker inspect {s.container}"))[0]
        hc = info["HostConfig"]
        assert hc["ReadonlyRootfs"] is True
        assert hc["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in hc["SecurityOpt"]
        assert info["Config"]["User"] not in ("", "0", "root")
        mounts = {m["Destination"]: m for m in info["Mounts"]}
        assert mounts["/models"]["RW"] is False


def test_native_server_runs_hardened(host, services):
    """Native mode: the installed binary, run by the unit as the kit's user with no
    privileges (templates/beekeeper-native.service.j2)."""
    for s in _applies(host_checks.native(services)):
        assert host.file(s.image).mode & 0o111, f"{s.image} is not executable"
        props = dict(line.split("=", 1) for line in host.check_output(
            f"systemctl show -p User -p NoNewPrivileges -p ProtectSystem "
            f"-p CapabilityBoundingSet {s.unit}").splitlines() if "=" in line)
        assert props.get("User") not in (None, "", "root"), props
        assert props.get("NoNewPrivileges") == "yes", props
        assert props.get("ProtectSystem") == "strict", props
        assert props.get("CapabilityBoundingSet", "") in ("", "0"), props


def test_model_hash_right(host, services):
    for path, sha in _applies(host_checks.hashed(services)):
        assert host.file(path).sha256sum == sha, path
    unpinned = [s.model_path for s in services if not s.model_sha256]
    if unpinned:
        warnings.warn(f"no sha256 recorded for {unpinned}: not checked", stacklevel=1)


def test_compose_project_runs_the_container(host, services):
    """Runtime "compose": the container is the compose project's, run from the service's
    compose file, and the user's override file is there."""
    for s in _applies(host_checks.compose(services)):
        labels = json.loads(host.check_output(
            f"docker inspect --format '{{{{json .Config.Labels}}}}' {s.container}"))
        assert labels.get("com.docker.compose.project") == s.container, labels
        assert s.compose_file, f"{s.service}: runtime compose, and no compose_file recorded"
        assert labels.get("com.docker.compose.project.config_files", "").startswith(
            s.compose_file), labels
        assert host.file(ServicePaths(s.service).compose_override).exists
        state = host.check_output(f"docker inspect --format '{{{{.State.Status}}}}' "
                                  f"{s.container}")
        assert state == "running"
