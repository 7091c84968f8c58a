"""
llama-server's flags: those the kit sets, those holding a secret or free text (server_extra_args'
checks), and what a built server accepts, read from its own `--help`, against the flags a service
would run it with: a renamed or dropped flag or value is refused before the server is replaced.

The help's shape is llama.cpp's common/arg.cpp (common_arg::to_string): one option a
paragraph, its spellings at column 0 joined by ", ", a value hint (`TYPE`, `[on|off|auto]`,
`a,b,c`), its help text at column 40 ("allowed values: f32, f16, ..." for a KV type).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .errors import PreflightError

# Upstream renames, old -> new: beellama v0.4 replaced the TurboQuant KV types with KVarN ones
# (its notes: `turbo2/3/4` and the `_tcq` ones redirect to `kvarn2/3/4`; a v0.4 `--help`
# lists kvarn2 ... kvarn8 and no turbo type, beellama issue #120) and renamed `--spec-type
# dflash` to `draft-dflash` (the old one rejected; #134). A refusal names the new spelling
# where the built server offers it.
RENAMED = {
    "turbo2": "kvarn2", "turbo3": "kvarn3", "turbo4": "kvarn4",
    "turbo2_tcq": "kvarn2", "turbo3_tcq": "kvarn3", "dflash": "draft-dflash",
}

# an option's spellings at the start of its paragraph, and the word a value hint lists
_NAME = r"-{1,2}[A-Za-z0-9][\w.-]*"
_NAMES = re.compile(rf"({_NAME}(?:,\s+{_NAME})*)(.*)$")
_WORD = re.compile(r"[a-z0-9][a-z0-9_.-]*")
NUMBER = re.compile(r"-\d+(\.\d+)?([eE][-+]?\d+)?")
_ALLOWED = re.compile(r"allowed values:\s*(.*?)\s*(?:\(|$)")


# The flags the kit sets (unit, entrypoint, profile), which server_extra_args may not set
# again: flag -> the key to use.
_KIT_FLAGS_BY_KEY = {
    "bind_address": ("--host",),
    "port": ("--port",),
    "api_key_file": ("--api-key", "--api-key-file"),
    "model_repo/model_file": ("-m", "--model", "-mu", "--model-url", "-hf", "-hfr", "--hf-repo",
        "-hff", "--hf-file"),
    "ctx_size": ("-c", "--ctx-size"),
    "slots": ("-np", "--parallel"),
    "the profile (its KV types)": ("-ctk", "--cache-type-k", "-ctv", "--cache-type-v"),
    "the profile": ("-fa", "--flash-attn", "-ngl", "--gpu-layers", "--n-gpu-layers", "-b",
        "--batch-size", "-ub", "--ubatch-size", "--jinja", "--no-jinja", "--chat-template",
        "--reasoning", "--backend-sampling"),
    "model_alias": ("--alias", "-a"),
    "the profile (its draft)": ("-kvu", "--kv-unified", "--spec-type", "-cd", "--ctx-size-draft",
        "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "-ctkd", "--cache-type-k-draft",
        "-ctvd", "--cache-type-v-draft"),
    "draft_repo/draft_file": ("-md", "--model-draft"),
}
KIT_FLAGS = {flag: key for key, flags in _KIT_FLAGS_BY_KEY.items() for flag in flags}

# llama-server flags holding a secret, which every user of the host would read (ps):
# flag -> where the secret goes instead.
_KEY_FILE = "api_key_file (the kit passes the key in a root-only env file)"
_TOKEN_FILE = "hf_token_file (the kit downloads the model; the server needs no Hub token)"
SECRET_FLAGS = {"--api-key": _KEY_FILE, "--api-key-file": _KEY_FILE, "-hft": _TOKEN_FILE,
                "--hf-token": _TOKEN_FILE}
# llama-server flags whose value is free text that may start with `-`: llama.cpp's parser
# (common/arg.cpp, common_params_parse_ex) takes the next word as the value whatever it
# starts with (`--system-prompt -c`); a negative number after any flag is a value too.
TEXT_VALUE_FLAGS = frozenset((
    "-p", "--prompt", "-sys", "--system-prompt", "-r", "--reverse-prompt", "--in-prefix",
    "--in-suffix", "--grammar", "-j", "--json-schema", "--chat-template-kwargs", "-l",
    "--logit-bias", "--override-kv", "-ot", "--override-tensor", "--samplers",
    "--sampling-seq", "--sampler-seq", "--dry-sequence-breaker", "--api-prefix", "-f",
    "--file", "--grammar-file", "--slot-save-path", "--path", "--log-file",
))


@dataclass(frozen=True)
class Option:
    """One option the server lists: how many words follow it, and the values it takes
    where its help names them (a value that may be a comma list, as stock llama.cpp's
    `--spec-type`, has `listed`)."""

    values_after: int = 0
    values: tuple[str, ...] = ()
    listed: bool = False


@dataclass(frozen=True)
class Offered:
    """What a server's `--help` lists: each spelling of each option."""

    options: dict[str, Option] = field(default_factory=dict)


def _paragraphs(text: str) -> list[tuple[str, str]]:
    """(the line naming an option, its help text joined) for each option of the help."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith("-") and not line.startswith("---"):
            gap = re.search(r"(?<=[^,\s]) {3,}", line)  # the padding before the help
            head, rest = (line[:gap.start()], line[gap.end():]) if gap else (line, "")
            out.append((head.rstrip(), rest.strip()))
        elif out and line.startswith(" "):
            out[-1] = (out[-1][0], f"{out[-1][1]} {line.strip()}".strip())
    return out


def _hint_values(hint: str) -> tuple[tuple[str, ...], bool]:
    """The values a hint lists: `[a|b|c]` (beellama's `--spec-type`, `-fa`), or `a,b,c`
    of plain words (stock llama.cpp's `--spec-type`, which takes a comma list)."""
    if hint.startswith("[") and hint.endswith("]") and "|" in hint:
        words = hint[1:-1].split("|")
        return (tuple(words), False) if all(_WORD.fullmatch(w) for w in words) else ((), False)
    words = hint.split(",")
    if len(words) > 1 and all(_WORD.fullmatch(w) for w in words):
        return tuple(words), True
    return (), False


def parse_help(text: str) -> Offered | None:
    """The options a llama-server `--help` lists, or None where it lists none (the binary
    did not run, or printed something else)."""
    options: dict[str, Option] = {}
    for head, help_text in _paragraphs(text):
        m = _NAMES.match(head)
        if m is None:
            continue
        names = [n.strip() for n in m.group(1).split(",")]
        hint = m.group(2).strip()
        allowed = _ALLOWED.search(help_text)
        if allowed:
            values, listed = tuple(v.strip() for v in allowed.group(1).split(",")), False
        else:
            values, listed = _hint_values(hint)
        # `TARGET DRAFT`: two words follow; `<tensor name pattern>=...`: one
        after = 0 if not hint else 1 if "<" in hint else len(hint.split())
        for name in names:
            options[name] = Option(values_after=min(after, 2), values=values, listed=listed)
    return Offered(options) if options else None


@dataclass(frozen=True)
class Unaccepted:
    """One word of the command line the server refuses: an option it lacks (value None),
    or a value it does not list; `offered` what it lists there, `renamed` the new spelling
    it offers instead."""

    option: str
    value: str | None = None
    offered: tuple[str, ...] = ()
    renamed: str | None = None

    @property
    def word(self) -> str:
        return f"`{self.option} {self.value}`" if self.value is not None else f"`{self.option}`"

    @property
    def why(self) -> str:
        if self.renamed:
            return f"renamed `{self.renamed}` there"
        if self.value is None:
            return "no such option there"
        return f"it offers {', '.join(self.offered)}"


def flag_name(word: str) -> str:
    """A word as the server's parser looks it up: a `--` word with `_` read as `-`."""
    return word.replace("_", "-") if word.startswith("--") else word


def unaccepted(args: Sequence[str], offered: Offered, *,
               check_values: bool = True) -> list[Unaccepted]:
    """The words of `args` the server would refuse. `check_values`: also the values its help
    lists (False for server_extra_args: a server may take a value its help does not list)."""
    out: list[Unaccepted] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or NUMBER.fullmatch(word):
            continue
        opt = offered.options.get(flag_name(word))
        if opt is None:
            new = RENAMED.get(word)
            out.append(Unaccepted(word, renamed=new if new in offered.options else None))
            continue
        given = args[i:i + opt.values_after]
        i += opt.values_after
        if not (check_values and opt.values and given):
            continue
        parts = given[0].split(",") if opt.listed else [given[0]]
        if all(p in opt.values for p in parts):
            continue
        bad = next(p for p in parts if p not in opt.values)
        new = RENAMED.get(bad)
        out.append(Unaccepted(word, given[0], opt.values,
                              renamed=new if new in opt.values else None))
    return out


def said(items: Sequence[Unaccepted]) -> str:
    """The refused words, those with the same reason given it once: "`-ctk turbo4`,
    `-ctv turbo4` (renamed `kvarn4` there)"."""
    groups: list[tuple[list[str], str]] = []
    for item in items:
        if groups and groups[-1][1] == item.why:
            groups[-1][0].append(item.word)
        else:
            groups.append(([item.word], item.why))
    return ", ".join(f"{', '.join(words)} ({why})" for words, why in groups)


def refusal(subject: str, built: str, profile: str, fits: Sequence[str],
            refused: Sequence[Unaccepted]) -> PreflightError | None:
    """One line for a service whose profile flags the built server refuses, or None:
    `subject` the service, `built` what was built (`source.ref 0123456789ab`), `fits` the
    releases the profile names (Profile.engine_refs)."""
    if not refused:
        return None
    releases = (f"source.ref starting with {' or '.join(fits)}" if fits
                else "none is named")
    return PreflightError(
        subject, f"the server built from {built} does not accept {said(refused)}",
        f"set `source` to a release profile `{profile}` fits ({releases}), or choose a "
        "profile made for this server (`beekeeper profiles`)")


def extra_warning(subject: str, built: str, unlisted: Sequence[Unaccepted]) -> str | None:
    """A warning for host data `server_extra_args` the built server's help does not list
    (by name: their values are the user's), or None. Not a refusal: the user's own flags,
    which the smoke check judges (a server that does not start is rolled back)."""
    if not unlisted:
        return None
    return (f"{subject}: the server built from {built} does not list "
            f"{', '.join(u.word for u in unlisted)} of server_extra_args (its `--help`): "
            "if it does not start, the smoke check rolls it back")
