"""
A scan for secrets in what the kit writes on the controller (issue 44): deploy.py is
prepared offline (tests/unit/harness.py, canned facts) for an inventory with a credential in
every URL form in every URL key of host data (user information, a token as the user name,
`?token=`, `?access_token=`, a fragment, percent-encoded, a raw `/`, `#` or `?` in the
password, `user:1234/...@`) and a registry login in an image reference, beside a clean host
whose operations are queued. Everything it prints (stdout, stderr, every log record at
DEBUG, each host's failure line and the run's summary), every operation's name, commands
and stdin (what pyinfra shows at -vv and sends to hosts) and every file written under the
controller's cache and report folders holds none of the secrets, encoded or decoded.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from pyinfra.api import Config, Inventory, State

from .harness import (
    COMMIT,
    DEFAULTS,
    ROOT,
    facts,
    pci_facts,
    place,
    prepare_each_host,
    run_deploy_hosts_stdin,
)

GOOD = {**DEFAULTS, "source": {"git": "https://git.example/o/r.git", "ref": COMMIT}}
MIRROR = "mirror.example/repo/x"


def secret(n: int) -> str:
    return f"Zq{n:02d}s3cr3tVALUE"


# each form of a URL carrying a credential: (name, URL); the secret strings are numbered
FORMS = [
    ("userinfo", f"https://user:{secret(1)}@{MIRROR}"),
    ("token as user", f"https://{secret(2)}@{MIRROR}"),
    ("?token=", f"https://{MIRROR}?token={secret(3)}"),
    ("?access_token=", f"https://{MIRROR}?arch=amd64&access_token={secret(4)}"),
    ("fragment", f"https://{MIRROR}#access_token={secret(5)}"),
    ("percent-encoded password", f"https://user:{secret(6)}%2F{secret(7)}%40x@{MIRROR}"),
    ("percent-encoded name", f"https://{MIRROR}?%74oken={secret(8)}"),
    ("raw / in password", f"https://user:{secret(9)}/{secret(10)}@{MIRROR}"),
    ("raw / after digits", f"https://user:1234/{secret(11)}@{MIRROR}"),
    ("raw # in password", f"https://user:{secret(12)}#{secret(13)}@{MIRROR}"),
    ("raw ? in password", f"https://user:{secret(14)}?{secret(15)}@{MIRROR}"),
    ("raw / in a token", f"https://{secret(16)}/{secret(17)}@{MIRROR}"),
    ("X-Amz-Signature", f"https://{MIRROR}?X-Amz-Signature={secret(18)}"),
]
# a registry login in an image reference (no URL, but it would reach the Dockerfile's FROM)
IMAGES = {"base_images": {"build": f"user:{secret(19)}@registry.example/img:1"},
          "preload_images": {f"user:{secret(20)}@registry.example/img": "/srv/a.tar"}}
SECRETS = [secret(n) for n in range(1, 21)]
KEYS = ["source.git", "hf_endpoint", "nvidia_repos.cuda", "nvidia_repos.cuda_key",
        "nvidia_repos.toolkit", "nvidia_repos.toolkit_key", "server_extra_args"]


def hosts() -> dict[str, dict]:
    """A host per key and form, the clean host last (it is queued while they fail)."""
    out = {f"h{k}-{f}": {**GOOD, **place(key, url)}
           for k, key in enumerate(KEYS) for f, (_, url) in enumerate(FORMS)}
    out.update({f"img-{key}": {**GOOD, key: value} for key, value in IMAGES.items()})
    out["clean"] = GOOD
    return out


def leaks(text: str) -> list[str]:
    """The secrets in `text`, as written or percent-decoded."""
    return [s for s in SECRETS if s in text or s in unquote(text)]


def _others(folder: Path) -> bool:
    """A folder of .cache/ that other processes write (written_since)."""
    return folder.parent == ROOT / ".cache" and (
        folder.name in ("mutation", "images", "pypi", "models", "src", "wheels")
        or folder.name.startswith("pytest-"))


def written_since(start: float, *folders: Path) -> dict[str, list[str]]:
    """Every file under `folders` written since `start`: the secrets it holds (read in
    chunks that overlap by more than a secret's encoded length, bytes as latin-1: never whole
    in memory). Left out: what other processes write under the checkout's .cache/ meanwhile,
    never this test's kit, whose cache is its own (offline_cache): the integration tier's
    images, downloads and source trees (2 GB in CI, read for 627 s once) and its lanes'
    folders, and mutmut's copy of the tree."""
    found: dict[str, list[str]] = {}
    for folder in folders:
        for dirpath, dirs, names in os.walk(folder):
            dirs[:] = [d for d in dirs if not _others(Path(dirpath, d))]
            for name in names:
                path = Path(dirpath, name)
                try:
                    if path.stat().st_mtime >= start and path.is_file():
                        found[str(path)] = file_leaks(path)
                except OSError:
                    continue
    return found


def file_leaks(path: Path, chunk: int = 8 << 20, overlap: int = 1024) -> list[str]:
    """The secrets in a file, read `chunk` bytes at a time, each read with the last
    `overlap` bytes of the one before (a secret cut between two reads is seen whole)."""
    seen: set[str] = set()
    tail = ""
    with path.open("rb") as f:
        while block := f.read(chunk):
            text = tail + block.decode("latin-1")
            seen.update(leaks(text))
            tail = text[-overlap:]
    return sorted(seen)


def test_no_secret_of_any_url_form_reaches_output_operations_or_the_controllers_files(
        offline_cache, canned_pins, capfd, caplog):
    """The controller's cache and pins are this test's own (conftest.py: offline_cache,
    canned_pins), scanned whole; the checkout's .cache/ and reports/ for files written since
    the test began."""
    from beekeeper.tasks.hostfail import print_summary

    start = time.time() - 1
    caplog.set_level(logging.DEBUG)
    data = hosts()

    # each host prepared as pyinfra prepares it: its refusal, and the run's summary
    state = State(Inventory((list(data.items()), {})), Config())
    errors = prepare_each_host(state, "deploy.py", lambda name: {**facts(), **pci_facts(())})
    print_summary(state, getattr(state, "beekeeper_failures", {}))
    assert set(errors) == set(data) - {"clean"}, errors.get("clean")
    said = [str(e) for e in errors.values()]
    for (_, url), k in [(f, k) for k in KEYS for f in FORMS]:
        assert any(k in line for line in said), (k, url)

    # the deploy queued for every host: the clean one's operations, the others' lines
    failed, ops = run_deploy_hosts_stdin({name: (d, facts()) for name, d in data.items()})
    assert failed == set(data) - {"clean"} and len(ops["clean"]) > 20
    queued = "\n".join(f"{name}\n" + "\n".join(cmds) + f"\n{stdin}"
                       for host_ops in ops.values() for name, cmds, stdin in host_ops)

    out = capfd.readouterr()
    printed = {"stdout": out.out, "stderr": out.err, "logs": caplog.text,
               "refusals": "\n".join(said), "operations": queued}
    assert "host data `" in out.err  # the failures were printed, and scanned
    files = written_since(0, Path(offline_cache), canned_pins.parent)
    files.update(written_since(start, ROOT / ".cache", ROOT / "reports"))
    assert str(canned_pins) in files
    found = {**{where: leaks(text) for where, text in printed.items()}, **files}
    assert not {k: v for k, v in found.items() if v}


@pytest.mark.parametrize("name,url", FORMS, ids=[n for n, _ in FORMS])
def test_every_form_is_refused_in_every_url_key_naming_it(name, url):
    from beekeeper.core.config import load_host_config
    from beekeeper.core.errors import ConfigError

    for key in KEYS:
        with pytest.raises(ConfigError) as e:
            load_host_config({**GOOD, **place(key, url)})
        line = str(e.value)
        assert line.startswith(f"host data `{key}`: ") and not leaks(line), (name, key, line)


def test_a_secret_cut_between_two_reads_of_a_file_is_found(tmp_path):
    """The scan reads files in chunks: a secret across a chunk's end, and one percent-encoded
    there, are each found; a file without one gives none."""
    f = tmp_path / "big"
    encoded = secret(2).replace("s", "%73").encode()
    f.write_bytes(b"x" * 10 + secret(1).encode() + b"y" * 40 + encoded)
    assert file_leaks(f, chunk=16, overlap=64) == sorted([secret(1), secret(2)])
    (tmp_path / "clean").write_bytes(b"z" * 100)
    assert file_leaks(tmp_path / "clean", chunk=16) == []
