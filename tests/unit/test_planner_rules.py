"""
The planner's rules held by their figures and words (issue 45: beekeeper/core/planner.py
through scripts/mutation.py; docs/testing.md, "Mutation testing"): the plan's table and
JSON, where the CUDA context comes from, the compute buffers by KV type and sampler
placement, a CPU build, the GGUF refusals and the ubatch policy's choice and its reasons.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from beekeeper.core import planner
from beekeeper.core.planner import (
    MIB,
    PlanError,
    UbatchMeasure,
    choose_ubatch,
    compute_buffer_bytes,
    cuda_context_for,
    kv_type_bytes,
    predict,
    recurrent_state_bytes,
)
from beekeeper.core.profiles import PROFILES, QWEN35_9B_LAYOUT


def _tiny_gguf(path: Path, layers: int) -> None:
    """A small llama-shaped GGUF: `layers` blocks, each with KV."""
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "llama")
    w.add_block_count(layers)
    w.add_embedding_length(64)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_vocab_size(100)
    w.add_tensor("token_embd.weight", np.zeros((100, 64), dtype=np.float16))
    w.add_tensor("blk.0.attn_k.weight", np.zeros((layers, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

TURBO4 = PROFILES["q8-turbo4-64k"]
MEASURED = ("H200 (driver 580.159.04, compute capability 9.0), measured: "
            "benchmarks/h200/2026-11-30-beellama (q8-turbo4-64k, the other four ranking "
            "profiles, ubatch 2048/4096 and backend sampling)")


def test_the_plan_table_says_each_part_and_both_totals():
    assert predict(TURBO4, card="NVIDIA H200").table() == "\n".join([
        "part                                                    MiB",
        "weights on GPU                                       8055.5",
        "KV cache K (65536 cells x 8 layers)                   264.0",
        "KV cache V                                            264.0",
        "recurrent state R+S (1 seq)                            50.2",
        "draft model + cache                                     0.0",
        "compute buffers                                       493.0",
        "CUDA context                                          622.0",
        "total (server process, NVML)                         9748.8  (9.52 GiB)",
        "total (rise of memory.used over idle)                9754.8  (9.53 GiB)",
        f"CUDA context: {MEASURED}",
    ])


def test_a_cpu_profiles_table_is_zero_by_part_with_no_rise_line():
    pred = predict(PROFILES["cpu-tiny"])
    assert pred.table() == "\n".join([
        "part                                                    MiB",
        "weights on GPU                                          0.0",
        "KV cache K (4096 cells x 0 layers)                      0.0",
        "KV cache V                                              0.0",
        "recurrent state R+S (1 seq)                             0.0",
        "draft model + cache                                     0.0",
        "compute buffers                                         0.0",
        "CUDA context                                            0.0",
        "total (server process, NVML)                            0.0  (0.00 GiB)",
        "CUDA context: none: a CPU profile uses no GPU memory",
    ])
    assert (pred.kv_cells, pred.n_seq) == (4096, 1)
    # llama.cpp's sizes: 5,000 padded to 5,120, a third of it (1,706) padded to 1,792 a slot
    other = predict(PROFILES["cpu-tiny"], ctx_size=5000, n_seq=3)
    assert (other.kv_cells, other.n_seq) == (5376, 3)
    assert other.total_mib == other.total_rise_mib == 0.0


def test_the_plans_json_holds_every_part_and_its_totals():
    pred = predict(TURBO4, card="NVIDIA H200")
    d = pred.to_json()
    assert d["profile"] == "q8-turbo4-64k" and d["context_basis"] == MEASURED
    assert (d["kv_k_mib"], d["kv_v_mib"], d["kv_mib"]) == (264.0, 264.0, 528.0)
    assert (d["recurrent_r_mib"], d["recurrent_s_mib"], d["recurrent_mib"]) == (2.25, 48.0, 50.25)
    assert (d["kv_cells"], d["kv_layers"], d["n_seq"]) == (65536, 8, 1)
    assert (d["cuda_context_mib"], d["cuda_context_rise_mib"]) == (622, 628)
    assert d["total_mib"] == pytest.approx(9748.758, abs=1e-3)
    assert d["total_rise_mib"] == pytest.approx(d["total_mib"] + 6)
    assert d["total_gb"] == pytest.approx(d["total_mib"] * MIB / 1e9)
    assert pred.total_gb == pytest.approx(10.2223, abs=1e-4)


@pytest.mark.parametrize(("card", "measured"), [
    ("NVIDIA H200", True), ("nvidia h200 nvl", True), ("H200", True),
    ("NVIDIA GeForce RTX 4090", False), ("", False), (None, False)])
def test_the_cuda_context_is_the_measured_cards_by_name_whatever_its_case(card, measured):
    ctx, found = cuda_context_for(card)
    assert found is measured and ctx.card == "H200"


def test_where_the_cuda_context_comes_from_is_said():
    assert predict(TURBO4, card="RTX 4090").context_basis == (
        "RTX 4090: not measured; assumed the H200's (622 MiB per process, 628 MiB of rise)")
    assert predict(TURBO4).context_basis == (
        "card not given: not measured; assumed the H200's (622 MiB per process, 628 MiB of "
        "rise)")
    given = predict(TURBO4, card="NVIDIA H200", cuda_context_mib=500)
    assert given.context_basis == "given: 500 MiB"
    # a context given is the process figure; the rise keeps the measured card's difference
    assert (given.cuda_context_mib, given.cuda_context_rise_mib) == (500, 506)
    assert given.table().splitlines()[7] == f"{'CUDA context':48} {500.0:>10.1f}"


def test_a_cuda_profile_with_no_layer_on_the_gpu_plans_no_vram():
    off = replace(TURBO4, server=replace(TURBO4.server, n_gpu_layers=0))
    pred = predict(off, card="NVIDIA H200")
    assert pred.total_mib == pred.total_rise_mib == 0.0
    assert (pred.kv_cells, pred.kv_layers) == (65536, 8)  # the shape is still said
    assert pred.context_basis == "none: a CPU build uses no GPU memory"
    assert "total (rise" not in pred.table()


def test_a_cpu_profile_given_its_gguf_is_planned_from_it_at_zero_vram(tmp_path):
    path = tmp_path / "tiny.gguf"
    _tiny_gguf(path, 18)
    pred = predict(PROFILES["cpu-tiny"], path)
    assert pred.kv_layers == 18 and pred.total_mib == 0.0
    assert pred.context_basis == "none: a CPU build uses no GPU memory"


def test_a_gpu_profile_without_a_layout_asks_for_its_gguf():
    bare = replace(TURBO4, layout=None)
    with pytest.raises(PlanError, match=r"^profile q8-turbo4-64k records no layout: give its "
                                        r"GGUF file \(--gguf\)$"):
        predict(bare)


FIX = "(give the model's .gguf file, the one llama-server loads)"


def test_a_gguf_the_planner_cannot_read_is_one_line_naming_it(tmp_path):
    def says(path: Path) -> str:
        with pytest.raises(PlanError) as e:
            predict(PROFILES["q8-f16-4k"], path)
        return str(e.value)

    assert says(tmp_path) == f"--gguf {tmp_path}: not a file {FIX}"
    missing = tmp_path / "no.gguf"
    assert says(missing) == f"--gguf {missing}: No such file or directory {FIX}"
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    assert says(empty) == f"--gguf {empty}: the file is empty {FIX}"
    other = tmp_path / "other.gguf"
    other.write_bytes(b"PK\x03\x04 a zip")
    assert says(other) == (f"--gguf {other}: not a GGUF file (it starts b'PK\\x03\\x04', a "
                           f"GGUF with b'GGUF') {FIX}")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(b"GGUF\x03\x00\x00\x00")
    line = says(cut)
    assert line.startswith(f"--gguf {cut}: not a GGUF model the planner can read (")
    assert line.endswith(f") {FIX}") and "\n" not in line


def test_a_gguf_without_an_architecture_or_its_numbers_is_refused_by_name(tmp_path):
    from gguf import GGUFWriter

    from beekeeper.core.planner import layout_from_gguf

    path = tmp_path / "vocab-only.gguf"
    w = GGUFWriter(str(path), "llama")
    for kv in w.kv_data:
        kv.pop("general.architecture", None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError) as e:
        layout_from_gguf(path)
    assert str(e.value) == f"{path}: no general.architecture; is it a GGUF model?"
    with pytest.raises(PlanError, match=r"not a GGUF model the planner can read \(.*"
                                        r"no general\.architecture"):
        predict(PROFILES["q8-f16-4k"], path)
    # an architecture without its numbers (a LoRA adapter): what the reader said, one line
    lora = tmp_path / "lora.gguf"
    w = GGUFWriter(str(lora), "llama")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(PlanError) as e:
        predict(PROFILES["q8-f16-4k"], lora)
    assert str(e.value) == (f"--gguf {lora}: not a GGUF model the planner can read (int() "
                            "argument must be a string, a bytes-like object or a real number, "
                            f"not 'NoneType') {FIX}")


def test_the_compute_buffers_by_kv_type_and_sampler_placement():
    cells, ub = 4096, 512
    per_ubatch = 493.0 / (248320 * 512) * 248320 * MIB
    f16 = compute_buffer_bytes(QWEN35_9B_LAYOUT, cells, "f16", "f16", ub, False)
    assert f16 == int(per_ubatch * ub) == 516947968
    # f16, bf16, f32 and turbo4 attend in place; the others make an f16 copy of K or V
    for kind in ("bf16", "f32", "turbo4"):
        assert compute_buffer_bytes(QWEN35_9B_LAYOUT, cells, kind, kind, ub, False) == f16
    half = cells * 4 * 256 * 2
    assert compute_buffer_bytes(QWEN35_9B_LAYOUT, cells, "turbo3", "f16", ub, False) == \
        f16 + half
    assert compute_buffer_bytes(QWEN35_9B_LAYOUT, cells, "f16", "q8_0", ub, False) == f16 + half
    assert compute_buffer_bytes(QWEN35_9B_LAYOUT, cells, "turbo3", "turbo3", ub, False) == \
        f16 + 2 * half
    # backend sampling: a second logits buffer and 2 KiB a cell
    assert compute_buffer_bytes(QWEN35_9B_LAYOUT, cells, "f16", "f16", ub, True) == \
        int(2 * per_ubatch * ub + cells * 2048)
    assert compute_buffer_bytes(QWEN35_9B_LAYOUT, cells, "f16", "f16", 2048, False) == \
        int(per_ubatch * 2048)


def test_a_layout_with_other_head_dims_for_k_and_v_copies_each_at_its_own():
    layout = replace(QWEN35_9B_LAYOUT, head_dim_k=128, head_dim_v=64)
    base = compute_buffer_bytes(layout, 1024, "f16", "f16", 512, False)
    assert compute_buffer_bytes(layout, 1024, "q8_0", "f16", 512, False) == \
        base + 1024 * 4 * 128 * 2
    assert compute_buffer_bytes(layout, 1024, "f16", "q8_0", 512, False) == \
        base + 1024 * 4 * 64 * 2


def test_an_unknown_kv_type_names_the_known_ones():
    with pytest.raises(ValueError) as e:
        kv_type_bytes("turbo9", 1024)
    assert str(e.value) == f"unknown KV cache type 'turbo9'; known: {sorted(planner.KV_BLOCK)}"
    with pytest.raises(ValueError) as e:
        kv_type_bytes("q8_0", 100)
    assert str(e.value) == "100 values per row do not fill q8_0 blocks of 32"
    assert kv_type_bytes("q8_0", 64) == 68 and kv_type_bytes("f32", 3) == 12


def test_no_recurrent_state_without_recurrent_layers_or_a_state():
    assert recurrent_state_bytes(4, replace(QWEN35_9B_LAYOUT, ssm_d_state=0)) == (0, 0)
    assert recurrent_state_bytes(4, replace(QWEN35_9B_LAYOUT, attention_layers=32)) == (0, 0)
    one = replace(QWEN35_9B_LAYOUT, attention_layers=31)
    r, s = recurrent_state_bytes(2, one)
    conv = 4096 + 2 * 16 * 128
    assert (r, s) == (2 * 1 * 3 * conv * 4, 2 * 1 * 128 * 4096 * 4)


def test_the_drafters_cache_takes_the_main_context_and_its_own_kv_types():
    d = PROFILES["q8-dflash-32k"]
    assert predict(d).draft_mib == pytest.approx(1057.0417, abs=1e-3)  # -cd 256, f16
    main = replace(d, server=replace(d.server, draft_ctx_size=None,
                                     cache_type_k_draft="q8_0", cache_type_v_draft="turbo4"))
    k = 32768 * 8 * 4 * 256 // 32 * 34
    v = 32768 * 8 * 4 * 256 // 128 * 66
    assert predict(main).draft_mib == (d.server.draft_model.size_bytes + k + v) / MIB
    assert predict(TURBO4).draft_mib == 0.0


def test_the_plan_of_a_changed_gguf_is_read_again(tmp_path):
    path = tmp_path / "m.gguf"
    _tiny_gguf(path, 4)
    first = predict(PROFILES["q8-f16-4k"], path)
    _tiny_gguf(path, 6)
    again = predict(PROFILES["q8-f16-4k"], path)
    assert (first.kv_layers, again.kv_layers) == (4, 6)
    assert again.weights_mib > first.weights_mib


# --- the ubatch policy ------------------------------------------------------------------

SRC = "(benchmarks/h200/2026-11-30-beellama)"


def test_the_ubatch_policys_reasons_say_each_measure_and_its_plan():
    ub, why = choose_ubatch(TURBO4, "NVIDIA H200", 10 * 1024)
    assert ub == 512 and why == (
        "-ub 512: TTFT 12.00 s, planned 9755 MiB; -ub 2048: TTFT 11.64 s, planned 11234 MiB "
        "(over budget); -ub 4096: TTFT 12.10 s, planned 13206 MiB (over budget) " + SRC)
    ub, why = choose_ubatch(TURBO4, "NVIDIA H200", 9000)
    assert ub == 512 and why.endswith(
        "; the profile's -ub 512 is over budget (9755 MiB); nothing measured fits " + SRC)


def test_an_own_ubatch_over_budget_takes_the_fastest_that_fits():
    big = replace(TURBO4, server=replace(TURBO4.server, ubatch_size=4096))
    ub, why = choose_ubatch(big, "nvidia h200", 10 * 1024)
    assert ub == 512
    assert why.endswith("; the profile's -ub 4096 is over budget (13206 MiB) " + SRC)


def test_an_own_ubatch_not_measured_is_kept():
    own = replace(TURBO4, server=replace(TURBO4.server, ubatch_size=1024))
    assert choose_ubatch(own, "NVIDIA H200", 40 * 1024)[0] == 1024


def test_no_measurement_for_the_card_keeps_the_profiles_own_and_says_its_plan():
    assert choose_ubatch(TURBO4, "RTX 4090", 9000) == (
        512, "no TTFT measured by ubatch for RTX 4090 / turbo4; the profile's -ub 512 planned "
             "9755 MiB (over budget)")
    assert choose_ubatch(TURBO4, None, 90000) == (
        512, "no TTFT measured by ubatch for this card / turbo4; the profile's -ub 512 planned "
             "9755 MiB")
    assert choose_ubatch(PROFILES["cpu-tiny"], "NVIDIA H200", 90000) == (
        512, "a CPU build: no GPU memory to trade for prefill speed")
    # another KV type on the measured card: nothing measured for it
    f16 = PROFILES["q8-f16-4k"]
    assert choose_ubatch(replace(f16, server=replace(f16.server, backend_sampling=False)),
                         "NVIDIA H200", 90000)[1].startswith(
        "no TTFT measured by ubatch for NVIDIA H200 / f16;")


@pytest.mark.parametrize(("fast", "chosen"), [(19.0, 2048), (19.01, 512)])
def test_a_larger_ubatch_is_taken_at_5_percent_faster_not_less(monkeypatch, fast, chosen):
    monkeypatch.setattr(planner, "UBATCH_MEASURED", (UbatchMeasure(
        card="H200", cache_type="turbo4", prompt_tokens=60_000,
        ttft_s_by_ubatch={512: 20.0, 2048: fast}, source="made"),))
    assert choose_ubatch(TURBO4, "NVIDIA H200", 40 * 1024)[0] == chosen
    # over budget, the faster one is not taken
    assert choose_ubatch(TURBO4, "NVIDIA H200", 10 * 1024)[0] == 512


def test_the_ubatch_is_planned_with_the_context_slots_and_context_given():
    _, why = choose_ubatch(TURBO4, "NVIDIA H200", 90000, ctx_size=4096, n_seq=2,
                           cuda_context_mib=100)
    small = predict(replace(TURBO4, server=replace(TURBO4.server, ubatch_size=512)),
                    ctx_size=4096, n_seq=2, cuda_context_mib=100, card="NVIDIA H200")
    assert why.startswith(f"-ub 512: TTFT 12.00 s, planned {small.total_rise_mib:.0f} MiB;")
    _, why = choose_ubatch(TURBO4, "RTX 4090", 90000, ctx_size=4096, n_seq=2,
                           cuda_context_mib=100)
    assert f"planned {small.total_rise_mib:.0f} MiB" in why


# --- what the planner reads from a GGUF's metadata ---------------------------------------

def _gguf(path: Path, keys: dict, *, tokens: int = 0, embd: bool = True,
          size: tuple[int, int] = (4, 64), output: bool = False) -> None:
    """A GGUF of llama's architecture with the metadata `keys` (under `llama.`; a list is an
    array, per layer), `tokens` vocabulary tokens, and two small tensors."""
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "llama")
    for k, v in keys.items():
        if isinstance(v, list):
            w.add_array(f"llama.{k}", v)
        else:
            w.add_uint32(f"llama.{k}", v)
    if tokens:
        w.add_token_list([f"t{i}" for i in range(tokens)])
    if embd:
        w.add_tensor("token_embd.weight", np.zeros((10, 64), dtype=np.float16))
    w.add_tensor("blk.0.attn_k.weight", np.zeros(size, dtype=np.float32))
    if output:
        w.add_tensor("output.weight", np.zeros((10, 64), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _layout(tmp_path: Path, keys: dict, **kw):
    from beekeeper.core.planner import layout_from_gguf

    path = tmp_path / "m.gguf"
    _gguf(path, keys, **kw)
    return layout_from_gguf(path)


def test_per_layer_kv_heads_count_the_attention_layers(tmp_path):
    """A hybrid model's GGUF may give head_count_kv per layer, 0 for a recurrent one."""
    layout, _ = _layout(tmp_path, {"block_count": 4, "embedding_length": 64,
                                   "attention.head_count": 2,
                                   "attention.head_count_kv": [0, 0, 0, 2]})
    assert (layout.n_layer, layout.attention_layers, layout.n_head_kv) == (4, 1, 2)
    two, _ = _layout(tmp_path, {"block_count": 2, "embedding_length": 64,
                                "attention.head_count": 4,
                                "attention.head_count_kv": [4, 0]})
    assert (two.attention_layers, two.n_head_kv, two.head_dim_k) == (1, 4, 16)


def test_per_layer_heads_take_the_largest_for_the_head_dim(tmp_path):
    layout, _ = _layout(tmp_path, {"block_count": 2, "embedding_length": 64,
                                   "attention.head_count": [2, 4],
                                   "attention.head_count_kv": [1, 1]})
    assert (layout.head_dim_k, layout.head_dim_v) == (16, 16)


def test_a_gguf_without_head_count_kv_has_as_many_kv_heads_as_heads(tmp_path):
    """llama.cpp reads a missing head_count_kv as head_count (no grouped-query attention):
    the planner read 0, and planned no KV cache at all for such a model (a product bug the
    mutation run of issue 45 showed: the default was never tested)."""
    layout, _ = _layout(tmp_path, {"block_count": 6, "embedding_length": 64,
                                   "attention.head_count": 4})
    assert (layout.n_head_kv, layout.attention_layers, layout.head_dim_k) == (4, 6, 16)
    k, v = planner.kv_cache_bytes(256, layout, "f16", "f16")
    assert k == v == 256 * 6 * 4 * 16 * 2
    # neither given: no attention heads, one head for the head dim
    bare, _ = _layout(tmp_path, {"block_count": 2, "embedding_length": 64})
    assert (bare.n_head_kv, bare.head_dim_k, bare.head_dim_v) == (0, 64, 64)


def test_the_full_attention_interval_counts_whole_layers(tmp_path):
    """llama.cpp's layer il attends when (il + 1) % interval == 0: 6 layers, interval 4: one."""
    layout, _ = _layout(tmp_path, {"block_count": 6, "embedding_length": 64,
                                   "attention.head_count": 2, "attention.head_count_kv": 1,
                                   "full_attention_interval": 4})
    assert layout.attention_layers == 1 and isinstance(layout.attention_layers, int)


def test_key_and_value_lengths_are_read_apart(tmp_path):
    layout, _ = _layout(tmp_path, {"block_count": 2, "embedding_length": 64,
                                   "attention.head_count": 2, "attention.head_count_kv": 1,
                                   "attention.key_length": 128,
                                   "attention.value_length": 96})
    assert (layout.head_dim_k, layout.head_dim_v) == (128, 96)


def _arch_gguf(path: Path, arch: str, n_layer: int, keys: dict) -> None:
    """A GGUF of `arch` with `n_layer` layers and the attention keys `keys` (a list: an
    array), one small tensor."""
    import numpy as np
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch)
    w.add_block_count(n_layer)
    w.add_embedding_length(64)
    w.add_head_count(2)
    for k, v in keys.items():
        if isinstance(v, list):
            w.add_array(f"{arch}.attention.{k}", v)
        else:
            w.add_uint32(f"{arch}.attention.{k}", v)
    w.add_tensor("blk.0.attn_k.weight", np.zeros((4, 64), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize(("arch", "n_layer", "keys", "want"), [
    ("gemma2", 6, {}, (3, 4096)),                          # period 2, its own window
    ("gemma3", 12, {"sliding_window": 1024}, (10, 1024)),  # period 6
    ("gemma3", 12, {}, (0, 0)),                            # no window key: none slides
    ("gemma3", 12, {"sliding_window": 1024, "sliding_window_pattern": 4}, (9, 1024)),
    # an array where llama.cpp reads a number: not read there, the period stands
    ("gemma3", 12, {"sliding_window": 1024, "sliding_window_pattern": [1, 0] * 6}, (10, 1024)),
    ("gpt-oss", 4, {"sliding_window": 128}, (2, 128)),
    ("gpt-oss", 4, {"sliding_window": 1}, (2, 1)),         # the smallest window there is
    ("gpt-oss", 4, {"sliding_window": 0}, (0, 0)),         # none, and no window of its own
    ("cohere2", 8, {}, (0, 0)),                            # no window key, none of its own
    # a period of 0: every layer slides (llama-hparams.cpp, set_swa_pattern)
    ("gemma3", 12, {"sliding_window": 1024, "sliding_window_pattern": 0}, (12, 1024)),
    ("olmo2", 8, {}, (0, 0)),
    ("exaone4", 64, {}, (0, 0)),  # llama.cpp slides only its 32B: not planned so
    ("llama", 8, {"sliding_window": 4096}, (0, 0)),        # not an architecture that slides
])
def test_the_sliding_window_layers_as_llama_cpp_reads_them(tmp_path, arch, n_layer, keys,
                                                           want):
    from beekeeper.core.planner import layout_from_gguf

    path = tmp_path / f"{arch}.gguf"
    _arch_gguf(path, arch, n_layer, keys)
    layout, _ = layout_from_gguf(path)
    assert (layout.swa_layers, layout.n_swa) == want


def test_the_vocabulary_from_its_key_else_the_token_list_else_none(tmp_path):
    keys = {"block_count": 2, "embedding_length": 64, "attention.head_count": 2}
    assert _layout(tmp_path, {**keys, "vocab_size": 1000}, tokens=30)[0].n_vocab == 1000
    assert _layout(tmp_path, keys, tokens=30)[0].n_vocab == 30
    assert _layout(tmp_path, keys)[0].n_vocab == 0


def test_the_token_embedding_is_kept_apart_from_the_gpu_weights(tmp_path):
    keys = {"block_count": 2, "embedding_length": 64, "attention.head_count": 2}
    layout, gpu = _layout(tmp_path, keys, output=True)
    assert (layout.embd_bytes, gpu) == (10 * 64 * 2, 4 * 64 * 4 + 10 * 64 * 2)
    layout, gpu = _layout(tmp_path, keys, embd=False, output=True)
    assert (layout.embd_bytes, gpu) == (0, 4 * 64 * 4 + 10 * 64 * 2)


def test_tied_embeddings_put_a_copy_of_the_token_embedding_on_the_gpu(tmp_path):
    """No output.weight (Gemma, Llama 3.2, small Qwen3): llama.cpp loads token_embd again as
    the output layer (TENSOR_DUPLICATED), on the GPU with the layers; the planner counted
    it on the host only, and planned the GPU's weights short by the embedding."""
    keys = {"block_count": 2, "embedding_length": 64, "attention.head_count": 2}
    tied, gpu_tied = _layout(tmp_path, keys)
    untied, gpu_untied = _layout(tmp_path, keys, output=True)
    assert tied.embd_bytes == untied.embd_bytes == 10 * 64 * 2
    assert gpu_tied == 4 * 64 * 4 + 10 * 64 * 2 == gpu_untied


def test_the_recurrent_numbers_are_read_by_their_keys_and_zero_without(tmp_path):
    keys = {"block_count": 4, "embedding_length": 64, "attention.head_count": 2,
            "attention.head_count_kv": 1, "full_attention_interval": 4}
    ssm = {"ssm.conv_kernel": 4, "ssm.state_size": 16, "ssm.group_count": 2,
           "ssm.inner_size": 128}
    layout, _ = _layout(tmp_path, {**keys, **ssm})
    assert (layout.ssm_conv_kernel, layout.ssm_d_state, layout.ssm_n_group,
            layout.ssm_d_inner) == (4, 16, 2, 128)
    plain, _ = _layout(tmp_path, keys)
    assert (plain.ssm_conv_kernel, plain.ssm_d_state, plain.ssm_n_group,
            plain.ssm_d_inner) == (0, 0, 0, 0)


def test_one_layer_on_the_gpu_is_a_gpu_plan():
    one = replace(TURBO4, server=replace(TURBO4.server, n_gpu_layers=1))
    assert predict(one, card="NVIDIA H200").total_mib == \
        predict(TURBO4, card="NVIDIA H200").total_mib
    assert predict(PROFILES["cpu-tiny"]).profile == "cpu-tiny"
    assert type(kv_type_bytes("q8_0", 64)) is int  # bytes: a whole number


# --- the plan of a GGUF read once per file as it is on disk -------------------------------

def test_a_gguf_rewritten_in_place_is_read_again_by_its_mtime_and_its_size(tmp_path):
    import os

    path = tmp_path / "m.gguf"
    keys = {"embedding_length": 64, "attention.head_count": 2}
    _gguf(path, {"block_count": 4, **keys})
    first = predict(PROFILES["q8-f16-4k"], path).kv_layers
    size, mtime = path.stat().st_size, path.stat().st_mtime_ns
    _gguf(path, {"block_count": 6, **keys})  # the same size, another layout
    assert path.stat().st_size == size
    os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
    assert (first, predict(PROFILES["q8-f16-4k"], path).kv_layers) == (4, 6)
    _gguf(path, {"block_count": 8, **keys}, size=(8, 64))  # another size, the same mtime
    os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
    assert predict(PROFILES["q8-f16-4k"], path).kv_layers == 8


def test_what_the_reader_said_is_cut_to_one_short_line(tmp_path, monkeypatch):
    import errno

    path = tmp_path / "m.gguf"
    _gguf(path, {"block_count": 2})

    def says(err: Exception) -> str:
        def boom(*_):
            raise err
        monkeypatch.setattr(planner, "_layout_of", boom)
        with pytest.raises(PlanError) as e:
            predict(PROFILES["q8-f16-4k"], path)
        return str(e.value)

    assert says(ValueError("x" * 200)) == \
        f"--gguf {path}: not a GGUF model the planner can read ({'x' * 120}) {FIX}"
    assert says(KeyError()) == \
        f"--gguf {path}: not a GGUF model the planner can read (KeyError) {FIX}"
    assert says(OSError(errno.EIO, "Input/output error")) == \
        f"--gguf {path}: Input/output error {FIX}"
    assert says(OSError("the disk went away")) == f"--gguf {path}: the disk went away {FIX}"


def test_the_ubatch_is_planned_from_the_gguf_given(tmp_path):
    path = tmp_path / "m.gguf"
    # turbo4 packs 128 values a block: two KV heads of 128
    _gguf(path, {"block_count": 2, "embedding_length": 256, "attention.head_count": 2},
          tokens=100)
    _, why = choose_ubatch(TURBO4, "NVIDIA H200", 90000, path)
    small = predict(TURBO4, path, card="NVIDIA H200").total_rise_mib
    assert why.startswith(f"-ub 512: TTFT 12.00 s, planned {small:.0f} MiB;")
    _, why = choose_ubatch(TURBO4, "RTX 4090", 90000, path)
    assert why.endswith(f"planned {small:.0f} MiB")
    bs = PROFILES["q8-turbo4-64k-bs"]
    assert choose_ubatch(bs, "RTX 4090", 90000)[1].startswith(
        "no TTFT measured by ubatch for RTX 4090 / turbo4 with backend sampling; the profile's "
        "-ub 384 planned ")


def test_a_plan_exactly_at_the_budget_fits(monkeypatch):
    def plan(ub: int) -> float:
        return predict(replace(TURBO4, server=replace(TURBO4.server, ubatch_size=ub)),
                       card="NVIDIA H200").total_rise_mib

    own = plan(512)
    _, why = choose_ubatch(TURBO4, "RTX 4090", own)
    assert not why.endswith("(over budget)")
    _, why = choose_ubatch(TURBO4, "NVIDIA H200", own)
    assert f"-ub 512: TTFT 12.00 s, planned {own:.0f} MiB;" in why
    assert "is over budget" not in why
    monkeypatch.setattr(planner, "UBATCH_MEASURED", (UbatchMeasure(
        card="H200", cache_type="turbo4", prompt_tokens=60_000,
        ttft_s_by_ubatch={512: 20.0, 2048: 19.0}, source="made"),))
    ub, why = choose_ubatch(TURBO4, "NVIDIA H200", plan(2048))
    assert ub == 2048 and "(over budget)" not in why


def test_the_ubatch_plans_take_the_cards_own_cuda_context(monkeypatch):
    """With a second card measured, its context figures are the ones each ubatch is planned
    with (one card in the table today: an unlisted card takes the H200's)."""
    other = planner.CudaContext(card="RTX 4090", process_mib=300, rise_mib=310, driver="x",
                                compute_cap="8.9", source="made")
    monkeypatch.setattr(planner, "CUDA_CONTEXTS", (*planner.CUDA_CONTEXTS, other))
    plan = predict(TURBO4, card="NVIDIA GeForce RTX 4090").total_rise_mib
    assert plan == predict(TURBO4, card="NVIDIA H200").total_rise_mib - 318
    assert choose_ubatch(TURBO4, "NVIDIA GeForce RTX 4090", 90000)[1].endswith(
        f"planned {plan:.0f} MiB")
    monkeypatch.setattr(planner, "UBATCH_MEASURED", (UbatchMeasure(
        card="RTX 4090", cache_type="turbo4", prompt_tokens=60_000,
        ttft_s_by_ubatch={512: 20.0}, source="made"),))
    assert choose_ubatch(TURBO4, "NVIDIA GeForce RTX 4090", 90000)[1] == \
        f"-ub 512: TTFT 20.00 s, planned {plan:.0f} MiB (made)"
