"""
Scripts that run on a host (standard library only, python3 3.8 or later): the model
downloader, the deploy's smoke check, the rollback. Uploaded as `text` gives them.
"""

import shlex
from pathlib import Path

from beekeeper.core import deployed
from beekeeper.core.paths import PREV, SUPERVISORCTL, ServicePaths, hostside_script

# a script's import of the deployment record, which the host gets written in (`text`)
RECORD_IMPORT = "from beekeeper.core.deployed import DeployedService\n"


def script(name: str) -> Path:
    """The local file of host-side script `name`."""
    return Path(__file__).with_name(name)


def text(name: str) -> str:
    """Host-side script `name` as the host runs it, one file: where it imports the
    deployment record (RECORD_IMPORT), core/deployed.py is written in, so host and kit
    read deployed.json by one declaration."""
    head, found, tail = script(name).read_text().partition(RECORD_IMPORT)
    if not found:
        return head
    # the script's own `from __future__` line, above, stands for both: the record's fields
    # are read by their annotations' text (deployed._allowed)
    future = "from __future__ import annotations\n"
    assert future in head, f"{name} imports the record without {future!r} above it"
    return head + Path(deployed.__file__).read_text().replace(future, "", 1) + tail


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
