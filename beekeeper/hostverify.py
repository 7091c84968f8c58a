"""
Run the verify suites on the host itself (where NVML sees the GPU and the server listens on
loopback), then bring the report back to the controller under reports/<host>/<UTC time>/.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import shlex
import subprocess
import tarfile
from pathlib import Path

from .core import cache
from .core.cache import CACHE, fetching
from .core.distro import APT_GET, apt_free
from .core.errors import VerifyError
from .core.paths import REPORTS_DIR, VERIFY_KIT as KIT, VERIFY_VENV as VENV
from .core.remote import ssh_as_root
from .verify_main import Keys, host_command

REQUIREMENTS = ["httpx>=0.28", "nvidia-ml-py>=12.535"]  # verify reads SSE itself
# what those need on the oldest host Python (3.10) that `pip download` does not fetch: it
# reads dependency markers for the controller's own Python, not for --python-version
# (anyio wants exceptiongroup below 3.11)
HOST_310_EXTRAS = ["exceptiongroup>=1.0.2"]
PYTHON = f"{VENV}/bin/python"  # what runs the suites on the host


def _wheels() -> Path:
    """Pure-Python wheels of the suites' dependencies, fetched once on the controller, so
    the host needs no package index (air-gapped boxes, TLS-intercepting proxies)."""
    wanted = [*REQUIREMENTS, *HOST_310_EXTRAS]
    # named by what it holds, so a changed list is fetched anew, not read from an old folder
    out = CACHE / "wheels" / ("verify-" + hashlib.sha256(" ".join(wanted).encode())
                              .hexdigest()[:12])
    with fetching(out.name):  # one process fetches, another (a second run) waits for it
        if not (out / ".complete").exists():  # cache.pip_download: one the tests stop
            cache.pip_download(["--only-binary=:all:", "--python-version", "3.10", *wanted],
                                out, CACHE / "pypi.log")
            (out / ".complete").write_text("")
    return out


def _kit_tarball() -> bytes:
    """The parts of the kit the suites import (the core, the verify package, the entry
    point) and their wheels: stdlib and the wheels only, no pyinfra on the host."""
    import beekeeper.verify as verify_pkg

    from . import core

    def skip(i: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in i.name:
            return None
        # root's: the host's tar, run as root, keeps the owner a tarball names (the
        # controller user's, a Mac's 501:20), who could then rewrite what root runs
        i.uid = i.gid = 0
        i.uname = i.gname = ""
        return i

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        here = Path(__file__).parent
        for f in ("__init__.py", "verify_main.py"):
            tar.add(str(here / f), arcname=f"beekeeper/{f}", filter=skip)
        tar.add(str(Path(core.__file__).parent), arcname="beekeeper/core", filter=skip)
        tar.add(str(Path(verify_pkg.__file__).parent), arcname="beekeeper/verify", filter=skip)
        tar.add(str(_wheels()), arcname="wheels", filter=skip)
    return buf.getvalue()


def _ssh(ssh: list[str], script: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(ssh_as_root(ssh, script), input=stdin, capture_output=True)


def run_on_host(ssh: list[str], host_label: str, args: argparse.Namespace, port: int,
                out_root: Path, keys: Keys) -> tuple[int, Path]:
    """Install the suites on the host, run them there (`verify_main.host_command`), copy the
    report back; the exit status is verify's on the host."""
    print(f"[verify] installing the suites on {host_label} ({KIT}, {VENV})", flush=True)
    p = _ssh(ssh, f"rm -rf {KIT} && mkdir -p {KIT} && tar -C {KIT} -xzf -", _kit_tarball())
    if p.returncode != 0:
        raise VerifyError(f"could not copy the suites to {host_label}: {p.stderr.decode()}")
    reqs = " ".join(shlex.quote(r) for r in REQUIREMENTS)
    p = _ssh(ssh, "python3 -c 'import ensurepip' 2>/dev/null || { "
                  + apt_free("apt-get update -qq") + " && "
                  f"{APT_GET} install -y -qq python3-venv; }} && "
                  f"{{ [ -x {PYTHON} ] || python3 -m venv {VENV}; }} && "
                  f"{VENV}/bin/pip install -q --no-index --find-links {KIT}/wheels {reqs}")
    if p.returncode != 0:
        raise VerifyError(f"could not set up {VENV} on {host_label} (python3-venv and network "
                          f"needed): {p.stderr.decode()[-800:]}")
    from beekeeper.verify.report import folder_stamp, render_from_json

    stamp = folder_stamp()
    remote_out = f"{REPORTS_DIR}/{stamp}"
    cmd = f"cd {KIT} && " + host_command(args, PYTHON, port, remote_out, host_label, keys)
    print(f"[verify] running on {host_label}: {cmd}", flush=True)
    run = subprocess.run(ssh_as_root(ssh, cmd), input=keys.to_stdin())
    local = out_root / host_label / stamp
    local.mkdir(parents=True, exist_ok=True)
    tar = _ssh(ssh, f"d=$(ls -d {remote_out}/{shlex.quote(host_label)}/*/ | head -n1) && "
                    'tar -C "$d" -cf - .')
    if tar.returncode != 0:
        raise VerifyError(f"no report came back from {host_label}: {tar.stderr.decode()}")
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
        t.extractall(local, filter="data")
    reports = sorted(local.rglob("report.md"))
    for r in reports:  # the host may lack matplotlib: draw the charts here
        render_from_json(r.parent)
    print(f"[verify] report: {reports[-1] if reports else local}", flush=True)
    return run.returncode, local
