"""
Commands the controller sends over a plain SSH login (`beekeeper rollback`, `verify --ssh`
and `--on-host`, `matrix`): they touch /etc/beekeeper, systemd and Docker, so they need
root. pyinfra gets there with the inventory's `_sudo`; these get there the same way for a
login that is not root (the example WSL box logs in as `me`), through sudo without a
password prompt, and say so in one line when neither is possible.
"""

from __future__ import annotations

import base64
import shlex
import subprocess

NEEDS_ROOT_EXIT = 126
SSH_FAILED = 255  # ssh's own failure (no connection, a key refused): never the command's
ANSWER_S = 120  # the longest a read over SSH waits for the host
# ssh's options that take a value (ssh(1)): the word after one is not the destination
SSH_VALUED = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def ssh_destination(ssh: list[str]) -> str:
    """The host `ssh` (ssh's own arguments, e.g. `me@gpu-box.lan -p 2222`) reaches: its
    destination's host name, without the user, an ssh:// scheme or a port."""
    words = iter(ssh)
    for word in words:
        if word.startswith("-") and len(word) > 1:  # flags, as getopt reads them (-vp 22)
            valued = next((k for k, c in enumerate(word[1:], 1) if c in SSH_VALUED), None)
            if valued == len(word) - 1:  # its value is the next word
                next(words, None)
            continue
        host = word.removeprefix("ssh://").rsplit("@", 1)[-1]
        return host.split(":", 1)[0] if host.count(":") == 1 else host
    return " ".join(ssh)


def as_root(command: str) -> str:
    """`command` (any POSIX shell text) for an SSH session: run as it is when the login is
    root, else through `sudo -n` (never a prompt: there is no terminal); else one line
    naming the user and the fix, exit 126. Standard input passes through. The login shell
    may be any (bash, fish, tcsh): what it parses is one `sh -c` of a single-quoted word
    holding no quote or backslash, the command travelling base64-encoded inside it."""
    q = shlex.quote(command)
    why = ("beekeeper: this needs root on the host: log in as root, or let $(id -un) "
           "use sudo without a password (sudo -n true failed)")
    script = (f'if [ "$(id -u)" -eq 0 ]; then sh -c {q}; '
              f"elif sudo -n true 2>/dev/null; then sudo -n sh -c {q}; "
              f'else echo "{why}" >&2; exit {NEEDS_ROOT_EXIT}; fi')
    encoded = base64.b64encode(script.encode()).decode()
    return f"sh -c 'eval \"$(echo {encoded} | base64 -d)\"'"


def ssh_as_root(ssh: list[str], command: str) -> list[str]:
    """The argv that runs `command` as root on the host `ssh` (ssh's own arguments) reaches."""
    return ["ssh", *ssh, as_root(command)]


def read_over_ssh(ssh: list[str], command: str, root: bool = True
                  ) -> subprocess.CompletedProcess[str]:
    """`command` run on the host `ssh` reaches, as root (else as the login), its output
    captured; subprocess.TimeoutExpired after ANSWER_S, OSError where ssh cannot run."""
    argv = ssh_as_root(ssh, command) if root else ["ssh", *ssh, command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=ANSWER_S)
