"""
NVML sampler: device memory used (and per-process where the driver gives it) at 10 Hz or
more, in a background thread. NVML sees this machine's cards only, so it samples only a
server on this machine (`locate_server`), never one through `ssh -L`.

memory.used is read as nvidia-smi reads it, NVML's `nvmlDeviceGetMemoryInfo_v2` `used`: the
VRAM rise is the sampler's peak less the engine suite's idle nvidia-smi figure (engine.py
`host_gpus`), so both must be one measure. The v1 call (pynvml's default) adds the driver's
reserved memory (nvml.h: "Sum of Reserved and Allocated device memory"), which on the H200
put 607 MiB into the server's rise (benchmarks/h200/2026-12-03-deploy). Without _v2 the v1
figure is used, and `used_measure` says so.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


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
    note: str | None = None
    interval_s: float = 0.05
    achieved_hz: float | None = None
    sampler_cpu_s: float | None = None  # CPU time the sampler thread used
    wall_s: float | None = None
    pid: int | None = None  # the server's process, when verify found it (per-process figures)
    processes_seen: int = 0  # most compute processes on the card in one sample
    # USED_ALLOCATED or USED_WITH_RESERVED; the reserve when _v2 reports it apart
    used_measure: str | None = None
    reserved_mib: float | None = None
    samples: list[VramSample] = field(default_factory=list)
    # the card's SM clock over the run while it was busy (every CLOCK_EVERY samples) and why
    # NVML said it was held below its maximum (CLOCK_REASONS; None: NVML's reasons could not
    # be read): a served figure's pace beside the engine's
    sm_clock_min_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    clock_reasons: list[str] | None = field(default_factory=list)

    @property
    def process_is_the_server(self) -> bool:
        """Whether peak_process_mib is the server's alone: its pid was followed, or it was the
        only compute process on the card throughout."""
        return self.peak_process_mib is not None and (
            self.pid is not None or self.processes_seen == 1)

    @property
    def server_peak_mib(self) -> float | None:
        """The server process's peak (NVML per process); None where the driver gives none."""
        return server_peak_mib({"peak_process_mib": self.peak_process_mib})


def server_peak_mib(vram: Mapping[str, Any]) -> float | None:
    """`VramResult.server_peak_mib` of a report.json's `suites.vram`: the process peak, None
    when not measured. Never the card's rise over the sampler's first sample
    (`peak_delta_mib`): verify samples a server already loaded, so that rise is not its
    peak; 0.0 is a figure, kept."""
    peak = vram.get("peak_process_mib")
    return None if peak is None else float(peak)


USED_ALLOCATED = "allocated (NVML _v2 used: nvidia-smi's memory.used)"
USED_WITH_RESERVED = ("allocated + driver-reserved (NVML v1 used: no _v2 in this driver or "
                      "binding; nvidia-smi's memory.used may leave the reserved memory out)")


def memory_read(nvml: Any, handle: Any) -> tuple[float, float, float | None, str]:
    """One read of a card's memory: (memory.total MiB, memory.used MiB, the driver's reserved
    MiB or None, which measure of used)."""
    try:
        m = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
        return m.total / 2**20, m.used / 2**20, m.reserved / 2**20, USED_ALLOCATED
    except Exception:  # no _v2 in this driver (NVMLError) or this pynvml (TypeError, ...)
        m = nvml.nvmlDeviceGetMemoryInfo(handle)
        return m.total / 2**20, m.used / 2**20, None, USED_WITH_RESERVED


@dataclass(frozen=True)
class Locality:
    """Whether the server at a URL runs on this machine, and its process where found."""

    local: bool
    why: str
    pid: int | None = None


def _listeners(port: int) -> set[str] | None:
    """Socket inodes listening on TCP `port` on this machine (Linux /proc), else empty; None
    where neither table can be read (no /proc: macOS)."""
    out: set[str] = set()
    read = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read = True
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                out.add(f[9])
    return out if read else None


def _owner(inodes: set[str]) -> tuple[int, str] | None:
    """(pid, command name) of the process holding one of these sockets, where readable."""
    wanted = {f"socket:[{i}]" for i in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
            if wanted.intersection(fds):
                return int(proc.name), (proc / "comm").read_text().strip()
        except OSError:
            continue
    return None


def _is_this_machine(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in (socket.gethostname(), socket.getfqdn())


def locate_server(url: str) -> Locality:
    """A server on this machine: its URL names this machine and what listens on its port is
    not an ssh tunnel (`ssh -L`: the server is on the far side). Its pid when the listener
    is llama-server itself (a container's port is held by docker-proxy, the server's pid is
    then not known)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not _is_this_machine(host):
        return Locality(False, f"the server ({host}) is not on this machine")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    inodes = _listeners(port)
    if inodes is None:  # a Mac: an ssh tunnel's port cannot be told from a server's
        return Locality(False, f"what listens on port {port} here cannot be told (no "
                        "/proc/net/tcp: not Linux, e.g. a Mac controller): a server reached "
                        "through an ssh tunnel has its card on the tunnel's far side")
    owner = _owner(inodes)
    if owner and owner[1] in ("ssh", "autossh"):
        return Locality(False, f"port {port} here is an ssh tunnel (pid {owner[0]}): the "
                        "server and its card are on the tunnel's far side")
    if owner and owner[1].startswith("llama-server"):
        return Locality(True, f"llama-server, pid {owner[0]}, on this machine", owner[0])
    return Locality(True, "the server is on this machine")


# NVML's clock event (throttle) reasons, nvml.h's nvmlClocksEventReason* and
# nvmlClocksThrottleReason* bits; the idle bit (a card between requests) is GPU_IDLE
CLOCK_REASONS = {0x2: "applications clocks setting", 0x4: "software power cap",
                 0x8: "hardware slowdown", 0x10: "sync boost",
                 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
                 0x80: "hardware power brake", 0x100: "display clock setting",
                 0x200: "board limit", 0x400: "reliability"}
GPU_IDLE = 0x1
CLOCK_EVERY = 10  # samples between two reads of the clock (2 Hz at 20 Hz)
NVML_CLOCK_SM = 1  # nvml.h's nvmlClockType_t


def clock_read(nvml: Any, handle: Any) -> tuple[float | None, int | None]:
    """The SM clock in MHz now and NVML's clock event reason bits (None: not read): the
    driver's `...EventReasons` call, else the older `...ThrottleReasons` (a binding has both
    names; a driver before the first answers the second only)."""
    try:
        mhz: float | None = float(nvml.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM))
    except Exception:
        mhz = None
    for name in ("nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons"):
        try:
            return mhz, int(getattr(nvml, name)(handle))
        except Exception:
            continue
    return mhz, None


class VramSampler:
    """Context manager; `pid` picks the process to follow (the server), if known. With
    `not_here` (the server is not on this machine) or `no_gpu` (a CPU profile) nothing is
    sampled, and the result says why."""

    def __init__(self, interval_s: float = 0.05, pid: int | None = None,
                 not_here: str | None = None, no_gpu: str | None = None):
        self.not_here = not_here
        self.no_gpu = no_gpu
        if interval_s <= 0 or interval_s > 0.1:
            raise ValueError("interval_s must be in (0, 0.1]: 10 Hz or more")
        self.interval_s = interval_s
        self.pid = pid
        self.result = VramResult(interval_s=interval_s, pid=pid)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handle: Any = None
        self._version: dict[str, int] = {}  # memory_read's measure, kept for every sample

    def __enter__(self) -> VramSampler:
        if self.no_gpu:
            self.result.skipped = f"skipped: {self.no_gpu}"
            return self
        if self.not_here:
            self.result.skipped = (f"skipped: {self.not_here}; NVML here would read this "
                                   "machine's card (run `beekeeper verify --on-host`)")
            return self
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self._device_of_pid())
        except Exception as e:  # no driver, no GPU, no library
            self.result.skipped = f"skipped: no NVIDIA GPU ({type(e).__name__})"
            return self
        nv, h = self._nvml, self._handle
        self.result.gpu_name, self.result.driver = (  # bytes from older pynvml
            x.decode() if isinstance(x, bytes) else x
            for x in (nv.nvmlDeviceGetName(h), nv.nvmlSystemGetDriverVersion()))
        r = self.result
        r.total_mib, r.baseline_mib, r.reserved_mib, r.used_measure = memory_read(nv, h)
        self._version = {"version": nv.nvmlMemory_v2} if r.used_measure == USED_ALLOCATED else {}
        self._thread = threading.Thread(target=self._run, name="vram-sampler", daemon=True)
        self._thread.start()
        return self

    def _device_of_pid(self) -> int:
        """The card the followed process runs on (multi-GPU hosts), else the first."""
        nv = self._nvml
        if self.pid is None:
            return 0
        try:
            for i in range(nv.nvmlDeviceGetCount()):
                procs = nv.nvmlDeviceGetComputeRunningProcesses(
                    nv.nvmlDeviceGetHandleByIndex(i))
                if any(p.pid == self.pid for p in procs):
                    return i
        except Exception:
            pass
        return 0

    def _process_mib(self) -> float | None:
        try:
            procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        except Exception:
            return None
        self.result.processes_seen = max(self.result.processes_seen, len(procs))
        vals = [p.usedGpuMemory for p in procs
                if p.usedGpuMemory is not None and (self.pid is None or p.pid == self.pid)]
        return sum(vals) / 2**20 if vals else None

    def _clock(self) -> None:
        """One read of the clock: its range over the reads while the card was busy (not
        idle), and every reason named."""
        r = self.result
        mhz, bits = clock_read(self._nvml, self._handle)
        if bits is None:
            r.clock_reasons = None
        elif r.clock_reasons is not None:
            r.clock_reasons += [name for bit, name in CLOCK_REASONS.items()
                                if bits & bit and name not in r.clock_reasons]
        if mhz is None or (bits or 0) & GPU_IDLE:
            return
        r.sm_clock_min_mhz = mhz if r.sm_clock_min_mhz is None else min(mhz, r.sm_clock_min_mhz)
        r.sm_clock_max_mhz = mhz if r.sm_clock_max_mhz is None else max(mhz, r.sm_clock_max_mhz)

    def _run(self) -> None:
        t0 = time.monotonic()
        cpu0 = time.thread_time()
        nxt = t0
        while not self._stop.is_set():
            used = self._nvml.nvmlDeviceGetMemoryInfo(self._handle, **self._version).used / 2**20
            if len(self.result.samples) % CLOCK_EVERY == 0:
                self._clock()
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
            r.peak_delta_mib = (r.peak_mib - r.baseline_mib if r.baseline_mib is not None
                                else None)
            procs = [s.process_mib for s in r.samples if s.process_mib is not None]
            r.peak_process_mib = max(procs) if procs else None
            if not procs:
                why = (f"the server's pid {r.pid} is not among the card's {r.processes_seen} "
                       "compute process(es) (it was restarted, or NVML reports another PID "
                       "namespace's pids)" if r.pid is not None and r.processes_seen else
                       "per-process memory not reported by the driver (WSL2/WDDM gives none)")
                r.note = (f"{why}: the server's peak is not measured; peak_delta_mib is the "
                          "card's rise over the sampler's first sample")
            span = r.samples[-1].t_s - r.samples[0].t_s
            r.achieved_hz = (len(r.samples) - 1) / span if span > 0 else None
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass
