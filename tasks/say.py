"""
Saying a host state the deploy goes on with: one yellow line naming the host.
"""

from __future__ import annotations

import click
from pyinfra import host


def warn(message: str) -> None:
    """A state the deploy goes on with, told in one yellow line naming the host."""
    click.echo(click.style(f"host {host.name}: warning: {message}", fg="yellow"), err=True)
