"""A model file is served only with the sha256 it should have: one of yours uploaded from the
controller (host data `model_path`) is checked against the file's own hash on the host before
it is moved into place, and one already on the host (`model_host_path`) is checked where it
is. The operations' shell lines run here, in sh, on real files.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from beekeeper.core import cache
from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError
from beekeeper.operations import model as model_ops
from beekeeper.tasks import model as model_task

from .harness import queued

CPU_GIT = {"profile": "cpu-tiny", "source": {"git": "https://x/y", "ref": "a" * 40}}


def sh(cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def own_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GGUF of yours on the controller; its hash cached under tmp_path, not the checkout."""
    monkeypatch.setattr(cache, "CACHE", tmp_path / "cache")
    local = tmp_path / "controller" / "mine-Q8_0.gguf"
    local.parent.mkdir()
    local.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    return local


def placing(own_model: Path, model_dir: Path, on_host: str | None = None) -> list[str]:
    """The commands that place the `model_path` model, as tasks/model.py queues them."""
    cfg = load_host_config({**CPU_GIT, "model_dir": str(model_dir),
                            "model_path": str(own_model)})
    ops = queued(lambda: model_task.ensure(cfg), {"Sha256File": lambda path, stamps: on_host})
    return next(cmds for name, cmds in ops
                if name.startswith(f"Place model {own_model.name} from the controller"))


def test_your_model_is_moved_into_place_only_with_its_own_sha256(own_model, tmp_path):
    """An upload cut short (or another file at the partial path) is removed and the deploy
    fails; the whole file is moved into place."""
    models = tmp_path / "models"
    models.mkdir()
    dest, partial = models / own_model.name, models / f"{own_model.name}.partial"
    cmds = placing(own_model, models)
    check = next(c for c in cmds if "sha256sum" in c)
    assert sha256(own_model) in check

    partial.write_bytes(own_model.read_bytes()[:-1])  # a truncated upload
    bad = sh(check)
    assert bad.returncode == 1 and "model sha256 mismatch" in bad.stderr
    assert not partial.exists() and not dest.exists()

    shutil.copy(own_model, partial)
    good = sh(check)
    assert good.returncode == 0, good.stderr
    assert dest.read_bytes() == own_model.read_bytes() and not partial.exists()


def test_your_model_already_in_place_is_not_uploaded_again(own_model, tmp_path):
    assert placing(own_model, tmp_path, on_host=sha256(own_model)) == []
    again = placing(own_model, tmp_path, on_host="0" * 64)  # another file at the path
    assert any("sha256sum" in c for c in again)


def test_your_model_already_in_place_needs_no_room_in_model_dir(tmp_path):
    """A `model_path` file without model_sha256 is placed and checked by its own sha256
    (hashed on the controller): a host already holding it has nothing to write, so a second
    run is not refused for the room the first one took; another file at the path is counted,
    and the line says what is written (an upload, not only a download)."""
    from beekeeper.core.errors import PreflightError
    from beekeeper.facts.host import DiskInfo

    from .harness import CPU_HOST, facts, run_deploy

    own_model = tmp_path / "mine-Q4_K_M.gguf"
    own_model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(range(256)) * 64)
    data = {**CPU_GIT, "model_path": str(own_model)}
    dest = f"/srv/beekeeper/models/{own_model.name}"
    # model_dir's file system: room for the build elsewhere, 1 GiB free here (less than the
    # file and 1 GiB margin)
    disk = {"DiskOf": lambda path=None, **_: DiskInfo(
        mount="/srv", free_bytes=2**30) if str(path).startswith("/srv") else
        DiskInfo(mount="/", free_bytes=500 * 2**30)}
    ops = run_deploy(data, facts(**{**CPU_HOST, **disk, "Sha256File": lambda path=None, **_:
                                    sha256(own_model) if path == dest else None}))
    # queued, and nothing to run: the file there is checked by the same hash
    assert [c for n, c in ops if n.startswith(f"Place model {own_model.name}")] == [[]]
    with pytest.raises(PreflightError) as e:
        run_deploy(data, facts(**{**CPU_HOST, **disk, "Sha256File": lambda path=None, **_:
                                  "0" * 64 if path == dest else None}))
    assert str(e.value).startswith(
        "host canned: model_dir /srv/beekeeper/models has 1.0 GiB free; the model files "
        "still to download or upload need 0.0 GiB plus 1 GiB margin: ")


def in_place(path: Path, expected: str, on_host: str | None) -> list[str]:
    ops = queued(lambda: model_ops.model_in_place(name="Check model", path=str(path),
                                                  sha256=expected, stamps="/st"),
                 {"Sha256File": lambda path, stamps: on_host})
    return [c for _, cmds in ops for c in cmds]


def test_a_model_served_in_place_with_another_sha256_fails_the_deploy(tmp_path):
    path = tmp_path / "yours.gguf"
    path.write_bytes(b"GGUF other weights")
    want = "ab" * 32
    assert in_place(path, want, on_host=want) == []  # the right file: nothing to do
    for found in (sha256(path), None):  # another file; no file at all
        [cmd] = in_place(path, want, on_host=found)
        run = sh(cmd)
        assert run.returncode == 1
        assert run.stderr.strip() == f"model {path}: sha256 is not {want}"
    assert path.read_bytes() == b"GGUF other weights"  # yours: never written or removed


# --- the host-side download (beekeeper/hostside/fetch_model.py) ---------------------------

WEIGHTS = b"GGUF" + bytes(range(256)) * 40
PINNED = hashlib.sha256(WEIGHTS).hexdigest()


class Hub:
    """huggingface_hub's calls fetch_model.py makes, answering for one file: `served` is what
    the download writes (the Hub's metadata says `etag`)."""

    def __init__(self, served: bytes = WEIGHTS, etag: str = PINNED):
        self.served, self.etag = served, etag
        self.resumed_at: list[int] = []

    def metadata(self, url: str, **_: Any) -> Any:
        return mock.Mock(etag=f'"{self.etag}"', size=len(self.served), location=url)

    def http_get(self, url: str, f: Any, resume_size: int = 0, **_: Any) -> None:
        self.resumed_at.append(resume_size)
        f.write(self.served[resume_size:])


def fetch(monkeypatch: pytest.MonkeyPatch, hub: Hub, dest: Path) -> int:
    import huggingface_hub
    from huggingface_hub import file_download

    from beekeeper.hostside import fetch_model

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", hub.metadata)
    monkeypatch.setattr(file_download, "http_get", hub.http_get)
    return fetch_model.main(["--endpoint", "https://hub.invalid", "--repo", "o/r",
                             "--revision", "c" * 40, "--file", dest.name, "--dest", str(dest),
                             "--sha256", PINNED, "--size", str(len(WEIGHTS))])


def test_the_download_is_moved_into_place_only_with_the_pinned_sha256(monkeypatch, tmp_path,
                                                                       capsys):
    dest = tmp_path / "m.gguf"
    partial = tmp_path / "m.gguf.partial"
    corrupt = WEIGHTS[:-1] + b"\x00"
    assert fetch(monkeypatch, Hub(served=corrupt), dest) == 1
    assert not dest.exists() and not partial.exists()
    assert f"sha256 mismatch for m.gguf: got {hashlib.sha256(corrupt).hexdigest()}, " \
           f"expected {PINNED}; removed {partial}" in capsys.readouterr().err
    assert fetch(monkeypatch, Hub(), dest) == 0
    assert dest.read_bytes() == WEIGHTS and not partial.exists()
    assert dest.stat().st_mode & 0o777 == 0o644


def test_a_file_the_hub_hashes_otherwise_is_not_downloaded(monkeypatch, tmp_path, capsys):
    hub = Hub(etag="f" * 64)
    models = tmp_path / "models"
    models.mkdir()
    assert fetch(monkeypatch, hub, models / "m.gguf") == 1
    assert hub.resumed_at == [] and list(models.iterdir()) == []
    assert "the Hub's sha256 is " + "f" * 64 in capsys.readouterr().err


def test_a_cut_download_resumes_where_it_stopped(monkeypatch, tmp_path):
    dest = tmp_path / "m.gguf"
    (tmp_path / "m.gguf.partial").write_bytes(WEIGHTS[:1000])
    hub = Hub()
    assert fetch(monkeypatch, hub, dest) == 0
    assert hub.resumed_at == [1000] and dest.read_bytes() == WEIGHTS
    # a partial file longer than the pinned size is not the file: started again
    (tmp_path / "m.gguf.partial").write_bytes(WEIGHTS + b"more")
    dest.unlink()
    assert fetch(monkeypatch, hub, dest) == 0
    assert hub.resumed_at == [1000, 0] and dest.read_bytes() == WEIGHTS


def test_two_services_files_of_one_name_and_other_contents_are_refused(tmp_path, monkeypatch):
    """Two services' own files of one name (llama-quantize writes ggml-model-<type>.gguf)
    land on one path in model_dir: the model stage placed the first alone, and the second
    service served the first's weights. Refused before any change, naming the second's key."""
    monkeypatch.setattr(cache, "CACHE", tmp_path / "cache")
    files = []
    for folder, weights in (("a", b"AAAA"), ("b", b"BBBB")):
        f = tmp_path / folder / "ggml-model-Q4_K_M.gguf"
        f.parent.mkdir()
        f.write_bytes(b"GGUF\x03\x00\x00\x00" + weights * 64)
        files.append(f)
    entries = [{"service_name": name, "profile": "cpu-tiny", "port": port, "model_path": str(f)}
               for name, port, f in (("a", 8080, files[0]), ("b", 8081, files[1]))]
    cfg = load_host_config({"source": CPU_GIT["source"], "model_dir": str(tmp_path / "models"),
                            "services": entries})
    with pytest.raises(ConfigError) as e:
        queued(lambda: model_task.ensure(cfg), {"Sha256File": lambda path, stamps: None})
    assert str(e.value).startswith("host data `services[1].model_path`")
    assert f"{tmp_path}/models/ggml-model-Q4_K_M.gguf" in str(e.value)
    # the same file for both: one placed, nothing refused
    same = [{**entries[1], "model_path": str(files[0])}, entries[0]]
    cfg = load_host_config({"source": CPU_GIT["source"], "model_dir": str(tmp_path / "models"),
                            "services": same})
    ops = queued(lambda: model_task.ensure(cfg), {"Sha256File": lambda path, stamps: None})
    assert len([n for n, _ in ops if n.startswith("Place model ggml-model-Q4_K_M.gguf")]) == 1


@pytest.fixture
def hub_stand_in():
    """The Hub stand-in on loopback (tests/integration/standins.py), its storage another
    origin as the Hub's CDN is; `seen` holds each request's Authorization header by where it
    went (`hub`, `storage`)."""
    from tests.integration.standins import HubStandIn

    hub = HubStandIn()
    hub.seen = []
    hub.storage_delay_s = 0.0  # seconds the storage host waits before it answers
    for where, server in (("hub", hub.server), ("storage", hub.storage)):
        base = server.RequestHandlerClass

        class Recording(base):  # type: ignore[valid-type,misc]
            where_ = where

            def _route(self, body: bool) -> None:
                hub.seen.append((self.where_, self.headers.get("Authorization")))
                if self.where_ == "storage":
                    time.sleep(hub.storage_delay_s)
                super()._route(body)

        server.RequestHandlerClass = Recording
    yield hub
    hub.close()


def fetch_from(hub: Any, f: Any, dest: Path, *extra: str) -> int:
    """fetch_model.py with the real huggingface_hub client against the stand-in."""
    from beekeeper.hostside import fetch_model

    return fetch_model.main(["--endpoint", hub.url, "--repo", f.repo, "--revision", f.commit,
                             "--file", f.filename, "--dest", str(dest), "--sha256", f.sha256,
                             "--size", str(len(f.data)), *extra])


def test_a_gated_models_token_is_not_sent_on_to_the_storage_host(hub_stand_in, tmp_path):
    """hf_token_file's token goes to the Hub (or the mirror) alone: the download from the
    storage host the Hub redirects to (its CDN, a mirror's S3) carries none, as
    huggingface_hub's own downloads do."""
    f = hub_stand_in.add("acme/gated-GGUF", "gated.gguf", WEIGHTS)
    token = tmp_path / "hf-token"
    token.write_text("hf_SecretGatedToken\n")
    token.chmod(0o600)
    dest = tmp_path / "gated.gguf"
    assert fetch_from(hub_stand_in, f, dest, "--token-file", str(token)) == 0
    assert dest.read_bytes() == WEIGHTS
    bearer = "Bearer hf_SecretGatedToken"
    assert ("hub", bearer) in hub_stand_in.seen
    assert [auth for where, auth in hub_stand_in.seen if where == "storage"] == [None]


def test_two_downloads_of_one_model_at_once_both_end_with_the_file(hub_stand_in, tmp_path):
    """Two inventory hosts on one machine serving one model (pyinfra runs an operation on
    every host at once) download it to one `.partial`: each waits for the other, and both
    end with the whole file in place, where both appended to it and removed it as corrupt,
    the deploy failing again every run."""
    f = hub_stand_in.add("acme/shared-GGUF", "shared.gguf", WEIGHTS)
    hub_stand_in.storage_delay_s = 0.5  # both have asked before either writes a byte
    dest = tmp_path / "shared.gguf"
    codes: list[int] = []
    runs = [threading.Thread(target=lambda: codes.append(fetch_from(hub_stand_in, f, dest)))
            for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
    assert codes == [0, 0]
    assert dest.read_bytes() == WEIGHTS
    assert not (tmp_path / "shared.gguf.partial").exists()
