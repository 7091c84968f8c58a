"""
`python -m beekeeper.verify_main`: the verify entry point a host runs (`beekeeper verify
--on-host` installs it there), and the one a GPU box runs from a checkout with nothing
installed but httpx and nvidia-ml-py (numpy, jinja2 and matplotlib are not needed; without
matplotlib the HTML report says so). From a checkout, `verify/` is made importable as
`beekeeper.verify`, as the wheel installs it.

The options verify takes are defined here once (`OPTIONS`): `beekeeper verify` adds the same
ones to its parser, and `--on-host` passes every one it was given on to this entry point on
the host (`forwarded`), so no option is known to one and lost by the other.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from .core.deployed import DeployedService, RecordError, read_record
from .core.errors import VerifyError, shown
from .core.paths import DEFAULT_PORT, ServicePaths, bracketed
from .core.profiles import (
    MAX_SLOTS,
    PROFILES,
    SUITES,
    Profile,
    profile_problem,
    with_ctx_size,
)

_Else = TypeVar("_Else")  # vram_budget_gib's last resort: a float, or None

# the --help of both verify commands ends with it
EXIT_STATUS = """Exit status: 0 nothing failed and every requested decode, TTFT, NIAH and VRAM check
judged its figure; 1 a check failed; 3 nothing failed but a requested one was not judged
(INCOMPLETE); 2 a usage or set-up error; 130 interrupted (Ctrl-C), no report written."""


def _argtype(what: str, read: Callable[[str], Any], fits: Callable[[Any], bool],
             give: str) -> Callable[[str], Any]:
    """An argparse type: `read(text)` where it `fits`, else one line saying what to give."""
    def parse(text: str) -> Any:
        try:
            value = read(text)
        except ValueError:
            value = None
        if value is None or not fits(value):
            raise argparse.ArgumentTypeError(f"{shown(text)} is not {what}: give {give}")
        return value
    return parse


def whole(what: str, example: str, high: int | None = None) -> Callable[[str], int]:
    span = f"from 1 to {high}" if high is not None else "of 1 or more"
    return _argtype(what, lambda t: int(t.strip().replace("_", "")),
                    lambda v: 1 <= v and (high is None or v <= high),
                    f"a whole number {span}, e.g. {example}")


def amount(what: str, example: str) -> Callable[[str], float]:
    """A finite number above 0: nan, inf, 0 and negatives refused."""
    return _argtype(what, float, lambda v: math.isfinite(v) and v > 0,
                    f"a number above 0, e.g. {example}")


def profile_name(text: str) -> str:
    """An argparse type: a profile's name, else one line with the name it most likely means
    (the value spelled in ASCII where it holds other characters)."""
    problem = profile_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


PORT = whole("a port", str(DEFAULT_PORT), 65535)
TOKENS = whole("a number of tokens", "4096")
BUDGET_GIB = amount("a VRAM budget in GiB", "10")


def suite_names(text: str) -> list[str]:
    """`--suite`'s comma list as the suites run it (`all,gateway` may be given; a name given
    twice runs once). ValueError: one line saying what is wrong and what to give."""
    give = f"give a comma list of {','.join(SUITES)} (or all), and gateway"
    names = [n.strip() for n in str(text).split(",")]
    if not text.strip() or "" in names:
        raise ValueError(f"--suite {shown(text)}: an empty name in the list; {give}")
    unknown = [n for n in names if n not in (*SUITES, "gateway", "all")]
    if unknown:
        raise ValueError(f"--suite {shown(text)}: {', '.join(map(shown, unknown))} is not "
                         f"a suite; {give}")
    out: list[str] = []
    for n in names:
        out += [s for s in (SUITES if n == "all" else (n,)) if s not in out]
    return ["all"] if names == ["all"] else out


@dataclass(frozen=True)
class ServerUrl:
    """A server URL as verify uses it: `base` (scheme, host, port and path: what is printed
    and kept in reports) and the secrets it carried, sent with each request but never
    shown: `auth` (its user information, as HTTP basic authentication) and `query`."""

    base: str
    auth: tuple[str, str] | None = None
    query: str = ""

    def client(self, api_key: str | None) -> Any:
        """A ServerClient for `base`, the secrets added to each request where no error
        message, log line or report can show them."""
        import httpx

        from beekeeper.verify.client import ServerClient

        c = ServerClient(self.base, api_key=api_key,
                         transport=_query_transport(self.query) if self.query else None)
        if self.auth is not None:
            c.http.auth = httpx.BasicAuth(*self.auth)
        return c


def _query_transport(query: str) -> Any:
    """An httpx transport that sends each request with `query` added to its own."""
    import httpx

    class WithQuery(httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.HTTPTransport()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            own = request.url.query.decode()
            url = request.url.copy_with(query=((own + "&" if own else "") + query).encode())
            sent = httpx.Request(request.method, url, headers=request.headers,
                                 stream=request.stream, extensions=request.extensions)
            return self.inner.handle_request(sent)

        def close(self) -> None:
            self.inner.close()

    return WithQuery()


def shown_url(text: str) -> str:
    """A URL as verify may print it, whatever its form: no user information (`***@`), no
    query or fragment (`?***`); cut when long."""
    head, sep, rest = text.partition("://")
    if not sep:
        head, rest = "", text
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    at = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if at >= 0:
        rest = rest[:at] + "?***"
    out = head + sep + rest
    return out if len(out) <= 80 else f"{out[:70]}... ({len(text)} characters)"


def server_url(text: str, flag: str = "--url") -> ServerUrl:
    """`text` (a server base URL) split into what may be shown and its secrets; VerifyError:
    one line naming `flag`, what is wrong and the fix, never the secrets."""
    fix = f"give {flag} as http://HOST:PORT, e.g. http://127.0.0.1:{DEFAULT_PORT}"
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise VerifyError(f"{flag} {shown(shown_url(text))}: not an http(s) URL; {fix}")
    m = re.search(r"[/?#]", rest)  # the authority's end: its user information, then the rest
    authority, tail = (rest[:m.start()], rest[m.start():]) if m else (rest, "")
    if "@" in tail:
        raise VerifyError(
            f"{flag}: an '@' after the host's name (a password holding a raw '/', '?' or "
            "'#'?), which could send it to another host: percent-encode those characters in "
            "the password (%2F, %3F, %23), or give the key in a file (--api-key-file)")
    userinfo, at, hostport = authority.rpartition("@")
    parts = urlsplit(f"{scheme}://{hostport}{tail}")
    try:
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError:
        parts = parts._replace(netloc="")
    if not parts.hostname:
        raise VerifyError(f"{flag} {shown(shown_url(text))}: no host, or a port that is not "
                          f"a number from 1 to 65535; {fix}")
    user, _, password = userinfo.partition(":")
    return ServerUrl(base=urlunsplit((scheme.lower(), hostport, parts.path, "", "")),
                     auth=(unquote(user), unquote(password)) if at else None,
                     query=parts.query)


OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--profile", {"type": profile_name, "metavar": "PROFILE", "help": (
        "the profile the server runs (`beekeeper profiles`); default: the one the host's "
        "deployed.json names (--sandbox, --ssh, --on-host, or a server the kit deployed "
        "on this machine)")}),
    ("--suite", {"default": "smoke", "help": (
        f"comma list of {','.join(SUITES)} or all (engine: llama-bench on the host, the "
        "baseline decode and TTFT are judged against; gateway, not in all: its overhead "
        "against --direct-url)")}),
    ("--quick", {"action": "store_true", "help": "small sizes (CPU servers)"}),
    ("--api-key-file", {"help": "the server's API key, in a file (a gateway's of several, "
                                "one a line: the first; with --on-host it travels on ssh's "
                                "standard input, never a command line)"}),
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
    ("--ctx-size", {"type": TOKENS, "help": (
        "the server's context when host data set ctx_size (deployed.json's ctx_size): "
        "verify's sizes follow it")}),
    ("--slots", {"type": whole("a number of slots", "2", MAX_SLOTS), "help": (
        "the server's request slots (-np) when host data set slots (deployed.json's "
        "slots): each request is sized to one slot's context")}),
    ("--decode-out", {"type": TOKENS, "help": "output tokens per decode run, e.g. 16384"}),
    ("--ttft-tokens", {"type": TOKENS, "help": (
        "prompt tokens of each TTFT request (default: the largest decode context; 512 with "
        "--quick), e.g. 60000 with --quick for the seed's TTFT in a short run")}),
    ("--ttft-requests", {"type": whole("a number of requests", "20"),
                         "help": "TTFT requests (default 20; 5 with --quick)"}),
    ("--settle-budget-s", {"type": float, "metavar": "S", "help": (
        "how long each figure (llama-bench's, the served decode, the TTFT) may take beyond "
        "its first round, for more repeats until its error is under 6%% (default 120; 0: "
        "the first round only)")}),
    ("--budget-gib", {"type": BUDGET_GIB, "help": (
        "VRAM budget (default: the vram_budget_gib the host's deployed.json names; else, on "
        "the controller, group_data/all.py's, else the kit's; elsewhere the profile's)")}),
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
    for flag, kw in OPTIONS:
        ap.add_argument(flag, **kw)
    # where the host reaches the server: from_deployed sets its record's (reached_at)
    ap.set_defaults(reached_at="127.0.0.1")


def forwarded(args: argparse.Namespace) -> list[str]:
    """Every shared option `args` holds a value for, as (unquoted) arguments of this entry
    point, but `NOT_FORWARDED`."""
    out: list[str] = []
    for flag, kw in OPTIONS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if flag in NOT_FORWARDED or value is None or value is False:
            continue
        if flag == "--direct-url" and secret_url(value):
            continue  # its credentials travel on standard input with the keys (Keys)
        text = f"{value:g}" if isinstance(value, float) else str(value)
        out += [flag] if kw.get("action") == "store_true" else [flag, text]
    return out


def decode_depths(text: str) -> list[int]:
    """--decode-ctx's sizes in tokens; ValueError: one is not a whole number above 0."""
    depths = [int(x) for x in text.split(",")]
    if min(depths) <= 0:
        raise ValueError(f"--decode-ctx {text!r}: a size of 0 or less")
    return depths


def usage_error(args: argparse.Namespace) -> str | None:
    try:  # as the suites run it: `all,gateway` is every suite and the gateway's
        args.suite = ",".join(suite_names(args.suite))
    except ValueError as e:
        return str(e)
    for flag, url in (("--url", args.url), ("--direct-url", args.direct_url)):
        try:
            if url is not None:
                server_url(url, flag)
        except VerifyError as e:
            return str(e)
    if args.url and getattr(args, "on_host", False) and (
            getattr(args, "ssh", None) or getattr(args, "sandbox", False)):
        return ("--url with --on-host and a host: the suites run on the host against its own "
                "server (--port) and --url would go unused; to verify a gateway, leave out "
                "--on-host (this machine reaches --url), with --direct-url for the server "
                "behind it")
    if args.engine_image and not args.model:
        return ("--engine-image needs --model PATH: the server's GGUF on the host (its "
                "folder is mounted at /models in the image; the server's /props names the "
                "path inside its own container, not one the host has)")
    if args.decode_ctx:
        try:
            decode_depths(args.decode_ctx)
        except ValueError:
            return (f"--decode-ctx {args.decode_ctx!r}: give context sizes in tokens, comma "
                    "separated, e.g. 4096,60000")
    if args.settle_budget_s is not None and not 0 <= args.settle_budget_s <= 86400:
        return (f"--settle-budget-s {args.settle_budget_s:g}: give seconds from 0 (the first "
                "round only) to 86400")
    return None


def from_deployed(args: argparse.Namespace, manifest: str | None, where: str) -> str | None:
    """--profile, --port, --ctx-size, --slots and --budget-gib, where not given, from the host's
    deployed.json (`manifest`, its text; None: none there), saying so; a problem is returned
    as one line (None: fine)."""
    if manifest is None:
        if args.profile is None:
            return (f"give --profile NAME: no deployed.json of service {args.service!r} on "
                    f"{where} to read it from (`beekeeper profiles` lists them), or --service "
                    "NAME where the service is named otherwise (host data `service_name`)")
        return None
    try:
        d = DeployedService.from_json(manifest, f"the deployed.json on {where}")
    except RecordError as e:
        if e.key is None:
            return (f"the deployed.json on {where} is not JSON ({e.detail}): give --profile "
                    "and --port")
        return f"{e.source}: {e.problem}: redeploy the service with the kit, or give --profile"
    said = []
    # a --port other than the record's is another server: nothing of its shape or address
    theirs = getattr(args, "port", None) in (None, d.port)
    if theirs:
        args.reached_at = DeployedService.reached_at(d.bind_address)  # where the host reaches it
    if args.profile is None:
        if d.profile not in PROFILES:
            return (f"the deployed.json on {where} names profile {d.profile!r}, which "
                    "this kit does not know: give --profile")
        args.profile = d.profile
        said.append(f"profile {args.profile}")
    if getattr(args, "port", None) is None and d.port is not None:
        args.port = d.port
        said.append(f"port {args.port}")
    ctx = d.ctx_size_tokens
    if (theirs and args.ctx_size is None and ctx is not None
            and ctx != PROFILES[args.profile].server.ctx_size):
        args.ctx_size = ctx
        said.append(f"context {ctx}")
    if (theirs and getattr(args, "slots", None) is None and d.slots is not None
            and d.slots != PROFILES[args.profile].server.parallel):
        args.slots = d.slots
        said.append(f"{d.slots} slots")
    given = getattr(args, "budget_gib", None)
    args.budget_gib = vram_budget_gib(given, d if theirs else None, lambda: None)
    if given is None and args.budget_gib is not None:
        said.append(f"VRAM budget {args.budget_gib:g} GiB")
    if said:
        print(f"verify: {', '.join(said)}, from what was deployed on {where} "
              f"(service {args.service})", flush=True)
    return None


def vram_budget_gib(given: float | None, record: DeployedService | None,
                    otherwise: Callable[[], _Else]) -> float | _Else:
    """The VRAM budget a run judges by: --budget-gib (`given`), else the one the host's
    deployed.json records (`record`: what the deploy planned the card by, where the service
    is the host's only GPU service), else `otherwise()` (the controller: the kit's group
    data; verify on a host: None, the profile's)."""
    if given is not None:
        return float(given)
    if record is not None and record.vram_budget_gib is not None:
        return record.vram_budget_gib
    return otherwise()


def local_manifest(service: str) -> str | None:
    try:
        return Path(ServicePaths(service).manifest).read_text()
    except OSError:
        return None


def profile_of(args: argparse.Namespace) -> Profile:
    profile = PROFILES[args.profile]
    if not args.ctx_size and not args.slots:
        return profile
    return with_ctx_size(profile, args.ctx_size or profile.server.ctx_size, args.slots)


def sizes_of(args: argparse.Namespace, profile: Profile) -> Any:
    from beekeeper.verify.suites import Sizes

    sizes = Sizes.for_profile(profile, args.quick)
    if args.decode_ctx:
        sizes.decode_ctx_tokens = decode_depths(args.decode_ctx)
    if args.decode_out:
        sizes.decode_out_tokens = args.decode_out
    if args.ttft_tokens:
        sizes.ttft_tokens = args.ttft_tokens
    if args.ttft_requests:
        sizes.ttft_requests = args.ttft_requests
    if args.settle_budget_s is not None:
        sizes.settle_budget_s = args.settle_budget_s
    return sizes


def hand_started(args: argparse.Namespace) -> Any:
    from beekeeper.verify.suites import HandStarted

    if not (args.llama_bench or args.engine_image):
        return None
    return HandStarted(llama_bench=args.llama_bench, image=args.engine_image, model=args.model)


def engine_shell(args: argparse.Namespace, ssh: list[str], label: str) -> Any:
    """Where llama-bench runs and the service is stopped and started: the host `ssh` reaches
    (none: this machine), as root, but for a hand-started server (--llama-bench,
    --engine-image), whose llama-bench runs as the login."""
    from beekeeper.verify.engine import LocalShell, SshShell

    root = hand_started(args) is None
    if root and not ssh and {"all", "engine", "vram"} & set(suite_names(args.suite)):
        sudo_once()  # llama-bench's baseline and the idle figure stop the service
    return SshShell(ssh, label, root) if ssh else LocalShell(label, root)


def sudo_once(need: str = "verify: llama-bench and the service's stop and start need root"
              ) -> None:
    """On this machine as a login that is not root, with a terminal, where sudo wants a
    password (a WSL2 user's, or a cache that expired during a long deploy): ask it once now
    (`sudo -v`), as the `sudo -n` after it cannot; else each root step says what is
    missing. `need`: what needs root, said before sudo asks."""
    if os.geteuid() == 0 or not sys.stdin.isatty() or shutil.which("sudo") is None:
        return
    if subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return
    print(f"{need}: sudo asks for your password once", file=sys.stderr)
    subprocess.run(["sudo", "-v"])


def secret_url(url: str | None) -> bool:
    """Whether `url` carries what only standard input may take to a host's command line: user
    information, a query or a fragment (where tokens travel)."""
    return bool(url) and bool(re.search(r"@|\?|#", str(url).partition("://")[2]))


@dataclass(frozen=True)
class Keys:
    """The API keys of the server (--api-key-file) and of --direct-url's (None: none), and
    --direct-url itself where it carries credentials (`secret_url`): with --on-host they
    travel on ssh's standard input, never the host's command line."""

    api: str | None = None
    direct: str | None = None
    direct_url: str | None = None

    @classmethod
    def from_files(cls, args: argparse.Namespace, record: DeployedService | None = None,
                   ssh: list[str] | None = None, host: str = "") -> Keys:
        """The keys --api-key-file and --direct-api-key-file name; without --api-key-file,
        the deployed server's own (`deployed_key`; `record`: its deployment record, None
        where verify did not find the server from it)."""
        def read(path: str | None) -> str | None:
            try:  # a file of several keys, one a line (a gateway's): its first
                return Path(path).read_text().strip().split("\n")[0].strip() if path \
                    else None
            except OSError as e:
                raise VerifyError(f"the API key file {path}: {e.strerror}") from None

        keys = cls(read(args.api_key_file)).or_deployed(args, record, ssh, host)
        return replace(keys, direct=read(args.direct_api_key_file),
                       direct_url=args.direct_url if secret_url(args.direct_url) else None)

    def or_deployed(self, args: argparse.Namespace, record: DeployedService | None,
                    ssh: list[str] | None = None, host: str = "") -> Keys:
        """Without a server key given (--api-key-file, even '': no key; standard input), the
        deployed one's (as `beekeeper verify` decides, cli.verify's `keyed`)."""
        given = self.api is not None or args.api_key_file is not None
        return self if given else replace(self, api=deployed_key(record, args.service, ssh, host))

    def to_stdin(self) -> bytes | None:
        """What `--keys-on-stdin` reads (None: nothing to send)."""
        if self.api is None and self.direct is None and self.direct_url is None:
            return None
        sent = {"api": self.api, "direct": self.direct}
        return json.dumps({**sent, "direct_url": self.direct_url} if self.direct_url
                          else sent).encode()


def deployed_key(record: DeployedService | None, service: str, ssh: list[str] | None = None,
                 host: str = "") -> str | None:
    """The API key the deploy stored for `service` (root-only, beside deployed.json) where
    its `record` says the server takes it: a key file a later deploy without a key left
    there (a rollback to the keyed deploy needs it) is not the server's. Read on this
    machine, or as root on `host` over `ssh` (the key comes back on ssh's standard output:
    on no command line and in no file on the controller); VerifyError, one line, when it
    cannot be read."""
    if record is None or not record.api_key:
        return None
    path = ServicePaths(service).api_key
    if ssh:
        from .core.remote import NEEDS_ROOT_EXIT, read_over_ssh

        quoted = shlex.quote(path)
        try:  # the key never printed, logged or written
            p = read_over_ssh(ssh, f"if [ -e {quoted} ]; then cat -- {quoted}; else exit 3; fi")
        except (OSError, subprocess.TimeoutExpired):  # no ssh here, or no answer in ANSWER_S
            p = subprocess.CompletedProcess([], 255, "")
        if p.returncode == 3:
            return None
        if p.returncode != 0:
            why = ("this needs root there: log in as root, or let the login use sudo without "
                   "a password" if p.returncode == NEEDS_ROOT_EXIT
                   else f"ssh or cat exited {p.returncode}")
            raise VerifyError(f"the deployed server's API key {path} on {host} could not be "
                              f"read ({why}): give the key with --api-key-file, or fix that")
        return p.stdout.strip() or None
    try:
        key = Path(path).read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise VerifyError(f"the deployed server's API key {path} could not be read "
                          f"({e.strerror}: it is root-only): run verify as root (`sudo "
                          ".venv/bin/beekeeper verify ...`: sudo's PATH lacks the venv), or "
                          "give the key with --api-key-file") from None
    return key or None


def deployed_here(url: str, record: DeployedService | None) -> bool:
    """Whether `url` is the server the kit deployed on this machine (`record`, its
    deployed.json there): the URL on loopback (or its bind address) at its port."""
    if record is None or record.port is None:
        return False
    parts = urlsplit(server_url(url).base)
    return parts.port == record.port and parts.hostname in ("127.0.0.1", "localhost", "::1",
                                                            record.bind_address)


def typed_command(argv: list[str]) -> str | None:
    """The verify command line of this process's `argv` as its user would type it again,
    quoted, URLs shown as `shown_url` shows them; None for any other program (a test
    runner)."""
    rest = [shown_url(a) if "://" in a else a for a in argv[1:]]
    if rest[:1] == ["verify"]:
        return shlex.join(["beekeeper", *rest])
    if Path(argv[0] if argv else "").name == "verify_main.py":
        return shlex.join(["python3", "-m", "beekeeper.verify_main", *rest])
    return None


def run_verify(args: argparse.Namespace, url: str, *, shell: Any, keys: Keys,
               budget_gib: float | None, where: Any = None) -> int:
    """The suites against `url`, judged and reported; the verdict's exit status. `shell`:
    where llama-bench and systemctl run (None: nowhere). A server that stops answering
    during the served suites is FAILED, its report written (suites.stopped); a request they do
    not judge that is refused (a 401), or answered as llama-server never answers, is a
    VerifyError, in one line; Ctrl-C is one line and INTERRUPTED, no report."""
    import httpx

    from beekeeper.verify.client import ServerAnswerError
    from beekeeper.verify.prompts import PromptFitError

    server = server_url(url)  # its credentials sent, never printed or kept in the report
    try:
        report = _run_suites(args, server, shell=shell, keys=keys, budget_gib=budget_gib,
                             where=where)
    except KeyboardInterrupt:
        return interrupted("verify", ": no report written")
    except (httpx.TransportError, httpx.HTTPStatusError) as e:  # outside the served suites
        raise unanswered(e, server.base) from None
    except ServerAnswerError as e:
        raise VerifyError(f"the server at {server.base}: {e}: verify needs llama-server's "
                          "/apply-template and /tokenize") from None
    except PromptFitError as e:
        raise VerifyError(f"no prompt of the size asked could be built with the tokenizer of "
                          f"the server at {server.base} ({e}): give other sizes "
                          "(--decode-ctx, --ttft-tokens)") from None
    return int(report.coverage.exit_status)


def _run_suites(args: argparse.Namespace, server: ServerUrl, *, shell: Any, keys: Keys,
                budget_gib: float | None, where: Any) -> Any:
    """run_suites with the run's options, its clients closed after it."""
    from beekeeper.verify.report import INVOCATION, Invocation
    from beekeeper.verify.suites import run_suites

    profile = profile_of(args)
    typed = getattr(args, "typed_command", None) or typed_command(sys.argv)
    with ExitStack() as stack:
        token = INVOCATION.set(Invocation(typed, args.service))  # the verdict's next step
        stack.callback(INVOCATION.reset, token)
        client = stack.enter_context(server.client(keys.api))
        direct = (stack.enter_context(server_url(args.direct_url, "--direct-url")
                                      .client(keys.direct))
                  if args.direct_url else None)  # --suite gateway: the server behind --url
        return run_suites(client, profile, suite_names(args.suite), out_dir=args.out,
                          quick=args.quick, host_label=args.host_label, card=args.card,
                          sizes=sizes_of(args, profile), shell=shell,
                          engine_gpu=args.engine_gpu, service=args.service, direct=direct,
                          budget_gib=budget_gib, hand=hand_started(args), where=where)


def unanswered(e: Exception, base: str) -> VerifyError:
    """A request the suites do not judge that failed (`e`, an httpx error), in one line: a
    refusal for the key names --api-key-file."""
    from beekeeper.verify.client import FailedRequest

    failed = FailedRequest.of(e)
    if failed is not None and failed.status is not None:
        hint = ": give its key with --api-key-file" if failed.status in (401, 403) else ""
        return VerifyError(f"the server at {base} answered {failed.got} to {failed.request}"
                           f"{hint}")
    return VerifyError(f"the server at {base} could not be reached "
                       f"({type(e).__name__}: {shown_url(str(e))})")


# what a shell reports for a program that SIGINT (Ctrl-C) ended: 128 + 2
INTERRUPTED = 130


def interrupted(who: str, after: str = "") -> int:
    """Ctrl-C's one line, `<who>: interrupted (Ctrl-C)<after>`, on stderr; INTERRUPTED."""
    print(f"{who}: interrupted (Ctrl-C){after}", file=sys.stderr, flush=True)
    return INTERRUPTED


def use_checkout_verify() -> None:
    """`beekeeper.verify` from the checkout's verify/ where it is not installed."""
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
    ap = argparse.ArgumentParser(prog="python -m beekeeper.verify_main",
                                 description=f"{__doc__}\n{EXIT_STATUS}",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help=f"server base URL, e.g. http://127.0.0.1:{DEFAULT_PORT}")
    add_verify_options(ap)
    ap.add_argument("--keys-on-stdin", action="store_true",
                    help="read the API keys as JSON on standard input ({\"api\": ..., "
                         "\"direct\": ...}): how `beekeeper verify --on-host` sends them")
    # the controller's `beekeeper verify --on-host ...` line, for the verdict's "run again"
    ap.add_argument("--typed-command", help=argparse.SUPPRESS)
    return ap


def host_command(args: argparse.Namespace, python: str, port: int, out: str,
                 host_label: str, keys: Keys) -> str:
    """The shell line that runs this entry point on the host for `beekeeper verify --on-host`:
    `forwarded(args)`, the server where the host reaches it (loopback, or the one address it
    listens on), the keys on standard input."""
    argv = [python, "-m", "beekeeper.verify_main", "--url",
            f"http://{bracketed(args.reached_at)}:{int(port)}",
            *forwarded(args), "--out", out, "--host-label", host_label]
    if keys.to_stdin() is not None:
        argv.append("--keys-on-stdin")
    typed = typed_command(sys.argv)  # the controller's own line, credentials hidden
    if typed is not None:
        argv += ["--typed-command", typed]
    return shlex.join(argv)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    manifest = local_manifest(args.service)
    try:
        problem = usage_error(args) or from_deployed(args, manifest, "this machine")
        if problem:
            raise VerifyError(problem)
        if args.keys_on_stdin:
            sent = json.loads(sys.stdin.read() or "{}")
            keys = Keys(sent.get("api"), sent.get("direct"), sent.get("direct_url"))
            args.direct_url = keys.direct_url or args.direct_url
        else:
            keys = Keys.from_files(args)
        record = read_record(manifest)
        # the server the kit deployed here: the key it stored (on-host verify, as root)
        keys = keys.or_deployed(args, record if deployed_here(args.url, record) else None)
        use_checkout_verify()
        return run_verify(args, args.url, shell=engine_shell(args, [], args.host_label),
                          keys=keys, budget_gib=args.budget_gib)
    except VerifyError as e:
        print(f"verify: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
