"""
The engine baseline on the sandbox host (container mode): llama-bench is in the image beside
llama-server, `beekeeper verify --suite engine,decode` judges the served decode against it,
and a server slowed on purpose fails the decode check with both figures named.
"""

import json
import re
import subprocess
import time

import pytest

from beekeeper.verify.judge import BUSY

from .helpers import BIN, ROOT, deploy, first_deploy, sandbox_exec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def deployed(fresh_sandbox):
    return first_deploy("from nothing, image with llama-bench")


def verify(tmp_path, suites: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    p = subprocess.run([str(BIN / "beekeeper"), "verify", "--sandbox", "--profile", "cpu-tiny",
                        "--suite", suites, "--out", str(tmp_path), *extra], cwd=ROOT,
                       capture_output=True, text=True, timeout=1800)
    print(p.stdout[-3000:])
    reports = list(tmp_path.rglob("report.json"))
    assert len(reports) == 1, (p.stdout + p.stderr)[-3000:]
    return p, json.loads(reports[0].read_text())


def verify_judged(tmp_path, suites: str, *extra: str, check: str = "decode.vs_engine@1024"
                  ) -> tuple[subprocess.CompletedProcess, dict]:
    """verify, with `check` judged. On a busy machine verify rightly leaves it unjudged
    ("the host was busy (...)": exit 3, INCOMPLETE); that says nothing about the kit, so
    it runs once more after a pause, and a second busy run skips the test, naming the load
    it measured: the verdict needs a quiet machine (as verify itself says)."""
    for attempt in (1, 2):
        out = tmp_path / f"run{attempt}"
        p, data = verify(out, suites, *extra)
        found = {c["name"]: c for c in data["checks"]}.get(check, {})
        if not (found.get("status") == "SKIP" and found.get("detail", "").startswith(BUSY)):
            return p, data
        print(f"[busy] {check}: {found['detail']}")
        time.sleep(20)
    pytest.skip(f"{check} not judged twice, the machine was busy: {found['detail']}")


def test_llama_bench_is_in_the_image_beside_the_server(deployed):
    tag = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]
    p = sandbox_exec(f"docker run --rm --entrypoint /bin/sh {tag} -c "
                     "'ls /usr/local/bin/llama-server /usr/local/bin/llama-bench'")
    assert p.returncode == 0, p.stderr
    # one build: the server image holds both; llama-bench runs as the unit's user
    h = sandbox_exec(f"docker run --rm --entrypoint /usr/local/bin/llama-bench {tag} --help")
    assert "--n-depth" in h.stdout + h.stderr


@pytest.mark.quiet  # a decode verdict
def test_verify_engine_decode_passes_and_prints_the_ratio(deployed, tmp_path):
    # 128 tokens out, not 512: about 3 s a run at cpu-tiny's 40 tok/s, a figure the noise
    # rule still judges (the full sizes run in test_smoke_decode_passes_without_quick)
    p, data = verify_judged(tmp_path, "engine,decode", "--decode-out", "128")
    assert p.returncode == 0, p.stdout[-3000:]
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["engine.baseline"]["status"] == "INFO"
    assert "stopped while llama-bench ran" in checks["engine.baseline"]["detail"]
    dec = data["suites"]["decode"][0]
    assert dec["ctx_tokens"] == 1024 and dec["record"]["ok"]
    ratio = dec["served_over_engine"]
    print(f"[figure] cpu-tiny decode at 1024 ctx: served {dec['decode_tok_s']:.1f} tok/s, "
          f"engine {dec['engine_tok_s']:.1f} tok/s, served/engine {ratio:.3f}")
    assert checks["decode.vs_engine@1024"]["status"] == "PASS"
    assert "[PASS] decode.vs_engine@1024: served" in p.stdout
    assert checks["decode.reference_card"]["status"] == "SKIP"  # no figure: never a PASS
    # the service is back after the baseline
    assert sandbox_exec("systemctl is-active beekeeper-llm.service").stdout.strip() == "active"


# the slow tier (scripts/test-slow.sh): verify's full sizes (60-140 s on 2 cores); the quick
# sizes above run the same code, and the unit tier checks that every profile's full sizes
# fit its context
@pytest.mark.slow
def test_smoke_decode_passes_without_quick(deployed, tmp_path):
    """The full sizes fit cpu-tiny's 4096-token context (it asked for 4096 + 512 before)."""
    p, data = verify(tmp_path, "smoke,decode")
    # no engine suite asked for: decode measured, not judged, and the run says so (exit 3)
    assert p.returncode == 3 and "verify INCOMPLETE" in p.stdout, p.stdout[-3000:]
    assert "[SKIP] decode.vs_engine@1024" in p.stdout  # no baseline: no expectation


# The slow-down: a sampler that sorts the whole vocabulary (262,144 tokens for gemma-3) on
# every token, work llama-bench (no sampling) does not do. Measured on a 2-vCPU VM: 26-28
# tok/s served against 73 without it (0.36); one thread instead of two, the slow-down this
# test used before, gave 62 against 73 (0.85), and served ratios of 0.73-0.85 against the
# 0.80 floor: a coin toss.
SLOW = ["--top-k", "0", "--typical", "0.99"]


# the slow tier (scripts/test-slow.sh): two deploys and a judged decode (90-480 s on 2 cores).
# In the main tier a real bad server is still failed by verify (test_deploy.py's weak model,
# NIAH), and the decode rule's arithmetic is the judge's, proven by mutants in the unit tier.
@pytest.mark.slow
def test_a_slow_server_fails_the_decode_check_naming_both_figures(deployed, tmp_path):
    run = deploy("--data", f"server_extra_args={json.dumps(SLOW)}")
    try:
        assert run.rc == 0, run.out[-3000:]
        assert " ".join(SLOW) in sandbox_exec(
            "systemctl show -p ExecStart --value beekeeper-llm.service").stdout
        # 128 tokens out, not 512: at about 26 tok/s each served run still takes 5 s (the
        # noise rule judges it), and the slow-down (0.36) is far below the floor (0.70)
        p, data = verify_judged(tmp_path, "engine,decode", "--decode-out", "128")
        assert p.returncode == 1, p.stdout[-3000:]
        line = next(ln for ln in p.stdout.splitlines() if "decode.vs_engine@1024" in ln
                    and ln.strip().startswith("["))
        print(f"[figure] slow server: {line.strip()}")
        assert line.strip().startswith("[FAIL]")
        m = re.search(r"served ([\d.]+) tok/s vs engine ([\d.]+) tok/s", line)
        assert m and float(m.group(1)) < float(m.group(2))
        # below the bar, so measured again as a pair (llama-bench, then the server): the
        # second pair judged, the first said, both far below
        assert "decode: below the bar at 1024 ctx: measured again as a pair" in p.stdout
        first = re.search(r"after the first pair was below the bar \(served ([\d.]+) tok/s "
                          r"vs engine ([\d.]+) tok/s: ratio ([\d.]+)\)", line)
        assert first and float(first.group(3)) < 0.7, line
    finally:
        back = deploy()
        assert back.rc == 0, back.out[-3000:]
