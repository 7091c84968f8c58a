#!/usr/bin/env python3
"""
The one rollback of a model service, run on the host (standard library only): swap its
unit, manifest and compose file with the `.prev` copies the last deploy kept, restart it,
and check that the restored server passes /health and the smoke check.

    python3 rollback.py --unit U --manifest M --compose C --hostcheck H --prev-suffix .prev
                        [--program-conf P --supervisorctl CTL] [--restore]
                        [--api-key-file F] [--timeout S]

Without --restore (`beekeeper rollback`, which sends this script on stdin, so hosts deployed
before it was installed can roll back too) the copies are swapped, so a second rollback goes
back to where the first started; a manifest without an older copy stays. With --restore
(a deploy whose new server failed its smoke check) the failed files are dropped instead.
Exit 0: the restored server is healthy; 1: it is not; 3: there is nothing to roll back to.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import NamedTuple

from beekeeper.core.deployed import DeployedService


def say(line: str) -> None:
    print(f"beekeeper: {line}", file=sys.stderr, flush=True)


def swap(path: str, prev: str) -> None:
    """Exchange `path` and its copy `path + prev` (a missing side moves over as missing)."""
    old, tmp = path + prev, path + ".swap"
    if os.path.exists(path):
        os.replace(path, tmp)
    if os.path.exists(old):
        os.replace(old, path)
    if os.path.exists(tmp):
        os.replace(tmp, old)


def serving(manifest: str) -> tuple[int, str] | None:
    """(port, "<profile> on <address>:<port>") from a manifest, or None."""
    try:
        record = DeployedService.load(manifest)
    except (OSError, ValueError):  # RecordError is a ValueError
        return None
    if record.port is None:
        return None
    addr = record.bind_address
    addr = f"[{addr}]" if ":" in addr else addr  # core/paths.bracketed (stdlib only here)
    return record.port, f"{record.profile} on {addr}:{record.port}"


def reached_at(manifest: str) -> list[str]:
    """hostcheck.py's --host for the manifest's server (DeployedService.hostcheck_host)."""
    try:
        return DeployedService.hostcheck_host(DeployedService.load(manifest).bind_address)
    except (OSError, ValueError):
        return []


class Way(NamedTuple):
    """A file that runs the service (`conf`), its name in messages (`word`), and the commands
    (argv, output left out) that restart the service once it changed back."""

    conf: str
    word: str
    restart: list[tuple[list[str], bool]]


def ways(a: argparse.Namespace) -> list[Way]:
    """The files that can run the service on this host, the supervisord program (where one
    is named) before the systemd unit: the first with a kept copy is the one rolled back."""
    unit = Way(a.unit, "unit", [(["systemctl", "daemon-reload"], False),
                                (["systemctl", "restart", os.path.basename(a.unit)], False)])
    if not a.program_conf:
        return [unit]
    # reread/update restarts the program whose file changed back
    program = os.path.basename(a.program_conf).removesuffix(".conf")
    return [Way(a.program_conf, "program", [([a.supervisorctl, "reread"], True),
                                            ([a.supervisorctl, "update", program], False),
                                            ([a.supervisorctl, "restart", program], True)]),
            unit]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--unit", required=True)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--compose", required=True)
    ap.add_argument("--program-conf", help="runtime supervisor: the program file")
    ap.add_argument("--supervisorctl", help="with --program-conf: the kit's supervisorctl")
    ap.add_argument("--prev-suffix", required=True,
                    help="what the deploy appends to a file's name for its kept copy")
    ap.add_argument("--hostcheck", required=True)
    ap.add_argument("--restore", action="store_true")
    ap.add_argument("--api-key-file")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args(argv)
    if a.program_conf and not a.supervisorctl:
        ap.error("--program-conf needs --supervisorctl")
    prev = a.prev_suffix
    way = next((w for w in ways(a) if os.path.exists(w.conf + prev)), None)
    if way is None:
        kept = ("no earlier deploy was kept on this host" if os.path.exists(a.manifest) else
                "nothing of this service is deployed on this host")
        say(f"no server is serving (no previous unit to restore: {kept})" if a.restore
            else f"nothing to roll back on this host: {kept} (a rollback returns to the "
                 "deploy before the last one)")
        return 3
    say(f"rolling back to the previous {way.word}")
    for path in (a.unit, a.manifest, a.compose, *([a.program_conf] if a.program_conf else [])):
        if path == a.manifest and not a.restore and not os.path.exists(path + prev):
            continue  # a swap keeps the manifest it has when no older one was kept
        swap(path, prev)
        if a.restore and os.path.exists(path + prev):
            os.remove(path + prev)  # the failed deploy's copy
    for line, quiet in way.restart:
        subprocess.call(line, stdout=subprocess.DEVNULL if quiet else None)
    now = serving(a.manifest)
    check = [sys.executable, a.hostcheck, "--timeout", str(a.timeout)]
    if a.api_key_file and os.path.exists(a.api_key_file):
        check += ["--api-key-file", a.api_key_file]
    if now and subprocess.call([*check, "--port", str(now[0]), *reached_at(a.manifest)],
                               stdout=subprocess.DEVNULL) == 0:
        say("rolled back; the previous server is healthy")
        say(f"serving {now[1]} (previous unit restored)")
        return 0
    say("no server is serving: the previous unit was restored but did not pass /health")
    return 1


if __name__ == "__main__":
    sys.exit(main())
