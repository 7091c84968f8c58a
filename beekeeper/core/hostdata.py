"""
Host data, declared: every key the kit reads, as pydantic models; a value that breaks a
declaration is refused in the kit's one line. The README's key table is rendered from here
(`python -m beekeeper.core.hostdata`); the rules between keys are config.py's.
"""

from __future__ import annotations

import difflib
import ipaddress
import os.path
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from .engine_flags import KIT_FLAGS, NUMBER, SECRET_FLAGS, TEXT_VALUE_FLAGS, flag_name
from .errors import ConfigError, cut, echo, host_data, near, shown
from .paths import DEFAULT_PORT, HF_TOKEN, MODEL_DIR, STATE_DIR
from .profiles import MAX_SLOTS, PROFILES, SHA256_RE
from .redact import AMBIGUOUS, RAW, URL, has_credentials, redact, url_secrets, userinfo_kind
from .toolkit import split_arch

MAX_PATH_LEN = 1024
# patterns are matched whole (pydantic's Rust engine: `$` is the end of the text, so a final
# newline never passes); the same strings with re.fullmatch where Python matches them
IMAGE_REF = r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$"
LOCAL_REF = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
CUDA_VERSION = r"^\d{2}\.\d{1,2}(\.\d{1,2})?$"
CUDA_ARCH = r"^\d{2,3}[a-z]?(;\d{2,3}[a-z]?)*$"
SERVICE_NAME = r"^[a-z][a-z0-9-]{0,30}$"
# Git fetches an object by its full name only (GitHub allows any reachable commit); an
# abbreviated hash is taken for a ref name and fails with "couldn't find remote ref".
GIT_SHA = r"^[0-9a-f]{40}$"
HF_REPO = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
HF_FILE = r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.gguf$"
GIT_URL = r"^(https?|ssh|git|file)://\S+$"
HTTP_URL = r"^https?://[^\s'\"]+$"
PACKAGE_VERSION = r"^[0-9][0-9A-Za-z.~+-]*$"
HOSTNAME = r"^[A-Za-z0-9][A-Za-z0-9-]{0,62}(?:\.[A-Za-z0-9][A-Za-z0-9-]{0,62})*$"
MODEL_ALIAS = r"^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,63}$"
MODEL_ALIAS_MAX = 64
PERSISTENT_NONE = "none"
DEFAULT_HF_ENDPOINT = "https://huggingface.co"
STAGES = ("provision", "build", "model", "service")
SOURCE_FIX = "set source = {'git': URL, 'ref': COMMIT} or {'path': FILE, 'ref': NAME}"


def full(pattern: str, value: str) -> bool:
    """`pattern` (^...$) matches the whole of `value`: no final newline slips past `$`."""
    return re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value) is not None


class Bad(ValueError):
    """A value refused by a declared check (`at`: a key below the one pydantic names)."""

    def __init__(self, problem: str, fix: str, at: str = "") -> None:
        super().__init__(problem)
        self.problem, self.fix, self.at = problem, fix, at


class Secret(Bad):
    """A value refused for the secret it may hold: never quoted, not even as a mapping's key."""


# a refusal's words where a key's declaration gives none of its own
UNSAID = {"problem": "is not valid", "key_problem": "is not a valid key here",
          "fix": "see the README, Host data keys"}


def key(default: Any, kind: str, doc: str, fix: str, problem: str = UNSAID["problem"],
        key_problem: str = UNSAID["key_problem"], **constraints: Any) -> Any:
    """One declared key: default, type in words and doc (the README), and its refusal's
    problem and fix (`key_problem`: for a mapping's key that breaks its pattern)."""
    return Field(default, description=doc,
                 json_schema_extra={"kind": kind, "problem": problem, "fix": fix,
                                    "key_problem": key_problem},
                 **constraints)


def whole(default: int | None, lo: int, hi: int, doc: str, fix: str,
          problem: str = "") -> Any:
    """A key of a whole number from `lo` to `hi`: its type words and problem read the bounds."""
    return key(default, f"integer {lo}-{hi}", doc, fix,
               problem or f"is not a whole number from {lo} to {hi}", ge=lo, le=hi)


def tcp_port(default: int | None, doc: str) -> Any:
    """A key of a TCP port."""
    return whole(default, 1, 65535, doc, "use an integer from 1 to 65535", "is not a TCP port")


FLAG = "True/False"


def flag(doc: str, default: bool = False, fix: str = "write True or False (no quotes)") -> Any:
    """A True/False key, False unless set."""
    return key(default, FLAG, doc, fix, "is not True or False")


def typed_fix(name: str, fix: str, kind: str) -> str:
    """A key's fix where its value came from the pyinfra command line, whose `--data` reads
    true and false as True and False, and a number or JSON as such (any other word stays a
    string): a Python file's `name = VALUE (no quotes)` as `--data name=VALUE`."""
    if kind == FLAG:
        return f"--data {name}=true or --data {name}=false"
    return re.sub(rf"\b{re.escape(name)} = (\S+) (\(no quotes\)|without quotes)",
                  rf"--data {name}=\1", fix)


def path(default: str | None, doc: str) -> Any:
    """A key of an absolute path: its validator (path_of) words each refusal."""
    return key(default, "path", doc, "give an absolute path")


def mapping(doc: str, fix: str, strings: bool = False, **more: Any) -> Any:
    """A key of a mapping, unset by default (`strings`: of strings to strings)."""
    return key(None, "mapping", doc, fix,
               "is not a mapping" + (" of strings to strings" if strings else ""), **more)


def safe_text(value: str, what: str) -> str:
    """Refuse non-printable characters: no shell line or unit file carries them safely."""
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        raise Bad(f"{shown(value)} holds the control character {bad!r}",
                  f"give {what} without control or non-printable characters")
    return value


_KINDS = {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean",
          "NoneType": "empty"}


def _type_name(value: Any) -> str:
    name = type(value).__name__
    return _KINDS.get(name, f"a {name}")


def abs_path(value: Any, example: str) -> str:
    """An absolute, normalized path that a shell line and a unit can carry quoted."""
    if not isinstance(value, str):
        raise Bad(f"{shown(value)} is {_type_name(value)}, not a path",
                  f"give an absolute path as a string, e.g. {example!r}")
    if not value:
        raise Bad("empty", f"give an absolute path, e.g. {example!r}")
    if value.startswith("~"):
        raise Bad(f"{shown(value)} is relative to a home folder (nothing expands ~ here)",
                  f"spell the folder out, e.g. {example!r}")
    if not value.startswith("/"):
        raise Bad(f"{shown(value)} is not an absolute path",
                  f"use an absolute path such as {example!r}")
    safe_text(value, "the path")
    if len(value) > MAX_PATH_LEN:
        raise Bad(f"the path is {len(value)} characters long",
                  f"use a path of at most {MAX_PATH_LEN} characters")
    norm = os.path.normpath(value)
    if norm in ("/", "//"):
        raise Bad(f"{shown(value)} is the root folder", f"use a folder such as {example!r}")
    if norm != value.rstrip("/") or value.startswith("//"):
        raise Bad(f"{shown(value)} is not a normalized path (`.`, `..` or `//` in it)",
                  f"write it as {norm!r}")
    return norm


def path_of(example: str) -> Any:
    return BeforeValidator(lambda v: abs_path(v, example))


def _model_dir(value: str) -> str:
    if ":" in value:
        raise Bad(f"{shown(value)} holds ':', Docker's --volume separator",
                  "use a folder without ':'")
    return value


def _ip(value: Any) -> str:
    if not isinstance(value, str):
        raise Bad(f"{shown(value)} is {_type_name(value)}, not an IP address",
                  "write it as a string, e.g. '127.0.0.1'")
    # its ValueError: the key's declared problem and fix; one spelling of each address
    # (`0:0:0:0:0:0:0:0` is `::`), as the rules that ask for `::` compare it
    return str(ipaddress.ip_address(value))


IpAddress = Annotated[str, BeforeValidator(_ip)]


def listen_on(doc: str) -> Any:
    """A key of the address a server listens on, loopback unless set."""
    return key("127.0.0.1", "IP address", doc, "use 127.0.0.1", "is not an IP address")


def one_word(key_text: str) -> bool:
    """A key the gateway can carry: an HTTP header value and a map line, so no space and no
    control character."""
    return not any(c.isspace() or not c.isprintable() for c in key_text)


KEY_FIX = "point it at a file on the controller that holds the key"


def api_key(doc: str) -> Any:
    """A key of an API key's file on the controller (checked by key_file)."""
    return key(None, "path", doc, KEY_FIX, "is not a file name")


def _server_key(text: str, where: str) -> None:
    """A server's key: one line, which llama-server reads whole."""
    if "\n" in text or "\r" in text:
        raise Bad(f"the key in {where} holds more than one line",
                  "keep the key alone on one line in the file (several keys, one a user: the "
                  "gateway's api_key_file)")
    if any(c in text for c in ',"'):
        # llama-server reads LLAMA_API_KEY as a CSV row of keys (common/arg.cpp): `a,b` is two
        # keys and a quote is dropped, so the key the smoke check and the gateway send fails
        raise Bad(f"the key in {where} holds ',' or '\"', which llama-server reads as a list of "
                  "keys", "use a key without them, e.g. `openssl rand -hex 32`")


def _gateway_keys(text: str, where: str) -> None:
    """The gateway's keys, one a line (one a user: HAProxy reads the file as an ACL's
    patterns, a line each), each one word (an HTTP header's value)."""
    # as HAProxy splits its pattern file: at LF alone, a CR before it dropped (any other line
    # break Python knows stays in the line, where one_word refuses it)
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    for n, line in enumerate(lines, 1):
        which = "the key" if len(lines) == 1 else f"the key on line {n}"
        if not one_word(line):
            raise Bad(f"{which} in {where} holds a space or a control character",
                      "use a key of printable characters without spaces, e.g. "
                      "`openssl rand -hex 32`")
        if line.startswith("#"):
            # a comment to HAProxy's pattern reader: that key would match no client
            raise Bad(f"{which} in {where} starts with '#', which HAProxy reads as a comment "
                      "in the gateway's key file (every request would get 401)",
                      "use a key that does not start with '#', e.g. `openssl rand -hex 32`")


def key_file(value: str, one_word_key: bool) -> str:
    """A key file on the controller: present, not empty, not readable by others; a server's
    one line; with `one_word_key` the gateway's, one key a line, each one word."""
    if not value:
        raise ValueError("empty")  # the key's declared problem and fix
    safe_text(value, "the path")
    if value.startswith("~"):
        raise Bad(f"{shown(value)} starts with ~, which nothing expands here",
                  f"give the path in full, e.g. {os.path.expanduser(value)!r}")
    path = Path(value)
    # echoed whole, marked: ConfigError cuts a long one (errors.refusal_line)
    where = echo(value) if path.is_absolute() else \
        f"{echo(value)} (relative to the folder pyinfra runs in: {echo(Path.cwd() / value)})"
    try:
        # as read by the tools that read it: no line-end translation (a lone CR stays one)
        text = path.read_bytes().decode().strip() if path.is_file() else ""
    except (OSError, UnicodeDecodeError) as e:
        raise Bad(f"{where} cannot be read ({type(e).__name__}: {e.strerror or e})"
                  if isinstance(e, OSError) else f"{where} is not text",
                  "point it at a text file on the controller, readable by the user running "
                  "pyinfra, that holds the key") from None
    if not text:
        raise Bad(f"{where} is missing or empty", KEY_FIX)
    if path.stat().st_mode & 0o077:
        # quoted for a shell: the fix is pasted as it is (a Mac's iCloud Drive folder is
        # `Mobile Documents`)
        raise Bad(f"{where} is readable by others", f"chmod 600 {echo(shlex.quote(value))}")
    (_gateway_keys if one_word_key else _server_key)(text, where)
    return value


def _profile(value: str) -> str:
    if value not in PROFILES:
        guess = near(value, sorted(PROFILES))
        raise Bad(f"unknown profile {shown(value)}",
                  f"did you mean {guess!r}? (profiles: `beekeeper profiles`)" if guess
                  else f"use one of: {', '.join(sorted(PROFILES))}")
    return value


def _service_name(value: str) -> str:
    if value == "gateway":
        raise Bad("'gateway' is the gateway's own unit (beekeeper-gateway.service)",
                  "name the service otherwise, e.g. 'llm'")
    return value


def _hub_repo(value: str) -> str:
    """The Hub's own rule for a repository id (huggingface_hub's validate_repo_id): `a/b-`,
    `a/b..c` pass the kit's pattern and fail in the client otherwise."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(value)
    except HFValidationError as e:
        reason = str(e).splitlines()[0].rstrip(".") if str(e) else "refused"
        # its reason may end quoting the value, which shown() has quoted (cut) already
        reason = reason.removesuffix(f": '{value}'").removesuffix(f": {value}").rstrip(".")
        raise Bad(f"{shown(value)} is not a Hub repository id (huggingface_hub: {reason})",
                  "use 'owner/name' as the Hub shows it, e.g. 'unsloth/Qwen3.5-9B-GGUF'") \
            from None
    return value


def _ctx_size_given(value: Any) -> Any:
    if isinstance(value, str):
        raise Bad(f"{shown(value)} is a string, not a number",
                  f"write ctx_size = {value.strip() if value.strip().isdigit() else 8192}"
                  " without quotes")
    return value


def _text_version(pattern: str) -> Callable[[Any], str]:
    """A release or arch list given as a string or a number (13.2, 89): its text (else its
    key's declared problem and fix)."""
    def check(value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int | float) \
                or not full(pattern, str(value)):
            raise ValueError(pattern)
        return str(value)
    return check


def _arch_list(value: str) -> str:
    """Each arch's suffix one CUDA knows, on an arch that has it: `a` from sm_90, `f` from
    sm_100 (CUDA 12.9); else nvcc fails after the build started."""
    for arch in value.split(";"):
        n, suffix = split_arch(arch)
        digits = str(n)
        floor = {"": 0, "a": 90, "f": 100}.get(suffix)
        where = "" if arch == value else f" (in {shown(value)})"
        if floor is None:
            raise Bad(f"{arch!r}{where} ends in {suffix!r}, which is no CUDA arch suffix",
                      f"write {digits!r}; CUDA's suffixes are 'a' (that GPU only, sm_90a and "
                      "newer) and 'f' (its family, sm_100f and newer)")
        if n < floor:
            kind = "architecture-specific: sm_90a and newer" if suffix == "a" else \
                "family-specific: sm_100f and newer"
            raise Bad(f"{arch!r}{where}: sm_{digits} has no {suffix!r} variant ({kind})",
                      f"write {digits!r}")
    return value


def _stages(value: list[str]) -> tuple[str, ...]:
    if not value or tuple(value) != STAGES[:len(value)]:
        raise Bad(f"{shown(value)} is not a prefix of {list(STAGES)}",
                  "e.g. ['provision'] or ['provision', 'build']")
    return tuple(value)


def _endpoint(value: str) -> str:
    safe_text(value, "the URL")
    return value.rstrip("/")


def _address(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        if full(HOSTNAME, value) and len(value) <= 253:
            return value
    raise Bad(f"{shown(value)} is not an IP address or a host name",
              "give the address the gateway reaches this host at, e.g. '10.0.0.5' or "
              "'gpu-box.lan'")


# where credentials belong instead of a URL, per key
CREDENTIALS_FIX = {
    "git": "give the URL without them and let the host's root in another way that stays off "
           "command lines: an ssh:// URL with a deploy key in /root/.ssh, a git credential "
           "helper on the host (`git config --system credential.helper store`, "
           "/root/.git-credentials mode 600), or source.path (a .tar.gz of a source tree on the "
           "controller)",
    "hub": "give the mirror's URL without them; a mirror that takes a Hub token reads it from "
           "hf_token_file (a root-only file on the host, sent as a bearer token)",
    "apt": "give the URL without them and put the login in a root-only file in "
           "/etc/apt/auth.conf.d/ on the host (apt_auth.conf(5): `machine HOST login USER "
           "password PASS`), which apt reads for that repository",
}


def no_credentials(kind: str) -> BeforeValidator:
    """Refuse a URL carrying credentials (a password in any scheme, any user in http(s)):
    pyinfra's output, `ps` and world-readable files would show them."""
    def check(value: Any) -> Any:
        if not isinstance(value, str) or not has_credentials(value):
            return value
        kinds = {userinfo_kind(m.group(0)) for m in URL.finditer(value)}
        # not quoted even redacted: where the password ends cannot be told
        if RAW in kinds:
            raise Bad("the URL holds user information with a raw '#', '?' or '/' (a URL "
                      "parser ends the host there and reads the rest of the password as the "
                      "port, path, query or fragment, where it would be printed)",
                      f"keep the login off the URL, in a root-only file: {CREDENTIALS_FIX[kind]}"
                      "; where a URL must hold a password (a git credential-store line), "
                      "percent-encode it: # as %23, ? as %3F, / as %2F")
        if AMBIGUOUS in kinds:
            raise Bad("the URL has an '@' after its host, which cannot be told from user "
                      "information whose password holds a raw '/', '?' or '#' (`user:12/34@h` "
                      "reads as host `user`, port 12, path `/34@h`), so a password would be "
                      "printed as the path",
                      "percent-encode it (in a password / as %2F, ? as %3F, # as %23; an '@' "
                      "in a path as %40), or give the token in a root-only file: "
                      f"{CREDENTIALS_FIX[kind]}")
        what = "; ".join(s for m in URL.finditer(value) for s in url_secrets(m.group(0)))
        raise Bad(f"{shown(redact(value))} carries credentials in the URL ({what}; they "
                  "would be printed in pyinfra's output and the host's command lines, logs "
                  "and files)", CREDENTIALS_FIX[kind])
    return BeforeValidator(check)


def _given(value: Any) -> Any:
    if value is None:
        raise Bad("None is not a value for it", "give a value, or remove the key")
    return value


def _seq(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _mapping(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value


Strict = ConfigDict(extra="forbid", strict=True, frozen=True)
Text = Annotated[str, AfterValidator(lambda v: safe_text(v, "the value"))]
# an image's digest after its '@' (OCI: algorithm:encoded), the only '@' a reference holds
_DIGEST = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*:[A-Fa-f0-9]{32,}")


def _image_login(value: Any) -> Any:
    """An '@' in an image reference other than its digest's is a registry login: refused
    before the pattern, never quoted."""
    if isinstance(value, str) and "@" in value and not (
            value.count("@") == 1 and _DIGEST.fullmatch(value.split("@", 1)[1])):
        raise Secret("the image reference holds an '@' that is not a digest's (name@sha256:...): "
                  "a registry login (user:password@) there would be printed and written into "
                  "the Dockerfile",
                  "name the image as 'registry/name:tag' or 'name@sha256:<64 hex digits>'; a "
                  "registry that needs a login gets it on the host with `docker login` (root's "
                  "~/.docker/config.json), never in host data")
    return value


ImageRef = Annotated[str, Field(pattern=IMAGE_REF), BeforeValidator(_image_login)]
Seq = BeforeValidator(_seq)
AptUrl = Annotated[Text, no_credentials("apt")]


class NvidiaRepos(BaseModel):
    """Host data `nvidia_repos`: mirrors of NVIDIA's apt repositories and their keys."""

    model_config = Strict
    cuda: AptUrl | None = key(None, "URL", "the CUDA apt repository (native mode)",
                              "give the mirror's URL as a string")
    cuda_key: AptUrl | None = key(None, "URL", "its signing key", "give the key's URL")
    toolkit: AptUrl | None = key(None, "URL", "the Container Toolkit's apt repository",
                                 "give the mirror's URL as a string")
    toolkit_key: AptUrl | None = key(None, "URL", "its signing key", "give the key's URL")


class BaseImages(BaseModel):
    """Host data `base_images`: the images the server image is built from."""

    model_config = Strict
    build: ImageRef | None = key(
        None, "image reference", "the build stage's image (default: NVIDIA's CUDA devel image "
        "for cuda_version, or Debian for a CPU profile)",
        "e.g. 'debian:bookworm' or 'nvidia/cuda:13.2.1-devel-ubuntu24.04'",
        "is not an image reference")
    runtime: ImageRef | None = key(
        None, "image reference", "the runtime stage's image",
        "e.g. 'debian:bookworm-slim' or 'nvidia/cuda:13.2.1-runtime-ubuntu24.04'",
        "is not an image reference")


class SourceData(BaseModel):
    """Host data `source`: where the server is built from."""

    model_config = Strict
    git: Annotated[Annotated[Text, Field(pattern=GIT_URL)] | None, BeforeValidator(_given),
                   no_credentials("git")] = key(
        None, "URL", "a git repository to build from, at the commit `ref`",
        "give the repository's URL, e.g. 'https://github.com/o/r'", "is not a git URL")
    path: Annotated[str | None, path_of("/srv/src/llama.cpp.tar.gz")] = path(
        None, "a .tar.gz of a source tree on the controller, named `ref`")
    # a string once validated: None (given or not) is refused by one_source as missing
    ref: Annotated[Text, BeforeValidator(lambda v: "" if v is None else v)] = key(
        None, "string", "the commit (40 hex digits) for `git`; a snapshot name (letters, "
        "digits, `.`, `_`, `-`) for `path`", "give the commit (40 hex digits) or snapshot "
        "name in quotes", "is not a string")

    @property
    def kind(self) -> str:
        """'git', or 'local' (`path`: a .tar.gz of a source tree on the controller)."""
        return "git" if self.git is not None else "local"

    @model_validator(mode="after")
    def one_source(self) -> SourceData:
        """`git` or `path`, and a ref of the kind it needs."""
        if not self.ref:
            raise Bad("missing", "pin the source to a commit or a named snapshot", at="ref")
        if self.git is not None and self.path is not None:
            raise Bad("both `git` and `path` given", "keep one of them")
        if self.git is not None and not full(GIT_SHA, self.ref):
            raise Bad(f"{shown(self.ref)} is not a full commit hash (40 hex digits)",
                      f"`git rev-parse {cut(self.ref)}` in a clone of {echo(self.git)} prints "
                      "the full hash to pin (a branch, tag or short hash cannot be fetched by "
                      "commit)",
                      at="ref")
        if self.path is not None and not full(LOCAL_REF, self.ref):
            raise Bad(f"{shown(self.ref)} is not a snapshot name", "use letters, digits, '.', '_' "
                      "and '-' (at most 64), e.g. 'lcp0.3.36'", at="ref")
        if self.git is None and self.path is None:
            raise Bad("neither `git` nor `path` given", "add one of them")
        return self


class GatewayData(BaseModel):
    """Host data `gateway`: this host is a gateway (docs/gateway.md)."""

    model_config = Strict
    port: int = tcp_port(4000, "the gateway's port")
    bind_address: IpAddress = listen_on("the address it listens on; not loopback needs "
                                        "`api_key_file`")
    api_key_file: Annotated[str, AfterValidator(lambda v: key_file(v, True))] | None = api_key(
        "a file on the controller holding the keys clients may send, one a line (one word "
        "each; one a user), mode 600")
    check_interval_s: int = whole(
        2, 1, 60, "seconds between health checks of each backend (out after 2 failures, back "
        "after 2 successes)", "e.g. check_interval_s = 2 (no quotes)")
    max_body_kib: int = whole(
        1024, 64, 65536, "the largest request body read whole to find its `model`",
        "e.g. max_body_kib = 1024 (no quotes)")
    timeout_s: int = whole(600, 10, 86400, "the longest a request (a long generation) may take",
                           "e.g. timeout_s = 600 (no quotes)")


def _extra_args(args: list[str]) -> tuple[str, ...]:
    """More llama-server flags: never one the kit sets, a secret, or a URL with credentials."""
    value_next = False
    for arg in args:
        safe_text(arg, "each argument")
        if has_credentials(arg):
            raise Bad(f"{shown(redact(arg))} carries credentials in a URL, which would be on "
                      "the server's command line", "give the URL without them")
        is_value, value_next = value_next or bool(NUMBER.fullmatch(arg)), False
        if is_value or not arg.startswith("-"):
            continue
        # the flag before an `=`, which llama.cpp's parser refuses: `--port=1` is refused
        # here as the kit's flag
        flag = flag_name(arg.split("=", 1)[0])
        if flag in SECRET_FLAGS:  # never quoted: its value may be in the same word
            kit = " and sets what the kit sets itself" if flag in KIT_FLAGS else ""
            raise Bad(f"{flag} puts a secret on the server's command line, which every user "
                      f"of the host can read (ps, systemctl status){kit}",
                      f"remove it and use {SECRET_FLAGS[flag]}" + (
                          " (extra arguments may add flags, never replace the kit's)"
                          if kit else ""))
        if flag in KIT_FLAGS:
            raise Bad(f"{shown(arg)} sets what the kit sets itself ({KIT_FLAGS[flag]})",
                      f"remove {flag} and use {KIT_FLAGS[flag]} (extra arguments may add "
                      "flags, never replace the kit's)")
        value_next = flag in TEXT_VALUE_FLAGS and "=" not in arg
    return tuple(args)


# what a model's file name may hold (HF_FILE): every command line carries it as one word
GGUF_NAME_FIX = ("a model file name is letters, digits and . _ + - (no space), starts with a "
                 "letter or digit and ends .gguf: rename the file, or point a symlink so "
                 "named at it")


def _gguf_name_problem(name: str) -> str | None:
    """What in a model file's name the kit cannot carry (None: nothing)."""
    if re.match(HF_FILE, name):
        return None
    if not name.endswith(".gguf"):
        return "does not end .gguf"
    if not (name[:1].isascii() and name[:1].isalnum()):
        return f"starts with {name[:1]!r}"
    bad = dict.fromkeys(c for c in name if not (c.isascii() and (c.isalnum() or c in "._+-")))
    return "holds " + ", ".join("' ' (a space)" if c == " " else repr(c) for c in bad)


# the first file of a split GGUF, as llama-gguf-split names its parts (llama.cpp's
# llama_split_path): the server finds the others beside it by this pattern
SPLIT_GGUF = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


def _one_file(value: str) -> str:
    """A model the kit places and checks as one file (uploaded, downloaded from the Hub, or
    on the host): not a part of a split GGUF, whose other parts the server looks for beside
    it, and which the sha256 and the VRAM plan (its tensors) would leave out."""
    m = SPLIT_GGUF.search(os.path.basename(value))
    if m is None or int(m.group(2)) <= 1:
        return value
    raise Bad(f"{shown(value)} is part {int(m.group(1))} of a split GGUF of {int(m.group(2))} "
              "files, and the kit places, checks (sha256) and plans (VRAM) one file per model, "
              "so the server could not load it or would load more than was planned",
              "merge the parts into one file (`llama-gguf-split --merge FIRST-PART OUT.gguf`) "
              "and give that file as model_path or model_host_path (a draft: put the merged file "
              "in a Hub repository of yours and name it in draft_file)")


def _placed_gguf_path(value: str) -> str:
    problem = _gguf_name_problem(os.path.basename(value))
    if problem is not None:
        raise Bad(f"{shown(value)}: its file name {problem}", GGUF_NAME_FIX)
    return _one_file(value)


def _hub_file(value: Any) -> Any:
    """A Hub file name the kit can carry (HF_FILE), else a renamed copy as model_path; not
    a string, or too long: left to the declared checks."""
    if not isinstance(value, str) or len(value) > 255:
        return value
    problem = _gguf_name_problem(value)
    if problem is None:
        return _one_file(value)
    raise Bad(f"{shown(value)} {problem}",
              f"{GGUF_NAME_FIX.split(':')[0]}; for a Hub file so named, download it, rename "
              "it, and give that file as model_path (draft files: rename it in a repository "
              "of yours)")


def _model_alias(value: Any) -> str:
    """A name a client can send as `model` and the server's command line can carry."""
    fix = ("give one word of letters, digits and . _ - : / + (at most "
           f"{MODEL_ALIAS_MAX}), e.g. model_alias = 'qwen3.5-9b'")
    if not isinstance(value, str):
        raise Bad(f"{shown(value)} is {_type_name(value)}, not a name", fix)
    if not value:
        raise Bad("empty", fix + ", or remove it (the profile's name)")
    bad = next((c for c in value if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        kind = "a space" if bad == " " else "whitespace" if bad.isspace() else \
            "a control character"
        raise Bad(f"{shown(value)} holds {kind} ({bad!r}), which a client's `model` and the "
                  "server's command line cannot carry as one name", fix)
    if len(value) > MODEL_ALIAS_MAX:
        raise Bad(f"{shown(value)} is {len(value)} characters long", fix)
    if not full(MODEL_ALIAS, value):
        odd = next((c for c in value if not (c.isascii() and (c.isalnum() or c in "._:/+-"))),
                   None)
        what = f"holds {odd!r}" if odd is not None else "does not start with a letter or digit"
        raise Bad(f"{shown(value)} {what}", fix)
    return value


PERSISTENT_FIX = ("give a folder on the pod's volume, e.g. persistent_root = "
                  "'/workspace/beekeeper', or persistent_root = 'none' where the container's "
                  "own disk is kept (Vast.ai)")


def _persistent_root(value: Any) -> Any:
    """'none' (the standard layout), or an absolute folder (normalized)."""
    if value is None or value == PERSISTENT_NONE:
        return value
    if isinstance(value, str) and value.strip().lower() == PERSISTENT_NONE:
        raise Bad(f"{shown(value)} is not a path", "write persistent_root = 'none' (lowercase)")
    try:
        return abs_path(value, "/workspace/beekeeper")
    except Bad as e:  # not a path, or not absolute: the folder it wants, said here
        absolute = e.fix.startswith(("give an absolute", "use an absolute"))
        raise Bad(e.problem, PERSISTENT_FIX if absolute else e.fix) from None


HubRepo = Annotated[str, Field(pattern=HF_REPO), AfterValidator(_hub_repo)]
# a file name and a git ref are at most 255 bytes (NAME_MAX; git refuses a longer ref)
HubFile = Annotated[str, Field(pattern=HF_FILE, max_length=255), BeforeValidator(_hub_file)]
Revision = Annotated[str, Field(pattern=r"^[^\s\x00-\x1f]+$", max_length=255)]
Sha256 = Annotated[str, Field(pattern=SHA256_RE.pattern)]


def _pin(role: str, part: str) -> Any:
    """model_* or draft_*: a GGUF in a Hub repository, pinned or resolved once."""
    what = "model" if role == "model" else "draft model"
    only = "" if role == "model" else " (a profile with a draft only)"
    return {
        "repo": key(None, "Hub repo id", f"the {what}'s Hub repository (owner/name), "
                    f"instead of the profile's (another one needs {role}_file){only}",
                    "use 'owner/name', e.g. 'unsloth/Qwen3.5-9B-GGUF'",
                    "is not a Hub repository id"),
        "file": key(None, "file name", f"the {what}'s .gguf file in that repository{only}",
                    "give the file's name in the repository, e.g. 'Qwen3.5-9B-Q8_0.gguf'",
                    "is not a .gguf file name"),
        "revision": key(None, "string", f"the {what}'s commit (40 hex digits), or a branch "
                        f"or tag the kit pins once{only}", "give a commit (40 hex digits), or a "
                        "branch or tag the kit pins once", "is not a revision"),
        "sha256": key(None, "sha256", f"the {what} file's sha256, checked on the host{only}",
                      "give 64 lowercase hex digits", "is not a sha256"),
    }[part]


class ServiceData(BaseModel):
    """The keys one model service reads: a `services` entry, or the top level without it."""

    model_config = Strict
    service_name: Annotated[str, Field(pattern=SERVICE_NAME), AfterValidator(_service_name)] \
        = key("llm", "name", "the service's name: unit beekeeper-NAME.service, container "
              "beekeeper-NAME", "use lowercase letters, digits and dashes, starting with a "
              "letter", "is not a valid name")
    profile: Annotated[str, AfterValidator(_profile)] | None = key(
        None, "profile name", "what to serve: model, context, slots, KV types "
        "(`beekeeper profiles`); required", f"use one of: {', '.join(sorted(PROFILES))}",
        "is not a profile name")
    port: int = tcp_port(DEFAULT_PORT, "the server's port")
    bind_address: IpAddress = listen_on("the address the server listens on; not loopback "
                                        "needs `api_key_file`")
    # a server takes any key of one line; the gateway's must be one word
    api_key_file: Annotated[str, AfterValidator(lambda v: key_file(v, False))] | None = api_key(
        "a file on the controller holding the API key clients must send (mode 600; a relative "
        "path is read from the folder pyinfra runs in)")
    ctx_size: Annotated[int, BeforeValidator(_ctx_size_given)] | None = key(
        None, "integer", "the context in tokens, shared by the slots (256 to the model's "
        "trained context a slot; default: the profile's)",
        "give a number of tokens, e.g. ctx_size = 8192 (no quotes)", "is not a whole number")
    slots: int | None = whole(
        None, 1, MAX_SLOTS, "request slots: how many requests the server runs "
        "at once (llama-server -np), each with ctx_size / slots tokens of context, one "
        "recurrent state each in the VRAM plan; default: the profile's (1 but cpu-tiny-4slot)",
        f"give a whole number from 1 to {MAX_SLOTS}, e.g. slots = 2 (no quotes)",
        "is not a number of slots")
    server_extra_args: Annotated[list[str], Seq, AfterValidator(_extra_args)] = key(
        (), "list of strings", "more llama-server flags, added after the kit's (never one "
        "the kit sets: host, port, key, model, context, slots, KV types ...)",
        "e.g. ['--threads', '8']", "is not a list of strings")
    state: Literal["present", "absent"] = key(
        "present", "'present' or 'absent'", "'absent': stop and remove the service on the "
        "next deploy (its model is kept)", "use 'present', or 'absent' to stop and remove "
        "the service on the next deploy (its model is kept)", "is not a service state")
    gateway_port: int | None = tcp_port(None, "the port a gateway reaches this service on, "
                                        "when not `port` (an SSH forward)")
    model_repo: HubRepo | None = _pin("model", "repo")
    model_file: HubFile | None = _pin("model", "file")
    model_revision: Revision | None = _pin("model", "revision")
    model_sha256: Sha256 | None = _pin("model", "sha256")
    model_path: Annotated[str, path_of("/srv/gguf/my-model-Q8_0.gguf"),
                          AfterValidator(_placed_gguf_path)] | None = path(
        None, "a GGUF of your own on the controller, uploaded once into model_dir and checked "
        "by sha256 (model_sha256, or the file's own); no Hub request")
    model_host_path: Annotated[str, path_of("/data/models/my-model-Q8_0.gguf"),
                               AfterValidator(_placed_gguf_path)] | None = path(
        None, "a GGUF already on the host, served where it is (needs model_sha256, checked on "
        "the host; the uninstall never removes it); no Hub request")
    model_alias: Annotated[str, BeforeValidator(_model_alias)] | None = key(
        None, "name", "the model name clients send (`model` in a request; what /v1/models "
        "lists) (default: the profile's name)", "e.g. model_alias = 'qwen3.5-9b', or remove "
        "it", "is not a model name")
    draft_repo: HubRepo | None = _pin("draft", "repo")
    draft_file: HubFile | None = _pin("draft", "file")
    draft_revision: Revision | None = _pin("draft", "revision")
    draft_sha256: Sha256 | None = _pin("draft", "sha256")


# True or False; None (written out) is the default, False
Flag = Annotated[bool, BeforeValidator(lambda v: False if v is None else v)]
Mapping_ = BeforeValidator(_mapping)


class HostData(ServiceData):
    """Every key of one inventory host (with one service's, read without `services`)."""

    mode: Literal["container", "native"] = key(
        "container", "'container' or 'native'", "the server in a Docker container, or "
        "built and run on the host", "use 'container' or 'native'", "is not a mode")
    runtime: Literal["systemd", "compose", "supervisor"] | None = key(
        None, "'systemd', 'compose' or 'supervisor'", "what runs the server: a systemd unit "
        "(around `docker run`, or the native binary), a compose project, or supervisord "
        "(native mode, hosts whose PID 1 is not systemd; default there) (default: compose "
        "with Docker Desktop, supervisor where PID 1 is not systemd, else systemd; WSL2 is the "
        "exception: without systemd it is refused unless mode = 'native' and runtime = "
        "'supervisor' are both given, since turning systemd on in /etc/wsl.conf is the "
        "better fix there: systemd starts the server again when the distro starts, the kit's "
        "supervisord only from a `command` under `[boot]` in /etc/wsl.conf)",
        "use runtime = 'systemd', 'compose' or 'supervisor'", "is not a runtime")
    services: Annotated[list[ServiceData], Seq] | None = key(
        None, "list of service mappings", "the host's model services, one mapping each (the "
        "service keys above); [] for a gateway-only host", "give one dict per service, [] "
        "for none, or drop `services`", "is not a list of dicts")
    model_dir: Annotated[str, path_of(MODEL_DIR), AfterValidator(_model_dir)] = path(
        MODEL_DIR, "where models are kept on the host")
    state_dir: Annotated[str, path_of(STATE_DIR)] = path(
        STATE_DIR, "the kit's state on the host (builds, logs)")
    persistent_root: Annotated[str, BeforeValidator(_persistent_root)] | None = key(
        None, "path or 'none'", "runtime supervisor (GPU containers): the folder on the pod's "
        "volume that keeps all the kit needs to start the server again after the pod restarts"
        "; 'none': the standard layout (/opt, /etc, /var) (default: /workspace/beekeeper "
        "where /workspace is a folder not on the container's overlay, else 'none')",
        PERSISTENT_FIX, "is not an absolute path or 'none'")
    source: Annotated[SourceData, Mapping_] | None = mapping(
        "what the server is built from: {'git': URL, 'ref': COMMIT} or {'path': FILE, 'ref': "
        "NAME}; required", SOURCE_FIX)
    cuda_version: Annotated[str, BeforeValidator(_text_version(CUDA_VERSION))] = key(
        "13.2.1", "CUDA release", "the CUDA release the server is built for",
        "e.g. cuda_version = '13.2.1'", "is not a CUDA release")
    cuda_arch: Annotated[str, BeforeValidator(_text_version(CUDA_ARCH)),
                         AfterValidator(_arch_list)] | None = key(
        None, "arch list", "the GPU architectures compiled for (default: the card's)",
        "e.g. '89' or '89;120'", "is not a CUDA arch list")
    vram_budget_gib: Annotated[float, Field(gt=0, le=4096, allow_inf_nan=False)] = key(
        10.0, "number of GiB", "the VRAM the services on one card may plan together",
        "e.g. vram_budget_gib = 10 (no quotes)", "is not a number of GiB above 0 and up to "
        "4096")
    health_timeout_s: int = whole(
        300, 10, 86400, "how long a started server may take to answer /health",
        "e.g. health_timeout_s = 300 (no quotes)",
        "is not a whole number of seconds from 10 to 86400")
    build_jobs: int | None = whole(None, 1, 1024, "parallel compile jobs (default: the host's "
                                   "cores)", "e.g. build_jobs = 4 (no quotes), or remove it")
    base_images: Annotated[BaseImages, Mapping_] | None = mapping(
        "`build` and `runtime` images instead of the defaults",
        "e.g. base_images = {'build': 'debian:bookworm', 'runtime': 'debian:bookworm-slim'}",
        strings=True)
    preload_images: Annotated[dict[Annotated[Text, Field(pattern=IMAGE_REF),
                                         BeforeValidator(_image_login)], Annotated[
        str, path_of("/srv/images/debian-bookworm.tar")]], Mapping_] | None = mapping(
        "image -> a `docker save` tar on the controller, loaded instead of pulled",
        "name each image as the Dockerfile does, e.g. "
        "{'debian:bookworm': '/srv/images/debian.tar'}", strings=True,
        key_problem="is not an image reference (each key names an image)")
    install_docker: bool = flag("install Docker Engine when it is missing", True,
                                "write install_docker = True or False (no quotes)")
    stages: Annotated[list[Literal[STAGES]], Seq, AfterValidator(_stages)] = key(  # type: ignore[valid-type]
        STAGES, "list", f"a prefix of {list(STAGES)}: stop after it",
        "e.g. ['provision'] or ['provision', 'build']", f"is not a prefix of {list(STAGES)}")
    hf_endpoint: Annotated[str, Field(pattern=HTTP_URL), AfterValidator(_endpoint),
                           no_credentials("hub")] = key(
        DEFAULT_HF_ENDPOINT, "URL", "the Hugging Face Hub, or a mirror of it",
        f"remove it (the Hub, {DEFAULT_HF_ENDPOINT}) or give a mirror's URL",
        "is not an http(s) URL")
    server_webui: bool = flag("build beellama's web UI into the server",
                              fix="set True or False")
    gateway: Annotated[GatewayData, Mapping_] | None = mapping(
        "make this host a gateway (its keys: `gateway.*` below); {} for the defaults",
        "write gateway = {} for the defaults, or e.g. gateway = {'port': 4000}")
    gateway_address: Annotated[str, AfterValidator(_address)] | None = key(
        None, "IP or host name", "where a gateway on another host reaches this host's "
        "services", "give the address the gateway reaches this host at, e.g. '10.0.0.5'",
        "is not an IP address or a host name")
    nvidia_repos: Annotated[NvidiaRepos, Mapping_] | None = mapping(
        "mirrors of NVIDIA's repositories: cuda, cuda_key, toolkit, toolkit_key",
        "e.g. nvidia_repos = {'cuda': 'https://mirror/cuda/repos/ubuntu2404/x86_64'}",
        strings=True)
    driver_branch: Annotated[int, Field(ge=100, le=9999)] | None = key(
        None, "integer", "the NVIDIA driver branch for native Linux (default: the one "
        "cuda_version ships with)", "e.g. driver_branch = 595 (no quotes), or remove it",
        "is not a driver branch (a whole number from 100 to 9999)")
    container_toolkit_version: Annotated[str, Field(pattern=PACKAGE_VERSION)] | None = key(
        None, "apt version", "the NVIDIA Container Toolkit's version (default: the kit's pin)",
        "e.g. '1.17.8-1', or remove it", "is not a package version")
    install_cuda_toolkit: Flag = flag("install the CUDA toolkit in container mode too "
                                      "(native mode always does)")
    hf_token_file: Annotated[str, path_of(HF_TOKEN)] | None = path(
        None, "a file on the host holding a Hugging Face token, for gated models (root-only, "
        "mode 600; checked on the host before any change)")
    allow_reboot: Flag = flag("reboot after installing the NVIDIA driver instead of stopping")
    use_docker_desktop: Flag = flag("use Docker Desktop's WSL integration as the engine")
    upgrade_driver: Flag = flag("native Linux with a driver older than cuda_version needs: "
                                "replace it with the pinned branch")
    cuda_follows_driver: Flag = flag("build for the newest CUDA the installed driver runs, "
                                     "instead of cuda_version")
    driver_flavour: Literal["open", "proprietary"] = key(
        "open", "'open' or 'proprietary'", "NVIDIA's open kernel modules (Turing and newer, "
        "required for Blackwell) or the proprietary ones (before Turing)",
        "driver_flavour = 'open' (Turing and newer) or 'proprietary'",
        "is not a driver flavour")


def fail(key: str, problem: str, fix: str) -> ConfigError:
    """The kit's one line for host data `key` (errors.Refusal: redacted, one line, cut)."""
    return ConfigError(host_data(key), problem, fix)


# host data's mappings of declared keys (`source.ref`: a refusal's key and a README row)
_MAPPINGS = {"source": SourceData, "gateway": GatewayData, "base_images": BaseImages,
             "nvidia_repos": NvidiaRepos}
_INNER = {**_MAPPINGS, "services": list, "preload_images": dict}


def _walk(loc: tuple[str | int, ...]) -> tuple[str, type[BaseModel] | None, Any, int]:
    """The key an error's location names (`services[0].port`, `preload_images['a:b']`), the
    model holding its last part, that part's field (ENTRY: a `services` entry not a
    mapping), and how many parts of `loc` name it."""
    model: Any = HostData
    out, field = "", None
    for depth, part in enumerate(loc):
        if isinstance(model, type) and issubclass(model, BaseModel):
            if not isinstance(part, str) or part not in model.model_fields:
                return f"{out}.{part}" if out else str(part), model, None, depth + 1
            field = model.model_fields[part]
            out += f".{part}" if out else part
            model = _INNER.get(part)
        elif model is list and isinstance(part, int):
            out, model, field = f"{out}[{part}]", ServiceData, ENTRY
        elif model is dict and isinstance(part, str) and part != "[key]":
            return f"{out}[{part!r}]", None, field, depth + 1
        else:
            return out, None, field, depth
    return out, None, field, len(loc)


def _at(raw: Any, loc: tuple[str | int, ...]) -> Any:
    """The value host data gave at `loc` (None: unreadable)."""
    try:
        for part in loc:
            raw = raw[part]
    except (KeyError, IndexError, TypeError):
        return None
    return raw


ENTRY = Field(json_schema_extra={
    "problem": "is not a mapping", "fix": "give each service as a dict, e.g. "
    "{'service_name': 'llm', 'profile': 'cpu-tiny', 'port': 8083}"})


UNKNOWN_KEY = "unknown key: beekeeper and pyinfra do not read it"


def did_you_mean(name: str, known: list[str], prefix: str = "") -> str:
    """The fix for an unknown key: the closest known one, else where the keys are listed."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return f"did you mean `{prefix}{close[0]}`? (or remove it)" if close else \
        "remove it (the keys the kit reads are listed in the README, Host data keys)"


def translate(error: Any, raw: Mapping[str, Any],
              typed: frozenset[str] = frozenset()) -> ConfigError:
    """One of pydantic's errors as the kit's line: the key, the problem, the fix (`typed`:
    the keys given on the pyinfra command line, `--data KEY=VALUE`)."""
    key, model, field, depth = _walk(error["loc"])
    if error["type"] == "extra_forbidden":  # only a declared model forbids a key
        assert model is not None and issubclass(model, BaseModel)
        prefix, _, name = key.rpartition(".")
        return fail(key, UNKNOWN_KEY, did_you_mean(name, sorted(model.model_fields),
                                                   prefix + "." if prefix else ""))
    ctx = error.get("ctx") or {}
    bad = ctx.get("error")
    if isinstance(bad, Bad):
        if isinstance(bad, Secret) and error["loc"][-1] == "[key]":  # named by its mapping
            key = key.split("[", 1)[0]
        return fail(f"{key}.{bad.at}" if bad.at else key, bad.problem,
                    typed_fix(key, bad.fix, "") if key in typed else bad.fix)
    extra = {**UNSAID, **((field.json_schema_extra or {}) if field is not None else {})}
    fix = str(extra["fix"])
    if key in typed:  # a top-level key: typed names no other
        fix = typed_fix(key, fix, str(extra.get("kind")))
    value = error.get("input") if depth == len(error["loc"]) else _at(raw, error["loc"][:depth])
    if error["loc"][-1] == "[key]":  # a mapping's key broke its pattern: the key is the value
        return fail(key, f"the key {shown(error['loc'][-2])} {extra['key_problem']}", fix)
    if error["type"] == "string_too_long":
        return fail(key, f"{shown(value)} is longer than {ctx.get('max_length')} characters",
                    fix)
    if error["type"] == "literal_error":  # one of a few words: the one it likely means
        guess = near(value, re.findall(r"'([^']*)'", str(ctx.get("expected", ""))))
        fix = f"did you mean {guess!r}? ({fix})" if guess else fix
    return fail(key, f"{shown(value)} {extra['problem']}", fix)


def parse(raw: Mapping[str, Any], typed: frozenset[str] = frozenset()) -> HostData:
    """Host data (the kit's keys only) as the declaration reads it, or the one line
    (`typed`: the keys given on the pyinfra command line)."""
    try:
        return HostData.model_validate(dict(raw))
    except ValidationError as e:
        errors = e.errors(include_url=False)  # an unknown key before a bad value
        first = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
        raise translate(first, raw, typed) from None


README_BEGIN, README_END = "<!-- host-data-keys:begin -->", "<!-- host-data-keys:end -->"


def _row(name: str, info: Any) -> str:
    extra = info.json_schema_extra or {}
    default = info.default
    shown = "-" if default is None else \
        f"`{list(default) if isinstance(default, tuple) else default!r}`"
    doc = str(info.description or "").replace("|", "\\|")
    return f"| `{name}` | {extra.get('kind', '')} | {shown} | {doc} |"


def markdown_table() -> str:
    """Every key of host data as a markdown table, a mapping's keys after it."""
    rows = ["| Key | Type | Default | What it does |", "|---|---|---|---|"]
    for name, info in HostData.model_fields.items():  # a service's keys first (inherited)
        rows.append(_row(name, info))
        for sub, sub_info in getattr(_MAPPINGS.get(name), "model_fields", {}).items():
            rows.append(_row(f"{name}.{sub}", sub_info))
    note = (f"The first {len(ServiceData.model_fields)} keys are a service's: at the top level "
            "of a host of one service, or in each `services` entry (beside `services` they are "
            "refused, except a key group_data/all.py gives every host, with its value: the kit's "
            "`profile`). Patterns "
            "match the whole value: a final newline never passes.")
    return "\n".join(rows) + "\n\n" + note + "\n"


def fill_readme(path: str) -> bool:
    """Write the table between the markers of README.md at `path`; True if it changed."""
    text = Path(path).read_text()
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_BEGIN}\n{markdown_table()}{README_END}{tail}"
    if new != text:
        Path(path).write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    """Print the key table, or with `--readme` fill the README's block."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m beekeeper.core.hostdata",
                                 description="The host data key table, from the schema.")
    ap.add_argument("--readme", metavar="README.md",
                    help="replace the block between the host-data-keys markers in this file")
    args = ap.parse_args(argv)
    if args.readme:
        print(f"{args.readme}: {'updated' if fill_readme(args.readme) else 'already current'}")
    else:
        print(markdown_table(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
