"""
Pinning Hub models on the controller with the real huggingface_hub client, against the
Hub stand-in on loopback (tests/integration/standins.py; the Hub cannot be reached here).
"""

import json

import pytest

from beekeeper.core.errors import ConfigError
from beekeeper.core.profiles import HfSource, ModelFile
from beekeeper.pins import is_pinned, pin_model
from tests.integration.standins import HubStandIn

DATA = b"GGUF" + bytes(range(256)) * 64


@pytest.fixture
def hub():
    h = HubStandIn()
    h.add("acme/tiny-GGUF", "tiny.gguf", DATA)
    yield h
    h.close()


def model(revision="main", sha256=None, size=0):
    return ModelFile(filename="tiny.gguf", source=HfSource("acme/tiny-GGUF", revision),
                     sha256=sha256, size_bytes=size, n_ctx_train=4096)


def test_branch_is_resolved_to_a_commit_once_then_read_from_the_lock(hub, tmp_path, capsys):
    lock = tmp_path / "pins.json"
    pinned = pin_model(model(), hub.url, lock=lock)
    f = hub.files[("acme/tiny-GGUF", "tiny.gguf")]
    assert pinned.source == HfSource("acme/tiny-GGUF", f.commit)
    assert (pinned.sha256, pinned.size_bytes) == (f.sha256, len(DATA))
    assert is_pinned(pinned)
    err = capsys.readouterr().err
    assert f"revision main -> commit {f.commit}" in err and f"model_sha256 = '{f.sha256}'" in err
    n = len(hub.log.requests)
    assert pin_model(model(), hub.url, lock=lock) == pinned
    assert len(hub.log.requests) == n  # from the lock: the Hub is not asked again
    assert json.loads(lock.read_text())  # kept on the controller


def test_a_given_sha256_that_the_hub_contradicts_is_refused(hub, tmp_path):
    with pytest.raises(ConfigError, match=r"`model_sha256`: f{64} does not match the Hub's"):
        pin_model(model(sha256="f" * 64), hub.url, lock=tmp_path / "p.json")


def test_unknown_file_or_revision_is_one_line_with_the_fix(hub, tmp_path):
    for m in (model(revision="nope"), ModelFile("other.gguf", HfSource("acme/tiny-GGUF", "main"),
                                                None, 0, 4096)):
        with pytest.raises(ConfigError) as e:
            pin_model(m, hub.url, lock=tmp_path / "p.json")
        assert "host data `model_revision`: cannot pin" in str(e.value)
        assert "\n" not in str(e.value)


def test_a_hub_that_cannot_be_reached_is_said_so_with_the_networks_fix(tmp_path, monkeypatch):
    """An offline controller (or one behind a proxy): the real client's connection error was
    worded as a repository problem ("check the repository, file and revision"). Nothing
    listens on the endpoint's port; the client's back-off between its retries is skipped."""
    import huggingface_hub.utils._http as hub_http

    monkeypatch.setattr(hub_http.time, "sleep", lambda s: None)
    with pytest.raises(ConfigError) as e:
        pin_model(model(), "http://127.0.0.1:9", lock=tmp_path / "p.json")
    said = str(e.value)
    assert said.startswith("host data `model_revision`: cannot reach http://127.0.0.1:9 from "
                           "this controller to pin acme/tiny-GGUF/tiny.gguf@main"), said
    assert "fix: check this controller's network (behind a proxy: HTTPS_PROXY" in said
    assert "check the repository" not in said and "\n" not in said


def test_a_gated_repository_is_pinned_with_the_controllers_token(hub, tmp_path,
                                                                   monkeypatch):
    """A gated (or private) repository answers 401 without a token: the refusal says where
    the controller's token goes; with HF_TOKEN set for pyinfra, the real client sends it and
    the pin goes through (the host's download reads hf_token_file, not this)."""
    hub.gated["acme/tiny-GGUF"] = "hf_controllers_token"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no token saved by `hf auth login`
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ConfigError) as e:
        pin_model(model(), hub.url, lock=tmp_path / "p.json")
    assert "a gated or private repository: a token on the controller, in HF_TOKEN or from " \
        "`hf auth login`" in str(e.value), e.value
    assert "hf_controllers_token" not in str(e.value)
    monkeypatch.setenv("HF_TOKEN", "hf_controllers_token")
    pinned = pin_model(model(), hub.url, lock=tmp_path / "p.json")
    assert pinned.sha256 == hub.files[("acme/tiny-GGUF", "tiny.gguf")].sha256


def test_fully_pinned_model_asks_nothing(hub, tmp_path):
    m = model(revision="a" * 40, sha256="b" * 64, size=10)
    assert pin_model(m, "http://127.0.0.1:9", lock=tmp_path / "p.json") == m


def test_commit_and_sha256_given_ask_nothing_even_without_a_size(hub, tmp_path):
    """Pinned in host data by commit and sha256: no Hub question (nothing listens on the
    endpoint), the size from the lock where it holds that file, else left to the host."""
    f = hub.files[("acme/tiny-GGUF", "tiny.gguf")]
    m = model(revision=f.commit, sha256=f.sha256)
    assert pin_model(m, "http://127.0.0.1:9", lock=tmp_path / "p.json") == m
    lock = tmp_path / "pins.json"
    pin_model(model(), hub.url, lock=lock)  # the lock now holds main's commit
    n = len(hub.log.requests)
    pinned = pin_model(model(revision="main", sha256=f.sha256), hub.url, lock=lock)
    assert pinned.size_bytes == len(DATA) and len(hub.log.requests) == n


def test_a_given_sha256_that_the_lock_contradicts_is_refused_naming_both(hub, tmp_path):
    lock = tmp_path / "pins.json"
    f = hub.files[("acme/tiny-GGUF", "tiny.gguf")]
    pin_model(model(), hub.url, lock=lock)
    with pytest.raises(ConfigError) as e:
        pin_model(model(sha256="f" * 64), hub.url, lock=lock)
    msg = str(e.value)
    assert msg.startswith("host data `model_sha256`: ") and "\n" not in msg
    assert "f" * 64 in msg and f.sha256 in msg and str(lock) in msg


def test_the_configuration_is_made_with_its_models_pinned_not_rewritten():
    """deploy.py pins a host's models by making its configuration with `pin` (the model, then
    the draft, of each service, with host data's Hub endpoint); without it nothing is asked."""
    from beekeeper.core.config import load_host_config

    data = {"profile": "cpu-tiny-draft", "hf_endpoint": "http://127.0.0.1:9",
            "source": {"path": "/srv/s.tar.gz", "ref": "lcp0.3.36"}}
    asked: list[tuple[str, str, str, bool]] = []

    def pin(m: ModelFile, endpoint: str, role: str, plans: bool) -> ModelFile:
        asked.append((m.filename, endpoint, role, plans))
        return ModelFile(filename=f"{role}.gguf", source=m.source, sha256="cd" * 32,
                         size_bytes=1, n_ctx_train=m.n_ctx_train)

    plain = load_host_config(data)
    assert asked == []
    cfg = load_host_config(data, pin=pin)
    name = plain.service.model.filename
    # a CPU profile: no VRAM plan reads the model served, so its header is not asked for
    assert asked == [(name, "http://127.0.0.1:9", "model", False),
                     (name, "http://127.0.0.1:9", "draft", False)]
    svc = cfg.service
    assert (svc.model.filename, svc.draft and svc.draft.filename) == ("model.gguf", "draft.gguf")
    assert (svc.name, svc.data.port, svc.profile) == \
        (plain.service.name, plain.service.data.port, plain.service.profile)
