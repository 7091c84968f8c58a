"""
Benchmark of the verify client itself (prints figures; asserts nothing):

- client overhead: the client's decode tok/s, (N - 1) / (t_last - t_first), against the
  server's own timings.predicted_per_second on the same requests (goal: ratio >= 0.98);
- the NVML sampler's achieved rate and CPU cost (or why there is none).

    python benchmarks/bench_client.py --sandbox --profile cpu-tiny
    python benchmarks/bench_client.py --url http://127.0.0.1:8083 --profile q8-turbo4-64k
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from beekeeper.core.profiles import PROFILES  # noqa: E402
from beekeeper.verify.client import ServerClient  # noqa: E402
from beekeeper.verify.suites import run_decode  # noqa: E402
from beekeeper.verify.vram import VramSampler  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url")
    ap.add_argument("--sandbox", action="store_true")
    ap.add_argument("--profile", default="cpu-tiny")
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--out-tokens", type=int, default=256)
    args = ap.parse_args(argv)
    if args.profile not in PROFILES:
        print(f"unknown profile {args.profile}", file=sys.stderr)
        return 2
    with ExitStack() as stack:
        url = args.url
        if args.sandbox:
            from beekeeper.sandbox import load_state, ssh_options
            from beekeeper.tunnel import ssh_tunnel

            url = stack.enter_context(ssh_tunnel(ssh_options(load_state()), 8083))
        client = stack.enter_context(ServerClient(url))
        ratios = []
        t0, c0 = time.monotonic(), time.process_time()
        with VramSampler() as sampler:
            for i in range(args.requests):
                run = run_decode(client, args.ctx, args.out_tokens, seed=100 + i)
                srv = run.server_predicted_per_second
                if run.decode_tok_s and srv:
                    ratios.append(run.decode_tok_s / srv)
                    print(f"request {i}: client {run.decode_tok_s:.2f} tok/s, server "
                          f"{srv:.2f} tok/s, ratio {run.decode_tok_s / srv:.4f}, "
                          f"{run.record.completion_tokens} tokens in "
                          f"{len(run.record.token_event_times_s)} events")
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
    if ratios:
        print(f"client/server decode ratio: median {statistics.median(ratios):.4f}, "
              f"min {min(ratios):.4f} over {len(ratios)} requests (goal >= 0.98)")
    r = sampler.result
    if r.skipped:
        print(f"NVML sampler: {r.skipped}")
    else:
        print(f"NVML sampler: {r.achieved_hz:.1f} Hz achieved at {1 / r.interval_s:.0f} Hz "
              f"asked; sampler thread CPU {r.sampler_cpu_s:.3f} s over {r.wall_s:.1f} s "
              f"({100 * (r.sampler_cpu_s or 0) / (r.wall_s or 1):.2f}% of one core)")
    print(f"client process CPU {cpu:.2f} s over {wall:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
