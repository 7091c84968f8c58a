"""
Template rendering with StrictUndefined: a missing key is an error, never an empty string.
"""

from __future__ import annotations

import json
import re
import shlex
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2

# templates/ of the checkout, installed as beekeeper.templates
TEMPLATES_DIR = Path(str(files("beekeeper.templates")))
# a word systemd reads as it is: no quotes, backslashes, specifiers (%), variables ($) or
# spaces; anything else is double-quoted and escaped (systemd.syntax(7), "Quoting")
_SD_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def _carried(value: object, where: str) -> str:
    """`value` as text; ValueError for a control character, which no rendered file carries
    (host data validation refuses them first)."""
    text = str(value)
    if any(not c.isprintable() for c in text):
        raise ValueError(f"{text!r} holds a control character; {where} cannot carry it")
    return text


def sd_quote(value: object, exec_line: bool = True) -> str:
    """One word for a unit file (not the executable, whose prefixes `@-:+!` differ):
    `%` -> `%%` (specifiers), `$` -> `$$` in command lines (environment variables), and
    double quotes with backslash escapes where needed."""
    text = _carried(value, "a unit file")
    if _SD_PLAIN.match(text):
        return text
    if text == ";":  # a lone ';' separates command lines
        return "\\;"
    text = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if exec_line:
        text = text.replace("$", "$$")
    return f'"{text}"'


def sd_join(values: object) -> str:
    """Arguments of an ExecStart= line, each quoted for systemd (never for a shell)."""
    return " ".join(sd_quote(v) for v in values)  # type: ignore[attr-defined]


def yaml_quote(value: object) -> str:
    """One string for a compose file: a JSON-style double-quoted YAML scalar (backslash and
    quote escaped), with `$` written `$$`, which compose reads as a literal `$` instead of
    interpolating a variable."""
    text = _carried(value, "a compose file")
    return json.dumps(text.replace("$", "$$"), ensure_ascii=False)


# a plain YAML scalar that reads back as the same string (YAML 1.1 and 1.2 alike): no
# indicator, number or word such as `no` or `null` that a reader takes for something else;
# a duration (`10s`) is no number
_YAML_PLAIN = re.compile(r"^([A-Za-z/][A-Za-z0-9/_.-]*|[0-9]+(ms|s|m|h))$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def yaml_plain(value: object) -> str:
    """One string for a compose file, plain where that is safe, else `yaml_quote`d."""
    text = str(value)
    if _YAML_PLAIN.match(text) and text.lower() not in _YAML_WORDS:
        return text
    return yaml_quote(text)


def yaml_bool(value: object) -> str:
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not a boolean")
    return "true" if value else "false"


def sv_quote(value: object) -> str:
    """One word for a supervisord program file: a shell-like word (supervisor splits
    `command` with shlex) with `%` written `%%` (its `%(name)s` expansions)."""
    return shlex.quote(_carried(value, "a program file")).replace("%", "%%")


def environment(templates_dir: Path = TEMPLATES_DIR) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["shquote"] = lambda v: shlex.quote(str(v))
    env.filters["shjoin"] = lambda v: " ".join(shlex.quote(str(x)) for x in v)
    # unit files: systemd's own quoting, not a shell's
    env.filters["sdquote"] = sd_quote
    env.filters["sdjoin"] = sd_join
    env.filters["sdpath"] = lambda v: sd_quote(v, exec_line=False)
    # supervisord program files: shlex words, `%%` for its expansions
    env.filters["svquote"] = sv_quote
    env.filters["svjoin"] = lambda v: " ".join(sv_quote(x) for x in v)
    # compose files: YAML double quotes, `$$` for compose's interpolation
    env.filters["yq"] = yaml_quote
    env.filters["yqlist"] = lambda v: "[" + ", ".join(yaml_quote(x) for x in v) + "]"
    env.filters["yplain"] = yaml_plain
    env.filters["ybool"] = yaml_bool
    # Dockerfiles: the exec (JSON) form of CMD and ENTRYPOINT
    env.filters["json"] = lambda v: json.dumps(list(v), ensure_ascii=False)
    return env


def render(template: str, **context: Any) -> str:
    """Render templates/<template> with the given context."""
    return environment().get_template(template).render(**context)
