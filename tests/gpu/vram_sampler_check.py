#!/usr/bin/env python3
"""
verify's VRAM sampler on a real card, without a server: torch allocates a known amount
while the sampler (verify/vram.py, NVML) follows this process; its peak rise over the
baseline and the process figure must show that amount. Prints the figures; exit 1 when the
rise is off by more than the CUDA context and the allocator's rounding allow.

    python3 tests/gpu/vram_sampler_check.py [GIB]     (the kit installed: start.sh)
"""

from __future__ import annotations

import os
import sys
import time

import torch

from beekeeper.verify.vram import VramSampler


def main() -> int:
    gib = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    torch.zeros(1, device="cuda")  # the CUDA context first: it is in the baseline
    torch.cuda.synchronize()
    with VramSampler(interval_s=0.05, pid=os.getpid()) as s:
        time.sleep(0.5)
        x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
        time.sleep(1.0)
        del x
        torch.cuda.empty_cache()
        time.sleep(0.5)
    r = s.result
    want = gib * 1024
    print(f"gpu {r.gpu_name}, driver {r.driver}, measure {r.used_measure}, reserved "
          f"{r.reserved_mib} MiB, {len(r.samples)} samples at {r.achieved_hz} Hz")
    print(f"baseline {r.baseline_mib:.0f} MiB, peak {r.peak_mib:.0f} MiB, rise "
          f"{r.peak_delta_mib:.0f} MiB (allocated {want:.0f}), process peak "
          f"{r.peak_process_mib} MiB, skipped {r.skipped}")
    ok = r.skipped is None and r.peak_delta_mib is not None and \
        want <= r.peak_delta_mib <= want + 64
    print("vram sampler:", "OK" if ok else "OFF")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
