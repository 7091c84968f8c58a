"""
Errors raised by beekeeper (plain exceptions: deploy.py turns one into pyinfra's failure).
"""

from __future__ import annotations

import difflib
import re
import unicodedata

from .redact import redact

# the longest value a refusal quotes whole; a longer one is cut, with its length
SHOWN_MAX = 80
# the longest run without a space a refusal echoes whole (a fix such as `chmod 600 PATH`
# stays runnable for a path of a usual depth)
PATH_SHOWN_MAX = 3 * SHOWN_MAX
# a refusal line longer than this has its runs cut after SHOWN_MAX instead
LINE_MAX = 400


def cut(text: str, most: int = SHOWN_MAX) -> str:
    """Text echoed unquoted, cut after `most` characters with its length."""
    return text if len(text) <= most else f"{text[:most - 20]}... ({len(text)} characters)"


def shown(value: object) -> str:
    """A value as a refusal quotes it: its repr cut after SHOWN_MAX characters, then spelled
    in ASCII where it holds other characters (a Cyrillic `с` in 'сpu-tiny'), cut alike."""
    whole = repr(value)
    text = whole
    if len(whole) > SHOWN_MAX:
        size = f"{len(value)} characters" if isinstance(value, str) else \
            f"{len(whole)} characters as written"
        text = f"{whole[:SHOWN_MAX - 20]}... ({size})"
    spelled = ascii(value) if isinstance(value, str) else whole
    return text if spelled == whole else f"{text} (written {cut(spelled)})"


def _folded(text: str) -> str:
    """A value as a near miss is compared: NFKC (full-width letters, ligatures), case
    folded, `_` and spaces as `-`, outer spaces gone."""
    return re.sub(r"[_\s]+", "-", unicodedata.normalize("NFKC", text).casefold().strip())


def near(value: object, options: list[str]) -> str | None:
    """The option `value` most likely means: the same once folded ('CPU-TINY', 'cpu_tiny',
    ' cpu-tiny', a full-width letter), else the closest spelling; None if none is close."""
    if not isinstance(value, str) or not value:
        return None
    folded = {_folded(o): o for o in options}
    mine = _folded(value)
    if mine in folded:
        return folded[mine]
    close = difflib.get_close_matches(mine, list(folded), n=1, cutoff=0.75)
    return folded[close[0]] if close else None


# an echoed value marked by echo(): private-use characters no refusal holds otherwise
ECHO_OPEN, ECHO_CLOSE = "\ue000", "\ue001"
_ECHOED = re.compile(f"{ECHO_OPEN}([^{ECHO_CLOSE}]*){ECHO_CLOSE}")
_RUN = re.compile(rf"\S{{{PATH_SHOWN_MAX + 1},}}")


def echo(value: object) -> str:
    """`value` as a refusal echoes it unquoted (a path the fix names, spaces and all), marked
    for refusal_line() to cut."""
    return f"{ECHO_OPEN}{value}{ECHO_CLOSE}"


def refusal_line(text: str) -> str:
    """A refusal's line as it may be printed: an echo() or any run without a space longer
    than PATH_SHOWN_MAX is cut after PATH_SHOWN_MAX, or after SHOWN_MAX where the line would
    still be longer than LINE_MAX."""
    def cuts(most: int) -> str:
        def one(m: re.Match[str]) -> str:
            echoed = m.group(m.lastindex or 0)  # an echo()'s value, or a run
            return cut(echoed, most) if len(echoed) > PATH_SHOWN_MAX else echoed
        return _RUN.sub(one, _ECHOED.sub(one, text))
    line = cuts(PATH_SHOWN_MAX)
    return cuts(SHOWN_MAX) if len(line) > LINE_MAX else line


class BeekeeperError(Exception):
    """Base class for every error beekeeper raises on purpose."""


# how a refusal's subject leads to its problem, and its problem to its fix: the kit's one line
# is `subject: problem; fix: fix` (KEYED); the others keep the words of refusals written
# before the type, as sentences (`port 8080 on the host is in use ...: stop it, or ...`)
LEADS = (": ", " ", ", ")
THENS = ("; fix: ", ": ", "; ", ", ")
KEYED = (": ", "; fix: ")


class Refusal(BeekeeperError):
    """The kit's refusal: `subject` (what is refused, e.g. host_data("port")), `problem` and
    `fix`, none empty, each redacted and written on one line; its line (str()) joins them with
    `lead` and `then` (KEYED: `host data `port`: ...; fix: ...`), every echo cut."""

    def __init__(self, subject: str, problem: str, fix: str, *, lead: str = KEYED[0],
                 then: str = KEYED[1]) -> None:
        if not (subject.strip() and problem.strip() and fix.strip()):
            raise ValueError(f"a refusal needs a subject, a problem and a fix: {subject!r}, "
                             f"{problem!r}, {fix!r}")
        if lead not in LEADS or then not in THENS:
            raise ValueError(f"a refusal's joints are one of {LEADS} and of {THENS}")
        said = [redact(one_line(redact(t))) for t in (subject, problem, fix)]
        # what tests and callers read: each part redacted, without refusal_line()'s marks
        self.subject, self.problem, self.fix = (_ECHOED.sub(r"\1", t) for t in said)
        self.lead, self.then = lead, then
        super().__init__(refusal_line(f"{said[0]}{lead}{said[1]}{then}{said[2]}"))

    def __reduce__(self) -> tuple[object, ...]:
        """Copied and pickled as it is (Exception's own way calls the type with its line)."""
        return rebuilt, (type(self), str(self), vars(self))


def rebuilt(kind: type[BeekeeperError], line: str, held: dict[str, object]) -> BeekeeperError:
    """An error of `kind` saying `line` and holding `held` (a refusal's parts), made without
    its constructor: a refusal copied, or one raised again as another type."""
    out = kind.__new__(kind)
    Exception.__init__(out, line)
    vars(out).update(held)
    return out


def one_line(text: str) -> str:
    """`text` with a character that would break a line written escaped (a newline as `\\n`),
    the echo marks kept for refusal_line()."""
    return "".join(c if c.isprintable() or c in (ECHO_OPEN, ECHO_CLOSE) else repr(c)[1:-1]
                   for c in text)


def host_data(key: str) -> str:
    """The subject of a refusal of host data `key`: `host data `key``, the key (which may be
    one the data made up) redacted and cut after SHOWN_MAX."""
    return f"host data `{cut(redact(key))}`"


class ConfigError(Refusal, ValueError):
    """Host or group data is invalid; raised before any operation touches a host."""


class PreflightError(Refusal):
    """A host fact rules the deploy out (wrong OS, WSL2 rules, GPU or driver too old)."""


class SandboxError(BeekeeperError, RuntimeError):
    """The local sandbox host could not be created, reached or removed."""


class UsageError(BeekeeperError):
    """A command line a `beekeeper` command cannot run (the command names it), exit 2."""


class VerifyError(BeekeeperError, RuntimeError):
    """A verification run could not be carried out (not: a check that failed)."""
