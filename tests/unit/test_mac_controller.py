"""A macOS controller deploying to a Linux GPU box: what the kit does on the controller with
the files and paths a Mac has (folders with spaces, such as iCloud Drive's `Mobile Documents`
or `Application Support`; the Mac user's own uid 501 and group `staff`, 20)."""
from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}


def _refusal(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        load_host_config(data)
    return str(e.value)


@pytest.mark.parametrize("where", [("Mobile Documents", "com~apple~CloudDocs", "keys"),
                                   ("Jane Doe", "keys")])
@pytest.mark.parametrize("key", ["api_key_file", "gateway"])
def test_the_chmod_fix_for_a_key_file_open_to_others_runs_as_written(tmp_path, where, key):
    """A key file a text editor saved (mode 644 under macOS's umask 022) in a folder whose
    name holds a space: the refusal's fix, pasted into a shell, makes the key private, and
    the host data then loads."""
    folder = tmp_path.joinpath(*where)
    folder.mkdir(parents=True)
    path = folder / "family.key"
    path.write_text("k" * 64 + "\n")
    path.chmod(0o644)
    data = {**CPU, "api_key_file": str(path)} if key == "api_key_file" else \
        {**CPU, "gateway": {"bind_address": "0.0.0.0", "api_key_file": str(path)}}
    line = _refusal(data)
    assert "is readable by others" in line, line
    fix = line.rsplit("; fix: ", 1)[1]
    assert fix.startswith("chmod 600 "), line
    p = subprocess.run(["sh", "-c", fix], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, f"{fix!r}: {p.stderr.strip()}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    load_host_config(data)


ROOT = Path(__file__).resolve().parents[2]
MAC_UID, MAC_GID = 501, 20  # the first Mac account's uid, and its group `staff`
# the suites' tarball as `beekeeper verify --on-host` builds it from a checkout at argv[1],
# written to argv[2]; its wheels as a controller that fetched them has them (BEEKEEPER_CACHE)
KIT_TARBALL = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
from beekeeper import hostverify
from beekeeper.core.cache import CACHE
assert hostverify.__file__.startswith(sys.argv[1]), hostverify.__file__
wanted = [*hostverify.REQUIREMENTS, *hostverify.HOST_310_EXTRAS]
wheels = CACHE / "wheels" / ("verify-" + hashlib.sha256(" ".join(wanted).encode())
                             .hexdigest()[:12])
wheels.mkdir(parents=True)
(wheels / "httpx-0.28.1-py3-none-any.whl").write_bytes(b"a wheel")
(wheels / ".complete").write_text("")
open(sys.argv[2], "wb").write(hostverify._kit_tarball())
"""


def _owned_by_the_mac_user(path: Path) -> None:
    """`path` and all in it as a Mac checkout has them: its user's (as root here; any other
    user's checkout is that user's already)."""
    import os

    if os.geteuid() != 0:
        return
    for p in [path, *path.rglob("*")]:
        os.lchown(p, MAC_UID, MAC_GID)


def test_the_suites_unpacked_on_the_host_are_roots_not_the_controller_users(tmp_path):
    """`verify --on-host` packs the kit's suites on the controller and root unpacks them on
    the host (`tar -C /opt/beekeeper/kit -xzf -`), then runs them as root. GNU tar as root
    keeps the owner a tarball names: the Mac user's 501:20 (or a Linux controller's 1000, on
    the host often another person's login), who could then rewrite what root runs. The
    tarball names root, as the kit's other tarballs do (cache.pack_source_tree)."""
    import os
    import shutil
    import sys
    import tarfile

    checkout = tmp_path / "Users" / "jane" / "beekeeper"
    checkout.mkdir(parents=True)
    shutil.copytree(ROOT / "beekeeper", checkout / "beekeeper",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "verify", checkout / "beekeeper" / "verify",
                    ignore=shutil.ignore_patterns("__pycache__"))
    _owned_by_the_mac_user(checkout)
    cache = tmp_path / "cache"
    out = tmp_path / "kit.tar.gz"
    p = subprocess.run([sys.executable, "-c", KIT_TARBALL, str(checkout), str(out)],
                       env={**os.environ, "BEEKEEPER_CACHE": str(cache)}, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    with tarfile.open(out) as t:
        members = t.getmembers()
    assert any(m.name == "beekeeper/verify_main.py" for m in members)
    named = sorted({(m.uid, m.gid, m.uname, m.gname) for m in members})
    assert all(m.uid == 0 and m.gid == 0 and m.uname in ("", "root") and
               m.gname in ("", "root") for m in members), named
    if os.geteuid() == 0:  # the host's own command, as root
        kit = tmp_path / "opt-beekeeper-kit"
        kit.mkdir()
        subprocess.run(["tar", "-C", str(kit), "-xzf", "-"], input=out.read_bytes(),
                       check=True)
        owners = {(f.stat().st_uid, f.stat().st_gid) for f in [kit, *kit.rglob("*")]}
        assert owners == {(0, 0)}, owners


# locate_server on a machine with no /proc listener tables (macOS), as a mount namespace with
# an empty /proc gives one here; argv[1]: the URL; prints the Locality as JSON
LOCATE = """
import json, sys
from dataclasses import asdict
from beekeeper.verify.vram import locate_server
print(json.dumps(asdict(locate_server(sys.argv[1]))))
"""


def test_a_tunnel_on_a_controller_without_proc_is_not_taken_for_the_server(tmp_path):
    """quickstart-ssh's tunnel (`ssh -N -L 8083:127.0.0.1:8083 me@gpu-box.lan`), then
    `beekeeper verify --url http://127.0.0.1:8083 ...` on a Mac: the listener is ssh, the
    server and its card are on the box. Linux tells that from /proc; a Mac has no /proc, and
    verify took the port for a server on the Mac: its VRAM verdict then read "no NVIDIA GPU
    (NVMLError_LibraryNotFound); run again once that is seen to", where the way out is
    `--on-host`. Where what listens cannot be told, the server is not taken to be here."""
    import json
    import shutil
    import socket
    import sys

    if not shutil.which("unshare"):
        pytest.skip("no unshare(1) here to run without /proc's listener tables")
    ssh = tmp_path / "ssh"  # the tunnel's listener, by the name `ssh -L` has
    ssh.symlink_to(sys.executable)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("import socket, time\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True)\n"
            "time.sleep(60)\n")
    tunnel = subprocess.Popen([str(ssh), "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert tunnel.stdout is not None and tunnel.stdout.readline().strip() == "up"
        url = f"http://127.0.0.1:{port}"

        def located(*wrap: str) -> dict:
            p = subprocess.run([*wrap, sys.executable, "-c", LOCATE, url], capture_output=True,
                               text=True, timeout=60)
            if wrap and p.returncode != 0 and "unshare" in p.stderr:
                pytest.skip(f"no mount namespace here: {p.stderr.strip()[:200]}")
            assert p.returncode == 0, p.stderr[-2000:]
            return dict(json.loads(p.stdout))

        linux = located()  # this machine, /proc and all: the tunnel is seen
        assert linux["local"] is False and "ssh tunnel" in linux["why"], linux
        mac = located("unshare", "-rm", "sh", "-c",
                      'mount -t tmpfs none /proc && exec "$0" "$@"')
        assert mac["local"] is False, mac
    finally:
        tunnel.kill()
        tunnel.wait()
