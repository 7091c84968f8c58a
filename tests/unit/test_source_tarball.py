"""
A source tarball packed on the controller (`source.path`) as a Mac's `tar czf` packs it:
each member carries the Mac user's ids (uid 501, gid 20) and, beside each file with extended
attributes, an AppleDouble `._NAME` member. Unpacked on the host by the kit's own command
(the deploy's "Unpack source tree" operation, run by bash with this machine's GNU tar), the
tree must belong to the user that unpacked it, never to whoever holds uid 501 on the host
(who could change the sources the build then runs as root), with the unpacker's umask, and
hold no `._` files. GNU tar keeps an archive's owner and modes only when root runs it (as the
deploy does): run as another user, the owner and mode checks pass without the fix.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

from beekeeper.core.paths import build_folders

from .harness import CPU, CPU_HOST, facts, run_deploy


def _mac_tarball(path: Path) -> None:
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, text in (("tree/", None), ("tree/CMakeLists.txt", b"project(x C)\n"),
                           ("tree/._CMakeLists.txt", b"\x00\x05\x16\x07AppleDouble"),
                           ("tree/src/", None), ("tree/src/main.c", b"int main(){}\n"),
                           ("tree/open.h", b"/* 0666 in the archive */\n")):
            info = tarfile.TarInfo(name.rstrip("/"))
            info.uid, info.gid, info.uname, info.gname = 501, 20, "alice", "staff"
            if text is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(text), 0o666 if name.endswith("open.h") else 0o644
                tar.addfile(info, io.BytesIO(text))


def test_a_macs_tarball_unpacks_owned_by_the_unpacker_without_appledouble_files(tmp_path):
    tarball = tmp_path / "beellama-src.tar.gz"
    _mac_tarball(tarball)
    state = tmp_path / "state"
    ops = run_deploy({**CPU, "mode": "native", "state_dir": str(state),
                      "source": {"path": str(tarball), "ref": "mac0"}}, facts(**CPU_HOST))
    (unpack,) = [cmds for name, cmds in ops if name.startswith("Unpack source tree")]
    sources = Path(build_folders(str(state)).sources)
    remote = sources / tarball.name  # where "Upload source tree" puts it
    remote.parent.mkdir(parents=True)
    shutil.copy(tarball, remote)
    run = subprocess.run(["bash", "-c", " && ".join(unpack)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    tree = next(p for p in sources.iterdir() if p.is_dir())
    found = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    assert "CMakeLists.txt" in found and "src/main.c" in found, found
    assert not [p for p in found if Path(p).name.startswith("._")], found
    me = (os.getuid(), os.getgid())
    assert {(p.stat().st_uid, p.stat().st_gid) for p in tree.rglob("*")} == {me}
    # the unpacker's umask (022 here, as a root shell's), not the archive's 0666
    assert not (tree / "open.h").stat().st_mode & 0o002


def test_a_tree_an_older_kit_unpacked_from_the_same_tarball_is_unpacked_again(tmp_path):
    """A tree unpacked before the owner and modes were the unpacker's holds the tarball's
    sha256 alone as its id: the deploy unpacks it again rather than building it as it is."""
    import hashlib

    tarball = tmp_path / "beellama-src.tar.gz"
    _mac_tarball(tarball)
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
    data = {**CPU, "mode": "native", "state_dir": str(tmp_path / "state"),
            "source": {"path": str(tarball), "ref": "mac0"}}

    def unpack(tree_id):
        ops = run_deploy(data, facts(**CPU_HOST, SourceTreeId=lambda path=None, **_: tree_id))
        return next(cmds for name, cmds in ops if name.startswith("Unpack source tree"))
    assert unpack(sha), "an older kit's tree built as it was unpacked"
    assert unpack(f"{sha} owned-by-unpacker") == []  # this kit's: nothing to do
