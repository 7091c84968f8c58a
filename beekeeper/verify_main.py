"""
`python -m beekeeper.verify_main`: the verify entry point a host runs (`beekeeper verify
--on-host` installs it there), and the one a GPU box runs from a checkout with nothing
installed but httpx and nvidia-ml-py (numpy, jinja2 and matplotlib are not needed; without
matplotlib the HTML report says so). From a checkout, `verify/` is made importable as
`beekeeper.verify`, as the wheel installs it.

Exit status: 0 nothing failed and every requested decode, TTFT, NIAH and VRAM check judged
its figure; 1 a check failed; 3 nothing failed but a requested one was not judged
(INCOMPLETE); 2 a usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from .core.profiles import PROFILES


def use_checkout_verify() -> None:
    """`beekeeper.verify` from the checkout's verify/ when it is not installed (a GPU box
    running `python -m beekeeper.verify_main` in a copy of the repository)."""
    if importlib.util.find_spec("beekeeper.verify") is not None:
        return
    folder = Path(__file__).resolve().parents[1] / "verify"
    spec = importlib.util.spec_from_file_location(
        "beekeeper.verify", folder / "__init__.py", submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        raise ImportError(f"no beekeeper.verify and no {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["beekeeper.verify"] = module
    setattr(sys.modules["beekeeper"], "verify", module)  # noqa: B010 (a module attribute)
    spec.loader.exec_module(module)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--suite", default="smoke")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ctx-size", type=int, help="the server's context (host data ctx_size)")
    ap.add_argument("--decode-ctx", help="decode runs at these context sizes, e.g. 4096,60000")
    ap.add_argument("--api-key-file")
    ap.add_argument("--host-label", default=os.uname().nodename)
    ap.add_argument("--engine-gpu")
    ap.add_argument("--llama-bench", help="a server started by hand: its llama-bench, run "
                    "beside it for the engine baseline (implies the engine suite)")
    ap.add_argument("--engine-image", help="a server started by hand in a container: an "
                    "image with llama-bench")
    ap.add_argument("--model", help="the server's GGUF (default: /props model_path)")
    ap.add_argument("--card", help="the card the reference checks judge (default: this "
                    "machine's, read with nvidia-smi)")
    ap.add_argument("--budget-gib", type=float,
                    help="VRAM budget (the controller's group_data/all.py vram_budget_gib; "
                    "default: the profile's)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    profile = PROFILES.get(args.profile)
    if profile is None:
        print(f"unknown profile {args.profile!r}; known: {', '.join(PROFILES)}", file=sys.stderr)
        return 2
    if args.ctx_size:
        from .core.profiles import with_ctx_size

        profile = with_ctx_size(profile, args.ctx_size)
    use_checkout_verify()
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.engine import LocalShell
    from beekeeper.verify.suites import HandStarted, Sizes, run_suites, verdict

    hand = (HandStarted(llama_bench=args.llama_bench, image=args.engine_image, model=args.model)
            if args.llama_bench or args.engine_image else None)
    sizes = Sizes.for_profile(profile, args.quick)
    if args.decode_ctx:
        sizes.decode_ctx_tokens = [int(x) for x in args.decode_ctx.split(",")]
    key = open(args.api_key_file).read().strip() if args.api_key_file else None
    names = args.suite.split(",")
    with ServerClient(args.url, api_key=key) as client:
        report = run_suites(client, profile, names, out_dir=args.out, quick=args.quick,
                            host_label=args.host_label, card=args.card, sizes=sizes,
                            shell=LocalShell(label=args.host_label, root=hand is None),
                            engine_gpu=args.engine_gpu, budget_gib=args.budget_gib, hand=hand)
    return verdict(report, names, profile).exit_status


if __name__ == "__main__":
    sys.exit(main())
