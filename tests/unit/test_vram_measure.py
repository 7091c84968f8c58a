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


def with_clocks(nv: Any, reads: list[tuple[float, int]], event_reasons: bool = True,
                throttle_reasons: bool = False) -> Any:
    """`nv` with NVML's SM clock and clock event reasons, one read of `reads` each time (the
    last repeated); `event_reasons` False: a driver without `...EventReasons` (the binding's
    call raises), `throttle_reasons`: the older `...ThrottleReasons` answers."""
    left = list(reads)

    def next_read() -> tuple[float, int]:
        return left.pop(0) if len(left) > 1 else left[0]

    state: dict[str, int] = {}

    def clock(handle: object, kind: int) -> float:
        assert kind == 1  # NVML_CLOCK_SM
        mhz, state["bits"] = next_read()
        return mhz

    def missing(handle: object) -> int:
        raise NVMLError("Function Not Found")

    nv.nvmlDeviceGetClockInfo = clock
    nv.nvmlDeviceGetCurrentClocksEventReasons = (lambda h: state["bits"]) if event_reasons \
        else missing
    nv.nvmlDeviceGetCurrentClocksThrottleReasons = (lambda h: state["bits"]) \
        if throttle_reasons else missing
    return nv


@pytest.mark.parametrize("event_reasons", [True, False])
def test_the_sm_clock_and_why_it_was_held_down_are_sampled(monkeypatch, event_reasons):
    """The card at 1,980 MHz, 1,410 under its power cap while idle between requests (0x4 |
    0x1), 1,500 thermally slowed (0x20), 345 idle: the range while busy and every reason
    named (the idle bit is none), read by the driver's EventReasons call or, on a driver
    without it, the older ThrottleReasons; the report shows it as information.
    Mutants: the idle reads in the range; no fallback to ThrottleReasons."""
    from beekeeper.verify.judge import clock_checks

    monkeypatch.setattr(vram, "CLOCK_EVERY", 1)
    nv = with_clocks(fake_pynvml(), [(1980.0, 0x0), (1410.0, 0x4 | 0x1), (1500.0, 0x20),
                                     (345.0, 0x1)], event_reasons, not event_reasons)
    vr = sample(monkeypatch, nv, pid=None)
    # the range while busy: the idle reads (1,410 and 345 MHz) left out of it
    assert (vr.sm_clock_min_mhz, vr.sm_clock_max_mhz) == (1500.0, 1980.0)
    assert vr.clock_reasons == ["software power cap", "software thermal slowdown"]
    (check,) = clock_checks(vr)
    assert (check.name, check.status, check.detail) == (
        "gpu.clocks", "INFO", "SM clock 1,500 to 1,980 MHz while the card was busy in the "
        "served suites; held down by: software power cap, software thermal slowdown")


def test_a_steady_clock_and_a_binding_without_clocks(monkeypatch):
    """One clock throughout, no reason: said so; a pynvml without the clock calls: no
    figure, and no check (never a made-up one); the clock read but neither reasons call
    answering: said as not read."""
    from beekeeper.verify.judge import clock_checks

    monkeypatch.setattr(vram, "CLOCK_EVERY", 1)
    vr = sample(monkeypatch, with_clocks(fake_pynvml(), [(1755.0, 0x0)]), pid=None)
    assert clock_checks(vr)[0].detail == (
        "SM clock 1,755 MHz throughout while the card was busy in the served suites; NVML "
        "named no reason it was held down")
    bare = sample(monkeypatch, fake_pynvml(), pid=None)
    assert (bare.sm_clock_min_mhz, bare.clock_reasons, clock_checks(bare)) == (None, None, [])
    # the clock read, its reasons by neither call: said so, not "no reason"
    unread = sample(monkeypatch, with_clocks(fake_pynvml(), [(1755.0, 0x0)], False), pid=None)
    assert clock_checks(unread)[0].detail.endswith(
        "; NVML's reasons for holding it down could not be read")


def test_verify_reports_the_clock_as_information(monkeypatch):
    """run_suites on a card NVML reads: `gpu.clocks` INFO among the checks; the verdict as
    before (information judges nothing).
    Mutant: clock_checks not added in _sampled_suites."""
    import httpx

    from beekeeper.core.profiles import PROFILES
    from beekeeper.verify.client import ServerClient
    from beekeeper.verify.suites import run_suites
    from beekeeper.verify.vram import Locality

    from .harness import fake_server

    monkeypatch.setitem(sys.modules, "pynvml", with_clocks(fake_pynvml(pid=9_999),
                                                           [(1980.0, 0x8)]))
    with ServerClient("http://127.0.0.1:9", transport=httpx.MockTransport(fake_server)) as c:
        rep = run_suites(c, PROFILES["q8-turbo4-64k"], ["smoke"], budget_gib=10.0,
                         where=Locality(True, "here", pid=9_999))
    clocks = next(ch for ch in rep.checks if ch.name == "gpu.clocks")
    assert (clocks.status, clocks.detail) == (
        "INFO", "SM clock 1,980 MHz throughout while the card was busy in the served suites; "
        "held down by: hardware slowdown")
    assert rep.coverage.word == "PASSED"
