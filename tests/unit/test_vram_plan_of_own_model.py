"""Preflight's VRAM check plans what the service serves: the user's own GGUF where the
controller holds it (host data model_path), at the service's ctx_size and slots; a refusal
names that shape and the ways out at it."""

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.core.planner import predict
from beekeeper.tasks import preflight as pf

from .harness import RTX4090, _gguf, cfg


def own(tmp_path, **kw):
    gguf = _gguf(tmp_path / "mine.gguf", {"block_count": 40, "embedding_length": 5120,
                                          "attention.head_count": 40,
                                          "attention.head_count_kv": 8,
                                          "context_length": 131072},
                 weights_bytes=kw.pop("weights_bytes", 0))
    return cfg(profile="q8-turbo4-64k", model_path=str(gguf), **kw), gguf


def test_the_users_file_is_planned_not_the_profiles_model(tmp_path):
    c, gguf = own(tmp_path)
    mine = predict(c.service.profile, gguf)
    qwen = predict(c.service.profile)
    assert mine.kv_mib != qwen.kv_mib  # 40 attention layers of 8 KV heads, not Qwen's 8 of 4
    budget = mine.total_mib / 1024
    pf.check_vram(cfg(profile="q8-turbo4-64k", model_path=str(gguf), vram_budget_gib=budget),
                  RTX4090)
    with pytest.raises(PreflightError) as e:
        pf.check_vram(cfg(profile="q8-turbo4-64k", model_path=str(gguf),
                          vram_budget_gib=budget * 0.99), RTX4090)
    assert str(e.value).startswith(
        f"profile q8-turbo4-64k with your model_path {gguf} needs {mine.total_mib:.0f} MiB")


def test_a_file_the_planner_cannot_read_is_one_line_naming_the_key(tmp_path):
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(PreflightError) as e:
        pf.check_vram(cfg(profile="q8-turbo4-64k", model_path=str(bad)), RTX4090)
    assert e.value.subject == "host data `model_path`"
    assert str(e.value).startswith(f"host data `model_path`: {bad}: not a GGUF model")
    assert e.value.fix == "give the model's .gguf file, the one llama-server loads"


def test_slots_over_the_budget_say_the_shape_and_offer_fewer_slots():
    with pytest.raises(PreflightError) as e:
        pf.check_vram(cfg(profile="q8-turbo4-64k-bs", slots=8), RTX4090)
    line = str(e.value)
    assert line.startswith("profile q8-turbo4-64k-bs at 8 slots needs ")
    fits = line.split("; profiles that fit with 8 slots: ")[1].split(", or fewer slots")[0]
    assert "q8-turbo4-64k-bs" not in fits.split(", ")  # the refused shape is not offered
    assert "dflash" not in fits  # a draft profile keeps one slot
    assert line.endswith(", or fewer slots; or raise vram_budget_gib")
