"""Two GPU services on one card share its VRAM budget (vram_budget_gib): what is added up is
what each serves, as preflight plans each one alone. Where a service serves a GGUF of yours
(host data model_path), the sum is that file's plan, not the profile's Qwen3.5-9B: two small
models of yours fit where two Qwen3.5-9B would not, and two larger ones over the budget
together are refused though two Qwen3.5-9B would fit."""

from __future__ import annotations

import pytest

from beekeeper.core.errors import BeekeeperError
from beekeeper.core.planner import predict
from beekeeper.core.profiles import PROFILES
from beekeeper.tasks import preflight as pf

from .harness import H200_CARD, RTX4090, _gguf, cfg, smi

SMALL = {"block_count": 4, "embedding_length": 512, "attention.head_count": 8,
         "attention.head_count_kv": 2}
LARGE = {"block_count": 80, "embedding_length": 5120, "attention.head_count": 40,
         "attention.head_count_kv": 8}


def _two(tmp_path, shape: dict, profile: str, **over):
    a = _gguf(tmp_path / "a.gguf", shape)
    b = _gguf(tmp_path / "b.gguf", shape)
    return {"services": [
        {"profile": profile, "model_path": str(a), "model_alias": "a"},
        {"profile": profile, "model_path": str(b), "model_alias": "b", "service_name": "b",
         "port": 8084}], **over}, a


def test_two_small_models_of_yours_on_one_card_fit_the_budget(tmp_path):
    data, a = _two(tmp_path, SMALL, "q8-f16-4k")
    mine = predict(PROFILES["q8-f16-4k"], a).total_mib
    assert 2 * mine < 10 * 1024 < 2 * predict(PROFILES["q8-f16-4k"]).total_mib
    c = cfg(**data)  # refused today with Qwen3.5-9B's 9,850 MiB twice
    pf.check_vram(c, RTX4090)


def test_two_models_of_yours_over_the_budget_together_are_refused(tmp_path):
    data, a = _two(tmp_path, LARGE, "q4km-f16-32k", vram_budget_gib=20)
    mine = predict(PROFILES["q4km-f16-32k"], a).total_mib
    qwen = predict(PROFILES["q4km-f16-32k"]).total_mib
    assert 2 * qwen < 20 * 1024 < 2 * mine and mine < 20 * 1024
    with pytest.raises(BeekeeperError) as e:
        pf.check_vram(cfg(**data), smi(H200_CARD))
    assert "vram_budget_gib" in str(e.value)
    assert f"{2 * mine:.0f} MiB together" in str(e.value), str(e.value)

