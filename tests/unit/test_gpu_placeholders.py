"""nvidia-smi as hosts print it: `[N/A]` (and other placeholders) for the compute capability
of a vGPU, a MIG instance or an old driver is unknown, not "a bug in beekeeper"; a given host
data `cuda_arch` gets past it, and without one preflight says to give it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.facts.gpu import parse_nvidia_smi

from .harness import DEFAULTS, RTX4090, facts, run_deploy

# `nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total
#  --format=csv,noheader,nounits` on a GRID vGPU guest (compute_cap not reported)
VGPU = ["path=/usr/bin/nvidia-smi",
        "gpu=GRID A100D-40C, 535.183.06, [N/A], 40960",
        "CUDA Version: 12.2"]


@pytest.mark.parametrize("cap", ["[N/A]", "[Not Supported]", "[Unknown Error]", "N/A", ""])
def test_a_placeholder_compute_capability_is_unknown(cap):
    info = parse_nvidia_smi([VGPU[0], f"gpu=GRID A100D-40C, 535.183.06, {cap}, 40960"])
    assert info is not None and len(info.gpus) == 1
    assert info.gpus[0].compute_cap is None and info.gpus[0].memory_total_mib == 40960
    real = parse_nvidia_smi([VGPU[0], "gpu=NVIDIA H200, 580.95.05, 9.0, 143771"])
    assert real is not None and real.gpus[0].compute_cap == "9.0"


def na(card=RTX4090):
    return replace(card, gpus=tuple(replace(g, compute_cap=None) for g in card.gpus))


def test_a_given_cuda_arch_gets_past_an_unknown_compute_capability():
    ops = run_deploy({**DEFAULTS, "cuda_arch": "89"}, facts(GpuInfo=na()))
    build = next(n for n, _ in ops if n.startswith("Build server image"))
    assert "89" in build or any("CMAKE_CUDA_ARCHITECTURES=89" in " ".join(c) for _, c in ops)


def test_without_cuda_arch_an_unknown_compute_capability_says_to_give_it():
    with pytest.raises(PreflightError, match=r"no compute capability for the NVIDIA GeForce "
                                             r"RTX 4090 \(\[N/A\].*set host data `cuda_arch`"):
        run_deploy(DEFAULTS, facts(GpuInfo=na()))
