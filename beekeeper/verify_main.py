"""
`python -m beekeeper.verify_main`: the verify entry point the host runs; it needs only the
kit's beekeeper/ and verify/ packages and httpx, httpx-sse, nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import os
import sys

from beekeeper.verify.client import ServerClient
from beekeeper.verify.engine import LocalShell
from beekeeper.verify.suites import run_suites

from .core.profiles import PROFILES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--suite", default="smoke")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ctx-size", type=int, help="the server's context (host data ctx_size)")
    ap.add_argument("--api-key-file")
    ap.add_argument("--host-label", default=os.uname().nodename)
    ap.add_argument("--engine-gpu")
    ap.add_argument("--budget-gib", type=float,
                    help="VRAM budget (the controller's group_data/all.py vram_budget_gib; "
                    "default: the profile's)")
    args = ap.parse_args(argv)
    profile = PROFILES.get(args.profile)
    if profile is None:
        print(f"unknown profile {args.profile!r}; known: {', '.join(PROFILES)}", file=sys.stderr)
        return 2
    if args.ctx_size:
        from .core.profiles import with_ctx_size

        profile = with_ctx_size(profile, args.ctx_size)
    key = open(args.api_key_file).read().strip() if args.api_key_file else None
    with ServerClient(args.url, api_key=key) as client:
        report = run_suites(client, profile, args.suite.split(","), out_dir=args.out,
                            quick=args.quick, host_label=args.host_label,
                            shell=LocalShell(label=args.host_label),
                            engine_gpu=args.engine_gpu, budget_gib=args.budget_gib)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
