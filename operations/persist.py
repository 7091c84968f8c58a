"""
GPU pods (runtime supervisor): the kit's folders as links into the persistent root, and the
end of an unsupervised server of the kit's (one a killed supervisord left).
"""

from __future__ import annotations

import posixpath

from pyinfra import host
from pyinfra.api import operation
from pyinfra.api.exceptions import OperationError

from beekeeper.core.paths import NATIVE_PREFIX, SERVER_USER
from beekeeper.facts.host import exe_sh
from beekeeper.facts.persist import PathKinds

from .shell import q


@operation()
def linked(path: str, target: str, keep_contents: bool = True):
    """
    `path` is a link to `target`. A folder there (a deploy before the persistent root was
    set) moves into `target` first; a link elsewhere (another root) moves its folder when
    `target` is not there yet; a file there (an earlier kit's launcher) is replaced.

    + path: the kit's folder or launcher, where the kit and its users look for it
    + target: where it lives, under the persistent root
    + keep_contents: whether a folder's contents move to the target (folders), or a file
      there is replaced (launchers)
    """
    now = host.get_fact(PathKinds, paths=[path]).get(path)
    p, t, parent = q(path), q(target), q(posixpath.dirname(path))
    if now is not None and now.kind == "link" and now.target == target:
        host.noop(f"{path} is a link to {target}")
        return
    made = f"mkdir -p {t} && " if keep_contents else ""  # a folder's target, never a file's
    if now is None or now.kind == "missing":
        yield f"{made}mkdir -p {parent} && ln -s {t} {p}"
    elif now.kind == "link":
        old = q(now.target)
        move = (f"if [ ! -e {t} ] && [ -d {old} ]; then mkdir -p {q(posixpath.dirname(target))}"
                f" && mv {old} {t}; fi; " if keep_contents else "")
        yield f"{move}{made}ln -sfn {t} {p}"
    elif now.kind == "dir" and keep_contents:
        yield (f"if [ -e {t} ]; then cp -a {p}/. {t}/ && rm -rf {p}; else mkdir -p "
               f"{q(posixpath.dirname(target))} && mv {p} {t}; fi && ln -s {t} {p}")
    elif now.kind == "file" and not keep_contents:
        yield f"rm -f {p} && ln -s {t} {p}"
    else:
        raise OperationError(f"{path} on the host is a {now.kind}, not the kit's: move it "
                             "away, then deploy again")


@operation()
def unsupervised_ended(pids: list[int]):
    """
    End each server of the kit's that answers on a service's port with no supervisor of
    the kit's (preflight found it: user beekeeper, the kit's binary), so the service's own
    can take the port: TERM, then KILL after 10 s. A pid no longer the kit's is left alone.
    """
    if not pids:
        host.noop("no unsupervised server of the kit's on a service's port")
        return
    pre = q(NATIVE_PREFIX)
    for pid in pids:
        # still the kit's: user beekeeper, its binary in the native builds' folder (linked or not)
        kits = (f"[ \"$(stat -c %U /proc/{pid} 2>/dev/null)\" = {SERVER_USER} ] && "
                f"{{ {exe_sh(str(pid), 'readlink -f')}; }} && real=$(readlink -f {pre}) && "
                f"case \"$exe\" in \"$real\"/*|{pre}/*) true;; *) false;; esac")
        yield (f"if {kits}; then kill -TERM {pid}; for i in $(seq 50); do "
               f"kill -0 {pid} 2>/dev/null || break; sleep 0.2; done; "
               f"kill -0 {pid} 2>/dev/null && kill -KILL {pid}; "
               f"echo 'beekeeper: ended the unsupervised server pid {pid}'; "
               "else echo 'beekeeper: pid "
               f"{pid} is gone or no longer a server of the kit: left alone'; fi; true")


@operation()
def kit_folder(path: str):
    """
    One of the kit's own folders there: a folder, or on a GPU pod a link to its folder on
    the persistent root (pyinfra's files.directory refuses a link where a folder is asked).
    """
    now = host.get_fact(PathKinds, paths=[path]).get(path)
    if now is not None and now.kind in ("dir", "link"):
        host.noop(f"{path} is there" + (f" (a link to {now.target})" if now.kind == "link"
                                        else ""))
        return
    if now is not None and now.kind == "file":
        raise OperationError(f"{path} on the host is a file, not the kit's folder: move it "
                             "away, then deploy again")
    yield f"mkdir -p {q(path)} && chmod 0755 {q(path)}"
