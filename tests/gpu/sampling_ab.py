#!/usr/bin/env python3
"""
Sampling on the CPU against sampling on the GPU (llama-server's per-request
`backend_sampling`, beellama's experimental option), on a running server, side by side in
one run: the same prompt (about CTX tokens, cache_prompt false), greedy, N_OUT tokens, the
two kinds alternated ROUNDS times. Prints the server's own decode rate (timings) of each
request with what the server echoed of `backend_sampling` (whether it honoured it: a server
started without `--backend-sampling` may not), the median of each kind, and whether the two
kinds produced the same text.

    python3 tests/gpu/sampling_ab.py [--port 8083] [--ctx 4096] [--out 160] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import urllib.request


def ask(port: int, prompt: str, n_out: int, backend: bool, seed: int) -> dict:
    body = {"prompt": prompt, "n_predict": n_out, "temperature": 0.0, "cache_prompt": False,
            "seed": seed, "ignore_eos": True, "backend_sampling": backend}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8083)
    ap.add_argument("--ctx", type=int, default=4096, help="prompt tokens, about (4096)")
    ap.add_argument("--out", type=int, default=160, help="tokens decoded (160)")
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    words = "the quick brown fox jumps over a lazy dog while seven bees keep the hive ".split()
    prompt = " ".join(words[i % len(words)] + str(i % 97) for i in range(a.ctx // 2))
    rates: dict[bool, list[float]] = {False: [], True: []}
    texts: dict[bool, set[str]] = {False: set(), True: set()}
    for r in range(a.rounds):
        for backend in (False, True) if r % 2 == 0 else (True, False):
            d = ask(a.port, prompt, a.out, backend, seed=r)
            t = d.get("timings") or {}
            # what the server says it did: a request's backend_sampling may be dropped (a
            # server started without --backend-sampling, or a sampler the GPU chain lacks)
            said = (d.get("generation_settings") or {}).get("backend_sampling")
            if "predicted_per_second" in t:
                rates[backend].append(float(t["predicted_per_second"]))
            texts[backend].add(d.get("content", ""))
            print(f"round {r} backend_sampling={backend} (the server echoed {said}): prompt "
                  f"{t.get('prompt_n')} tokens, {t.get('predicted_n')} out at "
                  f"{t.get('predicted_per_second', 0):.1f} tok/s "
                  f"({t.get('predicted_per_token_ms', 0):.3f} ms a token)", flush=True)
    for backend in (False, True):
        got = rates[backend]
        print(f"backend_sampling={backend}: median "
              f"{statistics.median(got) if got else float('nan'):.1f} tok/s over {len(got)} "
              f"timed; {len(texts[backend])} distinct text(s)")
    same = texts[False] == texts[True] and len(texts[False]) == 1
    print(f"same text both ways: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
