"""
Preflight's VRAM plan of a model of the user's on the Hub (host data `model_repo` and
`model_file`; issue 43, point 3), read from the file served, not the profile's: its GGUF
header read on the controller when the model is pinned (beekeeper/hubhead.py), with the real
huggingface_hub client against the Hub stand-in on loopback (tests/integration/standins.py:
a redirect to a storage host that honours range requests, as the Hub's CDN does), then
planned by preflight's check_vram as the deploy calls it (deploy.py: load_host_config with
pin_model, then preflight).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from beekeeper import hubhead
from beekeeper.core import ggufhead
from beekeeper.core.config import load_host_config
from beekeeper.core.errors import ConfigError, PreflightError
from beekeeper.core.planner import hub_header, predict, served_gguf
from beekeeper.core.profiles import PROFILES, HfSource, ModelFile
from beekeeper.pins import pin_model
from beekeeper.tasks import preflight as pf
from tests.integration.standins import HubStandIn

from .harness import DEFAULTS, RTX4090

PROFILE = "q4km-f16-32k"  # 6.4 GiB planned: within group_data's vram_budget_gib 10
REPO, FILE = "you/Big-GGUF", "big.gguf"
WARNED = "the VRAM check plans the profile's model instead"


def _gguf(path: Path, *, weights_mib: int = 40, tokens: int = 0, arch: bool = True) -> bytes:
    """A llama-shaped GGUF whose plan at PROFILE's 32k context is about 25 GiB (48 attention
    layers of 32 KV heads of 128 values), `weights_mib` of tensor data after its header (the
    file far larger than the header), `tokens` vocabulary entries (a header past the first
    read); `arch` False: no model's numbers (a LoRA adapter's header)."""
    w = GGUFWriter(str(path), "llama")
    if arch:
        w.add_block_count(48)
        w.add_embedding_length(4096)
        w.add_head_count(32)
        w.add_head_count_kv(32)
        w.add_vocab_size(32000)
    if tokens:
        w.add_tokenizer_model("llama")
        w.add_token_list([f"token-{i:07d}-" + "v" * 72 for i in range(tokens)])
    w.add_tensor("token_embd.weight", np.zeros((16, 32), dtype=np.float32))
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((weights_mib << 18,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


@pytest.fixture(autouse=True)
def fresh_run(monkeypatch):
    """Each test a run of its own: no header remembered as unreadable by an earlier one."""
    monkeypatch.setattr(hubhead, "_UNREAD", set())


@pytest.fixture
def big(tmp_path):
    path = tmp_path / FILE
    return path, _gguf(path)


@pytest.fixture
def hub(big):
    h = HubStandIn()
    h.add(REPO, FILE, big[1])
    yield h
    h.close()


def data(endpoint: str, **over):
    return {**DEFAULTS, "profile": PROFILE, "model_repo": REPO, "model_file": FILE,
            "hf_endpoint": endpoint, **over}


def refused(cfg) -> str:
    with pytest.raises(PreflightError) as e:
        pf.check_vram(cfg, RTX4090)
    return str(e.value)


def headers_dir() -> Path:
    """The controller cache's folder of Hub headers (this test's own cache: conftest.py)."""
    one = hub_header(ModelFile("x.gguf", HfSource("o/r", "0" * 40), "0" * 64, 0, 0))
    assert one is not None
    return one.parents[4]  # <sha256>/<commit>/<owner>/<name>/<file>


def test_a_hub_model_over_the_budget_is_refused_where_the_profiles_own_fits(hub, big):
    """The profile's own model (Qwen3.5-9B Q4_K_M, its layout recorded) fits the budget and
    is never fetched; the user's file, four times its plan, is refused by its own plan."""
    own = load_host_config({**DEFAULTS, "profile": PROFILE}, pin=pin_model)
    pf.check_vram(own, RTX4090)
    assert not headers_dir().exists()  # the profile's model: no header read
    cfg = load_host_config(data(hub.url), pin=pin_model)
    f = hub.files[(REPO, FILE)]
    assert (cfg.service.model.sha256, cfg.service.model.size_bytes) == (f.sha256, len(f.data))
    plan = predict(PROFILES[PROFILE], big[0]).total_mib
    assert plan > 10 * 1024 > predict(PROFILES[PROFILE]).total_mib
    line = refused(cfg)
    # named as the user named it (host data model_repo: the repository and file), not by
    # the controller's copy of its header
    assert line.startswith(f"profile {PROFILE} with your model_repo {REPO}/{FILE} needs "
                           f"{plan:.0f} MiB of VRAM, over vram_budget_gib 10 (10240 MiB): "
                           "weights "), line
    assert "\n" not in line and "gguf-headers" not in line


def test_a_cpu_profiles_hub_model_is_pinned_and_its_header_not_read(hub, capsys):
    """No VRAM plan reads a CPU profile's model: pinned by the Hub's metadata alone, no range
    of the file asked for, nothing kept, nothing warned (offline it would warn of a plan
    that is never made)."""
    cfg = load_host_config(data(hub.url, profile="cpu-tiny"), pin=pin_model)
    f = hub.files[(REPO, FILE)]
    assert cfg.service.model.sha256 == f.sha256
    assert hub.log.ranges == [] and FILE not in hub.log.body_bytes
    assert not headers_dir().exists() and "warning" not in capsys.readouterr().err
    # the same file for a GPU profile is read: the stand-in counts those ranges
    load_host_config(data(hub.url), pin=pin_model)
    assert hub.log.ranges == [f"bytes=0-{pf.GGUF_HEADER_FIRST - 1}"]


def test_only_the_header_is_transferred_and_later_plans_read_the_cache(hub, big, capsys):
    cfg = load_host_config(data(hub.url), pin=pin_model)
    size = len(big[1])
    served = hub.log.body_bytes[FILE]
    assert served <= pf.GGUF_HEADER_FIRST < size // 8  # one range: 4 MiB of a 40 MiB file
    assert hub.log.ranges == [f"bytes=0-{pf.GGUF_HEADER_FIRST - 1}"]
    kept = served_gguf(cfg.service.model)
    f = hub.files[(REPO, FILE)]
    assert kept == headers_dir() / f.sha256 / f.commit / REPO / FILE
    header = ggufhead.parse(big[1]).length
    assert kept.stat().st_size == size  # sparse to the file's size, its header's bytes
    with open(kept, "rb") as k:
        assert k.read(header) == big[1][:header]
    first = refused(cfg)
    # a second deploy: no request at all, the plan the same
    asked = len(hub.log.requests)
    again = load_host_config(data(hub.url), pin=pin_model)
    assert refused(again) == first and len(hub.log.requests) == asked
    # pinned in host data, the Hub gone (a dry run, offline): read from the cache alone
    hub.close()
    f = hub.files[(REPO, FILE)]
    pinned = data(hub.url, model_revision=f.commit, model_sha256=f.sha256)
    assert refused(load_host_config(pinned, pin=pin_model)) == first
    assert refused(load_host_config(pinned)) == first  # no model stage: no pin, the cache
    assert "warning" not in capsys.readouterr().err


def test_a_model_pinned_by_hand_takes_its_size_from_the_header_read(hub, big, capsys):
    """`model_revision` and `model_sha256` given (a gated repository's way, docs/own-model.md):
    no HEAD pins it, and the VRAM plan's header read, kept sparse at the file's length,
    gives its size, which the download and preflight's free-disk check count."""
    from .harness import on_host

    f = hub.files[(REPO, FILE)]
    cfg = load_host_config(data(hub.url, model_revision=f.commit, model_sha256=f.sha256),
                           pin=pin_model)
    assert cfg.service.model.size_bytes == len(big[1])
    assert not any(r.startswith("HEAD ") for r in hub.log.requests)  # the header's GETs only
    with on_host():  # nothing in model_dir yet
        assert pf.download_bytes(cfg) == len(big[1]) and pf.size_unknown(cfg) == []
        assert refused_room(cfg, len(big[1]) + pf.GIB - 1).startswith(
            "model_dir /srv/beekeeper/models has 1.0 GiB free; the model files still to "
            "download or upload need 0.0 GiB")
    assert "warning" not in capsys.readouterr().err


def refused_room(cfg, free: int) -> str:
    with pytest.raises(PreflightError) as e:
        pf.check_free_space(cfg, free)
    return str(e.value)


def test_a_model_pinned_by_hand_whose_size_is_unknown_is_one_warning(hub, capsys):
    """Pinned by hand for a CPU profile (no VRAM plan, so no header read) or where the header
    cannot be read: nothing on the controller knows the file's size; the free-disk check
    leaves it out and says so, naming the key that pinned it, and the host's download reads
    the size from the Hub."""
    from .harness import on_host

    f = hub.files[(REPO, FILE)]
    cfg = load_host_config(data(hub.url, profile="cpu-tiny", model_revision=f.commit,
                                model_sha256=f.sha256), pin=pin_model)
    assert cfg.service.model.size_bytes == 0 and hub.log.requests == []
    with on_host():
        pf.check_free_space(cfg, 0)  # not refused: nothing it can count
    assert capsys.readouterr().err.strip() == (
        f"host canned: warning: host data `model_revision`: {REPO}/{FILE} is pinned by hand "
        "(with `model_sha256`), so no Hub request told the controller its size, and the "
        "free-disk check of model_dir /srv/beekeeper/models leaves it out: make room for it "
        "there (the file's page on the Hub gives its size)")
    with on_host(Sha256File=lambda path, stamps: f.sha256):  # there already: no warning
        pf.check_free_space(cfg, 0)
    assert capsys.readouterr().err == ""


def test_a_header_longer_than_the_first_read_is_read_in_ranges_of_what_it_lacks(tmp_path):
    """A vocabulary past the first 4 MiB: the next range asks for the bytes after those
    read, as many as the header's numbers say it needs, and no more than that."""
    body = _gguf(tmp_path / FILE, weights_mib=64, tokens=60_000)
    length = ggufhead.parse(body).length
    assert pf.GGUF_HEADER_FIRST < length < len(body) // 4
    hub = HubStandIn()
    try:
        hub.add(REPO, FILE, body)
        cfg = load_host_config(data(hub.url), pin=pin_model)
        first, *more = hub.log.ranges
        assert first == f"bytes=0-{pf.GGUF_HEADER_FIRST - 1}" and len(more) == 1
        assert more[0].startswith(f"bytes={pf.GGUF_HEADER_FIRST}-")
        assert length <= hub.log.body_bytes[FILE] < len(body) // 2
        assert "with your " in refused(cfg)
    finally:
        hub.close()


def _warning(err: str) -> str:
    lines = [x for x in err.splitlines() if "warning" in x]
    assert len(lines) == 1, err
    return lines[0]


def test_a_hub_without_range_requests_is_one_warning_and_the_profiles_plan(hub, big, capsys):
    hub.honour_ranges = False
    cfg = load_host_config(data(hub.url), pin=pin_model)
    pf.check_vram(cfg, RTX4090)  # the profile's plan: within the budget
    line = _warning(capsys.readouterr().err)
    f = hub.files[(REPO, FILE)]
    assert line.startswith(f"[beekeeper] warning: host data `model_repo`: the GGUF header of "
                           f"{REPO}/{FILE} (commit {f.commit}) could not be read from "
                           f"{hub.url} (no range requests: the whole file); ")
    assert line.endswith(WARNED)
    assert hub.log.body_bytes.get(FILE, 0) < len(big[1])  # the client stopped at once
    assert not headers_dir().exists()
    # asked and told once a run: the next configuration of this run asks nothing more
    asked = len(hub.log.requests)
    pf.check_vram(load_host_config(data(hub.url), pin=pin_model), RTX4090)
    assert len(hub.log.requests) == asked and capsys.readouterr().err == ""


def test_a_range_answered_short_is_one_warning_not_a_cut_header(hub, big, capsys):
    """A server that caps each range (its Content-Range says the bytes it sent) is not the
    file's end: the header it leaves cut would be refused as no GGUF the planner reads."""
    hub.range_cap = 1 << 20
    pf.check_vram(load_host_config(data(hub.url), pin=pin_model), RTX4090)
    line = _warning(capsys.readouterr().err)
    assert f"({1 << 20} bytes of the {pf.GGUF_HEADER_FIRST} asked from byte 0); " in line, line
    assert line.endswith(WARNED) and not headers_dir().exists()


def test_a_hub_that_cannot_be_reached_is_one_warning_and_the_profiles_plan(hub, capsys):
    f = hub.files[(REPO, FILE)]
    hub.close()  # pinned in host data: the metadata is not asked, the header cannot be read
    cfg = load_host_config(data(hub.url, model_revision=f.commit, model_sha256=f.sha256),
                           pin=pin_model)
    pf.check_vram(cfg, RTX4090)
    line = _warning(capsys.readouterr().err)
    assert f"host data `model_repo`: the GGUF header of {REPO}/{FILE}" in line
    assert "(ConnectError: " in line and line.endswith(WARNED)


def test_bytes_that_are_no_gguf_are_one_warning_and_the_profiles_plan(tmp_path, capsys):
    hub = HubStandIn()
    try:
        hub.add(REPO, FILE, b"<html>" + bytes(1 << 20))
        pf.check_vram(load_host_config(data(hub.url), pin=pin_model), RTX4090)
    finally:
        hub.close()
    line = _warning(capsys.readouterr().err)
    assert ("(it does not start with GGUF's magic b'GGUF' (its first 8 bytes are "
            "b'<html>\\x00\\x00')); ") in line, line
    assert line.endswith(WARNED) and not headers_dir().exists()


def test_a_gguf_header_the_planner_cannot_read_is_refused_naming_model_repo(tmp_path):
    hub = HubStandIn()
    try:
        f = hub.add(REPO, FILE, _gguf(tmp_path / FILE, weights_mib=1, arch=False))
        with pytest.raises(ConfigError) as e:
            load_host_config(data(hub.url), pin=pin_model)
    finally:
        hub.close()
    line = str(e.value)
    assert line.startswith(f"host data `model_repo`: {REPO}/{FILE} (commit {f.commit}): not "
                           "a GGUF model the planner can read ("), line
    assert ", and the VRAM plan reads its layout; fix: name a GGUF model file " in line
    assert "\n" not in line and "gguf-headers" not in line
    # not kept: the next deploy reads it again
    assert not [p for p in headers_dir().rglob("*") if p.is_file()]

