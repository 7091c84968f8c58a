"""
Preflight's refusals of a model file on the host and of a model folder on a Windows drive,
each as the whole line a user reads (subject, problem, fix), and the host facts each reads
asked about the file the user named (survivors of the mutation run of tasks/preflight.py on
2026-12-05, issue 45: parts of these lines and the facts' arguments were never asserted).
"""

from __future__ import annotations

from typing import Any

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.core.paths import sha256_stamps
from beekeeper.core.runtime import runtime_of
from beekeeper.tasks import preflight as pf

from .harness import WSL, cfg, on_host

MINE = "/srv/m/mine.gguf"
SHA = "ab" * 32
HEAD = b"GGUF\x03\x00\x00\x00"


def refused(f: Any, *args: Any) -> str:
    with pytest.raises(PreflightError) as e:
        f(*args)
    return str(e.value)


def own(path: str = MINE, **over: Any) -> Any:
    return cfg(profile="q8-turbo4-64k", mode="native", model_host_path=path,
               model_sha256=SHA, **over)


def only(path: str, value: Any, other: Any = None, **want: Any) -> Any:
    """A canned fact that answers `value` about `path` (and the other arguments `want`),
    `other` about anything else: a fact asked about another file reads as that one."""
    def fact(**kw: Any) -> Any:
        return value if kw.get("path") == path and all(kw.get(k) == v
                                                       for k, v in want.items()) else other
    return fact


def test_a_model_under_home_with_a_native_systemd_service_is_the_whole_line():
    home = "/home/me/mine.gguf"
    with on_host(ModelTarget=""):
        line = refused(pf.check_own_model, own(home), runtime_of("native", "systemd"))
    assert line == (
        "host data `model_host_path`: /home/me/mine.gguf lies under /home, which the native "
        "service's systemd unit hides from the server (ProtectHome=yes hides /home, /root and "
        "/run/user), so it could never start; fix: move or copy the file out of them, e.g. "
        "into model_dir /srv/beekeeper/models, and set model_host_path to its new path (a "
        "symlink into them does not help: the server follows it)")


def test_a_model_whose_sha256_differs_is_the_whole_line_and_the_facts_read_that_file():
    """FileHead and Sha256File are asked about the path given, Sha256File with the state
    folder's stamps (a file as it was stamped is not hashed again): asked about anything
    else, these facts answer as for a file that is not there."""
    c = own()
    facts = {"ModelTarget": "", "File": only(MINE, {"size": 1}),
             "FileHead": only(MINE, HEAD),
             "Sha256File": only(MINE, "cd" * 32, stamps=sha256_stamps(c.state_dir)),
             "OthersCannotRead": ""}
    with on_host(**facts):
        line = refused(pf.check_own_model, c, runtime_of("native", "systemd"))
    assert line == (
        f"host data `model_sha256`: {MINE} has sha256 {'cd' * 32}, not {SHA}; fix: set "
        "model_sha256 to the file's (sha256sum on the host) if it is the file you mean")
    with on_host(**{**facts, "Sha256File": only(MINE, SHA, stamps=sha256_stamps(c.state_dir))}):
        pf.check_own_model(c, runtime_of("native", "systemd"))  # the file given: served


def test_a_model_folder_on_a_windows_drive_under_wsl2_is_the_whole_line():
    line = refused(pf.check_model_dir, cfg(model_dir="/mnt/d/models"), WSL)
    assert line == ("model_dir /mnt/d/models is on a Windows drive (9p, 3-5x slower loads): "
                    "use a folder on the WSL ext4 disk, e.g. /srv/beekeeper")


def test_a_model_file_that_is_no_gguf_is_read_at_the_path_given():
    """FileHead is asked about the path given: a zip saved as the model is refused before
    its sha256 is even read (asked about another file, FileHead answers None: unread)."""
    facts = {"ModelTarget": "", "File": only(MINE, {"size": 1}),
             "FileHead": only(MINE, b"PK\x03\x04\x14\x00\x00\x00")}
    with on_host(**facts):  # no Sha256File: reading it would be a KeyError
        line = refused(pf.check_own_model, own(), runtime_of("native", "systemd"))
    assert line.startswith(f"host data `model_host_path`: {MINE} is not a GGUF model file: it "
                           "does not start with GGUF's magic b'GGUF' (its first 8 bytes are "
                           "b'PK\\x03\\x04\\x14\\x00\\x00\\x00'); fix: give the path of a GGUF "
                           "model file"), line
