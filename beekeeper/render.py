"""
Template rendering with StrictUndefined: a missing key is an error, never an empty string.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import jinja2

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"


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
    return env


def render(template: str, **context: Any) -> str:
    """Render templates/<template> with the given context."""
    return environment().get_template(template).render(**context)
