"""A model file's sha256 remembered between runs (facts/gguf.py Sha256File and its stamps):
the fact's and the stamp's shell lines run here, in sh, on real files; the operations'
choices on canned facts. A second deploy of a 9.5 GB GGUF read its hash again every run."""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
from pathlib import Path

from beekeeper.facts.gguf import Sha256, Sha256File, parse_sha256, stamp_command
from beekeeper.operations import model as model_ops

from .harness import queued

SHA = "ab" * 32


def _hashing_log(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose sha256sum logs the files it is given (a path's own name is hashed
    from stdin, which logs nothing), then runs the real one."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "hashed"
    real = subprocess.run(["sh", "-c", "command -v sha256sum"], capture_output=True,
                          text=True).stdout.strip()
    (bin_ / "sha256sum").write_text(
        f"#!/bin/sh\n[ $# -gt 0 ] && echo \"$*\" >> {log}\nexec {real} \"$@\"\n")
    (bin_ / "sha256sum").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}, log


def _fact(path: Path, stamps: Path, env: dict[str, str]) -> Sha256 | None:
    cmd = Sha256File().command(path=str(path), stamps=str(stamps))
    p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env=env,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return parse_sha256(p.stdout.splitlines())


def _stamp(path: Path, sha: str, stamps: Path, env: dict[str, str]) -> None:
    p = subprocess.run(["sh", "-c", stamp_command(str(path), sha, str(stamps))],
                       capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0, p.stderr


def _hashes(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_stamped_file_is_not_hashed_again_and_any_rewrite_is(tmp_path):
    env, log = _hashing_log(tmp_path)
    model, stamps = tmp_path / "m q'uote.gguf", tmp_path / "state" / "sha256"
    assert _fact(model, stamps, env) is None  # no file
    model.write_bytes(b"GGUF" + b"\x01" * 4096)
    want = hashlib.sha256(model.read_bytes()).hexdigest()
    got = _fact(model, stamps, env)
    assert got == want and not got.stamped and _hashes(log) == 1
    _stamp(model, want, stamps, env)
    assert oct(stamps.stat().st_mode & 0o777) == "0o700"
    got = _fact(model, stamps, env)
    assert got == want and got.stamped and _hashes(log) == 1  # read, not hashed
    # the same size, other bytes, its old mtime put back: ctime says it was rewritten
    old = model.stat()
    model.write_bytes(b"GGUF" + b"\x02" * 4096)
    os.utime(model, ns=(old.st_atime_ns, old.st_mtime_ns))
    got = _fact(model, stamps, env)
    assert got == hashlib.sha256(model.read_bytes()).hexdigest() != want
    assert not got.stamped and _hashes(log) == 2


def test_a_symlinks_target_is_what_is_stamped(tmp_path):
    env, log = _hashing_log(tmp_path)
    stamps = tmp_path / "stamps"
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"GGUF a")
    b.write_bytes(b"GGUF b")
    link = tmp_path / "model.gguf"
    link.symlink_to(a)
    _stamp(link, hashlib.sha256(b"GGUF a").hexdigest(), stamps, env)
    assert _fact(link, stamps, env).stamped
    link.unlink()
    link.symlink_to(b)  # the link now names another file: hashed, and that file's hash
    got = _fact(link, stamps, env)
    assert got == hashlib.sha256(b"GGUF b").hexdigest() and not got.stamped


def test_only_a_hash_of_64_hex_digits_is_taken():
    assert parse_sha256([]) is None
    assert parse_sha256(["stamped"]) is None
    assert parse_sha256(["stamped " + "g" * 64]) is None
    assert parse_sha256(["hashed 1:2:3:4 " + "ab" * 31]) is None
    assert parse_sha256(["ab" * 32]) is None  # neither read from a stamp nor hashed here
    assert parse_sha256(["stamped " + "ab" * 32]).stamped
    got = parse_sha256(["hashed 1:2:3:4 " + "ab" * 32])
    assert got == "ab" * 32 and not got.stamped and got.identity == "1:2:3:4"


def test_a_stamp_is_written_only_for_the_file_that_was_hashed(tmp_path):
    """The file changed between the hash and the stamp: no stamp (the next run hashes)."""
    env, _ = _hashing_log(tmp_path)
    model, stamps = tmp_path / "m.gguf", tmp_path / "stamps"
    model.write_bytes(b"GGUF one")
    hashed = _fact(model, stamps, env)
    model.write_bytes(b"GGUF two")  # rewritten after its hash was taken
    p = subprocess.run(["sh", "-c", stamp_command(str(model), hashed, str(stamps),
                                                  identity=hashed.identity)],
                       capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0 and "not remembered" in p.stderr
    assert not _fact(model, stamps, env).stamped


def test_stamping_is_best_effort_and_two_writers_never_fail(tmp_path):
    """A stamp only saves a hash: a folder that cannot be written warns and exits 0, and
    two hosts of one machine stamping the same file at once both succeed."""
    env, _ = _hashing_log(tmp_path)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    p = subprocess.run(["sh", "-c", stamp_command(str(model), SHA, str(blocked))],
                       capture_output=True, text=True, env=env, timeout=30)
    assert p.returncode == 0 and "not remembered" in p.stderr
    stamps = tmp_path / "stamps"
    one = shlex.quote(stamp_command(str(model), SHA, str(stamps)))
    both = f"sh -c {one} & sh -c {one}"  # two hosts' commands: two shells
    for _ in range(40):
        p = subprocess.run(["sh", "-c", f"{both} & wait"], capture_output=True, text=True,
                           env=env, timeout=30)
        assert "not remembered" not in p.stderr, p.stderr
    assert _fact(model, stamps, env).stamped


def _stamping(got: object) -> list[str]:
    ops = queued(lambda: model_ops.sha256_stamped(name="Remember", path="/m/x.gguf",
                                                  sha256=SHA, stamps="/st"),
                 {"Sha256File": lambda path, stamps: got})
    return [c for _, cmds in ops for c in cmds]


def test_a_hash_that_matched_without_its_stamp_gets_one_and_nothing_else_does():
    assert _stamping(Sha256(SHA, stamped=True)) == []
    assert _stamping(None) == []  # not there (the placing operation failed or stamps)
    assert _stamping(Sha256("cd" * 32)) == []  # another file: never stamped as this one
    cmds = _stamping(Sha256(SHA, identity="1:2:3:4"))
    assert len(cmds) == 1 and SHA in cmds[0] and "/st" in cmds[0] and "1:2:3:4" in cmds[0]


def test_a_placed_file_is_stamped_after_its_check_and_a_placed_one_is_left_alone(tmp_path):
    src = tmp_path / "x.gguf"
    src.write_bytes(b"GGUF")

    def placing(got: object) -> list[str]:
        ops = queued(lambda: model_ops.model_placed(name="Place", dest="/m/x.gguf",
                                                    sha256=SHA, local_src=str(src),
                                                    stamps="/st"),
                     {"Sha256File": lambda path, stamps: got})
        return [c for _, cmds in ops for c in cmds]

    assert placing(Sha256(SHA, stamped=True)) == []
    assert placing(Sha256(SHA)) == []  # right, unstamped: left to sha256_stamped
    check = placing(None)[-1]
    moved, stamped = check.index("mv -f"), check.index("/st")
    assert moved < stamped < check.index("else rm -f")  # stamped only once checked
