"""The VRAM sampler reads memory.used in the measure of the idle baseline it is judged against.

The engine suite reads the idle card with nvidia-smi (verify/engine.py `host_gpus`), whose
memory.used is NVML's `_v2` `used`: memory allocated on the card. NVML's first call,
`nvmlDeviceGetMemoryInfo` (pynvml's default), gives `used` = allocated + the driver's
reserved memory. On the H200 (driver 580, benchmarks/h200/2026-12-03-deploy) the sampler read
the server at 10,340 MiB that way, 607 MiB over nvidia-smi's 9,733, with one compute
process on the card, and judged a rise of 10,362 MiB over the 10,240 budget. A fake pynvml
here models the driver: nvidia-smi's figure is the allocated memory, v1 adds a reserve of
607 MiB, _v2 gives the two apart.
"""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import pytest

from beekeeper.verify import vram
from beekeeper.verify.engine import EngineBaseline
from beekeeper.verify.judge import judge_vram, vram_figures
from beekeeper.verify.vram import USED_ALLOCATED, USED_WITH_RESERVED, VramSampler

MIB = 2**20
TOTAL = 143_771  # the H200's memory.total (nvidia-smi and NVML), MiB
RESERVED = 607  # what the driver sets aside: in v1 `used`, not in nvidia-smi's memory.used
SERVER = 9_724  # the server process's own memory (NVML's process list), MiB
ALLOCATED = SERVER + 9  # nvidia-smi's memory.used with the server loaded (status.txt: 9,733)
BUDGET = 10_240.0


class NVMLError(Exception):
    pass


def fake_pynvml(*, v2: bool = True, pid: int = 9_999) -> types.ModuleType:
    """A one-card pynvml: `v2` False is a driver without nvmlDeviceGetMemoryInfo_v2."""
    nv: Any = types.ModuleType("pynvml")
    nv.nvmlMemory_v2 = 0x02000028

    def memory(handle: object, version: int | None = None) -> Any:
        if version is None:  # v1: used = allocated + reserved, used + free = total
            return types.SimpleNamespace(total=TOTAL * MIB, used=(ALLOCATED + RESERVED) * MIB,
                                         free=(TOTAL - ALLOCATED - RESERVED) * MIB)
        if not v2:
            raise NVMLError("Function Not Found")
        return types.SimpleNamespace(version=version, total=TOTAL * MIB,
                                     reserved=RESERVED * MIB, used=ALLOCATED * MIB,
                                     free=(TOTAL - ALLOCATED - RESERVED) * MIB)

    nv.nvmlInit = nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: 1
    nv.nvmlDeviceGetHandleByIndex = lambda i: f"card{i}"
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nv.nvmlSystemGetDriverVersion = lambda: "580.159.04"
    nv.nvmlDeviceGetMemoryInfo = memory
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=pid, usedGpuMemory=SERVER * MIB)]
    return nv


def sample(monkeypatch: pytest.MonkeyPatch, nv: types.ModuleType, pid: int | None
           ) -> vram.VramResult:
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    with VramSampler(interval_s=0.02, pid=pid) as sampler:
        time.sleep(0.1)
    return sampler.result


def test_the_rise_over_nvidia_smis_idle_is_the_servers_memory_not_the_drivers_reserve(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The H200's verify: idle 0 MiB (nvidia-smi, service stopped), the restarted server
    followed by pid. Read in v1, the rise was 10,340 MiB and failed; it is 9,733 MiB."""
    vr = sample(monkeypatch, fake_pynvml(pid=9_999), pid=9_999)
    assert vr.used_measure == USED_ALLOCATED and vr.reserved_mib == RESERVED
    assert {s.used_mib for s in vr.samples} == {ALLOCATED}
    idle = EngineBaseline(placement="stopped", commands=[], idle_used_mib=0.0)
    fig = vram_figures(vr, idle, BUDGET, 9_755.0)
    assert fig.rise_mib == ALLOCATED and fig.process_peak_mib == SERVER
    assert judge_vram(fig).status == "PASS"
    assert fig.rise_mib - fig.process_peak_mib < 16  # what no listed process owns: ~9 MiB


def test_a_driver_without_v2_is_read_in_v1_and_says_the_reserve_is_in_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    vr = sample(monkeypatch, fake_pynvml(v2=False), pid=None)
    assert vr.used_measure == USED_WITH_RESERVED and vr.reserved_mib is None
    assert vr.baseline_mib == ALLOCATED + RESERVED
    assert {s.used_mib for s in vr.samples} == {ALLOCATED + RESERVED}


def test_a_binding_without_the_version_argument_falls_back_to_v1() -> None:
    old: Any = types.ModuleType("pynvml")  # a pynvml before _v2: no nvmlMemory_v2
    old.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(
        total=TOTAL * MIB, used=(ALLOCATED + RESERVED) * MIB)
    assert vram.memory_read(old, "card0") == (TOTAL, ALLOCATED + RESERVED, None,
                                              USED_WITH_RESERVED)


def test_a_card_sampled_without_the_vram_suite_is_shown_not_judged(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A default `--suite smoke` run on a machine whose card NVML reads: the server's peak
    (9,724 MiB) is over a 5 GiB budget, but no VRAM check was asked for. It used to FAIL the
    run: 'verify FAILED (no speed, NIAH or VRAM check requested; 3 PASS, 1 FAIL...)'."""
    import httpx

    from beekeeper.core.profiles import PROFILES
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.suites import run_suites
    from beekeeper.verify.vram import Locality

    from .harness import fake_server

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(pid=9_999))
    with ServerClient("http://127.0.0.1:9", transport=httpx.MockTransport(fake_server)) as c:
        rep = run_suites(c, PROFILES["q8-turbo4-64k"], ["smoke"], budget_gib=5.0,
                         where=Locality(True, "here", pid=9_999))
    v = next(ch for ch in rep.checks if ch.name == "vram.rise_vs_budget")
    assert v.status == "INFO" and "add --suite vram" in v.detail and "9724 MiB" in v.detail
    assert rep.suites.vram is not None  # the figures stay in the report
    cov = rep.coverage
    assert (cov.word, cov.line()) == ("PASSED", "no speed, NIAH or VRAM check requested")
    assert "verify FAILED" not in capsys.readouterr().out
    # named, the same figure is judged against the budget
    with ServerClient("http://127.0.0.1:9", transport=httpx.MockTransport(fake_server)) as c:
        asked = run_suites(c, PROFILES["q8-turbo4-64k"], ["smoke", "vram"], budget_gib=5.0,
                           where=Locality(True, "here", pid=9_999))
    assert next(ch for ch in asked.checks if ch.name == "vram.rise_vs_budget").status == "FAIL"
    assert asked.coverage.word == "FAILED"


def test_the_servers_peak_is_its_process_figure_or_not_measured() -> None:
    """key_figures' peak VRAM: the process peak (0.0 kept: `or` dropped it), never the card's
    rise over the sampler's first sample, taken with the server already loaded."""
    from beekeeper.verify.report import key_figures
    from beekeeper.verify.vram import server_peak_mib

    assert server_peak_mib({"peak_process_mib": 9724.0, "peak_delta_mib": 12.0}) == 9724.0
    assert server_peak_mib({"peak_process_mib": 0.0, "peak_delta_mib": 12.0}) == 0.0
    assert server_peak_mib({"peak_process_mib": None, "peak_delta_mib": 12.0}) is None
    wsl = {"suites": {"vram": {"peak_process_mib": None, "peak_delta_mib": 40.0}}}
    assert key_figures(wsl)["peak_vram_mib"] is None
    r = vram.VramResult(peak_process_mib=None, peak_delta_mib=40.0)
    assert r.server_peak_mib is None
