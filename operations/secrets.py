"""
Secrets on the host: root-only files written from stdin, env files built on the host, so
no key is on a command line or in pyinfra's output.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pyinfra import host
from pyinfra.api import StringCommand, operation
from pyinfra.facts.files import File, Sha1File

from .shell import q, via_tmp


def sha1_text(text: str) -> str:
    """sha1 of text as pyinfra's Sha1File fact reports a file holding it."""
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()

def secret_content(src: str) -> str:
    """A local secret file's text as the host gets it: stripped, as every reader of a key
    here strips it, and one newline (pyinfra's stdin ends every line with one)."""
    return Path(src).read_text().strip() + "\n"

def put_secret(name: str, src: str, dest: str):
    """Copy a local secret file to the host as a root-only file (0600). Not by pyinfra's
    upload, which first writes a file with the default mode (under sudo in /tmp, where any
    user can read it): the content goes on the stdin of `umask 077; cat`, on no command
    line and in no output."""
    text = secret_content(src)
    return secret_file(name=name, dest=dest, sha1=sha1_text(text),
                       _stdin=text, _get_pty=False)  # a pty echoes stdin

@operation()
def secret_file(dest: str, sha1: str):
    """
    Write stdin to a root-only file (0600), through a root-only temporary file beside it.
    Called by `put_secret`, which gives the content as `_stdin`.
    """
    info = host.get_fact(File, path=dest)
    if (host.get_fact(Sha1File, path=dest) == sha1 and info and info.get("mode") == 600
            and info.get("user") == "root"):
        host.noop(f"{dest} is up to date")
        return
    tmp, put = via_tmp(dest)
    # rm first: `cat >` into a temporary file left by an earlier run keeps that file's mode
    yield StringCommand(f"rm -f {tmp} && umask 077 && cat > {tmp} && chown root:root {tmp} && "
                        f"{put}")


def env_line(key: str, quoted: bool) -> str:
    """The env file's line: `LLAMA_API_KEY=key`, or `LLAMA_API_KEY='key'` (compose reads that
    literally; it interpolates `$` otherwise). The operation below fills it on the host with
    printf."""
    return f"LLAMA_API_KEY='{key}'\n" if quoted else f"LLAMA_API_KEY={key}\n"


@operation()
def secret_env_file(src: str, key_path: str, env_path: str, quoted: bool):
    """
    Write the env file's line (env_line) to a root-only env file on the host, built there
    from the root-only key file `key_path` (the host's copy of the local `src`), so the key
    is on no command line and in no pyinfra output.
    """
    expected = sha1_text(env_line(secret_content(src).strip(), quoted))
    if host.get_fact(Sha1File, path=env_path) == expected:
        host.noop(f"{env_path} is up to date")
        return
    tmp, put = via_tmp(env_path)
    fmt = env_line("%s", quoted)
    yield StringCommand(f"umask 077 && printf {q(fmt)} \"$(cat {q(key_path)})\" > {tmp} && {put}")
