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

import pytest

from beekeeper.core.paths import manifest_glob


@pytest.fixture(scope="module")
def services(host) -> list[dict]:
    out = host.run(f"cat {manifest_glob()} 2>/dev/null | jq -s . 2>/dev/null "
                   "|| python3 -c 'import glob,json,sys; print(json.dumps([json.load(open(p)) "
                   f"for p in sorted(glob.glob(sys.argv[1]))]))' {shlex.quote(manifest_glob())}")
    found = json.loads(out.stdout or "[]")
    assert found, f"no beekeeper service on this host ({manifest_glob()})"
    return found


def test_docker_engine_running_and_enabled(host, services):
    if all(s["mode"] != "container" for s in services):
        pytest.skip("no container-mode service")
    docker = host.service("docker")
    assert docker.is_running and docker.is_enabled


def test_units_enabled_and_active(host, services):
    for s in services:
        unit = host.service(s["unit"])
        assert unit.is_enabled, f"{s['unit']} is not enabled"
        assert unit.is_running, f"{s['unit']} is not active"


def test_server_listens_on_the_expected_address_only(host, services):
    for s in services:
        assert host.socket(f"tcp://{s['bind_address']}:{s['port']}").is_listening
        listeners = [addr for addr in host.socket.get_listening_sockets()
                     if addr.endswith(f":{s['port']}")]
        assert listeners == [f"tcp://{s['bind_address']}:{s['port']}"], listeners


def test_image_tag_present(host, services):
    for s in services:
        if s["mode"] == "container":
            assert host.run(f"docker image inspect {s['image']}").rc == 0, s["image"]


def test_container_runs_hardened(host, services):
    for s in services:
        if s["mode"] != "container":
            continue
        info = json.loads(host.check_output(f"docker inspect {s['container']}"))[0]
        hc = info["HostConfig"]
        assert hc["ReadonlyRootfs"] is True
        assert hc["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in hc["SecurityOpt"]
        assert info["Config"]["User"] not in ("", "0", "root")
        mounts = {m["Destination"]: m for m in info["Mounts"]}
        assert mounts["/models"]["RW"] is False


def test_model_hash_right(host, services):
    for s in services:
        if s["model_sha256"]:
            assert host.file(s["model_path"]).sha256sum == s["model_sha256"]
        if s.get("draft_sha256"):
            assert host.file(s["draft_path"]).sha256sum == s["draft_sha256"]


def test_compose_project_runs_the_container(host, services):
    """Runtime "compose": the container is the compose project's, run from the service's
    compose file, and the user's override file is there."""
    compose = [s for s in services if s.get("runtime") == "compose"]
    if not compose:
        pytest.skip("no compose-runtime service")
    for s in compose:
        labels = json.loads(host.check_output(
            f"docker inspect --format '{{{{json .Config.Labels}}}}' {s['container']}"))
        assert labels.get("com.docker.compose.project") == s["container"], labels
        assert labels.get("com.docker.compose.project.config_files", "").startswith(
            s["compose_file"]), labels
        folder = s["compose_file"].rsplit("/", 1)[0]
        assert host.file(f"{folder}/compose.override.yaml").exists
        state = host.check_output(f"docker inspect --format '{{{{.State.Status}}}}' "
                                  f"{s['container']}")
        assert state == "running"
