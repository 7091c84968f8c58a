#!/usr/bin/env python3
"""
Host-side model download with huggingface_hub, pinned to a commit and a sha256: straight to
`<dest>.partial`, resumed from there, checked before the rename (docs/architecture.md).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _say(msg: str) -> None:
    print(f"[beekeeper] {msg}", flush=True)


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _progress(path: str, total: int, start_bytes: int, stop: threading.Event,
              every_s: float) -> None:
    t0 = time.monotonic()
    while not stop.wait(every_s):
        have = os.path.getsize(path) if os.path.exists(path) else 0
        rate = (have - start_bytes) / max(time.monotonic() - t0, 1e-6)
        eta = f"{(total - have) / rate:,.0f} s" if rate > 0 else "unknown"
        _say(f"downloaded {_mib(have)} of {_mib(total)} ({100 * have / max(total, 1):.1f} %), "
             f"{rate / 2**20:,.1f} MiB/s, ETA {eta}")


def _token(path: str | None) -> str | None:
    if not path:
        return None
    with open(path) as f:  # root-only file; never on a command line
        return f.read().strip() or None


def _origin(url: str) -> tuple[str, str, int | None]:
    u = urllib.parse.urlsplit(url)
    return u.scheme, (u.hostname or "").lower(), u.port or {"http": 80, "https": 443}.get(u.scheme)


# where a token from hf_token_file goes: the Hub (or the mirror asked), never the storage
# host it redirects a download to (its CDN, a mirror's S3), as huggingface_hub's own downloads
HUB_ORIGINS = ("https://huggingface.co", "https://hf.co")


def _token_for(location: str, url: str, token: str | None) -> str | bool | None:
    """The token a download from `location` (metadata of `url`) carries: hf_token_file's
    (None: the host's own, as huggingface_hub finds one) on the Hub's origin; False, none at
    all, on another."""
    hub = {_origin(url), *map(_origin, HUB_ORIGINS)}
    return token if _origin(location) in hub else False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--revision", required=True, help="a commit")
    ap.add_argument("--file", required=True)
    ap.add_argument("--dest", required=True)
    ap.add_argument("--sha256", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--token-file")
    args = ap.parse_args(argv)

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # our own lines instead
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    token = _token(args.token_file)
    url = hf_hub_url(args.repo, args.file, revision=args.revision, endpoint=args.endpoint)
    meta = get_hf_file_metadata(url, token=token, endpoint=args.endpoint, retry_on_errors=True)
    hub_sha = (meta.etag or "").strip('"')
    if hub_sha != args.sha256:
        print(f"{args.file} at {args.revision}: the Hub's sha256 is {hub_sha or 'unknown'}, "
              f"expected {args.sha256}; nothing downloaded", file=sys.stderr)
        return 1

    # --size 0: pinned by commit and sha256 without asking the Hub: its metadata says
    size = args.size or int(meta.size or 0)
    with _one_download_at_a_time(args.dest):
        if os.path.isfile(args.dest) and os.path.getsize(args.dest) == size \
                and sha256_file(args.dest) == args.sha256:
            _say(f"{args.dest} sha256 {args.sha256} (put there by another download)")
            return 0
        return _download(args, meta, url, token, size)


@contextlib.contextmanager
def _one_download_at_a_time(dest: str) -> Iterator[None]:
    """Held while a download writes `<dest>.partial`: another download into the model folder
    (another inventory host on this machine serving the model) waits for it, then finds the
    file in place or resumes from where it stopped."""
    fd = os.open(os.path.dirname(os.path.abspath(dest)), os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"waiting for another download into {os.path.dirname(dest) or '.'}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # the lock goes with it


def _download(args: argparse.Namespace, meta: Any, url: str, token: str | None,
              size: int) -> int:
    """`<dest>.partial` written (resumed) from the Hub's storage, checked, renamed to dest."""
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    partial = args.dest + ".partial"
    have = os.path.getsize(partial) if os.path.exists(partial) else 0
    if have > size:
        os.remove(partial)
        have = 0
    _say(f"{'resuming' if have else 'starting'} {args.repo}/{args.file}@{args.revision[:12]}"
         f" at {_mib(have)} of {_mib(size)} -> {partial}")
    stop = threading.Event()
    ticker = threading.Thread(target=_progress, daemon=True,
                              args=(partial, size, have, stop, 10.0))
    ticker.start()
    t0 = time.monotonic()
    try:
        with open(partial, "ab") as f:
            headers = build_hf_headers(token=_token_for(meta.location, url, token))
            http_get(meta.location, f, resume_size=have, headers=headers,
                     expected_size=size or None, displayed_filename=args.file)
    finally:
        stop.set()
    wall = time.monotonic() - t0
    _say(f"downloaded {_mib(size - have)} in {wall:.1f} s; checking sha256")
    got = sha256_file(partial)
    if got != args.sha256:
        os.remove(partial)
        print(f"sha256 mismatch for {args.file}: got {got}, expected {args.sha256}; "
              f"removed {partial}", file=sys.stderr)
        return 1
    os.chmod(partial, 0o644)
    os.replace(partial, args.dest)
    _say(f"{args.dest} sha256 {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
