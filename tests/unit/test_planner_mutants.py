"""
The planner's rules pinned where a mutant of core/planner.py survived its run of 2026-12-05
(issue 45; docs/testing.md, "Mutation testing"), after the day's changes: slots, the KV cache
per slot, the draft model's second recurrent state.
"""

from __future__ import annotations

from dataclasses import replace

from beekeeper.core.planner import kv_cells, predict
from beekeeper.core.profiles import PROFILES


def test_a_draft_profiles_plan_says_its_recurrent_state_is_held_twice():
    """beellama's speculative server keeps a second recurrent state a slot: the plan's table
    says so beside the figure, which is twice one state's."""
    draft = predict(PROFILES["q8-dflash-32k"], card="NVIDIA H200")
    rows = draft.table().splitlines()
    assert "recurrent state R+S (1 seq, x2: a draft model)        100.5" in rows
    plain = predict(PROFILES["q8-turbo4-64k"]).table().splitlines()
    assert "recurrent state R+S (1 seq)                            50.2" in plain
    # the same model without its draft: one state
    alone = replace(PROFILES["q8-dflash-32k"],
                    server=replace(PROFILES["q8-dflash-32k"].server, draft_model=None))
    assert predict(alone).recurrent_mib * 2 == draft.recurrent_mib


def test_each_slots_share_of_the_kv_cache_is_padded_to_256_cells():
    """llama.cpp pads the context to 256 cells, splits it over the slots and pads each share
    to 256 again: -c 4352 -np 16 is 8,192 cells, -c 8192 -np 3 is 8,448."""
    assert kv_cells(4352, 16) == 8192
    assert kv_cells(8192, 3) == 3 * 2816
    assert kv_cells(8192, 2) == 8192 and kv_cells(8192) == 8192
    assert kv_cells(8193, 1) == 8448


def test_a_unified_kv_cache_is_one_share_for_all_slots_and_another_is_one_a_slot():
    """--kv-unified (the draft profiles) keeps one cache the slots share: the context padded
    once; without it each slot's share is padded (-c 8448 -np 2: 2 x 4,352 cells)."""
    unified = PROFILES["q8-dflash-32k"]
    assert unified.server.kv_unified
    assert predict(unified, ctx_size=8448, n_seq=2).kv_cells == 8448
    split = PROFILES["q8-turbo4-64k"]
    assert not split.server.kv_unified
    assert predict(split, ctx_size=8448, n_seq=2).kv_cells == 8704


def test_a_hub_headers_copy_is_kept_where_the_docs_say():
    """docs/own-model.md tells a user where the controller keeps a Hub model's header (to
    find or clear it): the cache's `gguf-headers/`, by sha256, commit, repository and file."""
    import re
    from pathlib import Path

    from beekeeper.core.cache import CACHE
    from beekeeper.core.planner import hub_header
    from beekeeper.core.profiles import HfSource, ModelFile

    doc = (Path(__file__).resolve().parents[2] / "docs/own-model.md").read_text()
    folder = re.search(r"controller's `\.cache/([a-z-]+)/`", doc)
    assert folder is not None
    model = ModelFile("sub/big.gguf", HfSource("you/Big-GGUF", "c" * 40), "d" * 64, 0, 0)
    assert hub_header(model) == \
        CACHE / folder[1] / ("d" * 64) / ("c" * 40) / "you" / "Big-GGUF" / "big.gguf"
