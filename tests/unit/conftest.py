import json
from pathlib import Path

import pytest

from beekeeper import hostverify, pins
from beekeeper.core import cache
from beekeeper.core.errors import BeekeeperError
from beekeeper.core.hostdata import DEFAULT_HF_ENDPOINT
from beekeeper.core.profiles import PROFILES, HfSource, ModelFile, PypiSource

# Canned pins (the Hub cannot be reached from the tests): what pins.pin_model would have
# written after asking the Hub for each profile's model. Commit and sha256 are made up.
CANNED_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _profile_models() -> list[ModelFile]:
    return [m for p in PROFILES.values() for m in filter(None, [p.model, p.server.draft_model])]


@pytest.fixture(autouse=True)
def canned_pins(tmp_path, monkeypatch):
    lock = tmp_path / "model-pins.json"
    entries = {}
    for m in _profile_models():
        if isinstance(m.source, HfSource):
            key = pins._key(DEFAULT_HF_ENDPOINT, m.source, m.filename)
            entries[key] = {"commit": CANNED_COMMIT, "sha256": "ab" * 32,
                            "size_bytes": m.size_bytes}
    lock.write_text(json.dumps(entries))
    monkeypatch.setattr(pins, "LOCK", lock)
    return lock


def _no_pypi(args: list[str], dest: Path, log: Path) -> None:
    raise BeekeeperError(f"a unit test reached for PyPI (pip download {' '.join(args)}): the "
                         "fast tier runs offline; mark the test `network` if it must")


@pytest.fixture(autouse=True)
def offline_cache(request, tmp_path_factory, monkeypatch):
    """Each test's own empty controller cache (nothing an earlier run or test left in .cache/
    counts), holding a small stand-in file for each PyPI-shipped model: a deploy plan places
    the file the cache hands it, and the host checks the profile's sha256, so the plan is the
    same as with the real 228 MB download. A unit test that reaches for PyPI fails at once.
    Tests marked `network` keep the configured cache and PyPI."""
    if request.node.get_closest_marker("network"):
        return cache.CACHE
    root = tmp_path_factory.mktemp("beekeeper-cache")
    for m in _profile_models():
        if isinstance(m.source, PypiSource):
            f = root / "models" / m.filename
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"GGUF stand-in for " + m.filename.encode())
    for module in (cache, hostverify):
        monkeypatch.setattr(module, "CACHE", root)
    monkeypatch.setenv("BEEKEEPER_CACHE", str(root))
    monkeypatch.setattr(cache, "pip_download", _no_pypi)
    return root


@pytest.fixture
def keys(tmp_path):
    """Key files (owner-only, as the kit requires) by short name: the gateway's tests'."""
    out = {}
    for name, text in (("gw", "gw-secret"), ("be", "be-secret"), ("be2", "other-secret"),
                       ("spaced", "two words")):
        p = tmp_path / f"{name}.key"
        p.write_text(text + "\n")
        p.chmod(0o600)
        out[name] = str(p)
    return out


@pytest.fixture
def alone_as_nobody(tmp_path_factory):
    """One test at a time runs processes as `nobody` (a lock across pytest-xdist's
    workers): where fds are hidden, the port's holder is found among every process of the
    socket's user (test_persistent_root.py), and another test's `nobody` process
    (test_sandbox_docker_access.py) would be found beside it."""
    import fcntl

    # this run's folder above each worker's (pytest-xdist: popen-gw0, popen-gw1), the user's
    # own: no file another user's run left can be in the way
    run = tmp_path_factory.getbasetemp().parent
    with open(run / "beekeeper-tests-nobody.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
