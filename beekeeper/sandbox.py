"""
The sandbox host: a local container with systemd as PID 1, sshd and room for its own
Docker engine, published on 127.0.0.1 only. The kit reaches it over SSH, exactly as it
reaches a remote GPU box.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
import docker.errors

from .cache import CACHE, ROOT
from .errors import SandboxError

STATE_DIR = Path(os.environ.get("BEEKEEPER_SANDBOX_DIR", ROOT / ".sandbox"))
# BEEKEEPER_SANDBOX_NAME / _PORT let two sandboxes (two work trees) run side by side.
CONTAINER = os.environ.get("BEEKEEPER_SANDBOX_NAME", "beekeeper-sandbox")
VOLUME = f"{CONTAINER}-docker"
DEFAULT_SSH_PORT = int(os.environ.get("BEEKEEPER_SANDBOX_PORT", "2222"))
BASE = "beekeeper/debian:bookworm"

_BUILD_BASE_DOCKERFILE = f"""\
FROM {BASE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
    cmake g++ make git ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
"""

_HOST_DOCKERFILE = f"""\
FROM {BASE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
    systemd systemd-sysv dbus openssh-server python3 sudo curl ca-certificates \\
    iproute2 procps kmod \\
 && rm -rf /var/lib/apt/lists/* \\
 && systemctl enable ssh \\
 && mkdir -p /root/.ssh && chmod 700 /root/.ssh \\
 && rm -f /etc/ssh/ssh_host_*
# new host keys on first boot, like a fresh machine
RUN printf '[Unit]\\nBefore=ssh.service\\n[Service]\\nType=oneshot\\n'\\
'ExecStart=/usr/bin/ssh-keygen -A\\n[Install]\\nWantedBy=multi-user.target\\n' \\
    > /etc/systemd/system/ssh-keygen.service && systemctl enable ssh-keygen.service
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
"""


def _content_tag(repo: str, dockerfile: str) -> str:
    """Images derived from BASE are tagged by their Dockerfile's hash: cache by content."""
    return f"{repo}:bookworm-{hashlib.sha256(dockerfile.encode()).hexdigest()[:10]}"


BUILD_BASE = _content_tag("beekeeper/debian-build", _BUILD_BASE_DOCKERFILE)
HOST_IMAGE = _content_tag("beekeeper/sandbox-host", _HOST_DOCKERFILE)


@dataclass
class SandboxState:
    """How to reach the sandbox host; written by `beekeeper sandbox up`."""

    container: str
    ssh_port: int
    ssh_key: str
    known_hosts: str
    preload_images: dict[str, str]
    base_images: dict[str, str]


def _log(msg: str) -> None:
    print(f"[sandbox] {msg}", file=sys.stderr, flush=True)


def _client() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
        return client
    except Exception as e:
        raise SandboxError(f"no Docker engine answers ({e}): start dockerd, or run "
                           "scripts/setup.sh, which installs and starts it") from None


def debian_mirror() -> str:
    """The Debian mirror this controller's apt uses (BEEKEEPER_DEBIAN_MIRROR overrides)."""
    if os.environ.get("BEEKEEPER_DEBIAN_MIRROR"):
        return os.environ["BEEKEEPER_DEBIAN_MIRROR"]
    texts = []
    for p in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if p.is_file():
            texts.append(p.read_text(errors="replace"))
    for text in texts:
        for m in re.finditer(r"(?m)^\s*(?:URIs:|deb)\s+(?:\[[^\]]*\]\s+)?(\S+)", text):
            url = m.group(1)
            if "security" not in url and url.startswith("http"):
                return url
    raise SandboxError("no Debian mirror found in /etc/apt: set BEEKEEPER_DEBIAN_MIRROR")


def _has_image(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure_base_image(client: docker.DockerClient) -> None:
    """debian:bookworm where it can be pulled, otherwise debootstrap + import."""
    if _has_image(client, BASE):
        return
    try:
        img = client.images.pull("debian", tag="bookworm")
        img.tag(BASE)
        _log("pulled debian:bookworm")
        return
    except docker.errors.APIError:
        _log("debian:bookworm cannot be pulled here: building it with debootstrap")
    if not shutil.which("debootstrap"):
        raise SandboxError("debootstrap is missing: apt-get install debootstrap")
    with tempfile.TemporaryDirectory(prefix="beekeeper-rootfs-") as rootfs:
        log = CACHE / "debootstrap.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            rc = subprocess.call(["debootstrap", "--variant=minbase", "bookworm", rootfs,
                                  debian_mirror()], stdout=out, stderr=subprocess.STDOUT)
        if rc != 0:
            raise SandboxError(f"debootstrap failed (exit {rc}); see {log}")
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        client.api.import_image_from_stream(tar.stdout, repository=BASE.split(":")[0],
                                            tag="bookworm")
        tar.wait()
    _log(f"imported {BASE}")


def _build(client: docker.DockerClient, tag: str, dockerfile: str) -> None:
    if _has_image(client, tag):
        return
    _log(f"building {tag}")
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True,
                        pull=False)


def _save(client: docker.DockerClient, name: str) -> str:
    """`docker save NAME` to the cache, once per (image id, name): the archive carries
    exactly that name, whatever other tags the image has."""
    img = client.images.get(name)
    tag = hashlib.sha256(name.encode()).hexdigest()[:8]
    out = CACHE / "images" / f"{img.id.split(':')[1][:16]}-{tag}.tar"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with tmp.open("wb") as f:
            for chunk in client.api.get_image(name):
                f.write(chunk)
        tmp.rename(out)
    return str(out)


CONTROLLER_CA = Path("/etc/ssl/certs/ca-certificates.crt")


def _share_trust(c) -> None:
    """The sandbox host trusts what the controller trusts, as a host on the same network
    would: the controller's CA bundle joins the host's, and pip there uses the system
    store (a TLS-inspecting proxy in front of the package registries then works there
    too). Nothing else about the host changes."""
    if not CONTROLLER_CA.is_file():
        return
    data = CONTROLLER_CA.read_bytes()
    pip_conf = b"[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in (("usr/local/share/ca-certificates/beekeeper-controller.crt", data),
                           ("etc/pip.conf", pip_conf)):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(body), 0o644
            tar.addfile(info, io.BytesIO(body))
    c.put_archive("/", buf.getvalue())
    # /tmp is cleaned by systemd-tmpfiles while the host boots: its temp file goes elsewhere
    res = c.exec_run("update-ca-certificates",
                     environment={"TMPDIR": "/var/tmp"})  # noqa: S108 (the sandbox host's)
    if res.exit_code != 0:
        raise SandboxError(f"update-ca-certificates failed in the sandbox: {res.output[-300:]!r}")


def _pin_host_key(c, known: Path, ssh_port: int, deadline_s: float = 30) -> None:
    """Read the host's SSH key through the engine (not over the network) and pin it."""
    start = time.monotonic()
    while True:
        res = c.exec_run("cat /etc/ssh/ssh_host_ed25519_key.pub")
        if res.exit_code == 0 and res.output.strip():
            key = " ".join(res.output.decode().split()[:2])
            known.write_text(f"[127.0.0.1]:{ssh_port} {key}\n")
            return
        if time.monotonic() - start > deadline_s:
            raise SandboxError("the sandbox host made no SSH host key")
        time.sleep(0.5)


def _wait_ssh(state: SandboxState, deadline_s: float = 60) -> None:
    start = time.monotonic()
    while time.monotonic() - start < deadline_s:
        rc = subprocess.call(
            ["ssh", *ssh_options(state), "-o", "ConnectTimeout=3", "true"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        if rc == 0:
            return
        time.sleep(1)
    raise SandboxError(f"sshd in {state.container} did not answer on 127.0.0.1:"
                       f"{state.ssh_port} within {deadline_s:.0f} s")


def ssh_options(state: SandboxState) -> list[str]:
    return ["-i", state.ssh_key, "-p", str(state.ssh_port),
            "-o", f"UserKnownHostsFile={state.known_hosts}",
            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
            "root@127.0.0.1"]


def up(ssh_port: int = DEFAULT_SSH_PORT) -> SandboxState:
    client = _client()
    ensure_base_image(client)
    _build(client, BUILD_BASE, _BUILD_BASE_DOCKERFILE)
    _build(client, HOST_IMAGE, _HOST_DOCKERFILE)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    key = STATE_DIR / "id_ed25519"
    if not key.exists():
        subprocess.check_call(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                               "beekeeper-sandbox", "-f", str(key)])
    known = STATE_DIR / "known_hosts"
    state = SandboxState(
        container=CONTAINER, ssh_port=ssh_port, ssh_key=str(key), known_hosts=str(known),
        preload_images={BASE: _save(client, BASE), BUILD_BASE: _save(client, BUILD_BASE)},
        base_images={"build": BUILD_BASE, "runtime": BASE},
    )
    try:
        c = client.containers.get(CONTAINER)
        if c.status != "running":
            c.start()
    except docker.errors.NotFound:
        _log(f"starting {CONTAINER} (ssh on 127.0.0.1:{ssh_port})")
        c = client.containers.run(
            HOST_IMAGE, name=CONTAINER, hostname="sandbox", detach=True,
            cap_add=["SYS_ADMIN", "NET_ADMIN"],
            security_opt=["seccomp=unconfined", "apparmor=unconfined"],
            cgroupns="host",
            tmpfs={"/run": "", "/run/lock": "", "/tmp": ""},  # noqa: S108 (the sandbox host's own /tmp)
            volumes={"/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw"},
                     VOLUME: {"bind": "/var/lib/docker", "mode": "rw"}},
            ports={"22/tcp": ("127.0.0.1", ssh_port)},
            labels={"io.beekeeper.sandbox": "1"},
        )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = Path(str(key) + ".pub").read_bytes()
        info = tarfile.TarInfo("authorized_keys")
        info.size, info.mode = len(data), 0o600
        tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    c.put_archive("/root/.ssh", buf.getvalue())
    _share_trust(c)
    _pin_host_key(c, known, ssh_port)
    (STATE_DIR / "state.json").write_text(json.dumps(asdict(state), indent=2))
    # for `ssh -F .sandbox/ssh_config sandbox` and pytest-testinfra's --ssh-config
    (STATE_DIR / "ssh_config").write_text(
        f"Host sandbox\n  HostName 127.0.0.1\n  Port {ssh_port}\n  User root\n"
        f"  IdentityFile {key}\n  UserKnownHostsFile {known}\n"
        "  StrictHostKeyChecking yes\n  BatchMode yes\n")
    _wait_ssh(state)
    _log(f"up: ssh -i {key} -p {ssh_port} root@127.0.0.1")
    return state


def write_host_data(data: dict[str, object] | None) -> None:
    """Extra host data for the sandbox inventory (the tests point its source at a git
    server and its models at a Hub endpoint); None removes it."""
    path = STATE_DIR / "host_data.json"
    if data is None:
        path.unlink(missing_ok=True)
    else:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))


def load_host_data() -> dict[str, object]:
    path = STATE_DIR / "host_data.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def load_state() -> SandboxState:
    path = STATE_DIR / "state.json"
    if not path.exists():
        raise SandboxError("no sandbox yet: run `beekeeper sandbox up` first")
    return SandboxState(**json.loads(path.read_text()))


def down(purge: bool = True) -> None:
    client = _client()
    try:
        client.containers.get(CONTAINER).remove(force=True)
        _log(f"removed {CONTAINER}")
    except docker.errors.NotFound:
        pass
    if purge:
        try:
            client.volumes.get(VOLUME).remove(force=True)
        except docker.errors.NotFound:
            pass
    (STATE_DIR / "state.json").unlink(missing_ok=True)
    (STATE_DIR / "known_hosts").unlink(missing_ok=True)
    write_host_data(None)


def status() -> dict[str, object]:
    client = _client()
    try:
        c = client.containers.get(CONTAINER)
    except docker.errors.NotFound:
        return {"container": CONTAINER, "status": "absent"}
    return {"container": CONTAINER, "status": c.status,
            "ports": c.attrs["NetworkSettings"]["Ports"]}
