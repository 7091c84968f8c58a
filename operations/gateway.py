"""
Gateway operations: a checked HAProxy config, the backends' key map built from root-only
files, stale key files pruned, and the wait after a change (rolled back if it fails).
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.facts.files import Sha1File

from beekeeper.core.gateway import PATHS as GP  # the gateway's host files
from beekeeper.core.paths import prev
from beekeeper.facts.lifecycle import FileSizes

from .shell import StreamedCommand, q, via_tmp


@operation()
def config_installed(staged: str, dest: str, expected_sha1: str):
    """
    Put a staged HAProxy config in place once `haproxy -c` accepts it, keeping the one it
    replaces as `<dest>.prev` (gateway_checked puts that back when the new one does not
    serve); no change when the config in place is already the wanted one.
    """
    if host.get_fact(Sha1File, path=dest) == expected_sha1:
        host.noop(f"{dest} is up to date")
        return
    old, (tmp, put) = q(prev(dest)), via_tmp(dest)
    yield StringCommand(f"haproxy -c -q -f {q(staged)} && "
                        f"{{ if [ -f {q(dest)} ]; then cp -p {q(dest)} {old}; "
                        f"else rm -f {old}; fi; }} && "
                        f"cp -p {q(staged)} {tmp} && {put}")


@operation()
def keys_map_built(map_path: str, entries: list[tuple[str, str]], expected_sha1: str):
    """
    Build HAProxy's map `<backend> <key>` (root-only) on the host from root-only key files,
    so no key is on a command line or in pyinfra's output.

    + entries: (backend name, key file on the host) pairs
    """
    if host.get_fact(Sha1File, path=map_path) == expected_sha1:
        host.noop(f"{map_path} is up to date")
        return
    lines = " ".join(f"printf '%s %s\\n' {q(backend)} \"$(cat {q(path)})\";"
                     for backend, path in entries)
    tmp, put = via_tmp(map_path)
    yield StringCommand(f"umask 077 && {{ {lines} true; }} > {tmp} && {put}")


@operation()
def files_pruned(folder: str, keep: list[str]):
    """
    Remove the files of a folder the kit owns that this deploy no longer writes.

    + keep: the files it writes there, by path
    """
    stale = [f for f in sorted(host.get_fact(FileSizes, path=folder).keys())
             if f"{folder}/{f}" not in keep]
    if not stale:
        host.noop(f"nothing stale in {folder}")
        return
    yield StringCommand("rm -f " + " ".join(q(f"{folder}/{f}") for f in stale))


@operation()
def gateway_checked(address: str, port: int, after_change: bool, summary: str):
    """
    After a change, wait until the gateway answers /health. If it does not (a port
    `haproxy -c` cannot know is taken, say), show its log, put the previous config back
    (`<config>.prev`, kept by config_installed) and restart on it, so the gateway that
    worked before the deploy goes on working, and fail.

    + summary: the last line: what the gateway routes
    """
    if not after_change:
        host.noop(f"beekeeper: {summary} (unchanged)")
        return
    script = (
        f"for i in $(seq 40); do "
        f"if ( exec 3<>/dev/tcp/{q(address)}/{int(port)} && "
        "printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 ' ) "
        "2>/dev/null; "
        f"then echo {q('beekeeper: ' + summary)}; exit 0; fi; sleep 0.5; done; "
        f"journalctl -u {q(GP.unit_name)} -n 30 --no-pager; "
        f"echo {q(f'beekeeper: the gateway does not answer on {address}:{port}')} >&2; "
        f"if [ -f {q(prev(GP.config))} ]; then "
        f"cp -p {q(prev(GP.config))} {q(GP.config)} && systemctl restart {q(GP.unit_name)} && "
        f"echo {q('beekeeper: put the previous gateway config back and restarted on it')} >&2; "
        "fi; exit 1")
    yield StreamedCommand(f"bash -c {q(script)}")  # /dev/tcp is bash's
