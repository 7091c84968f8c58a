"""
A signed, flat apt repository made by the tests, holding stand-in packages under NVIDIA's
names. NVIDIA's repositories cannot be reached here; this is the edge we fake. The kit's
real operations add its key and source, install, pin and hold from it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import textwrap
from pathlib import Path

# /usr/bin/nvidia-ctk stand-in: merges the nvidia runtime into daemon.json, keeping every
# other key, like the real `nvidia-ctk runtime configure --runtime=docker`.
NVIDIA_CTK = """#!/usr/bin/env python3
import json, os, sys
if sys.argv[1:4] != ["runtime", "configure", "--runtime=docker"]:
    sys.exit("stand-in nvidia-ctk: only 'runtime configure --runtime=docker'")
path = "/etc/docker/daemon.json"
cfg = json.load(open(path)) if os.path.exists(path) else {}
cfg.setdefault("runtimes", {})["nvidia"] = {"path": "nvidia-container-runtime", "args": []}
json.dump(cfg, open(path, "w"), indent=4)
print("INFO Wrote updated config to /etc/docker/daemon.json")
"""
RUNTIME = "#!/bin/sh\nexec runc \"$@\"\n"
CDI_PATH_UNIT = "[Unit]\nDescription=stand-in CDI refresh\n[Path]\nPathChanged=/etc/hostname\n" \
    "[Install]\nWantedBy=multi-user.target\n"
CDI_SERVICE_UNIT = "[Unit]\nDescription=stand-in CDI refresh\n[Service]\nType=oneshot\n" \
    "ExecStart=/bin/true\n"

VERSION = "1.18.0-1"
PACKAGES = {
    "nvidia-container-toolkit": {"usr/bin/nvidia-ctk": NVIDIA_CTK,
                                 "usr/bin/nvidia-container-runtime": RUNTIME},
    "nvidia-container-toolkit-base": {
        "lib/systemd/system/nvidia-cdi-refresh.path": CDI_PATH_UNIT,
        "lib/systemd/system/nvidia-cdi-refresh.service": CDI_SERVICE_UNIT},
    "libnvidia-container-tools": {"usr/share/doc/libnvidia-container-tools/README": "stand-in\n"},
    "libnvidia-container1": {"usr/share/doc/libnvidia-container1/README": "stand-in\n"},
}


def _deb(work: Path, name: str, version: str, files: dict[str, str], out: Path) -> Path:
    root = work / f"{name}_{version}"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755 if "/bin/" in f"/{rel}" else 0o644)
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    (root / "DEBIAN" / "control").write_text(textwrap.dedent(f"""\
        Package: {name}
        Version: {version}
        Architecture: all
        Maintainer: beekeeper tests <tests@beekeeper.invalid>
        Description: stand-in for NVIDIA's {name} (tests only)
        """))
    deb = out / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)],
                   check=True, capture_output=True)
    return deb


def _packages_index(out: Path) -> str:
    entries = []
    for deb in sorted(out.glob("*.deb")):
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True,
                                 text=True).stdout.strip()
        data = deb.read_bytes()
        entries.append(f"{control}\nFilename: ./{deb.name}\nSize: {len(data)}\n"
                       f"SHA256: {hashlib.sha256(data).hexdigest()}\n")
    return "\n".join(entries)


# NVIDIA's CUDA repository, as far as the kit's CUDA toolkit step needs it.
CUDA_PACKAGES = {
    "cuda-toolkit-13-2": {"usr/local/cuda-13.2/bin/nvcc": "#!/bin/sh\necho stand-in nvcc\n"},
}
CUDA_VERSION = "13.2.1-1"


def _flat_repo(out: Path, work: Path, packages: dict[str, dict[str, str]], version: str,
               gpg: list[str], env: dict[str, str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, files in packages.items():
        _deb(work, name, version, files, out)
    index = _packages_index(out)
    (out / "Packages").write_text(index)
    sha = hashlib.sha256(index.encode()).hexdigest()
    (out / "Release").write_text(
        "Origin: beekeeper-tests\nLabel: nvidia-stand-in\nSuite: /\nCodename: /\n"
        f"SHA256:\n {sha} {len(index.encode())} Packages\n")
    subprocess.run([*gpg, "--clearsign", "-o", str(out / "InRelease"), str(out / "Release")],
                   env=env, check=True, capture_output=True)
    subprocess.run([*gpg, "-abs", "-o", str(out / "Release.gpg"), str(out / "Release")],
                   env=env, check=True, capture_output=True)


def build(repo: Path, gnupg_home: Path) -> Path:
    """Make the repos under `repo`/toolkit and `repo`/cuda, signed with one new key
    (`repo`/gpgkey armored, `repo`/gpgkey.gpg binary); returns `repo`."""
    env = {**os.environ, "GNUPGHOME": str(gnupg_home)}
    gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    gpg = ["gpg", "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", ""]
    subprocess.run([*gpg, "--quick-gen-key", "beekeeper test repo <tests@beekeeper.invalid>",
                    "ed25519", "sign", "never"], env=env, check=True, capture_output=True)
    _flat_repo(repo / "toolkit", repo / "work", PACKAGES, VERSION, gpg, env)
    _flat_repo(repo / "cuda", repo / "work", CUDA_PACKAGES, CUDA_VERSION, gpg, env)
    key = subprocess.run([*gpg, "--armor", "--export"], env=env, check=True,
                         capture_output=True).stdout
    (repo / "gpgkey").write_bytes(key)
    binary = subprocess.run([*gpg, "--export"], env=env, check=True, capture_output=True).stdout
    (repo / "gpgkey.gpg").write_bytes(binary)
    return repo
