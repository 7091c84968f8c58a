"""
The host's proxy settings for `docker build`, passed by name, never by value.
"""

from __future__ import annotations

import shlex


def proxy_build(names: tuple[str, ...], environment: str = "/etc/environment") -> tuple[str, str]:
    """(shell prefix, build arguments) that hand the host's proxy variables to `docker build`.

    The prefix exports the proxy lines of /etc/environment into the docker CLI's own
    environment; `--build-arg NAME` without a value makes the CLI take each from there. So a
    proxy URL, which may carry a password, never reaches a command line, a log or the kit.
    http_proxy, https_proxy, no_proxy and their upper-case forms are Docker's predefined build
    arguments: RUN steps (the Dockerfile's apt-get) see them without an ARG line, and they
    stay out of the image's ENV and of `docker history`; nor do they change the Dockerfile,
    so the image tag stays as it is.
    """
    if not names:
        return "", ""
    pattern = "^ *(export +)?(" + "|".join(names) + ")="
    prefix = (f"eval \"$(grep -E {shlex.quote(pattern)} {shlex.quote(environment)} | "
              "sed -E 's/^ *(export +)?/export /')\"; ")
    args = "".join(f" --build-arg {shlex.quote(n)}" for n in names)
    return prefix, args
