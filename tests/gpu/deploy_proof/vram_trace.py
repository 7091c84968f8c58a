#!/usr/bin/env python3
"""
Trace a GPU's memory and who holds it, beside a run of `beekeeper verify` (issue 40, point 3:
the 607 MiB that the H200's verify counted over the server's own memory).

Every 1/--hz s (default 10 Hz) one CSV row: the card's memory.used in both of NVML's measures
(`used_v1_mib`: nvmlDeviceGetMemoryInfo, allocated + the driver's reserved memory, what
verify's sampler read up to 2026-12-04; `used_v2_mib`: the _v2 call, allocated only, what
nvidia-smi's memory.used and verify's idle baseline say; `reserved_mib`), NVML's compute
processes (pid, MiB) with each one's comm, ppid and the head of its command line from /proc,
and at a lower rate (--maps-hz, default 2 Hz) every process whose /proc/<pid>/maps maps
libcuda (a CUDA process, whether NVML lists it or not), with whether it holds /dev/nvidia-uvm
open (the CUDA runtime opens it at cuInit; NVML users such as nvidia-smi and this tracer do
not). A scan of every /proc/<pid>/maps, measured on a 2-core CPU machine (2026-12-04): 6.6 ms
for 90 processes when quiet, 15 ms of CPU (31 ms wall) for 104 under a load of 4.6; at 2 Hz
that is 1.5 to 3 % of one core, at 10 Hz up to 15 %, hence 2 Hz. The scan never runs more
often than 20 times its own last duration (5 % of a core at most), and each row that scanned
says how long it took (`scan_ms`).

Each row also gives what could slow a decode beside it: the SM clock, power, utilisation and
temperature (empty where NVML does not say), and cumulative CPU seconds (`host_busy_s`,
`host_steal_s` from /proc/stat; `procs_cpu_s`, the NVML-listed processes' user + system time
from /proc/<pid>/stat). `--load CSV` prints, per stretch of one step and one set of GPU
processes, the clock, power and temperature while the GPU was busy and the CPU cores busy.

It runs until --stop-file exists or --duration passes (or SIGTERM/SIGINT), each row flushed
as written. Needs the nvidia-ml-py package (`import pynvml`) to trace, not to be imported or
to summarise.

    # on the GPU box, as root, beside a verify:
    python3 tests/gpu/deploy_proof/vram_trace.py --out /tmp/h200/vram_trace.csv \\
        --stop-file /tmp/h200/vram_trace.stop --duration 1800 &
    beekeeper verify --on-host --suite engine,smoke,decode,ttft,vram ...
    touch /tmp/h200/vram_trace.stop; wait
    python3 tests/gpu/deploy_proof/vram_trace.py --summary /tmp/h200/vram_trace.csv

`--summary` prints one block per phase, a phase being a stretch of rows with the same set of
GPU processes (NVML's list and libcuda's holders): its time, memory.used in both measures,
what NVML charged to each process, and what no listed process owned (used_v2 less the
processes' sum: ~9 MiB beside one server on the H200; the v1 figure adds the reserve).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 2**20
FIELDS = ["t_unix", "t_s", "used_v1_mib", "used_v2_mib", "reserved_mib", "procs", "cuda",
          "scan_ms", "sm_mhz", "power_w", "gpu_util_pct", "temp_c", "host_busy_s", "host_steal_s",
          "procs_cpu_s", "event"]
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
CMD_HEAD = 100  # characters of a command line kept
SCAN_SHARE = 0.05  # the libcuda scan may take at most this share of one core


# ---- /proc (pure given a proc root: the unit tests give a folder laid out like it) ----

def proc_info(pid: int, proc: str = "/proc") -> tuple[str, int | None, str]:
    """(comm, ppid, command line head) of a process; ("?", None, "") where unreadable (gone,
    or another PID namespace's pid)."""
    base = Path(proc) / str(pid)
    try:
        comm = (base / "comm").read_text().strip()
    except OSError:
        return "?", None, ""
    f = stat_fields(pid, proc)
    ppid = int(f[1]) if len(f) > 1 and f[1].isdigit() else None
    try:
        raw = (base / "cmdline").read_bytes()
        cmd = raw.replace(b"\0", b" ").decode(errors="replace").strip()[:CMD_HEAD]
    except OSError:
        cmd = ""
    return comm, ppid, cmd


def stat_fields(pid: int, proc: str = "/proc") -> list[str]:
    """/proc/<pid>/stat's fields after the command name (state first: field 3 of proc(5)),
    counted from its last ")" (a name may hold spaces and parentheses); [] where unreadable."""
    try:
        stat = (Path(proc) / str(pid) / "stat").read_text()
        return stat[stat.rindex(")") + 2:].split()
    except (OSError, ValueError):
        return []


def proc_cpu_s(pid: int, proc: str = "/proc") -> float | None:
    """A process's CPU time so far (user + system, s: utime and stime); None where
    unreadable."""
    try:
        f = stat_fields(pid, proc)
        return (int(f[11]) + int(f[12])) * TICK_S
    except (ValueError, IndexError):
        return None


def host_cpu_s(proc: str = "/proc") -> tuple[float, float] | None:
    """(busy, steal) CPU seconds of the whole host so far, all cores (/proc/stat's first line:
    busy is everything but idle, iowait and steal); None where unreadable."""
    try:
        f = [int(x) for x in (Path(proc) / "stat").read_text().split("\n", 1)[0].split()[1:]]
        idle, iowait, steal = f[3], f[4], f[7] if len(f) > 7 else 0
        return (sum(f[:8]) - idle - iowait - steal) * TICK_S, steal * TICK_S
    except (OSError, ValueError, IndexError):
        return None


def _holds_uvm(base: Path) -> bool:
    try:
        return any(os.readlink(fd) == "/dev/nvidia-uvm" for fd in (base / "fd").iterdir())
    except OSError:
        return False


def cuda_holders(proc: str = "/proc", skip: int | None = None) -> list[list[Any]]:
    """[pid, comm, ppid, holds /dev/nvidia-uvm] of every process mapping libcuda."""
    out: list[list[Any]] = []
    for entry in os.scandir(proc):
        if not entry.name.isdigit() or int(entry.name) == skip:
            continue
        base = Path(entry.path)
        try:
            with open(base / "maps", "rb") as f:
                if b"libcuda.so" not in f.read():
                    continue
        except OSError:
            continue
        comm, ppid, _ = proc_info(int(entry.name), proc)
        out.append([int(entry.name), comm, ppid, _holds_uvm(base)])
    return sorted(out)


# ---- the summary (pure) ----

@dataclass
class Row:
    t_unix: float
    t_s: float
    used_v1: float | None
    used_v2: float | None
    reserved: float | None
    procs: list[list[Any]]  # [pid, MiB or None, comm, ppid, cmd]
    cuda: list[list[Any]] | None  # [pid, comm, ppid, uvm]; None: not scanned in this row
    event: str = ""


def _num(s: str) -> float | None:
    return float(s) if s not in ("", None) else None


def read_rows(lines: Iterable[str]) -> list[Row]:
    out = []
    for r in csv.DictReader(lines):
        out.append(Row(float(r["t_unix"]), float(r["t_s"]), _num(r["used_v1_mib"]),
                       _num(r["used_v2_mib"]), _num(r["reserved_mib"]),
                       json.loads(r["procs"] or "[]"),
                       json.loads(r["cuda"]) if r["cuda"] else None, r.get("event") or ""))
    return out


@dataclass
class Phase:
    key: tuple[frozenset[tuple[int, str]], frozenset[tuple[int, str]]]  # (NVML's, libcuda's)
    rows: list[Row] = field(default_factory=list)
    cuda: list[list[Any]] = field(default_factory=list)


def phases(rows: list[Row]) -> list[Phase]:
    """Stretches of rows with the same GPU processes: NVML's compute processes and, as of the
    last scan, libcuda's holders (a row without a scan keeps the last one's)."""
    out: list[Phase] = []
    cuda: list[list[Any]] = []
    for row in rows:
        if row.cuda is not None:
            cuda = row.cuda
        key = (frozenset((int(p[0]), str(p[2])) for p in row.procs),
               frozenset((int(c[0]), str(c[1])) for c in cuda))
        if not out or out[-1].key != key:
            out.append(Phase(key, cuda=cuda))
        out[-1].rows.append(row)
    return out


def _span(vals: list[float | None]) -> str:
    got = [v for v in vals if v is not None]
    if not got:
        return "-"
    first, last, top = got[0], got[-1], max(got)
    return (f"{first:.0f}" if first == last == top else
            f"{first:.0f}->{last:.0f} (max {top:.0f})")


def describe(ph: Phase) -> list[str]:
    """A phase's lines: time, memory.used both ways, each process, what none owned."""
    rows, last = ph.rows, ph.rows[-1]
    head = (f"t={rows[0].t_s:8.2f}-{last.t_s:8.2f} s ({len(rows)} rows): memory.used "
            f"{_span([r.used_v2 for r in rows])} MiB (nvidia-smi's, NVML _v2); "
            f"v1 {_span([r.used_v1 for r in rows])}; reserved {_span([r.reserved for r in rows])}")
    out = [head] + [f"  event: {r.event}" for r in rows if r.event]
    peak: dict[int, float] = {}
    info: dict[int, list[Any]] = {}
    for r in rows:
        for p in r.procs:
            info[int(p[0])] = p
            if p[1] is not None:
                peak[int(p[0])] = max(peak.get(int(p[0]), 0.0), float(p[1]))
    for pid, p in sorted(info.items()):
        mib = f"{peak[pid]:.0f} MiB" if pid in peak else "MiB not reported"
        out.append(f"  NVML: {p[2]}[{pid}] {mib}, ppid {p[3]}: {p[4]}")
    if not info:
        out.append("  NVML: no compute process")
    holders = [f"{c[1]}[{c[0]}]{' uvm' if c[3] else ''} ppid {c[2]}" for c in ph.cuda]
    out.append("  libcuda: " + (", ".join(holders) if holders else "no process maps it"))
    listed = {int(p[0]) for p in last.procs}
    unlisted = [f"{c[1]}[{c[0]}]" for c in ph.cuda if int(c[0]) not in listed]
    if unlisted:
        out.append("  maps libcuda, not in NVML's list: " + ", ".join(unlisted))
    charged = sum(float(p[1]) for p in last.procs if p[1] is not None)
    for name, used in (("v2", last.used_v2), ("v1", last.used_v1)):
        if used is not None:
            out.append(f"  at its end, owned by no listed process ({name}): "
                       f"{used - charged:.0f} MiB")
    return out


def summary(rows: list[Row]) -> str:
    if not rows:
        return "no rows\n"
    lines = [f"{len(rows)} rows over {rows[-1].t_s - rows[0].t_s:.1f} s"]
    for ph in phases(rows):
        lines += describe(ph)
    return "\n".join(lines) + "\n"


def _med(vals: list[float]) -> str:
    return f"{statistics.median(vals):.1f}" if vals else "-"


def _vals(rows: list[dict[str, str]], key: str) -> list[float]:
    return [v for r in rows if (v := _num(r.get(key, ""))) is not None]


def _rate(first: dict[str, str], last: dict[str, str], key: str) -> str:
    """A cumulative column's rise a second from `first` to `last` (CPU s a s: cores)."""
    a, b = _num(first.get(key, "")), _num(last.get(key, ""))
    dt = float(last["t_s"]) - float(first["t_s"])
    return "-" if a is None or b is None or dt <= 0 else f"{(b - a) / dt:.2f}"


def _stretches(lines: Iterable[str]) -> list[tuple[str, str, list[dict[str, str]]]]:
    """Consecutive rows of one proof step (full.sh's `step:` events) and one set of GPU
    processes: (step, the processes' names, rows)."""
    out: list[tuple[str, str, list[dict[str, str]]]] = []
    step, key = "(before the first step)", None
    for r in csv.DictReader(lines):
        for part in (r.get("event") or "").split("; "):
            if part.startswith("step: "):
                step = part[len("step: "):]
        procs = json.loads(r.get("procs") or "[]")
        now = (step, frozenset(int(p[0]) for p in procs))
        if now != key:
            out.append((step, ",".join(sorted({str(p[2]) for p in procs})) or "-", []))
            key = now
        out[-1][2].append(r)
    return out


def load_summary(lines: Iterable[str], busy_pct: float = 50.0) -> str:
    """Per stretch of one step and one set of GPU processes (a second or more): its rows and
    how many had the GPU busy (utilisation at least `busy_pct`); over the busy rows the SM
    clock (median, min), power (median) and temperature (max); over the whole stretch, from
    its first row to its last, the CPU cores busy: the GPU's processes, the host, stolen."""
    out = []
    for step, names, rows in _stretches(lines):
        first, last = rows[0], rows[-1]
        dt = float(last["t_s"]) - float(first["t_s"])
        if dt < 1.0:
            continue
        busy = [r for r in rows if (_num(r.get("gpu_util_pct", "")) or 0) >= busy_pct]
        mhz, temp = _vals(busy, "sm_mhz"), _vals(busy, "temp_c")
        rate = {k: _rate(first, last, k) for k in ("procs_cpu_s", "host_busy_s",
                                                   "host_steal_s")}
        out.append(
            f"{step} [{names}] t={float(first['t_s']):.1f}+{dt:.1f} s: {len(rows)} rows, "
            f"{len(busy)} busy; SM clock median {_med(mhz)} MHz (min "
            f"{f'{min(mhz):.0f}' if mhz else '-'}), power median "
            f"{_med(_vals(busy, 'power_w'))} W, temperature max "
            f"{f'{max(temp):.0f}' if temp else '-'} C; CPU cores: GPU processes "
            f"{rate['procs_cpu_s']}, host {rate['host_busy_s']}, stolen {rate['host_steal_s']}")
    return "\n".join(out) + "\n"


# ---- the tracer (needs pynvml and a GPU) ----

def _nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise SystemExit("vram_trace: no pynvml here: pip install nvidia-ml-py (the GPU box "
                         "has it: verify's own dependency)") from None
    try:
        pynvml.nvmlInit()
    except Exception as e:
        raise SystemExit(f"vram_trace: NVML did not start ({e}): no NVIDIA driver or GPU") from e
    return pynvml


def _memory(nv: Any, h: Any) -> tuple[float, float | None, float | None]:
    v1 = nv.nvmlDeviceGetMemoryInfo(h).used / MIB
    try:
        m = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
        return v1, m.used / MIB, m.reserved / MIB
    except Exception:  # no _v2 in this driver or binding
        return v1, None, None


def _load(nv: Any, h: Any, pids: list[int]) -> dict[str, str]:
    """What could slow a decode: the SM clock, power, utilisation and temperature (each ""
    where NVML says nothing), the host's busy and stolen CPU seconds, and the CPU seconds of
    the GPU's processes (cumulative: the rate between two rows is their difference)."""
    def nv_read(f: Any, fmt: str) -> str:
        try:
            return fmt.format(f())
        except Exception:  # not supported by this card, driver or binding
            return ""
    from beekeeper.verify.vram import clock_read  # verify's own read of the clock

    mhz = clock_read(nv, h)[0]
    out = {"sm_mhz": "" if mhz is None else f"{mhz:.0f}",
           "power_w": nv_read(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000, "{:.1f}"),
           "gpu_util_pct": nv_read(lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu, "{}"),
           "temp_c": nv_read(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                             "{}")}
    host = host_cpu_s()
    out["host_busy_s"] = "" if host is None else f"{host[0]:.2f}"
    out["host_steal_s"] = "" if host is None else f"{host[1]:.2f}"
    cpu = [c for c in (proc_cpu_s(p) for p in pids) if c is not None]
    out["procs_cpu_s"] = f"{sum(cpu):.2f}" if cpu else ""
    return out


def _procs(nv: Any, h: Any) -> list[list[Any]]:
    out = []
    for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
        mib = p.usedGpuMemory / MIB if p.usedGpuMemory is not None else None
        out.append([p.pid, mib, *proc_info(p.pid)])
    return sorted(out, key=lambda p: p[0])


def samples(nv: Any, h: Any, hz: float, maps_hz: float, until: float, stop_file: Path | None,
            stopping: list[str]) -> Iterator[dict[str, Any]]:
    t0 = time.monotonic()
    nxt, next_scan = t0, t0
    me = os.getpid()
    while True:
        now = time.monotonic()
        why = ("stop file" if stop_file and stop_file.exists() else
               "duration" if now - t0 >= until else stopping[0] if stopping else "")
        v1, v2, res = _memory(nv, h)
        procs = _procs(nv, h)
        row: dict[str, Any] = {
            "t_unix": f"{time.time():.3f}", "t_s": f"{now - t0:.3f}", "used_v1_mib": f"{v1:.1f}",
            "used_v2_mib": "" if v2 is None else f"{v2:.1f}",
            "reserved_mib": "" if res is None else f"{res:.1f}",
            "procs": json.dumps(procs), "cuda": "", "scan_ms": "",
            **_load(nv, h, [p[0] for p in procs]), "event": f"stop: {why}" if why else ""}
        if now >= next_scan or why:
            s0 = time.monotonic()
            row["cuda"] = json.dumps(cuda_holders(skip=me))
            took = time.monotonic() - s0
            row["scan_ms"] = f"{took * 1e3:.1f}"
            next_scan = s0 + max(1.0 / maps_hz, took / SCAN_SHARE)
        yield row
        if why:
            return
        nxt += 1.0 / hz
        time.sleep(max(0.0, nxt - time.monotonic()))


def _read_step(path: str | None) -> str:
    if not path:
        return ""
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def trace(args: argparse.Namespace) -> int:
    nv = _nvml()
    h = nv.nvmlDeviceGetHandleByIndex(args.device)
    name = nv.nvmlDeviceGetName(h)
    name = name.decode() if isinstance(name, bytes) else name
    drv = nv.nvmlSystemGetDriverVersion()
    drv = drv.decode() if isinstance(drv, bytes) else drv
    total = nv.nvmlDeviceGetMemoryInfo(h).total / MIB
    stopping: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda n, f: stopping.append(f"signal {n}"))
    stop_file = Path(args.stop_file) if args.stop_file else None
    if stop_file is not None and stop_file.exists():
        stop_file.unlink()  # a stop file left from the last run would end this one at once
    n, last_step = 0, ""
    with open(args.out, "w", newline="", buffering=1) as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        for row in samples(nv, h, args.hz, args.maps_hz, args.duration, stop_file, stopping):
            if n == 0:
                row["event"] = (f"start: GPU {args.device} {name}, driver {drv}, "
                                f"{total:.0f} MiB, tracer pid {os.getpid()}")
            step = _read_step(args.step_file)
            if step != last_step:  # the step of the proof now running (full.sh writes it)
                row["event"] = "; ".join(e for e in (row["event"], f"step: {step}") if e)
                last_step = step
            w.writerow(row)
            n += 1
    nv.nvmlShutdown()
    print(f"vram_trace: {n} rows in {args.out}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summary", metavar="CSV", help="print the phases of a trace and exit")
    ap.add_argument("--load", metavar="CSV",
                    help="print each step's clocks, power and CPU rates while the GPU was busy")
    ap.add_argument("--out", help="the CSV to write (trace mode)")
    ap.add_argument("--stop-file", help="stop when this file exists (removed at the start)")
    ap.add_argument("--duration", type=float, default=1800.0, help="stop after S s (1800)")
    ap.add_argument("--hz", type=float, default=10.0, help="NVML samples a second (10)")
    ap.add_argument("--maps-hz", type=float, default=2.0,
                    help="libcuda scans of /proc a second (2; never over 5%% of a core)")
    ap.add_argument("--device", type=int, default=0, help="the GPU's NVML index (0)")
    ap.add_argument("--step-file", help="a file naming the step now running (read each "
                    "sample; a change is an event in the trace)")
    args = ap.parse_args(argv)
    if args.load:
        with open(args.load, newline="") as fh:
            sys.stdout.write(load_summary(fh))
        return 0
    if args.summary:
        with open(args.summary, newline="") as fh:
            sys.stdout.write(summary(read_rows(fh)))
        return 0
    if not args.out:
        ap.error("give --out CSV to trace, or --summary CSV or --load CSV")
    if args.hz <= 0 or args.maps_hz <= 0:
        ap.error("--hz and --maps-hz must be over 0")
    return trace(args)


if __name__ == "__main__":
    sys.exit(main())
