"""
VRAM planner: predict a server's peak GPU memory as a breakdown, right for hybrid
(attention + recurrent) models such as Qwen3.5, where only some layers keep a KV cache.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .profiles import HybridLayout, Profile

MIB = 1 << 20

# (values per block, bytes per block) of each KV cache type. turbo* blocks are one
# 128-value rotation group (beellama ggml-common.h); TheTom's fork differs (turbo4 = 68 B).
KV_BLOCK: dict[str, tuple[int, int]] = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2),
    "q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
    "iq4_nl": (32, 18),
    "turbo4": (128, 66), "turbo3": (128, 50), "turbo2": (128, 34),
    "turbo3_tcq": (128, 52), "turbo2_tcq": (128, 36),
}

# Per-process memory beyond llama.cpp's own buffers (CUDA context, cuBLAS and FA
# workspaces): 1109 MiB on an H200 with CUDA 13.0, the same for f16 and q8_0 KV
# (benchmarks/h200/2026-11-29). Other cards differ; override with cuda_context_mib.
CUDA_CONTEXT_MIB = 1109
UBATCH = 512
# Graph scratch of Qwen3.5-9B at ubatch 512 with flash attention and f16 KV: 152 MiB
# measured (same run); scaled by vocab x ubatch for other models.
_COMPUTE_F16_MIB_PER_VOCAB_UBATCH = 152.0 / (248320 * 512)


def kv_type_bytes(cache_type: str, n_values: int) -> int:
    if cache_type not in KV_BLOCK:
        raise ValueError(f"unknown KV cache type {cache_type!r}; known: {sorted(KV_BLOCK)}")
    per, size = KV_BLOCK[cache_type]
    if n_values % per:
        raise ValueError(f"{n_values} values per row do not fill {cache_type} blocks of {per}")
    return n_values // per * size


def kv_cells(ctx_size: int, pad: int = 256) -> int:
    """llama.cpp pads the KV cache to a multiple of 256 cells."""
    return math.ceil(ctx_size / pad) * pad


def kv_cache_bytes(cells: int, layout: HybridLayout, type_k: str, type_v: str) -> tuple[int, int]:
    """(K bytes, V bytes) for the attention layers only."""
    k = kv_type_bytes(type_k, layout.n_head_kv * layout.head_dim_k)
    v = kv_type_bytes(type_v, layout.n_head_kv * layout.head_dim_v)
    return cells * layout.attention_layers * k, cells * layout.attention_layers * v


def recurrent_state_bytes(n_seq: int, layout: HybridLayout) -> tuple[int, int]:
    """(conv state R, SSM state S) bytes, f32, for the recurrent layers; constant in context."""
    n_rec = layout.n_layer - layout.attention_layers
    if n_rec <= 0 or layout.ssm_d_state == 0:
        return 0, 0
    conv_channels = layout.ssm_d_inner + 2 * layout.ssm_n_group * layout.ssm_d_state
    r = n_rec * (layout.ssm_conv_kernel - 1) * conv_channels * 4
    s = n_rec * layout.ssm_d_state * layout.ssm_d_inner * 4
    return r * n_seq, s * n_seq


def compute_buffer_bytes(layout: HybridLayout, cells: int, type_k: str = "f16",
                         type_v: str = "f16", ubatch: int = UBATCH) -> int:
    """Scratch for the worst-case graph.

    f16 KV: scales with vocab x ubatch (152 MiB for Qwen3.5-9B, measured). A quantized
    KV type adds f16 copies of K and V for the attention kernel (measured +224 MiB for
    q8_0 at 65,536 cells; the full f16 K+V, 256 MiB, is used as a conservative bound).
    """
    base = _COMPUTE_F16_MIB_PER_VOCAB_UBATCH * layout.n_vocab * ubatch * MIB
    dequant = 0
    for t, hd in ((type_k, layout.head_dim_k), (type_v, layout.head_dim_v)):
        if t not in ("f16", "bf16", "f32"):
            dequant += cells * layout.n_head_kv * hd * 2
    return int(base + dequant)


@dataclass(frozen=True)
class Prediction:
    """Predicted peak VRAM, by part, MiB."""

    profile: str
    weights_mib: float
    kv_k_mib: float
    kv_v_mib: float
    kv_cells: int
    kv_layers: int
    recurrent_r_mib: float
    recurrent_s_mib: float
    n_seq: int
    draft_mib: float
    compute_mib: float
    cuda_context_mib: float

    @property
    def kv_mib(self) -> float:
        return self.kv_k_mib + self.kv_v_mib

    @property
    def recurrent_mib(self) -> float:
        return self.recurrent_r_mib + self.recurrent_s_mib

    @property
    def total_mib(self) -> float:
        return (self.weights_mib + self.kv_mib + self.recurrent_mib + self.draft_mib
                + self.compute_mib + self.cuda_context_mib)

    @property
    def total_gb(self) -> float:
        return self.total_mib * MIB / 1e9

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(kv_mib=self.kv_mib, recurrent_mib=self.recurrent_mib,
                 total_mib=self.total_mib, total_gb=self.total_gb)
        return d

    def table(self) -> str:
        rows = [
            ("weights on GPU", self.weights_mib),
            (f"KV cache K ({self.kv_cells} cells x {self.kv_layers} layers)", self.kv_k_mib),
            ("KV cache V", self.kv_v_mib),
            (f"recurrent state R+S ({self.n_seq} seq)", self.recurrent_mib),
            ("draft model + cache", self.draft_mib),
            ("compute buffers", self.compute_mib),
            ("CUDA context", self.cuda_context_mib),
        ]
        out = [f"{'part':48} {'MiB':>10}"]
        out += [f"{name:48} {mib:>10.1f}" for name, mib in rows]
        out.append(f"{'total':48} {self.total_mib:>10.1f}  ({self.total_mib / 1024:.2f} GiB)")
        return "\n".join(out)


def layout_from_gguf(path: Path) -> tuple[HybridLayout, int]:
    """Read the architecture numbers and GPU weight bytes from a GGUF file's metadata."""
    from gguf import GGUFReader

    reader = GGUFReader(str(path))

    def field(key: str, default: Any = None) -> Any:
        f = reader.get_field(key)
        if f is None:
            return default
        vals = [f.parts[i].tolist() for i in f.data]
        flat = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in vals]
        return flat if len(flat) > 1 else flat[0]

    arch_field = reader.get_field("general.architecture")
    if arch_field is None:
        raise ValueError(f"{path}: no general.architecture; is it a GGUF model?")
    arch = bytes(arch_field.parts[-1]).decode()
    n_layer = int(field(f"{arch}.block_count"))
    head_kv = field(f"{arch}.attention.head_count_kv", 0)
    n_head = field(f"{arch}.attention.head_count", 0)
    interval = field(f"{arch}.full_attention_interval")
    if isinstance(head_kv, list):  # per-layer: 0 marks a recurrent layer
        attention_layers = sum(1 for h in head_kv if h)
        n_head_kv = max(head_kv)
    else:
        n_head_kv = int(head_kv)
        attention_layers = n_layer // int(interval) if interval else n_layer
    n_embd = int(field(f"{arch}.embedding_length"))
    n_head_i = max(n_head) if isinstance(n_head, list) else int(n_head or 1)
    hd_k = int(field(f"{arch}.attention.key_length", n_embd // n_head_i))
    hd_v = int(field(f"{arch}.attention.value_length", hd_k))
    tokens = reader.get_field("tokenizer.ggml.tokens")
    n_vocab = int(field(f"{arch}.vocab_size", len(tokens.data) if tokens else 0))
    embd_bytes = 0
    gpu_bytes = 0
    for t in reader.tensors:
        if t.name == "token_embd.weight":
            embd_bytes = int(t.n_bytes)
        else:
            gpu_bytes += int(t.n_bytes)
    layout = HybridLayout(
        n_layer=n_layer, attention_layers=attention_layers, n_head_kv=n_head_kv,
        head_dim_k=hd_k, head_dim_v=hd_v, n_embd=n_embd, n_vocab=n_vocab,
        ssm_conv_kernel=int(field(f"{arch}.ssm.conv_kernel", 0)),
        ssm_d_state=int(field(f"{arch}.ssm.state_size", 0)),
        ssm_n_group=int(field(f"{arch}.ssm.group_count", 0)),
        ssm_d_inner=int(field(f"{arch}.ssm.inner_size", 0)),
        ssm_n_v_heads=int(field(f"{arch}.ssm.time_step_rank", 0)),
        embd_bytes=embd_bytes,
    )
    return layout, gpu_bytes


def predict(profile: Profile, gguf_path: Path | None = None, *, ctx_size: int | None = None,
            n_seq: int | None = None, cuda_context_mib: float = CUDA_CONTEXT_MIB) -> Prediction:
    """Peak VRAM for a profile, from the GGUF on disk when given, else recorded metadata."""
    if gguf_path is not None:
        layout, weights = layout_from_gguf(gguf_path)
    else:
        if profile.layout is None:
            raise ValueError(f"profile {profile.name} records no layout: give its GGUF file")
        layout = profile.layout
        weights = profile.model.size_bytes - layout.embd_bytes
    s = profile.server
    cells = kv_cells(ctx_size or s.ctx_size)
    seqs = n_seq or s.parallel
    k, v = kv_cache_bytes(cells, layout, s.cache_type_k, s.cache_type_v)
    r, st = recurrent_state_bytes(seqs, layout)
    draft = 0.0
    if s.draft_model is not None:
        # The drafter's weights plus its own KV cache at the context it really gets: -cd
        # when the profile sets it (DFlash: 256), else the server gives it the main -c.
        # Its attention shape is not recorded: the target's stands in (an upper bound for
        # a drafter that is a fraction of the target's size).
        dk, dv = kv_cache_bytes(kv_cells(s.draft_ctx_size or s.ctx_size), layout,
                                s.cache_type_k_draft or "f16", s.cache_type_v_draft or "f16")
        draft = (s.draft_model.size_bytes + dk + dv) / MIB
    return Prediction(
        profile=profile.name, weights_mib=weights / MIB, kv_k_mib=k / MIB, kv_v_mib=v / MIB,
        kv_cells=cells, kv_layers=layout.attention_layers, recurrent_r_mib=r / MIB,
        recurrent_s_mib=st / MIB, n_seq=seqs, draft_mib=draft,
        compute_mib=compute_buffer_bytes(layout, cells, s.cache_type_k, s.cache_type_v) / MIB
        if profile.backend == "cuda" else 0.0,
        cuda_context_mib=cuda_context_mib if profile.backend == "cuda" else 0.0,
    )
