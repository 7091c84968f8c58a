"""
Model operations: place a model file from the controller, or download it on the host.
"""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.operations import files

from beekeeper.facts.gguf import Sha256File, stamp_command

from .shell import StreamedCommand, q, with_heartbeat


@operation()
def model_placed(dest: str, sha256: str, local_src: str, stamps: str):
    """
    Place a model file from the controller, checked by sha256; skip when the file on
    the host already has the right hash. A mismatch removes the partial file and fails.

    + stamps: the folder of sha256 stamps (facts.gguf.Sha256File): a placed file is stamped
    """
    if _already(dest, sha256, stamps):
        return
    partial = dest + ".partial"
    yield from files.put._inner(src=local_src, dest=partial, mode="0644")
    yield StringCommand(
        f"if [ \"$(sha256sum {q(partial)} | cut -d' ' -f1)\" = {q(sha256)} ]; "
        f"then mv -f {q(partial)} {q(dest)} && {{ {stamp_command(dest, sha256, stamps)}; }}; "
        f"else rm -f {q(partial)}; echo {q(f'model sha256 mismatch for {dest}: removed')} >&2; "
        "exit 1; fi"
    )


def _already(path: str, sha256: str, stamps: str) -> bool:
    """Whether the file at `path` has `sha256` (read from its stamp, or hashed)."""
    if host.get_fact(Sha256File, path=path, stamps=stamps) != sha256:
        return False
    host.noop(f"{path} has sha256 {sha256[:12]}…")
    return True


@operation()
def sha256_stamped(path: str, sha256: str, stamps: str):
    """
    Stamp a model file that has the right sha256 but no stamp of itself as it is (hashed
    in this run: a file placed before stamps existed, or yours, touched since): the next
    run reads the stamp instead of hashing the file. Never a reason to restart the server.
    """
    got = host.get_fact(Sha256File, path=path, stamps=stamps)
    if got != sha256 or getattr(got, "stamped", True):
        host.noop(f"{path}: sha256 stamped" if got == sha256 else f"{path}: not in place")
        return
    hashed_as = getattr(got, "identity", None)  # the file's identity when it was hashed
    yield StringCommand(stamp_command(path, sha256, stamps, identity=hashed_as))


@operation()
def model_in_place(path: str, sha256: str, stamps: str):
    """
    A model file of yours already on the host (host data `model_host_path`): checked, never
    written, moved or removed. A wrong hash fails (preflight refuses it first).

    + sha256: its expected sha256 (host data model_sha256)
    + stamps: the folder of sha256 stamps (the stamp is the kit's; the file stays yours)
    """
    if _already(path, sha256, stamps):
        return
    yield StringCommand(f"echo {q(f'model {path}: sha256 is not {sha256}')} >&2; exit 1")


@operation()
def model_downloaded(dest: str, sha256: str, size_bytes: int, endpoint: str, repo: str,
                     revision: str, filename: str, fetcher: str, python: str,
                     stamps: str, token_file: str | None = None):
    """
    Download a model from the Hugging Face Hub on the host straight to `<dest>.partial`
    (resumed after an interruption), check its sha256, then rename it into place; skip when
    the file on the host already has the right hash.

    + sha256, size_bytes: the pinned file's hash and size (beekeeper.pins)
    + repo, revision, filename: what to download; revision is a commit
    + python: interpreter with huggingface-hub on the host
    + token_file: root-only file with a Hub token on the host, if the repo needs one
    """
    if _already(dest, sha256, stamps):
        return
    args = [python, fetcher, "--endpoint", endpoint, "--repo", repo, "--revision", revision,
            "--file", filename, "--dest", dest, "--sha256", sha256, "--size", str(size_bytes)]
    if token_file:
        args += ["--token-file", token_file]
    log = dest + ".download.log"
    yield StreamedCommand(with_heartbeat(" ".join(q(a) for a in args), log,
                                        f"downloading {filename}"))
    yield StringCommand(stamp_command(dest, sha256, stamps))
