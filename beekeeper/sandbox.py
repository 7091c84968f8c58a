"""
The sandbox hosts: local containers (systemd, sshd, their own Docker engine) the kit reaches
over SSH on 127.0.0.1 as it reaches a GPU box; the first is Debian 12, more run beside it by
name (Debian 12 or 13) on a Docker network of their own (README's `beekeeper sandbox`).
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path

import docker
import docker.errors

from .core.cache import CACHE
from .core.distro import APT_GET
from .core.errors import SandboxError
from .core.paths import KIT_ROOT

STATE_DIR = Path(os.environ.get("BEEKEEPER_SANDBOX_DIR", KIT_ROOT / ".sandbox"))
# BEEKEEPER_SANDBOX_NAME / _PORT let two sets of sandboxes (two work trees) run side by side.
CONTAINER = os.environ.get("BEEKEEPER_SANDBOX_NAME", "beekeeper-sandbox")
DEFAULT_SSH_PORT = int(os.environ.get("BEEKEEPER_SANDBOX_PORT", "2222"))
# the network the sandboxes share (made by `up`, removed with the last of them)
NETWORK = f"{CONTAINER}-net"
RELEASES = ("bookworm", "trixie")


def base_image(release: str) -> str:
    return f"beekeeper/debian:{release}"


# the server image's base images stay Debian 12 on every sandbox host, so a build on one
# host has the same inputs, and the same tag, as on another (`copy_image` shares it)
BASE = base_image("bookworm")


def _apt_install(*lines: str) -> str:
    """A Dockerfile RUN line that installs packages (a line of names per argument) without
    their recommends and keeps no apt lists."""
    names = " \\\n    ".join(lines)
    return (f"RUN apt-get update \\\n && {APT_GET} install -y --no-install-recommends \\\n"
            f"    {names} \\\n && rm -rf /var/lib/apt/lists/*")


_BUILD_BASE_DOCKERFILE = f"FROM {BASE}\n{_apt_install('cmake g++ make git ca-certificates')}\n"

_HOST_DOCKERFILE = "FROM {base}\n" + _apt_install(
    "systemd systemd-sysv dbus openssh-server python3 sudo curl ca-certificates",
    "iproute2 procps kmod") + """ \\
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


POD_START = ["/bin/sh", "-c", "ssh-keygen -A && exec /usr/sbin/sshd -D -e"]  # the image's CMD
# A GPU container's state, on CPU (docs/gpu-containers.md): PID 1 is sshd, no Docker engine,
# the build tools already there and no apt lists (a rented pod's image was never `apt-get
# update`d). The kit runs the server under its supervisord.
_POD_DOCKERFILE = "FROM {base}\n" + _apt_install(
    "openssh-server python3 ca-certificates iproute2 procps curl cmake g++ make git") + """ \\
 && mkdir -p /root/.ssh /run/sshd && chmod 700 /root/.ssh \\
 && rm -f /etc/ssh/ssh_host_*
# new host keys at each start, like a fresh machine; sshd is PID 1
CMD """ + json.dumps(POD_START) + "\n"
INITS = ("systemd", "sshd")  # what a sandbox host runs as PID 1


def _content_tag(repo: str, dockerfile: str, release: str = "bookworm") -> str:
    """Images derived from a base are tagged by their Dockerfile's hash: cache by content."""
    return f"{repo}:{release}-{hashlib.sha256(dockerfile.encode()).hexdigest()[:10]}"


def host_dockerfile(release: str, init: str = "systemd") -> str:
    template = _POD_DOCKERFILE if init == "sshd" else _HOST_DOCKERFILE
    return template.format(base=base_image(release))


def host_image(release: str, init: str = "systemd") -> str:
    repo = "beekeeper/sandbox-pod" if init == "sshd" else "beekeeper/sandbox-host"
    return _content_tag(repo, host_dockerfile(release, init), release)


BUILD_BASE = _content_tag("beekeeper/debian-build", _BUILD_BASE_DOCKERFILE)


@dataclass
class SandboxState:
    """How to reach the sandbox host; written by `beekeeper sandbox up`."""

    container: str
    ssh_port: int
    ssh_key: str
    known_hosts: str
    preload_images: dict[str, str]
    base_images: dict[str, str]
    release: str = "bookworm"
    init: str = "systemd"  # PID 1: systemd, or sshd (a GPU container's state, no Docker)


def _log(msg: str) -> None:
    print(f"[sandbox] {msg}", file=sys.stderr, flush=True)


def _client() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
        return client
    except Exception as e:
        if "Permission denied" in str(e):  # the engine's socket: root's and its group's
            import pwd

            user = pwd.getpwuid(os.getuid()).pw_name
            sock = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
            fix = (f"DOCKER_HOST names a socket root may not open ({sock}): point it at the "
                   "engine's own, or unset it" if os.getuid() == 0 else
                   f"run the command as root (with sudo), or add {user} to the docker group "
                   f"(`sudo usermod -aG docker {user}`: as good as root on this machine) and "
                   "log in again")
            raise SandboxError(f"this user ({user}) may not use the Docker engine at {sock} "
                               f"({e}): {fix}") from None
        raise SandboxError(f"no Docker engine answers ({e}): start dockerd, or run "
                           "scripts/setup.sh demo, which installs and starts it") from None


def debian_mirror() -> str:
    """The Debian mirror this controller's apt uses (BEEKEEPER_DEBIAN_MIRROR overrides)."""
    if os.environ.get("BEEKEEPER_DEBIAN_MIRROR"):
        return os.environ["BEEKEEPER_DEBIAN_MIRROR"]
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    texts = [p.read_text(errors="replace") for p in lists if p.is_file()]
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


def ensure_base_image(client: docker.DockerClient, release: str = "bookworm") -> None:
    """debian:<release> where it can be pulled, otherwise debootstrap + import."""
    base = base_image(release)
    if _has_image(client, base):
        return
    try:
        img = client.images.pull("debian", tag=release)
        img.tag(base)
        _log(f"pulled debian:{release}")
        return
    except docker.errors.APIError:
        _log(f"debian:{release} cannot be pulled here: building it with debootstrap")
    if not shutil.which("debootstrap"):
        raise SandboxError("debootstrap is missing: apt-get install debootstrap")
    with tempfile.TemporaryDirectory(prefix="beekeeper-rootfs-") as rootfs:
        log = CACHE / f"debootstrap-{release}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            rc = subprocess.call(["debootstrap", "--variant=minbase", release, rootfs,
                                  debian_mirror()], stdout=out, stderr=subprocess.STDOUT)
        if rc != 0:
            raise SandboxError(f"debootstrap {release} failed (exit {rc}); see {log}")
        tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        client.api.import_image_from_stream(tar.stdout, repository=base.split(":")[0],
                                            tag=release)
        tar.wait()
    _log(f"imported {base}")


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
    """The sandbox host trusts the controller's CA bundle, as a host on the same network
    would, and pip there uses the system store (a TLS-inspecting proxy then works there too)."""
    if not CONTROLLER_CA.is_file():
        return
    _put(c, "/", {"usr/local/share/ca-certificates/beekeeper-controller.crt":
                  CONTROLLER_CA.read_bytes(),
                  "etc/pip.conf": b"[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"})
    res = c.exec_run(["sh", "-c", "TMPDIR=/var/tmp update-ca-certificates"])
    if res.exit_code != 0:
        raise SandboxError(f"update-ca-certificates failed in the sandbox: {res.output[-300:]!r}")


# The sandbox's own quirk, never the kit's: /proc/sys is read-only in the sandbox container
# and IPv6 off in its network namespace, so Docker 26 (Debian 13) cannot write
# net.ipv6.conf.eth0.disable_ipv6 and starts no container ("failed to disable IPv6 on
# container's interface eth0"; Docker 20.10 does not try). A real host needs nothing.
_DOCKER_DROPIN = b"""# written by `beekeeper sandbox up` (sandbox hosts only)
[Service]
Environment=DOCKER_ALLOW_IPV6_ON_IPV4_INTERFACE=1
"""


def _put(c, folder: str, files: dict[str, bytes], mode: int = 0o644) -> None:
    """Write `files` (path below `folder`: contents) into container `c` through the engine."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(body), mode
            tar.addfile(info, io.BytesIO(body))
    c.put_archive(folder, buf.getvalue())


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


def volume(name: str) -> str:
    """The Docker volume holding sandbox host `name`'s own engine (/var/lib/docker)."""
    return f"{name}-docker"


def workspace_volume(name: str) -> str:
    """A pod host's volume at /workspace: what a rented pod keeps when it restarts."""
    return f"{name}-workspace"


def state_dir(name: str | None = None) -> Path:
    name = name or CONTAINER
    return STATE_DIR if name == CONTAINER else STATE_DIR / name


def _host_data_file(name: str | None) -> Path:  # write_host_data's, read by inventory_host
    return state_dir(name) / "host_data.json"


def _ensure_network(client: docker.DockerClient):
    try:
        return client.networks.get(NETWORK)
    except docker.errors.NotFound:
        _log(f"creating network {NETWORK}")
        return client.networks.create(NETWORK, driver="bridge",
                                      labels={"io.beekeeper.sandbox": "1"})


def _start_host(client: docker.DockerClient, name: str, release: str, ssh_port: int,
                init: str, command: list[str] | None = None):
    """Start (or find) sandbox host `name`. `init` "sshd": a host whose PID 1 is sshd: no
    systemd, no engine, no privileges beyond Docker's defaults (a rented GPU container's
    state), with a volume at /workspace; `command`: in place of its image's (a pod's start
    command that runs the kit's start script first)."""
    _ensure_network(client)
    pod = init == "sshd"
    try:
        c = client.containers.get(name)
        if not pod and NETWORK not in c.attrs["NetworkSettings"]["Networks"]:
            # made before the sandboxes shared a network: connecting a second network to a
            # running host breaks its published SSH port, and its engine's saved bridge may
            # hold the network's addresses (which cuts the host off once its Docker starts),
            # so the host and its Docker volume are made anew
            _log(f"re-creating {name} and its Docker volume on network {NETWORK}")
            c.remove(force=True)
            with suppress(docker.errors.NotFound):
                client.volumes.get(volume(name)).remove(force=True)
            raise docker.errors.NotFound(name)
        if c.status != "running":
            c.start()
    except docker.errors.NotFound:
        _log(f"starting {name} (Debian {release}{', PID 1 sshd' if pod else ''}, ssh on "
             f"127.0.0.1:{ssh_port})")
        labels = {"io.beekeeper.sandbox": "1", "io.beekeeper.sandbox.release": release}
        if pod:
            own: dict[str, object] = dict(
                labels={**labels, "io.beekeeper.sandbox.init": "sshd"}, command=command,
                volumes={workspace_volume(name): {"bind": "/workspace", "mode": "rw"}})
        else:
            own = dict(
                labels=labels, cap_add=["SYS_ADMIN", "NET_ADMIN"],
                security_opt=["seccomp=unconfined", "apparmor=unconfined"], cgroupns="host",
                tmpfs={"/run": "", "/run/lock": "", "/tmp": ""},  # noqa: S108 (the sandbox host's own /tmp)
                volumes={"/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "rw"},
                         volume(name): {"bind": "/var/lib/docker", "mode": "rw"}})
        c = client.containers.create(
            host_image(release, init), name=name, detach=True,
            hostname="sandbox" if name == CONTAINER else name,
            ports={"22/tcp": ("127.0.0.1", ssh_port)}, network=NETWORK, **own)
        c.start()
    return c


def prepare(release: str = "bookworm", client: docker.DockerClient | None = None,
            init: str = "systemd") -> None:
    """The images a sandbox host of `release` starts from, made where missing; a caller may
    call it ahead of `up` (e.g. while another host builds)."""
    if release not in RELEASES:
        raise SandboxError(f"release {release!r} is not one of {', '.join(RELEASES)}")
    client = client or _client()
    ensure_base_image(client)

    def build_base() -> None:  # the server image's build stage, saved for each host to load
        own = _client()
        _build(own, BUILD_BASE, _BUILD_BASE_DOCKERFILE)
        _save(own, BUILD_BASE)

    def host() -> None:
        own = _client()
        if release != "bookworm":
            ensure_base_image(own, release)
        _build(own, host_image(release, init), host_dockerfile(release, init))

    # the two images are each made from a base (mostly apt's downloads and unpacking): side
    # by side, each through a client of its own, while the base is saved
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = [pool.submit(build_base), pool.submit(host)]
        _save(client, BASE)  # what each host preloads (saved once)
        for job in jobs:
            job.result()


def up(ssh_port: int | None = None, name: str | None = None,
       release: str = "bookworm", init: str = "systemd",
       pod_command: list[str] | None = None) -> SandboxState:
    """Start (or find) a sandbox host: the first (no name) on DEFAULT_SSH_PORT, others with a
    port of their own; `init` "sshd" (with `pod_command`): `_start_host`'s."""
    name = name or CONTAINER
    if init not in INITS:
        raise SandboxError(f"init {init!r} is not one of {', '.join(INITS)}")
    if init != "systemd" and name == CONTAINER:
        raise SandboxError(f"the first sandbox host runs systemd: give the {init} host a "
                           "name and a port of its own (--name, --ssh-port)")
    if ssh_port is None:
        if name != CONTAINER:
            raise SandboxError(f"sandbox {name}: give it an SSH port of its own (--ssh-port)")
        ssh_port = DEFAULT_SSH_PORT
    client = _client()
    prepare(release, client, init)
    sdir = state_dir(name)
    sdir.mkdir(parents=True, exist_ok=True)
    key = STATE_DIR / "id_ed25519"  # one controller key for every sandbox host
    if not key.exists():
        subprocess.check_call(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                               "beekeeper-sandbox", "-f", str(key)])
    known = sdir / "known_hosts"
    state = SandboxState(
        container=name, ssh_port=ssh_port, ssh_key=str(key), known_hosts=str(known),
        preload_images={BASE: _save(client, BASE), BUILD_BASE: _save(client, BUILD_BASE)},
        base_images={"build": BUILD_BASE, "runtime": BASE}, release=release, init=init,
    )
    c = _start_host(client, name, release, ssh_port, init,
                    pod_command if init == "sshd" else None)
    _put(c, "/root/.ssh", {"authorized_keys": Path(str(key) + ".pub").read_bytes()}, 0o600)
    _pin_host_key(c, known, ssh_port)
    (sdir / "state.json").write_text(json.dumps(asdict(state), indent=2))
    # for `ssh -F .sandbox/ssh_config sandbox` and pytest-testinfra's --ssh-config
    alias = "sandbox" if name == CONTAINER else name
    (sdir / "ssh_config").write_text(
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {ssh_port}\n  User root\n"
        f"  IdentityFile {key}\n  UserKnownHostsFile {known}\n"
        "  StrictHostKeyChecking yes\n  BatchMode yes\n")
    _wait_ssh(state)  # booted: systemd has set up /tmp and friends
    _share_trust(c)
    if init == "systemd":
        _put(c, "/", {"etc/systemd/system/docker.service.d/beekeeper-sandbox.conf":
                      _DOCKER_DROPIN})
        c.exec_run(["sh", "-c", "systemctl daemon-reload && systemctl try-restart docker.service"])
    _log(f"up: ssh -i {key} -p {ssh_port} root@127.0.0.1")
    return state


def write_host_data(data: dict[str, object] | None, name: str | None = None) -> None:
    """Extra host data for a sandbox's inventory entry (the tests point its source at a git
    server and its models at a Hub endpoint); None removes it."""
    path = _host_data_file(name)
    if data is None:
        path.unlink(missing_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2))


def load_state(name: str | None = None) -> SandboxState:
    path = state_dir(name) / "state.json"
    if not path.exists():
        hint = "" if (name or CONTAINER) == CONTAINER else f" --name {name} --ssh-port PORT"
        raise SandboxError(f"no sandbox {name or CONTAINER} yet: run "
                           f"`beekeeper sandbox up{hint}` first")
    return SandboxState(**json.loads(path.read_text()))


def inventory_host(name: str | None = None, **data: object) -> tuple[str, dict[str, object]]:
    """A sandbox host's pyinfra inventory entry, then what `write_host_data` added, then
    `data`."""
    from .core.cache import CPU_SOURCE_REF, cpu_source_tarball

    st = load_state(name)
    added = _host_data_file(name)
    given = {**(json.loads(added.read_text()) if added.exists() else {}), **data}
    # a host of services names a profile in each entry (one beside them is refused)
    profile = {} if "services" in given else {"profile": "cpu-tiny"}
    return ("sandbox" if st.container == CONTAINER else st.container, {
        "ssh_hostname": "127.0.0.1",
        "ssh_port": st.ssh_port,
        "ssh_user": "root",
        "ssh_key": st.ssh_key,
        "ssh_known_hosts_file": st.known_hosts,
        "ssh_strict_host_key_checking": "yes",  # pinned by `beekeeper sandbox up`
        **profile,
        # the llama.cpp tree vendored in the pinned llama-cpp-python sdist
        "source": {"path": str(cpu_source_tarball()), "ref": CPU_SOURCE_REF},
        # no registry here: base images come from the controller
        "base_images": st.base_images,
        "preload_images": st.preload_images,
        "health_timeout_s": 120,
        **given,
    })


def names() -> list[str]:
    """Every sandbox host this controller runs (of this CONTAINER's set), first one first."""
    client = _client()
    found = [c.name for c in client.containers.list(all=True,
                                                      filters={"label": "io.beekeeper.sandbox"})
             if c.name == CONTAINER or c.name.startswith(f"{CONTAINER}-")]
    return sorted(found, key=lambda n: (n != CONTAINER, n))


def down(purge: bool = True, name: str | None = None) -> None:
    name = name or CONTAINER
    client = _client()
    with suppress(docker.errors.NotFound):
        client.containers.get(name).remove(force=True)
        _log(f"removed {name}")
    if purge:
        for v in (volume(name), workspace_volume(name)):
            with suppress(docker.errors.NotFound):
                client.volumes.get(v).remove(force=True)
    sdir = state_dir(name)
    (sdir / "state.json").unlink(missing_ok=True)
    (sdir / "known_hosts").unlink(missing_ok=True)
    write_host_data(None, name)
    with suppress(docker.errors.NotFound):
        net = client.networks.get(NETWORK)
        net.reload()
        if not net.attrs.get("Containers"):
            net.remove()


def status(name: str | None = None) -> dict[str, object]:
    name = name or CONTAINER
    client = _client()
    try:
        c = client.containers.get(name)
    except docker.errors.NotFound:
        return {"container": name, "status": "absent"}
    return {"container": name, "status": c.status,
            "release": c.labels.get("io.beekeeper.sandbox.release", "bookworm"),
            "ports": c.attrs["NetworkSettings"]["Ports"]}
