"""One line naming the host, for what the deploy goes on with."""

from __future__ import annotations

import click
from pyinfra import host


def warn(message: str, name: str | None = None) -> None:
    """A state the deploy goes on with, told in one yellow line naming the host (`name`: where
    pyinfra's host context is not set)."""
    click.echo(click.style(f"host {name or host.name}: warning: {message}", fg="yellow"),
               err=True)


def say(message: str) -> None:
    """A decision the deploy took from the host's facts, told in one line naming the host."""
    click.echo(f"host {host.name}: {message}", err=True)
