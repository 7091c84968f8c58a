"""
Issue 25 on the GPU machine: a server a user started by hand (no unit, no SSH, no
deployed.json), judged by `beekeeper verify` alone. For each profile: `llama-server` with
exactly `PROFILES[name].server.args(model)` (plus --host/--port/--alias), then
`python3 -m beekeeper.verify_main ... --llama-bench <build>/bin/llama-bench --model <gguf>`
from this checkout; its stdout, exit status and report.json land in --out.

    python3 tests/gpu/beellama_tier.py build  --src carry/beellama-src.tar.gz --work W &
    python3 tests/gpu/beellama_tier.py models --work W --quants q8_0
    python3 tests/gpu/verify_by_hand.py --work W --out $OUT \
        --item 'q8-turbo4-64k:smoke,decode,ttft,vram:4096,60000' --item 'q8-f16-4k:decode:'
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkout import use_checkout  # noqa: E402

ROOT = use_checkout()

from beekeeper.core.profiles import PROFILES  # noqa: E402

MODEL = "qwen35-9b-shaped-q8_0.gguf"  # beellama_tier.py models --quants q8_0


def wait_healthy(url: str, proc: subprocess.Popen, deadline_s: float) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def one(work: Path, out: Path, name: str, suites: str, depths: str, port: int) -> dict:
    model = work / MODEL
    server = [str(work / "build" / "bin" / "llama-server"), "--host", "127.0.0.1",
              "--port", str(port), *PROFILES[name].server.args(str(model)), "--alias", name]
    url = f"http://127.0.0.1:{port}"
    verify = [sys.executable, "-m", "beekeeper.verify_main", "--url", url, "--profile", name,
              "--suite", suites, "--llama-bench", str(work / "build" / "bin" / "llama-bench"),
              "--model", str(model), "--out", str(out / f"verify-{name}")]
    if depths:
        verify += ["--decode-ctx", depths]
    rec: dict = {"server": shlex.join(server), "verify": shlex.join(verify)}
    with (out / f"server-{name}.log").open("w") as log:
        proc = subprocess.Popen(server, stdout=log, stderr=subprocess.STDOUT)
    try:
        if not wait_healthy(url, proc, 300):
            rec["error"] = f"server not healthy (exit {proc.poll()})"
            return rec
        t0 = time.monotonic()
        p = subprocess.run(verify, cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
        rec.update(rc=p.returncode, wall_s=round(time.monotonic() - t0, 1))
        (out / f"verify-{name}.txt").write_text(p.stdout + "\n--- stderr\n" + p.stderr)
        print(p.stdout[-4000:], p.stderr[-2000:], flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return rec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--item", action="append", required=True,
                    help="PROFILE:SUITES:DEPTHS (depths may be empty)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for i, item in enumerate(a.item):
        name, suites, depths = item.split(":")
        runs.append(one(Path(a.work), out, name, suites, depths, 8091 + i))
        (out / "verify_by_hand.json").write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
