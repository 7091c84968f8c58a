"""
Signed, flat apt repositories made by the tests, holding stand-in packages under NVIDIA's
names (NVIDIA's repositories cannot be reached here; this is the edge we fake) and, for a
host that had a driver before the kit, under Debian's (its older driver, kernel headers for
the running kernel). The kit's real operations add the key and source, install, pin, hold
and purge from them, with the host's real apt and dpkg.
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


def _deb(work: Path, name: str, version: str, files: dict[str, str], out: Path,
         depends: str = "") -> Path:
    root = work / f"{name}_{version}"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755 if "/bin/" in f"/{rel}" else 0o644)
    (root / "DEBIAN").mkdir(parents=True, exist_ok=True)
    control = textwrap.dedent(f"""\
        Package: {name}
        Version: {version}
        Architecture: all
        Maintainer: beekeeper tests <tests@beekeeper.invalid>
        """) + (f"Depends: {depends}\n" if depends else "") + \
        f"Description: stand-in for {name} (tests only)\n"
    (root / "DEBIAN" / "control").write_text(control)
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

# (name, version, files, Depends)
Spec = tuple[str, str, dict[str, str], str]


def smi(version: str, cuda: str) -> str:
    """A stand-in nvidia-smi, shipped by the stand-in driver packages: an RTX 4090 on the
    driver `version`, answering the two queries the kit's GPU fact makes."""
    return (f"#!/bin/sh\n# stand-in nvidia-smi of driver {version} (tests only)\n"
            f"case \"$*\" in\n  *--query-gpu*) echo \"NVIDIA GeForce RTX 4090, {version}, 8.9, "
            f"24564\" ;;\n  *) echo \"| NVIDIA-SMI {version}    Driver Version: {version}    "
            f"CUDA Version: {cuda} |\" ;;\nesac\n")


def driver_specs(version: str, cuda: str) -> list[Spec]:
    """One NVIDIA driver release as Debian and NVIDIA's Debian repositories name its parts:
    the kernel module's DKMS source, libcuda, nvidia-smi, locked to each other by version."""
    branch = version.split(".")[0]
    deb = f"{version}-1"
    return [
        ("nvidia-kernel-open-dkms", deb, {f"usr/src/nvidia-{version}/README": "stand-in\n"}, ""),
        ("libcuda1", deb, {f"usr/lib/x86_64-linux-gnu/libcuda.so.{version}": "stand-in\n"}, ""),
        ("nvidia-smi", deb, {"usr/bin/nvidia-smi": smi(version, cuda)}, ""),
        ("nvidia-open", deb, {f"usr/share/doc/nvidia-open/branch-{branch}": "stand-in\n"},
         f"nvidia-kernel-open-dkms (= {deb}), libcuda1 (= {deb}), nvidia-smi (= {deb})"),
    ]


def pinning_spec(branch: int, version: str) -> Spec:
    """nvidia-driver-pinning-<branch>: an apt preferences file that locks the driver's
    packages to the branch (NVIDIA's version-locking packages for Debian and Ubuntu)."""
    pins = ("Package: nvidia-open nvidia-kernel-open-dkms libcuda1 nvidia-smi\n"
            f"Pin: version {branch}.*\nPin-Priority: 1000\n")
    return (f"nvidia-driver-pinning-{branch}", f"{version}-1",
            {f"etc/apt/preferences.d/nvidia-driver-pinning-{branch}": pins}, "")


# What a Debian 12 user has before the kit: Debian's own driver (non-free, branch 535),
# the package a CUDA toolkit from Debian brings on top of it, and the kernel headers.
DISTRO_DRIVER = "535.247.01"
DISTRO_DEB = f"{DISTRO_DRIVER}-1~deb12u1"
# ... or NVIDIA's own, an older branch locked by its pinning package
NVIDIA_OLDER = "570.195.03"


def distro_specs(kernel_release: str, headers_meta: str | None) -> list[Spec]:
    specs: list[Spec] = [
        ("nvidia-kernel-dkms", DISTRO_DEB, {f"usr/src/nvidia-current-{DISTRO_DRIVER}/README":
                                            "stand-in\n"}, ""),
        ("libcuda1", DISTRO_DEB, {f"usr/lib/x86_64-linux-gnu/libcuda.so.{DISTRO_DRIVER}":
                                  "stand-in\n"}, ""),
        ("nvidia-smi", DISTRO_DEB, {"usr/bin/nvidia-smi": smi(DISTRO_DRIVER, "12.2")}, ""),
        ("nvidia-driver", DISTRO_DEB, {"usr/share/doc/nvidia-driver/stand-in": "stand-in\n"},
         f"nvidia-kernel-dkms (= {DISTRO_DEB}), libcuda1 (= {DISTRO_DEB}), "
         f"nvidia-smi (= {DISTRO_DEB})"),
        ("nvidia-cuda-dev", "12.4.131~12.4.1-1", {"usr/share/doc/nvidia-cuda-dev/stand-in":
                                                  "stand-in\n"}, "libcuda1"),
        (f"linux-headers-{kernel_release}", "1.0",
         {f"usr/src/linux-headers-{kernel_release}/Makefile": "# stand-in\n"}, ""),
    ]
    if headers_meta:  # above the real archive's version, so apt picks the stand-in
        specs.append((headers_meta, "99.0", {}, f"linux-headers-{kernel_release}"))
    return specs


def _flat_repo(out: Path, work: Path, specs: list[Spec], gpg: list[str],
               env: dict[str, str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, version, files, depends in specs:
        _deb(work, name, version, files, out, depends)
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


def build(repo: Path, gnupg_home: Path, kernel_release: str = "",
          headers_meta: str | None = None, branch: int = 595) -> Path:
    """Make the repos under `repo`/toolkit, `repo`/cuda (NVIDIA's CUDA repository: the
    toolkit, the driver of `branch` and of a newer branch, the branch's pinning package)
    and `repo`/distro (the distribution's archive: its older driver, the kernel headers of
    `kernel_release`), signed with one new key (`repo`/gpgkey armored, `repo`/gpgkey.gpg
    binary); returns `repo`."""
    env = {**os.environ, "GNUPGHOME": str(gnupg_home)}
    gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    gpg = ["gpg", "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", ""]
    subprocess.run([*gpg, "--quick-gen-key", "beekeeper test repo <tests@beekeeper.invalid>",
                    "ed25519", "sign", "never"], env=env, check=True, capture_output=True)
    work = repo / "work"
    _flat_repo(repo / "toolkit", work, [(n, VERSION, f, "") for n, f in PACKAGES.items()],
               gpg, env)
    pinned = f"{branch}.21.01"
    cuda = [(n, CUDA_VERSION, f, "") for n, f in CUDA_PACKAGES.items()]
    cuda += driver_specs(pinned, "13.2") + driver_specs(f"{branch + 5}.10.02", "13.3")
    cuda += driver_specs(NVIDIA_OLDER, "12.8")
    cuda += [pinning_spec(branch, pinned), pinning_spec(int(NVIDIA_OLDER.split(".")[0]),
                                                        NVIDIA_OLDER)]
    _flat_repo(repo / "cuda", work, cuda, gpg, env)
    if kernel_release:
        _flat_repo(repo / "distro", work, distro_specs(kernel_release, headers_meta), gpg, env)
    key = subprocess.run([*gpg, "--armor", "--export"], env=env, check=True,
                         capture_output=True).stdout
    (repo / "gpgkey").write_bytes(key)
    binary = subprocess.run([*gpg, "--export"], env=env, check=True, capture_output=True).stdout
    (repo / "gpgkey.gpg").write_bytes(binary)
    return repo
