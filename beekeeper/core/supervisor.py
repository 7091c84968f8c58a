"""
Runtime "supervisor" (PID 1 not systemd: GPU containers, rented pods): the controller's
`supervisor` package, packed here and unpacked on the host (no pip there), and the launchers
that run it with the host's python3 and the kit's config.
"""

from __future__ import annotations

import hashlib
import io
import shlex
import tarfile
from importlib import metadata
from pathlib import Path

from .paths import KIT_ROOT, SUPERVISOR_CONF, SUPERVISORCTL

q = shlex.quote

PACKAGE = "supervisor"


def shutdown_line() -> str:
    """Stop supervisord (its programs first) and wait until its socket no longer answers."""
    ctl = q(SUPERVISORCTL)
    return (f"{ctl} shutdown >/dev/null 2>&1; for i in $(seq 100); do {ctl} pid >/dev/null "
            "2>&1 || break; sleep 0.2; done")


def launcher(tool: str, python: str, lib: str) -> str:
    """The /usr/local/sbin launcher of supervisord or supervisorctl: the host's python3
    with the unpacked package, the kit's config."""
    return ("#!/bin/sh\n"
            "# Written by beekeeper (runtime supervisor): do not edit.\n"
            f"PYTHONPATH={q(lib)} exec {q(python)} -m supervisor.{tool} -c "
            f"{q(SUPERVISOR_CONF)} \"$@\"\n")


def package_files() -> tuple[str, list[tuple[str, Path]]]:
    """The installed supervisor package of this controller: its version and its files
    (the `supervisor/` tree only, by their names inside it)."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise RuntimeError("the `supervisor` package is not installed on this controller: "
                           "run scripts/setup.sh (it is one of the kit's dependencies)") from None
    found: list[tuple[str, Path]] = []
    for f in dist.files or []:
        if f.parts and f.parts[0] == "supervisor" and "__pycache__" not in f.parts:
            found.append((str(f), Path(str(dist.locate_file(f)))))
    if not found:
        raise RuntimeError("the installed `supervisor` package lists no files")
    return dist.version, sorted(found)


def package_tarball() -> Path:
    """The supervisor package as a gzip tarball under .cache/ (same files, same bytes: a
    second deploy uploads nothing)."""
    version, found = package_files()
    out = KIT_ROOT / ".cache" / f"supervisor-{version}.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in found:
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    digest = hashlib.sha256(raw).hexdigest()
    stamp = out.with_suffix(".sha256")
    if not out.exists() or not stamp.exists() or stamp.read_text().strip() != digest:
        import gzip

        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with open(tmp, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0,
                                                   filename="") as gz:
            gz.write(raw)
        tmp.replace(out)
        stamp.write_text(digest + "\n")
    return out
