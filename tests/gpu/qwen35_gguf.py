"""
Write a GGUF with Qwen3.5's architecture and tensor shapes and random weights, in Q8_0 or
in a Q4_K_M-shaped mix: its size, VRAM and decode cost are the real model's; its answers
are noise.

    python tests/gpu/qwen35_gguf.py OUT.gguf [--tiny] [--quant q4_k_m]

Q4_K_M follows llama.cpp's llama_tensor_get_type for that file type: Q4_K by default,
Q6_K for output.weight and for attn_v / ffn_down in the "more bits" layers (the first and
last eighth and every third between), Q5_K for the fused attn_qkv of the recurrent layers;
the small ssm_alpha/ssm_beta projections are kept in Q8_0. For Qwen3.5-9B that comes to
5.618 GB of tensors (a 5.625 GB file); the published Qwen3.5-9B-Q4_K_M.gguf is 5.629 GB.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q, GGUFWriter, TokenType


@dataclass(frozen=True)
class Shape:
    n_layer: int = 32
    n_embd: int = 4096
    n_ff: int = 12288
    n_head: int = 16
    n_head_kv: int = 4
    head_dim: int = 256
    ssm_d_state: int = 128  # head_k_dim = head_v_dim
    ssm_n_group: int = 16   # key heads
    ssm_dt_rank: int = 32   # value heads
    ssm_conv: int = 4
    n_vocab: int = 248320
    full_attention_interval: int = 4
    n_ctx_train: int = 262144


QWEN35_9B = Shape()
TINY = Shape(n_layer=4, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, head_dim=64,
             ssm_d_state=32, ssm_n_group=4, ssm_dt_rank=8, n_vocab=2048, n_ctx_train=32768)

BLOCK = 34  # Q8_0: fp16 scale + 32 int8
# K-quants: (values per block, bytes per block, byte offsets of the fp16 scales d / dmin)
KQUANT: dict[Q, tuple[int, int, tuple[int, ...]]] = {
    Q.Q4_K: (256, 144, (0, 2)),    # d, dmin, scales[12], qs[128]
    Q.Q5_K: (256, 176, (0, 2)),    # d, dmin, scales[12], qh[32], qs[128]
    Q.Q6_K: (256, 210, (208,)),    # ql[128], qh[64], scales[16] (int8), d
}


class _Pool:
    """Random Q8_0 blocks with a small, finite scale; tensors are views into it."""

    def __init__(self, max_bytes: int, seed: int = 0):
        n_blocks = max_bytes // BLOCK + 1
        rng = np.random.default_rng(seed)
        blocks = rng.integers(-127, 128, size=(n_blocks, BLOCK), dtype=np.int8).view(np.uint8)
        blocks[:, 0:2] = np.frombuffer(np.float16(2e-4).tobytes(), dtype=np.uint8)
        self.flat = blocks.reshape(-1)

    def q8(self, rows: int, cols: int) -> np.ndarray:
        """A (rows, cols) Q8_0 tensor as raw bytes: shape (rows, cols / 32 * 34)."""
        row_bytes = cols // 32 * BLOCK
        return self.flat[: rows * row_bytes].reshape(rows, row_bytes)


class _KPool:
    """Random K-quant blocks of one type, with small finite fp16 scales."""

    def __init__(self, qtype: Q, max_bytes: int, seed: int = 1):
        per, size, scales = KQUANT[qtype]
        self.per, self.size = per, size
        rng = np.random.default_rng(seed)
        blocks = rng.integers(0, 256, size=(max_bytes // size + 1, size), dtype=np.uint8)
        for off in scales:
            blocks[:, off:off + 2] = np.frombuffer(np.float16(1e-5).tobytes(), dtype=np.uint8)
        self.flat = blocks.reshape(-1)

    def tensor(self, rows: int, cols: int) -> np.ndarray:
        row_bytes = cols // self.per * self.size
        return self.flat[: rows * row_bytes].reshape(rows, row_bytes)


def _more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits(): Q4_K_M gives these layers' attn_v/ffn_down Q6_K."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _vocab(n: int) -> tuple[list[bytes], list[float], list[int]]:
    toks: list[bytes] = [b"<unk>", b"<s>", b"</s>"]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL]
    toks += [f"<0x{i:02X}>".encode() for i in range(256)]
    types += [TokenType.BYTE] * 256
    words = [chr(c) for c in range(33, 127)] + ["\u2581" + chr(c) for c in range(97, 123)]
    toks += [w.encode() for w in words]
    types += [TokenType.NORMAL] * len(words)
    i = 0
    while len(toks) < n:
        toks.append(f"\u2581w{i}".encode())
        types.append(TokenType.NORMAL)
        i += 1
    scores = [0.0] * 3 + [-1000.0] * 256 + [-float(k) for k in range(n - 259)]
    return toks[:n], scores[:n], types[:n]


def write(path: Path, s: Shape = QWEN35_9B, quant: str = "q8_0") -> int:
    arch = "qwen35"
    w = GGUFWriter(str(path), arch)
    w.add_name("qwen35-shaped-random")
    w.add_block_count(s.n_layer)
    w.add_context_length(s.n_ctx_train)
    w.add_embedding_length(s.n_embd)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e7)
    w.add_rope_dimension_count(s.head_dim // 4)
    w.add_rope_dimension_sections([11, 11, 10, 0] if s.head_dim == 256 else [4, 2, 2, 0])
    w.add_ssm_conv_kernel(s.ssm_conv)
    w.add_ssm_state_size(s.ssm_d_state)
    w.add_ssm_group_count(s.ssm_n_group)
    w.add_ssm_time_step_rank(s.ssm_dt_rank)
    w.add_ssm_inner_size(s.ssm_d_state * s.ssm_dt_rank)
    w.add_full_attention_interval(s.full_attention_interval)
    k_m = quant == "q4_k_m"
    w.add_file_type(15 if k_m else 7)  # MOSTLY_Q4_K_M or MOSTLY_Q8_0
    toks, scores, types = _vocab(s.n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)

    pool = _Pool(s.n_vocab * s.n_embd // 32 * BLOCK)
    total = 0

    kpools = ({t: _KPool(t, s.n_vocab * s.n_embd * KQUANT[t][1] // KQUANT[t][0])
               for t in KQUANT} if k_m else {})

    def q8(name: str, rows: int, cols: int, kq: Q = Q.Q4_K) -> None:
        """Q8_0, or in a Q4_K_M model the K-quant `kq`."""
        nonlocal total
        if k_m and kq in kpools and cols % 256 == 0:
            arr = kpools[kq].tensor(rows, cols)
            w.add_tensor(name, arr, raw_shape=arr.shape, raw_dtype=kq)
        else:
            arr = pool.q8(rows, cols)
            w.add_tensor(name, arr, raw_shape=arr.shape, raw_dtype=Q.Q8_0)
        total += arr.nbytes

    def f32(name: str, shape: tuple[int, ...], value: float) -> None:
        nonlocal total
        arr = np.full(shape, value, dtype=np.float32)
        w.add_tensor(name, arr)
        total += arr.nbytes

    key_dim = s.ssm_d_state * s.ssm_n_group
    value_dim = s.ssm_d_state * s.ssm_dt_rank
    conv_dim = 2 * key_dim + value_dim
    q8("token_embd.weight", s.n_vocab, s.n_embd)
    f32("output_norm.weight", (s.n_embd,), 1.0)
    q8("output.weight", s.n_vocab, s.n_embd, Q.Q6_K)
    for i in range(s.n_layer):
        b = f"blk.{i}"
        f32(f"{b}.attn_norm.weight", (s.n_embd,), 1.0)
        f32(f"{b}.post_attention_norm.weight", (s.n_embd,), 1.0)
        if (i + 1) % s.full_attention_interval == 0:
            q8(f"{b}.attn_q.weight", 2 * s.n_head * s.head_dim, s.n_embd)
            q8(f"{b}.attn_k.weight", s.n_head_kv * s.head_dim, s.n_embd)
            q8(f"{b}.attn_v.weight", s.n_head_kv * s.head_dim, s.n_embd,
               Q.Q6_K if _more_bits(i, s.n_layer) else Q.Q4_K)
            q8(f"{b}.attn_output.weight", s.n_embd, s.n_head * s.head_dim)
            f32(f"{b}.attn_q_norm.weight", (s.head_dim,), 1.0)
            f32(f"{b}.attn_k_norm.weight", (s.head_dim,), 1.0)
        else:
            q8(f"{b}.attn_qkv.weight", conv_dim, s.n_embd, Q.Q5_K)
            q8(f"{b}.attn_gate.weight", value_dim, s.n_embd)
            f32(f"{b}.ssm_conv1d.weight", (conv_dim, s.ssm_conv), 0.1)
            f32(f"{b}.ssm_dt.bias", (s.ssm_dt_rank,), 0.0)
            f32(f"{b}.ssm_a", (s.ssm_dt_rank,), -1.0)
            q8(f"{b}.ssm_beta.weight", s.ssm_dt_rank, s.n_embd, Q.Q8_0)
            q8(f"{b}.ssm_alpha.weight", s.ssm_dt_rank, s.n_embd, Q.Q8_0)
            f32(f"{b}.ssm_norm.weight", (s.ssm_d_state,), 1.0)
            q8(f"{b}.ssm_out.weight", s.n_embd, value_dim)
        q8(f"{b}.ffn_gate.weight", s.n_ff, s.n_embd)
        q8(f"{b}.ffn_up.weight", s.n_ff, s.n_embd)
        q8(f"{b}.ffn_down.weight", s.n_embd, s.n_ff,
           Q.Q6_K if _more_bits(i, s.n_layer) else Q.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--tiny", action="store_true", help="a small model of the same layout")
    ap.add_argument("--quant", choices=["q8_0", "q4_k_m"], default="q8_0")
    args = ap.parse_args(argv)
    n = write(args.out, TINY if args.tiny else QWEN35_9B, args.quant)
    print(f"wrote {args.out}: {args.out.stat().st_size} bytes ({n} tensor bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
