"""The config matrix end to end on the sandbox host, over two CPU profiles. A long benchmark
(two deploys and every suite on each, about 2.5 minutes on 2 cores): the slow tier. Its
parts run in the main tier (deploys switching profiles, every suite, the report)."""

import json
import subprocess

import pytest

from .helpers import BIN, ROOT, sandbox_exec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_matrix_ranks_two_profiles_and_leaves_the_host_as_found(fresh_sandbox, tmp_path):
    before = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["profile"]
    p = subprocess.run([str(BIN / "beekeeper"), "matrix", "--sandbox", "--quick",
                        "--profiles", "cpu-smollm,cpu-tiny", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    data = json.loads(next(tmp_path.rglob("matrix.json")).read_text())
    assert data["recommended"] == "cpu-tiny"  # smollm fails NIAH
    assert [r["profile"] for r in data["rows"]] and all(r["deployed"] for r in data["rows"])
    md = next(tmp_path.rglob("matrix.md")).read_text()
    assert "| rank | config | decode tok/s | VRAM | TTFT | NIAH | notes |" in md
    assert "<svg" in next(tmp_path.rglob("matrix.html")).read_text()
    after = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["profile"]
    assert after == before
