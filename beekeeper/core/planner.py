"""
VRAM planner: predict a server's peak GPU memory as a breakdown, right for hybrid
(attention + recurrent) models such as Qwen3.5, where only some layers keep a KV cache.
"""

from __future__ import annotations

import functools
import math
import mmap
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import ggufhead
from .profiles import FileSource, HfSource, HybridLayout, ModelFile, Profile

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


@dataclass(frozen=True)
class CudaContext:
    """Memory beyond llama.cpp's own buffers (CUDA context, cuBLAS and FA workspaces), MiB,
    for one card (name pattern) with the driver and compute capability it was measured on.

    Two figures, one per measure of a run's VRAM: what NVML charges to the server process,
    and how much the card's memory.used rises over idle. They differ by memory the driver
    charges to the process but had already set aside at idle (494 MiB on the H200, the same
    in all five recorded configurations)."""

    card: str
    process_mib: float
    rise_mib: float
    driver: str
    compute_cap: str
    source: str


# Calibrated from what the GPU tier measured (tests/gpu/gpu_tier.py): the measured process
# peak minus the planner's other terms (Prediction.total_mib less cuda_context_mib), and the
# rise minus the same.
# The H200 row is beellama's (the engine the kit serves), from the profiles' exact servers:
# 610 to 630 MiB per process over f16, turbo4, turbo3, turbo3_tcq and Q4_K_M at ubatch 512
# (655 at 2048, 715 at 4096); on that machine the rise of memory.used was the process figure
# plus 6 to 9 MiB (the driver set nothing aside at idle).
CUDA_CONTEXTS: tuple[CudaContext, ...] = (
    CudaContext(card="H200", process_mib=622, rise_mib=628, driver="580.159.04",
                compute_cap="9.0", source="benchmarks/h200/2026-11-30-beellama (q8-turbo4-64k, "
                "the other four ranking profiles, ubatch 2048/4096 and backend sampling)"),
)
# A card not in the table: the H200's figures are assumed (CUDA 13.0 context on a recent
# driver). A card's context differs mostly by its SM count and the driver's reservations, a
# few hundred MiB either way; measure it with the GPU tier and add a row, or pass
# cuda_context_mib.
ASSUMED_CONTEXT = CUDA_CONTEXTS[0]


def cuda_context_for(card: str | None) -> tuple[CudaContext, bool]:
    """(context figures, True when measured on this card; False: assumed)."""
    for c in CUDA_CONTEXTS:
        if card and c.card.lower() in card.lower():
            return c, True
    return ASSUMED_CONTEXT, False


UBATCH = 512
# beellama's CUDA0 compute buffer for Qwen3.5-9B (its log's `compute buffer size`): 493 MiB
# at ubatch 512 (501 with f16 KV), 1,972 at 2048, 3,944 at 4096: the f32 logits of one
# ubatch (vocab x ubatch x 4 bytes) and 1.7 % more; scaled by vocab x ubatch for other
# models (benchmarks/h200/2026-11-30-beellama).
_COMPUTE_MIB_PER_VOCAB_UBATCH = 493.0 / (248320 * 512)
# `--backend-sampling` (the sampler chain on the GPU) adds to it another logits-sized buffer
# and about 2 KiB per KV cell: measured +614 MiB at 65,536 cells, +486 at 4,096.
_BACKEND_SAMPLING_BYTES_PER_CELL = 2048
# KV types whose attention dequantizes K and V to f16 in a separate buffer at prefill:
# measured for turbo3 and turbo3_tcq (+256 MiB at 65,536 cells: the full f16 K+V), not for
# turbo4 or f16; q8_0 on the llama.cpp tree (+224 MiB); the other quantized types unmeasured,
# counted the same way as a conservative bound.
_NO_DEQUANT = ("f16", "bf16", "f32", "turbo4")


def kv_type_bytes(cache_type: str, n_values: int) -> int:
    if cache_type not in KV_BLOCK:
        raise ValueError(f"unknown KV cache type {cache_type!r}; known: {sorted(KV_BLOCK)}")
    per, size = KV_BLOCK[cache_type]
    if n_values % per:
        raise ValueError(f"{n_values} values per row do not fill {cache_type} blocks of {per}")
    return n_values // per * size


KV_PAD_CELLS = 256


def kv_cells(ctx_size: int, n_seq: int = 1) -> int:
    """The KV cache's cells as llama.cpp sizes it (src/llama-context.cpp): the context
    padded to a multiple of 256 cells, split over the sequences (slots), each slot's share
    padded up to 256 again; the cache is the slots' shares together."""
    pad = KV_PAD_CELLS
    per_seq = math.ceil(math.ceil(ctx_size / pad) * pad // n_seq / pad) * pad
    return per_seq * n_seq


def kv_cache_bytes(cells: int, layout: HybridLayout, type_k: str, type_v: str,
                   swa_cells: int | None = None) -> tuple[int, int]:
    """(K bytes, V bytes) for the attention layers only: `cells` for the full-attention
    ones, `swa_cells` (default: `cells`) for those over a sliding window."""
    k = kv_type_bytes(type_k, layout.n_head_kv * layout.head_dim_k)
    v = kv_type_bytes(type_v, layout.n_head_kv * layout.head_dim_v)
    cell_layers = cells * (layout.attention_layers - layout.swa_layers) + \
        (cells if swa_cells is None else swa_cells) * layout.swa_layers
    return cell_layers * k, cell_layers * v


def swa_cells(cells: int, layout: HybridLayout, n_seq: int, unified: bool, ubatch: int) -> int:
    """The sliding-window layers' cells as llama.cpp sizes them (llama-kv-cache-iswa.cpp):
    a stream's window (each slot's, or the slots' together in a unified cache) and one
    ubatch, padded to 256, at most the stream's full cells; one stream a slot unless
    unified."""
    streams = 1 if unified else n_seq
    per = cells // streams
    window = layout.n_swa * (n_seq if unified else 1) + ubatch
    return streams * math.ceil(min(per, window) / KV_PAD_CELLS) * KV_PAD_CELLS


def recurrent_state_bytes(n_seq: int, layout: HybridLayout) -> tuple[int, int]:
    """(conv state R, SSM state S) bytes, f32, for the recurrent layers; constant in context."""
    n_rec = layout.n_layer - layout.attention_layers
    if n_rec <= 0 or layout.ssm_d_state == 0:
        return 0, 0
    conv_channels = layout.ssm_d_inner + 2 * layout.ssm_n_group * layout.ssm_d_state
    r = n_rec * (layout.ssm_conv_kernel - 1) * conv_channels * 4
    s = n_rec * layout.ssm_d_state * layout.ssm_d_inner * 4
    return r * n_seq, s * n_seq


def compute_buffer_bytes(layout: HybridLayout, cells: int, type_k: str, type_v: str,
                         ubatch: int, backend_sampling: bool) -> int:
    """Scratch for the worst-case graph, and the f16 copies of K and V where the KV type's
    attention makes them (see the figures above)."""
    per_ubatch = _COMPUTE_MIB_PER_VOCAB_UBATCH * layout.n_vocab * MIB
    base = per_ubatch * ubatch
    if backend_sampling:
        base += per_ubatch * ubatch + cells * _BACKEND_SAMPLING_BYTES_PER_CELL
    dequant = 0
    for t, hd in ((type_k, layout.head_dim_k), (type_v, layout.head_dim_v)):
        if t not in _NO_DEQUANT:
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
    # the same prediction for the other measure: the rise of the card's memory.used
    cuda_context_rise_mib: float = 0.0
    context_basis: str = ""  # which card's context figures, measured or assumed
    kv_swa_cells: int = 0  # the sliding-window layers' cells (their window and a ubatch)
    kv_swa_layers: int = 0

    @property
    def total_rise_mib(self) -> float:
        return self.total_mib - self.cuda_context_mib + self.cuda_context_rise_mib

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
                 total_mib=self.total_mib, total_rise_mib=self.total_rise_mib,
                 total_gb=self.total_gb)
        return d

    def table(self) -> str:
        rows = [
            ("weights on GPU", self.weights_mib),
            (f"KV cache K ({self.kv_cells} cells x {self.kv_layers} layers"
             + (f", {self.kv_swa_cells} x {self.kv_swa_layers} sliding-window"
                if self.kv_swa_layers else "") + ")", self.kv_k_mib),
            ("KV cache V", self.kv_v_mib),
            (f"recurrent state R+S ({self.n_seq} seq"
             f"{', x2: a draft model' if self.draft_mib else ''})", self.recurrent_mib),
            ("draft model + cache", self.draft_mib),
            ("compute buffers", self.compute_mib),
            ("CUDA context", self.cuda_context_mib),
        ]
        out = [f"{'part':48} {'MiB':>10}"]
        out += [f"{name:48} {mib:>10.1f}" for name, mib in rows]
        out.append(f"{'total (server process, NVML)':48} {self.total_mib:>10.1f}  "
                   f"({self.total_mib / 1024:.2f} GiB)")
        if self.cuda_context_mib:
            out.append(f"{'total (rise of memory.used over idle)':48} "
                       f"{self.total_rise_mib:>10.1f}  ({self.total_rise_mib / 1024:.2f} GiB)")
        if self.context_basis:
            out.append(f"CUDA context: {self.context_basis}")
        return "\n".join(out)


def layout_from_gguf(path: Path) -> tuple[HybridLayout, int]:
    """Read the architecture numbers and GPU weight bytes from a GGUF file's metadata."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        head = ggufhead.parse(data)

    def field(key: str, default: Any = None) -> Any:
        value = head.fields.get(key, default)
        if isinstance(value, tuple):  # an array: one value stands for itself
            return value[0] if len(value) == 1 else list(value)
        return value

    arch = head.fields.get("general.architecture")
    if not isinstance(arch, str):
        raise ValueError(f"{path}: no general.architecture; is it a GGUF model?")
    n_layer = int(field(f"{arch}.block_count"))
    n_head = field(f"{arch}.attention.head_count", 0)
    # a GGUF without head_count_kv (no grouped-query attention): llama.cpp takes head_count
    head_kv = field(f"{arch}.attention.head_count_kv", n_head)
    interval = field(f"{arch}.full_attention_interval")
    swa_layers, n_swa = _sliding(arch, field, n_layer)
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
    tokens = head.fields.get("tokenizer.ggml.tokens")
    n_vocab = int(field(f"{arch}.vocab_size",
                        tokens.count if isinstance(tokens, ggufhead.Strings) else 0))
    embd_bytes = 0
    gpu_bytes = 0
    for t in head.tensors:
        if t.name == "token_embd.weight":
            embd_bytes = t.n_bytes
        else:
            gpu_bytes += t.n_bytes
    if not any(t.name == "output.weight" for t in head.tensors):
        # tied embeddings: llama.cpp loads a copy of token_embd as the output layer, on the
        # GPU with the other layers (TENSOR_DUPLICATED)
        gpu_bytes += embd_bytes
    layout = HybridLayout(
        n_layer=n_layer, attention_layers=attention_layers, n_head_kv=n_head_kv,
        head_dim_k=hd_k, head_dim_v=hd_v, n_embd=n_embd, n_vocab=n_vocab,
        ssm_conv_kernel=int(field(f"{arch}.ssm.conv_kernel", 0)),
        ssm_d_state=int(field(f"{arch}.ssm.state_size", 0)),
        ssm_n_group=int(field(f"{arch}.ssm.group_count", 0)),
        ssm_d_inner=int(field(f"{arch}.ssm.inner_size", 0)),
        embd_bytes=embd_bytes, swa_layers=swa_layers, n_swa=n_swa,
    )
    return layout, gpu_bytes


# architectures whose layers attend over a sliding window (llama-model.cpp, load_hparams):
# the pattern's period where the GGUF gives none (layer il slides where il % period <
# period - 1; 0: every layer; a per-layer array is not read there, the period stands), the
# window where the GGUF gives none (0: none), and whether a window of 0 or none given means
# no layer slides
SLIDING = {"gemma2": (2, 4096, False), "gemma3": (6, 0, True), "cohere2": (4, 0, False),
           "gpt-oss": (2, 0, False), "olmo2": (4, 0, True)}


def _sliding(arch: str, field: Callable[..., Any], n_layer: int) -> tuple[int, int]:
    """(layers over a sliding window, the window in tokens) as llama.cpp reads them."""
    if arch not in SLIDING:
        return 0, 0
    period, default_window, needs_window = SLIDING[arch]
    window = int(field(f"{arch}.attention.sliding_window", default_window) or 0)
    if window <= 0 and (needs_window or not default_window):
        return 0, 0
    pattern = field(f"{arch}.attention.sliding_window_pattern", period)
    p = period if isinstance(pattern, list) else int(pattern)
    return sum(1 for il in range(n_layer) if p == 0 or il % p < p - 1), window


class PlanError(ValueError):
    """The planner lacks an input (a layout for this profile) and says which to give: its
    line, and for a GGUF it cannot read, the problem (the file's path first) and the fix."""

    def __init__(self, line: str, problem: str = "", fix: str = "") -> None:
        super().__init__(line)
        self.problem, self.fix = problem or line, fix


def _unreadable(path: Path, problem: str) -> PlanError:
    """`--gguf path: problem (fix)`: a GGUF the planner cannot read."""
    fix = "give the model's .gguf file, the one llama-server loads"
    return PlanError(f"--gguf {path}: {problem} ({fix})", f"{path}: {problem}", fix)


def _cpu_only(profile: Profile, ctx_size: int | None, n_seq: int | None) -> Prediction:
    """A CPU profile without a layout: zero by part, the table says why."""
    s = profile.server
    return Prediction(profile=profile.name, weights_mib=0.0, kv_k_mib=0.0, kv_v_mib=0.0,
                      kv_cells=kv_cells(ctx_size or s.ctx_size, n_seq or s.parallel), kv_layers=0,
                      recurrent_r_mib=0.0, recurrent_s_mib=0.0,
                      n_seq=n_seq or s.parallel, draft_mib=0.0, compute_mib=0.0,
                      cuda_context_mib=0.0,
                      context_basis="none: a CPU profile uses no GPU memory")


def _context(card: str | None, cuda_context_mib: float | None) -> tuple[CudaContext, str]:
    """The CUDA context assumed for `card`, and the table's words for where it comes from."""
    ctx, measured = cuda_context_for(card)
    basis = (f"{ctx.card} (driver {ctx.driver}, compute capability {ctx.compute_cap}), "
             f"measured: {ctx.source}" if measured else
             f"{card or 'card not given'}: not measured; assumed the {ctx.card}'s "
             f"({ctx.process_mib:.0f} MiB per process, {ctx.rise_mib:.0f} MiB of rise)")
    if cuda_context_mib is not None:
        basis = f"given: {cuda_context_mib:.0f} MiB"
    return ctx, basis


def _draft_mib(profile: Profile, layout: HybridLayout) -> float:
    """The drafter's weights plus its own KV cache at the context it really gets: -cd
    when the profile sets it (DFlash: 256), else the server gives it the main -c.
    Its attention shape is not recorded: the target's stands in (an upper bound for
    a drafter that is a fraction of the target's size)."""
    s = profile.server
    if s.draft_model is None:
        return 0.0
    dk, dv = kv_cache_bytes(kv_cells(s.draft_ctx_size or s.ctx_size), layout,
                            s.cache_type_k_draft or "f16", s.cache_type_v_draft or "f16")
    return (s.draft_model.size_bytes + dk + dv) / MIB


@functools.lru_cache(maxsize=8)
def _layout_of(path: str, mtime_ns: int, size: int) -> tuple[HybridLayout, int]:
    """layout_from_gguf once per file as it is on disk (a plan and its ubatch choices read
    one model several times)."""
    return layout_from_gguf(Path(path))


def _read_gguf(path: Path) -> tuple[HybridLayout, int]:
    """The layout and GPU weight bytes of the GGUF at `path`; PlanError: one line saying what
    is wrong with the file (missing, empty, not a GGUF, its metadata lacking a number the
    planner needs) and what to give instead."""
    if path.exists() and not path.is_file():
        raise _unreadable(path, "not a file")
    try:
        on_disk = path.stat()
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise _unreadable(path, str(e.strerror or e)) from None
    if on_disk.st_size == 0:
        raise _unreadable(path, "the file is empty")
    if magic != b"GGUF":
        raise _unreadable(path, f"not a GGUF file (it starts {magic!r}, a GGUF with b'GGUF')")
    try:
        return _layout_of(str(path.resolve()), on_disk.st_mtime_ns, on_disk.st_size)
    except OSError as e:
        raise _unreadable(path, str(e.strerror or e)) from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        # a truncated file, or a GGUF without an architecture's numbers (a LoRA adapter, a
        # vocabulary-only file): what the reader said, in one line
        said = " ".join(str(e).split())[:120] or type(e).__name__
        raise _unreadable(path, f"not a GGUF model the planner can read ({said})") from None


def served_gguf(model: ModelFile) -> Path | None:
    """The GGUF a service serves, where the controller can read it: a file of the user's
    given by host data `model_path` (uploaded from the controller), or one on the Hub
    (`model_repo`) whose header the controller's cache holds (`hub_header`: read when the
    model was pinned, beekeeper/hubhead.py, for a file other than the profile's only). None
    for the profile's own model (its recorded layout is that file's), for a Hub file whose
    header was not read (the profile's model is planned) and for a file already on the host
    (`model_host_path`: the controller cannot read it)."""
    src = model.source
    if isinstance(src, HfSource):
        header = hub_header(model)
        return header if header is not None and header.is_file() else None
    return Path(src.path) if isinstance(src, FileSource) and not src.on_host else None


def hub_header(model: ModelFile) -> Path | None:
    """Where the controller's cache keeps the header of a Hub GGUF, by its sha256 and the
    commit it was read at (a commit given wrong beside the right sha256 is read again once
    corrected), under its repository's and its own name (what a refusal of its plan shows):
    a sparse file as long as the model, its header's bytes only. None: not a Hub file, or
    its sha256 unknown."""
    from .cache import CACHE

    src = model.source
    if not isinstance(src, HfSource) or not model.sha256:
        return None
    return CACHE / "gguf-headers" / model.sha256 / src.revision / src.repo / \
        Path(model.filename).name


def predict(profile: Profile, gguf_path: Path | None = None, *, ctx_size: int | None = None,
            n_seq: int | None = None, cuda_context_mib: float | None = None,
            card: str | None = None) -> Prediction:
    """Peak VRAM for a profile, from the GGUF on disk when given, else recorded metadata.

    A CPU profile keeps everything in host memory: its VRAM prediction is zero by part (the
    table says so), computed from its GGUF when one is given."""
    if gguf_path is not None:
        layout, weights = _read_gguf(gguf_path)
    elif profile.layout is not None:
        layout = profile.layout
        weights = profile.model.size_bytes - layout.embd_bytes
    elif profile.backend == "cpu":
        return _cpu_only(profile, ctx_size, n_seq)
    else:
        raise PlanError(f"profile {profile.name} records no layout: give its GGUF file "
                        "(--gguf)")
    gpu = profile.backend == "cuda" and profile.server.n_gpu_layers > 0
    ctx, basis = _context(card, cuda_context_mib)
    s = profile.server
    seqs = n_seq or s.parallel
    cells = kv_cells(ctx_size or s.ctx_size, 1 if s.kv_unified else seqs)
    # beellama doubles the sequences of a server with a draft (server-context.cpp), whose
    # unified cache holds a window for each
    window = swa_cells(cells, layout, seqs * (2 if s.draft_model is not None else 1),
                       s.kv_unified, s.ubatch_size or UBATCH)
    k, v = kv_cache_bytes(cells, layout, s.cache_type_k, s.cache_type_v, window)
    # beellama's speculative server keeps a second recurrent state a slot (the backup it
    # drafts from, server-context.cpp): planned at its peak
    r, st = recurrent_state_bytes(seqs * (2 if s.draft_model is not None and gpu else 1),
                                  layout)
    draft = _draft_mib(profile, layout)
    return Prediction(
        # parts kept in host memory by a CPU build count zero here (this is a VRAM plan)
        profile=profile.name, weights_mib=weights / MIB * gpu, kv_k_mib=k / MIB * gpu,
        kv_v_mib=v / MIB * gpu, kv_cells=cells,
        kv_layers=layout.attention_layers - layout.swa_layers,
        kv_swa_cells=window if layout.swa_layers else 0, kv_swa_layers=layout.swa_layers,
        recurrent_r_mib=r / MIB * gpu, recurrent_s_mib=st / MIB * gpu, n_seq=seqs,
        draft_mib=draft * gpu,
        compute_mib=compute_buffer_bytes(layout, cells, s.cache_type_k, s.cache_type_v,
                                         s.ubatch_size or UBATCH, s.backend_sampling) / MIB
        if gpu else 0.0,
        cuda_context_mib=(ctx.process_mib if cuda_context_mib is None else cuda_context_mib)
        if gpu else 0.0,
        cuda_context_rise_mib=(ctx.rise_mib if cuda_context_mib is None else
                               cuda_context_mib - (ctx.process_mib - ctx.rise_mib))
        if gpu else 0.0,
        context_basis=basis if gpu else "none: a CPU build uses no GPU memory",
    )


@dataclass(frozen=True)
class UbatchMeasure:
    """Served time to first token by physical batch (-ub), one card, KV type and sampler
    placement, at the profile's TTFT length: the input of the ubatch policy."""

    card: str
    cache_type: str
    prompt_tokens: int
    ttft_s_by_ubatch: dict[int, float]  # median of 3 requests per ubatch
    source: str
    backend_sampling: bool = False


UBATCH_MEASURED: tuple[UbatchMeasure, ...] = (
    UbatchMeasure(card="H200", cache_type="turbo4", prompt_tokens=60_000,
                  ttft_s_by_ubatch={512: 12.00, 2048: 11.64, 4096: 12.10},
                  source="benchmarks/h200/2026-11-30-beellama"),
    UbatchMeasure(card="H200", cache_type="turbo4", prompt_tokens=60_000,
                  ttft_s_by_ubatch={256: 13.46, 320: 13.67, 384: 12.74},
                  source="benchmarks/h200/2026-11-30-beellama, second run",
                  backend_sampling=True),
)
UBATCH_MIN_GAIN = 0.05
UBATCH_POLICY = (
    "the physical batch (-ub, with -b at least 2048 and at least -ub) whose measured TTFT "
    "on this card, KV type and sampler placement is shortest among those whose planned peak "
    "(the rise over idle) fits the VRAM budget, if it is at least "
    f"{UBATCH_MIN_GAIN:.0%} shorter than at the profile's own (-ub {UBATCH} unless "
    "the profile sets one); when the profile's own does not fit, the shortest that does. "
    "A card, KV type or placement with no measurement keeps the profile's own.")


def choose_ubatch(profile: Profile, card: str | None, budget_mib: float,
                  gguf_path: Path | None = None, *, ctx_size: int | None = None,
                  n_seq: int | None = None, cuda_context_mib: float | None = None
                  ) -> tuple[int, str]:
    """(ubatch, why) by UBATCH_POLICY; the plan's other terms as `predict` takes them."""
    from dataclasses import replace

    kv, bs = profile.server.cache_type_k, profile.server.backend_sampling
    own = profile.server.ubatch_size or UBATCH
    if profile.backend == "cpu":
        return own, "a CPU build: no GPU memory to trade for prefill speed"

    def rise(ub: int) -> float:
        s = replace(profile.server, ubatch_size=ub, batch_size=max(2048, ub))
        return predict(replace(profile, server=s), gguf_path, ctx_size=ctx_size, n_seq=n_seq,
                       cuda_context_mib=cuda_context_mib, card=card).total_rise_mib

    m = next((x for x in UBATCH_MEASURED if card and x.card.lower() in card.lower()
              and x.cache_type == kv and x.backend_sampling == bs), None)
    if m is None:
        own_rise = rise(own)
        return own, (f"no TTFT measured by ubatch for {card or 'this card'} / {kv}"
                     f"{' with backend sampling' if bs else ''}; the profile's -ub {own} "
                     f"planned {own_rise:.0f} MiB"
                     f"{' (over budget)' if own_rise > budget_mib else ''}")

    plans = {ub: rise(ub) for ub in sorted(set(m.ttft_s_by_ubatch) | {own})}
    fitting = [ub for ub in m.ttft_s_by_ubatch if plans[ub] <= budget_mib]
    why = [f"-ub {ub}: TTFT {m.ttft_s_by_ubatch[ub]:.2f} s, planned {plans[ub]:.0f} MiB"
           f"{'' if plans[ub] <= budget_mib else ' (over budget)'}"
           for ub in sorted(m.ttft_s_by_ubatch)]
    fastest = min(fitting, key=lambda ub: m.ttft_s_by_ubatch[ub], default=None)
    base = m.ttft_s_by_ubatch.get(own)
    if plans[own] > budget_mib:
        best = own if fastest is None else fastest
        why.append(f"the profile's -ub {own} is over budget ({plans[own]:.0f} MiB)"
                   + ("; nothing measured fits" if fastest is None else ""))
    elif (fastest is not None and base
          and m.ttft_s_by_ubatch[fastest] <= base * (1 - UBATCH_MIN_GAIN)):
        best = fastest
    else:
        best = own
    return best, f"{'; '.join(why)} ({m.source})"


# a GGUF starts with its magic and a version the server reads (core/ggufhead.py's)
GGUF_MAGIC, GGUF_VERSIONS = ggufhead.MAGIC, ggufhead.VERSIONS
GGUF_HEAD_BYTES = 8


def gguf_problem(head: bytes) -> str | None:
    """What keeps a file starting with `head` from being a GGUF the server loads; None."""
    if head[:4] != GGUF_MAGIC[:len(head[:4])] or not head:
        return ("it is empty" if not head else "it does not start with GGUF's magic b'GGUF' "
                f"(its first {len(head)} bytes are {head!r})")
    if len(head) < GGUF_HEAD_BYTES:
        return f"it is {len(head)} bytes long, shorter than a GGUF header"
    version = int.from_bytes(head[4:8], "little")
    if version not in GGUF_VERSIONS:
        return (f"it is GGUF version {version}, and the server reads versions "
                f"{' and '.join(map(str, GGUF_VERSIONS))}")
    return None
