"""
Scripts that run on a host (standard library only, any python3): the model downloader,
the deploy's smoke check, the rollback. Uploaded by path, from here.
"""

import shlex
from pathlib import Path

from beekeeper.core.paths import PREV, SUPERVISORCTL, ServicePaths, hostside_script


def script(name: str) -> Path:
    """The local file of host-side script `name`, to upload."""
    return Path(__file__).with_name(name)


def rollback_command(paths: ServicePaths, restore: bool, timeout_s: int = 300,
                     script: str = hostside_script("rollback.py")) -> str:
    """The one rollback (hostside/rollback.py, installed by tasks/smoke.py): the smoke
    gate's (restore: the failed files are dropped) and `beekeeper rollback`'s (a swap, with
    `script="-"`: the script on stdin)."""
    args = ["python3", script, "--unit", paths.unit,
            "--manifest", paths.manifest, "--compose", paths.compose_file,
            "--program-conf", paths.program_conf, "--supervisorctl", SUPERVISORCTL,
            "--prev-suffix", PREV,
            "--hostcheck", hostside_script("hostcheck.py"), "--api-key-file", paths.api_key,
            "--timeout", str(timeout_s)]
    return " ".join(shlex.quote(a) for a in args) + (" --restore" if restore else "")
