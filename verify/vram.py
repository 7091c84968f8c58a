"""
NVML sampler: device memory used (and per-process where the driver gives it) at 10 Hz or
more, in a background thread, for the whole run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class VramSample:
    t_s: float
    used_mib: float
    process_mib: float | None


@dataclass
class VramResult:
    """What the sampler saw. `skipped` says why there is no number, never a fake one."""

    skipped: str | None = None
    gpu_name: str | None = None
    driver: str | None = None
    total_mib: float | None = None
    baseline_mib: float | None = None
    peak_mib: float | None = None
    peak_delta_mib: float | None = None
    peak_process_mib: float | None = None
    per_process_available: bool = False
    note: str | None = None
    interval_s: float = 0.05
    achieved_hz: float | None = None
    sampler_cpu_s: float | None = None  # CPU time the sampler thread used
    wall_s: float | None = None
    samples: list[VramSample] = field(default_factory=list)

    @property
    def server_peak_mib(self) -> float | None:
        """The server process's peak, else the card's rise over the sampler's baseline."""
        return server_peak_mib({"peak_process_mib": self.peak_process_mib,
                                "peak_delta_mib": self.peak_delta_mib})


def server_peak_mib(vram: Mapping[str, Any]) -> float | None:
    """`VramResult.server_peak_mib` of a report.json's `suites.vram`."""
    return vram.get("peak_process_mib") or vram.get("peak_delta_mib")


class VramSampler:
    """Context manager; `pid` picks the process to follow (the server), if known."""

    def __init__(self, interval_s: float = 0.05, device_index: int = 0, pid: int | None = None):
        if interval_s <= 0 or interval_s > 0.1:
            raise ValueError("interval_s must be in (0, 0.1]: 10 Hz or more")
        self.interval_s = interval_s
        self.device_index = device_index
        self.pid = pid
        self.result = VramResult(interval_s=interval_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handle: Any = None

    def __enter__(self) -> VramSampler:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.device_index)
        except Exception as e:  # no driver, no GPU, no library
            self.result.skipped = f"skipped: no NVIDIA GPU ({type(e).__name__})"
            return self
        nv, h = self._nvml, self._handle
        name = nv.nvmlDeviceGetName(h)
        self.result.gpu_name = name.decode() if isinstance(name, bytes) else name
        drv = nv.nvmlSystemGetDriverVersion()
        self.result.driver = drv.decode() if isinstance(drv, bytes) else drv
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        self.result.total_mib = mem.total / 2**20
        self.result.baseline_mib = mem.used / 2**20
        self._thread = threading.Thread(target=self._run, name="vram-sampler", daemon=True)
        self._thread.start()
        return self

    def _process_mib(self) -> float | None:
        try:
            procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        except Exception:
            return None
        vals = [p.usedGpuMemory for p in procs
                if p.usedGpuMemory is not None and (self.pid is None or p.pid == self.pid)]
        return sum(vals) / 2**20 if vals else None

    def _run(self) -> None:
        t0 = time.monotonic()
        cpu0 = time.thread_time()
        nxt = t0
        while not self._stop.is_set():
            used = self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used / 2**20
            self.result.samples.append(VramSample(time.monotonic() - t0, used,
                                                  self._process_mib()))
            nxt += self.interval_s
            self._stop.wait(max(0.0, nxt - time.monotonic()))
        self.result.sampler_cpu_s = time.thread_time() - cpu0
        self.result.wall_s = time.monotonic() - t0

    def __exit__(self, *exc: object) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        r = self.result
        if r.samples:
            r.peak_mib = max(s.used_mib for s in r.samples)
            r.peak_delta_mib = r.peak_mib - (r.baseline_mib or 0)
            procs = [s.process_mib for s in r.samples if s.process_mib is not None]
            r.per_process_available = bool(procs)
            r.peak_process_mib = max(procs) if procs else None
            if not procs:
                r.note = ("per-process memory not reported by the driver (WSL2/WDDM gives "
                          "none): peak is the device-level delta over the baseline")
            span = r.samples[-1].t_s - r.samples[0].t_s
            r.achieved_hz = (len(r.samples) - 1) / span if span > 0 else None
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass
