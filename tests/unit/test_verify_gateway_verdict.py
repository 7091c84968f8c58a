"""`--suite gateway` is judged like any other area: without a server behind the gateway to
compare with (no --direct-url) the run said `verify PASSED` (exit 0) on a gateway it never
measured; now INCOMPLETE (exit 3) naming the gateway, and PASSED where the gateway's checks
passed. Against real servers on 127.0.0.1 (tests/unit/harness.py FakeLlama)."""

from __future__ import annotations

import json
from pathlib import Path

from beekeeper import cli

from .harness import FakeLlama, loopback_llama

RUN = ["--profile", "cpu-tiny", "--quick", "--settle-budget-s", "0", "--host-label", "box"]


def verdict(out: Path) -> dict:
    (file,) = out.rglob("report.json")
    return dict(json.loads(file.read_text())["verdict"])


def test_a_gateway_suite_with_nothing_to_compare_with_is_not_judged(tmp_path, capsys):
    with loopback_llama(FakeLlama()) as url:
        rc = cli.main(["verify", "--url", url, "--suite", "smoke,gateway", "--out",
                       str(tmp_path), *RUN])
    out = capsys.readouterr().out
    assert rc == 3, out
    v = verdict(tmp_path)
    assert v["word"] == "INCOMPLETE"
    assert [n["area"] for n in v["not_judged"]] == ["gateway"]
    assert "give --direct-url" in v["not_judged"][0]["why"]
    assert "verify INCOMPLETE (nothing failed, but not judged: the gateway" in out


def test_a_gateway_measured_against_its_server_is_judged(tmp_path, capsys):
    with loopback_llama(FakeLlama()) as gateway, loopback_llama(FakeLlama()) as direct:
        rc = cli.main(["verify", "--url", gateway, "--direct-url", direct, "--suite",
                       "smoke,gateway", "--out", str(tmp_path), *RUN])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "verify PASSED (judged: the gateway;" in out
