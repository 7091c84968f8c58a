"""
Errors raised by beekeeper. Each names the key or input at fault and the fix. Plain
exceptions (no pyinfra here): deploy.py turns one into pyinfra's one-line failure.

A refusal (ConfigError, PreflightError) echoes what the user gave; refusal_line() is the one
place its echoes are cut, whoever wrote the line (a value quoted by hostdata.shown() is cut
after SHOWN_MAX already).
"""

from __future__ import annotations

import re

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


def cut_words(text: str, most: int = PATH_SHOWN_MAX) -> str:
    """`text` with every run of non-space characters longer than `most` cut (cut())."""
    return re.sub(rf"\S{{{most + 1},}}", lambda m: cut(m.group(0), most), text)


# an echoed value marked by echo(): private-use characters no refusal holds otherwise
ECHO_OPEN, ECHO_CLOSE = "\ue000", "\ue001"
_ECHOED = re.compile(f"{ECHO_OPEN}([^{ECHO_CLOSE}]*){ECHO_CLOSE}")
_RUN = re.compile(rf"\S{{{PATH_SHOWN_MAX + 1},}}")


def echo(value: object) -> str:
    """`value` as a refusal echoes it unquoted (a path the fix names, spaces and all), marked
    for refusal_line() to cut."""
    return f"{ECHO_OPEN}{value}{ECHO_CLOSE}"


def refusal_line(text: str) -> str:
    """A refusal's line as it may be printed, every echo cut, the one place that cuts them:
    an echo() of more than PATH_SHOWN_MAX characters, and any run without a space that long
    (an echo nobody marked: a key's name, a word of a library's message) is cut after
    PATH_SHOWN_MAX (a path of a usual depth stays whole, a fix such as `chmod 600 PATH`
    runnable), or after SHOWN_MAX where the line would still be longer than LINE_MAX (a
    relative path echoed twice, a library's reason quoting the value)."""
    def cuts(most: int) -> str:
        def one(m: re.Match[str]) -> str:
            echoed = m.group(m.lastindex or 0)  # an echo()'s value, or a run
            return cut(echoed, most) if len(echoed) > PATH_SHOWN_MAX else echoed
        return _RUN.sub(one, _ECHOED.sub(one, text))
    line = cuts(PATH_SHOWN_MAX)
    return cuts(SHOWN_MAX) if len(line) > LINE_MAX else line


class BeekeeperError(Exception):
    """Base class for every error beekeeper raises on purpose."""


class _Refusal(BeekeeperError):
    """An error whose one argument is a refusal's line: cut by refusal_line()."""

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (refusal_line(args[0]),)
        super().__init__(*args)


class ConfigError(_Refusal, ValueError):
    """Host or group data is invalid; raised before any operation touches a host."""


class PreflightError(_Refusal):
    """A host fact rules the deploy out (wrong OS, WSL2 rules, GPU or driver too old)."""


class SandboxError(BeekeeperError, RuntimeError):
    """The local sandbox host could not be created, reached or removed."""


class VerifyError(BeekeeperError, RuntimeError):
    """A verification run could not be carried out (not: a check that failed)."""
