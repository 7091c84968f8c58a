"""A macOS controller deploying to a Linux GPU box: what the kit does on the controller with
the files and paths a Mac has (folders with spaces, such as iCloud Drive's `Mobile Documents`
or `Application Support`; the Mac user's own uid 501 and group `staff`, 20)."""
from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}


def _refusal(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        load_host_config(data)
    return str(e.value)


@pytest.mark.parametrize("where", [("Mobile Documents", "com~apple~CloudDocs", "keys"),
                                   ("Jane Doe", "keys")])
@pytest.mark.parametrize("key", ["api_key_file", "gateway"])
def test_the_chmod_fix_for_a_key_file_open_to_others_runs_as_written(tmp_path, where, key):
    """A key file a text editor saved (mode 644 under macOS's umask 022) in a folder whose
    name holds a space: the refusal's fix, pasted into a shell, makes the key private, and
    the host data then loads."""
    folder = tmp_path.joinpath(*where)
    folder.mkdir(parents=True)
    path = folder / "family.key"
    path.write_text("k" * 64 + "\n")
    path.chmod(0o644)
    data = {**CPU, "api_key_file": str(path)} if key == "api_key_file" else \
        {**CPU, "gateway": {"bind_address": "0.0.0.0", "api_key_file": str(path)}}
    line = _refusal(data)
    assert "is readable by others" in line, line
    fix = line.rsplit("; fix: ", 1)[1]
    assert fix.startswith("chmod 600 "), line
    p = subprocess.run(["sh", "-c", fix], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, f"{fix!r}: {p.stderr.strip()}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    load_host_config(data)
