"""
`python -m beekeeper.verify_main`: the verify entry point a host runs (`beekeeper verify
--on-host` installs it there), and the one a GPU box runs from a checkout with nothing
installed but httpx and nvidia-ml-py (numpy, jinja2 and matplotlib are not needed; without
matplotlib the HTML report says so). From a checkout, `verify/` is made importable as
`beekeeper.verify`, as the wheel installs it.

The options verify takes are defined here once (`OPTIONS`): `beekeeper verify` adds the same
ones to its parser, and `--on-host` passes every one it was given on to this entry point on
the host (`forwarded`), so no option is known to one and lost by the other.

Exit status: 0 nothing failed and every requested decode, TTFT, NIAH and VRAM check judged
its figure; 1 a check failed; 3 nothing failed but a requested one was not judged
(INCOMPLETE); 2 a usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core.errors import VerifyError
from .core.profiles import PROFILES, Profile, with_ctx_size

# verify/suites.py's ALL_SUITES (a unit test holds them equal), known before it is imported
SUITES = ("engine", "smoke", "decode", "ttft", "niah", "vram", "load")
SUITE_HELP = ("comma list of engine,smoke,decode,ttft,niah,vram,load or all (engine: "
              "llama-bench on the host, the baseline decode and TTFT are judged against; "
              "gateway, not in all: its overhead against --direct-url)")

# every option `beekeeper verify` and this entry point share: (flags, add_argument keywords)
OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--profile", {"choices": sorted(PROFILES), "metavar": "PROFILE", "help": (
        "the profile the server runs (`beekeeper profiles`); default: the one the host's "
        "deployed.json names (--sandbox, --ssh, --on-host, or a server the kit deployed "
        "on this machine)")}),
    ("--suite", {"default": "smoke", "help": SUITE_HELP}),
    ("--quick", {"action": "store_true", "help": "small sizes (CPU servers)"}),
    ("--api-key-file", {"help": "the server's API key, in a file (with --on-host it "
                                "travels on ssh's standard input, never a command line)"}),
    ("--direct-url", {"help": "--suite gateway: the server behind the gateway at --url, "
                              "measured in the same run (with --on-host: as the host sees it)"}),
    ("--direct-api-key-file", {"help": "the key of --direct-url's server"}),
    ("--service", {"default": "llm", "help": (
        "the kit's service whose engine baseline is measured (host data `services`): its "
        "deployed.json and unit (default: llm)")}),
    ("--engine-gpu", {"help": "run llama-bench on this GPU (index), which the service does "
                              "not use, and keep the service running (default: stop the "
                              "service while it runs)"}),
    ("--llama-bench", {"metavar": "PATH", "help": (
        "a server you started (not deployed by the kit): its llama-bench, run beside it "
        "(never stopped) for the engine baseline; implies --suite engine. With "
        "--engine-image: the path inside the image")}),
    ("--engine-image", {"metavar": "IMAGE", "help": (
        "a server you started in a container: an image with llama-bench "
        "(/usr/local/bin/llama-bench unless --llama-bench), the model's folder mounted at "
        "/models; needs --model")}),
    ("--model", {"metavar": "PATH", "help": (
        "with --llama-bench/--engine-image: the server's GGUF on the host (default with "
        "--llama-bench: the model_path in the server's /props)")}),
    ("--decode-ctx", {"help": "decode runs at these context sizes, e.g. 4096,60000"}),
    ("--ctx-size", {"type": int, "help": (
        "the server's context when host data set ctx_size (deployed.json's ctx_size): "
        "verify's sizes follow it")}),
    ("--decode-out", {"type": int, "help": "output tokens per decode run, e.g. 16384"}),
    ("--ttft-tokens", {"type": int, "help": (
        "prompt tokens of each TTFT request (default: the largest decode context; 512 with "
        "--quick), e.g. 60000 with --quick for the seed's TTFT in a short run")}),
    ("--ttft-requests", {"type": int, "help": "TTFT requests (default 20; 5 with --quick)"}),
    ("--settle-budget-s", {"type": float, "metavar": "S", "help": (
        "how long each figure (llama-bench's, the served decode, the TTFT) may take beyond "
        "its first round, for more repeats until its error is under 6%% (default 120; 0: "
        "the first round only)")}),
    ("--budget-gib", {"type": float, "help": (
        "VRAM budget (default: group_data/all.py vram_budget_gib on the controller, else "
        "the profile's)")}),
    ("--card", {"help": "the card the reference checks judge, e.g. 'RTX 3090' (default: "
                        "the GPU where the server runs, read with nvidia-smi there)"}),
    ("--host-label", {"default": os.uname().nodename,
                      "help": "the report folder's name under --out"}),
    ("--out", {"help": "report folder root"}),
]
# what `--on-host` sets itself on the host's command line rather than passing on: the report
# folder and label are the host's, and the keys travel on standard input
NOT_FORWARDED = {"--out", "--host-label", "--api-key-file", "--direct-api-key-file"}


def add_verify_options(ap: argparse.ArgumentParser) -> None:
    """`OPTIONS`, on `beekeeper verify`'s parser or this entry point's."""
    for flag, kw in OPTIONS:
        ap.add_argument(flag, **kw)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def forwarded(args: argparse.Namespace) -> list[str]:
    """Every shared option `args` holds a value for, as arguments of this entry point (not
    quoted: `shlex.join` them for a shell). `--out`, `--host-label` and the keys are left
    for the caller (`NOT_FORWARDED`)."""
    out: list[str] = []
    for flag, kw in OPTIONS:
        value = getattr(args, _dest(flag), None)
        if flag in NOT_FORWARDED or value is None or value is False:
            continue
        out += [flag] if kw.get("action") == "store_true" else [flag, f"{value:g}"
                                                               if isinstance(value, float)
                                                               else str(value)]
    return out


def usage_error(args: argparse.Namespace) -> str | None:
    """One line saying what to add or change, for options that cannot work together."""
    unknown = [n for n in str(args.suite).split(",") if n not in (*SUITES, "gateway", "all")]
    if unknown:
        return (f"--suite {args.suite!r}: {', '.join(map(repr, unknown))} is not a suite; "
                f"give a comma list of {','.join(SUITES)} (or all), or gateway")
    if args.engine_image and not args.model:
        return ("--engine-image needs --model PATH: the server's GGUF on the host (its "
                "folder is mounted at /models in the image; the server's /props names the "
                "path inside its own container, not one the host has)")
    if args.decode_ctx:
        try:
            depths = [int(x) for x in args.decode_ctx.split(",")]
        except ValueError:
            depths = []
        if not depths or min(depths) <= 0:
            return (f"--decode-ctx {args.decode_ctx!r}: give context sizes in tokens, comma "
                    "separated, e.g. 4096,60000")
    if args.settle_budget_s is not None and not 0 <= args.settle_budget_s <= 86400:
        return (f"--settle-budget-s {args.settle_budget_s:g}: give seconds from 0 (the first "
                "round only) to 86400")
    return None


def from_deployed(args: argparse.Namespace, manifest: str | None, where: str) -> str | None:
    """--profile, --port and --ctx-size, where not given, from the host's deployed.json
    (`manifest`, its text; None: none there): what was deployed, not a guess. A line saying
    what was read is printed; a problem is returned as one line (None: fine)."""
    if manifest is None:
        if args.profile is None:
            return (f"give --profile NAME: no deployed.json of service {args.service!r} on "
                    f"{where} to read it from (`beekeeper profiles` lists them)")
        return None
    try:
        d = json.loads(manifest)
    except json.JSONDecodeError as e:
        return f"the deployed.json on {where} is not JSON ({e}): give --profile and --port"
    said = []
    if args.profile is None:
        if d.get("profile") not in PROFILES:
            return (f"the deployed.json on {where} names profile {d.get('profile')!r}, which "
                    "this kit does not know: give --profile")
        args.profile = d["profile"]
        said.append(f"profile {args.profile}")
    if getattr(args, "port", None) is None and isinstance(d.get("port"), int):
        args.port = d["port"]
        said.append(f"port {args.port}")
    ctx = d.get("ctx_size")
    if (args.ctx_size is None and isinstance(ctx, int)
            and ctx != PROFILES[args.profile].server.ctx_size):
        args.ctx_size = ctx
        said.append(f"context {ctx}")
    if said:
        print(f"verify: {', '.join(said)}, from what was deployed on {where} "
              f"(service {args.service})", flush=True)
    return None


def local_manifest(service: str) -> str | None:
    """This machine's deployed.json of `service` (readable by anyone), or None."""
    from .core.paths import ServicePaths

    try:
        return Path(ServicePaths(service).manifest).read_text()
    except OSError:
        return None


def profile_of(args: argparse.Namespace) -> Profile:
    """The profile named, at the server's context when --ctx-size says it differs."""
    profile = PROFILES[args.profile]
    return with_ctx_size(profile, args.ctx_size) if args.ctx_size else profile


def sizes_of(args: argparse.Namespace, profile: Profile) -> Any:
    """The suites' sizes: the profile's, with --decode-ctx, --decode-out, --ttft-tokens and
    --ttft-requests applied."""
    from beekeeper.verify.suites import Sizes

    sizes = Sizes.for_profile(profile, args.quick)
    if args.decode_ctx:  # e.g. the seed's runs: 4096,60000
        sizes.decode_ctx_tokens = [int(x) for x in args.decode_ctx.split(",")]
    if args.decode_out:  # e.g. the seed's sustained run: 16384
        sizes.decode_out_tokens = args.decode_out
    if args.ttft_tokens:  # e.g. the seed's 60000 in a --quick run
        sizes.ttft_tokens = args.ttft_tokens
    if args.ttft_requests:
        sizes.ttft_requests = args.ttft_requests
    if args.settle_budget_s is not None:
        sizes.settle_budget_s = args.settle_budget_s
    return sizes


def hand_started(args: argparse.Namespace) -> Any:
    """--llama-bench / --engine-image / --model: a server the user started, or None."""
    from beekeeper.verify.suites import HandStarted

    if not (args.llama_bench or args.engine_image):
        return None
    return HandStarted(llama_bench=args.llama_bench, image=args.engine_image, model=args.model)


@dataclass(frozen=True)
class Keys:
    """The API keys of the server (--api-key-file) and of --direct-url's (None: none)."""

    api: str | None = None
    direct: str | None = None

    @classmethod
    def from_files(cls, args: argparse.Namespace) -> Keys:
        def read(path: str | None) -> str | None:
            try:
                return Path(path).read_text().strip() if path else None
            except OSError as e:
                raise VerifyError(f"the API key file {path}: {e.strerror}") from None

        return cls(read(args.api_key_file), read(args.direct_api_key_file))

    def to_stdin(self) -> bytes | None:
        """What `--keys-on-stdin` reads (None: no key, nothing to send)."""
        if self.api is None and self.direct is None:
            return None
        return json.dumps({"api": self.api, "direct": self.direct}).encode()


def run_verify(args: argparse.Namespace, url: str, *, shell: Any, keys: Keys,
               budget_gib: float | None, where: Any = None) -> int:
    """The suites against `url`, judged and reported; the verdict's exit status. `shell`:
    where llama-bench and systemctl run (None: nowhere, the engine checks say why)."""
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.suites import run_suites, verdict

    profile = profile_of(args)
    names = args.suite.split(",")
    with ExitStack() as stack:
        client = stack.enter_context(ServerClient(url, api_key=keys.api))
        direct = (stack.enter_context(ServerClient(args.direct_url, api_key=keys.direct))
                  if args.direct_url else None)  # --suite gateway: the server behind --url
        report = run_suites(client, profile, names, out_dir=args.out, quick=args.quick,
                            host_label=args.host_label, card=args.card,
                            sizes=sizes_of(args, profile), shell=shell,
                            engine_gpu=args.engine_gpu, service=args.service, direct=direct,
                            budget_gib=budget_gib, hand=hand_started(args), where=where)
    return verdict(report, names, profile).exit_status


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


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m beekeeper.verify_main", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8083")
    add_verify_options(ap)
    ap.add_argument("--keys-on-stdin", action="store_true",
                    help="read the API keys as JSON on standard input ({\"api\": ..., "
                         "\"direct\": ...}): how `beekeeper verify --on-host` sends them")
    return ap


def host_command(args: argparse.Namespace, python: str, port: int, out: str,
                 host_label: str, keys: Keys) -> str:
    """The shell line that runs this entry point on the host for `beekeeper verify --on-host`
    with `args`: every shared option passed on (`forwarded`), the server on the host's
    loopback, the report under `out`, the keys (if any) read from standard input."""
    argv = [python, "-m", "beekeeper.verify_main", "--url", f"http://127.0.0.1:{int(port)}",
            *forwarded(args), "--out", out, "--host-label", host_label]
    if keys.to_stdin() is not None:
        argv.append("--keys-on-stdin")
    return shlex.join(argv)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    problem = usage_error(args) or from_deployed(args, local_manifest(args.service),
                                                 "this machine")
    if problem:
        print(f"verify: {problem}", file=sys.stderr)
        return 2
    try:
        if args.keys_on_stdin:
            sent = json.loads(sys.stdin.read() or "{}")
            keys = Keys(sent.get("api"), sent.get("direct"))
        else:
            keys = Keys.from_files(args)
    except VerifyError as e:
        print(f"verify: {e}", file=sys.stderr)
        return 2
    use_checkout_verify()
    from beekeeper.verify.engine import LocalShell

    shell = LocalShell(label=args.host_label, root=hand_started(args) is None)
    return run_verify(args, args.url, shell=shell, keys=keys, budget_gib=args.budget_gib)


if __name__ == "__main__":
    sys.exit(main())
