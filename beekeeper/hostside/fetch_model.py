#!/usr/bin/env python3
"""
Host-side model download with huggingface-hub: resumable, pinned to a revision, verified
by sha256 (given, or the Hub's LFS sha256 for that revision). A mismatch removes the file.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--revision", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--dest", required=True)
    ap.add_argument("--sha256")
    ap.add_argument("--token-file")
    args = ap.parse_args(argv)
    token = None
    if args.token_file:
        with open(args.token_file) as f:  # root-only file; never on a command line
            token = f.read().strip()
    expected = args.sha256
    if not expected:
        meta = get_hf_file_metadata(hf_hub_url(args.repo, args.file, revision=args.revision),
                                    token=token)
        expected = (meta.etag or "").strip('"')
        print(f"[beekeeper] sha256 from the Hub's LFS metadata: {expected}", flush=True)
    cache_dir = os.path.join(os.path.dirname(args.dest), ".hf-cache")
    path = hf_hub_download(args.repo, args.file, revision=args.revision, cache_dir=cache_dir,
                           token=token)
    got = sha256_file(path)
    if got != expected:
        shutil.rmtree(cache_dir, ignore_errors=True)
        print(f"sha256 mismatch for {args.file}: got {got}, expected {expected}; removed",
              file=sys.stderr)
        return 1
    tmp = args.dest + ".partial"
    shutil.copyfile(path, tmp)
    os.replace(tmp, args.dest)
    shutil.rmtree(cache_dir, ignore_errors=True)
    print(f"[beekeeper] {args.dest} sha256 {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
