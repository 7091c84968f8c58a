"""
Source operations: the server's source tree on the host, checked out from git at a full
commit or unpacked from a tarball, each replaced only when what it holds differs.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import operation

from beekeeper.core.paths import LOG_DIR
from beekeeper.facts.source import ID_FILE, SourceTreeId

from .shell import StreamedCommand, q, with_heartbeat

# The image build sends the tree to the engine; git's own folder is not needed there.
DOCKERIGNORE = ".git\n"


@operation()
def git_fetched(url: str, commit: str, dest: str):
    """
    Check out `commit` of the repository at `url` into `dest` (a shallow fetch by full
    commit hash, as GitHub allows), unless `git rev-parse HEAD` there already says it.

    + dest: folder on the host (replaced only once the new checkout is verified)
    """
    if host.get_fact(SourceTreeId, path=dest) == commit:
        host.noop(f"{dest} is at {commit[:12]}")
        return
    tmp = dest + ".tmp"
    script = (
        f"rm -rf {q(tmp)} && git init -q {q(tmp)} && "
        f"git -C {q(tmp)} fetch -q --depth 1 {q(url)} {q(commit)} && "
        f"git -C {q(tmp)} -c advice.detachedHead=false checkout -q FETCH_HEAD && "
        f"test \"$(git -C {q(tmp)} rev-parse HEAD)\" = {q(commit)} && "
        f"printf %s {q(DOCKERIGNORE)} > {q(tmp)}/.dockerignore && "
        f"rm -rf {q(dest)} && mv {q(tmp)} {q(dest)}"
    )
    log = f"{LOG_DIR}/fetch-{commit[:12]}.log"
    yield StreamedCommand(with_heartbeat(f"bash -c {q(script)}", log,
                                        f"fetching {url} at {commit[:12]}"))


# Owned by the user that unpacks it, never by the packer's uid (a Mac's 501 may be a user
# here, who could change what the build then runs as root), with that user's umask, never
# the archive's modes (a member 0666 would be writable by all); without the AppleDouble `._`
# files a Mac's tar adds beside files with extended attributes.
UNPACK_FLAGS = "--no-same-owner --no-same-permissions --exclude='._*'"
UNPACKED_AS = "owned-by-unpacker"


@operation()
def tarball_unpacked(tarball: str, tree_id: str, dest: str):
    """
    Unpack a source tarball (uploaded from the controller) into `dest`, unless `dest`
    already holds the tree with that id.

    + tarball: the .tar.gz on the host (one top folder)
    + tree_id: the tarball's sha256, recorded in `dest` as what it holds
    """
    # what the tree holds and how it was unpacked: a tree an older kit unpacked otherwise
    # (as the packer owned it) is unpacked again
    unpacked_id = f"{tree_id} {UNPACKED_AS}"
    if host.get_fact(SourceTreeId, path=dest) == unpacked_id:
        host.noop(f"{dest} holds {tree_id[:12]}")
        return
    tmp = dest + ".tmp"
    yield (f"rm -rf {q(tmp)} && mkdir -p {q(tmp)} && "
           f"tar -C {q(tmp)} --strip-components=1 {UNPACK_FLAGS} -xzf {q(tarball)} && "
           f"echo {q(unpacked_id)} > {q(tmp)}/{ID_FILE} && "
           f"rm -rf {q(dest)} && mv {q(tmp)} {q(dest)}")
