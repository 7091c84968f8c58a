"""tests/gpu/deploy_proof/vram_trace.py: its pure parts (the CSV's summary, the /proc scan on
a folder laid out like /proc) and a whole trace against a fake pynvml, on a machine without
a GPU."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

TRACER = Path(__file__).resolve().parents[1] / "gpu" / "deploy_proof" / "vram_trace.py"
MIB = 2**20


def load(name: str = "vram_trace") -> Any:
    """The tracer as a module (tests/gpu is no package); registered, as dataclasses need."""
    spec = importlib.util.spec_from_file_location(name, TRACER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


vt = load()

SERVER_CMD = "/opt/beekeeper/llama-server/ba1fdce591f5/llama-server --host 127.0.0.1"
BENCH_CMD = "/opt/beekeeper/llama-server/ba1fdce591f5/llama-bench -m /workspace/models/q.gguf"


def row(t: float, v2: float | None, procs: list[list[Any]], cuda: list[list[Any]] | None,
        reserved: float | None = 607.0, event: str = "") -> dict[str, Any]:
    return {"t_unix": f"{1_780_000_000 + t:.3f}", "t_s": f"{t:.3f}",
            "used_v1_mib": "" if v2 is None else f"{v2 + (reserved or 0):.1f}",
            "used_v2_mib": "" if v2 is None else f"{v2:.1f}",
            "reserved_mib": "" if reserved is None else f"{reserved:.1f}",
            "procs": json.dumps(procs), "cuda": "" if cuda is None else json.dumps(cuda),
            "scan_ms": "" if cuda is None else "6.6", "event": event}


def csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, vt.FIELDS)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


SERVER = [8942, 9724.0, "llama-server", 8841, SERVER_CMD]
SERVER_CUDA = [8942, "llama-server", 8841, True]
BENCH = [9900, 9690.0, "llama-bench", 9899, BENCH_CMD]
BENCH_CUDA = [9900, "llama-bench", 9899, True]
AGAIN = [9950, 9724.0, "llama-server", 8841, SERVER_CMD]
AGAIN_CUDA = [9950, "llama-server", 8841, True]

# the engine suite on the H200 as the tracer would see it: the server, the service stopped,
# llama-bench, the server started again; memory.used in nvidia-smi's measure (v2), the
# driver's 607 MiB reserve in v1 only
ENGINE_SUITE = [
    row(0.0, 9733, [SERVER], [SERVER_CUDA], event="start: GPU 0 NVIDIA H200"),
    row(0.1, 9733, [SERVER], None),
    row(0.5, 9733, [SERVER], [SERVER_CUDA]),
    row(0.6, 0, [], None),  # stopped: NVML lists nothing before the next scan
    row(1.0, 0, [], []),
    row(1.5, 9699, [BENCH], [BENCH_CUDA]),
    row(1.6, 9700, [BENCH], None),
    row(2.0, 0, [], []),
    row(2.5, 9733, [AGAIN], [AGAIN_CUDA]),
    row(2.6, 9747, [[9950, 9738.0, "llama-server", 8841, SERVER_CMD]], None,
        event="stop: stop file"),
]


def test_the_summary_gives_one_block_per_set_of_gpu_processes() -> None:
    rows = vt.read_rows(io.StringIO(csv_text(ENGINE_SUITE)))
    phases = vt.phases(rows)
    # server | stopped (NVML empty, scan not yet) | stopped | bench | stopped | server again
    assert [len(p.rows) for p in phases] == [3, 1, 1, 2, 1, 2]
    assert phases[1].key == (frozenset(), frozenset({(8942, "llama-server")}))
    text = vt.summary(rows)
    assert text.startswith("10 rows over 2.6 s")
    assert "NVML: llama-bench[9900] 9690 MiB, ppid 9899: " + BENCH_CMD in text
    assert "libcuda: llama-server[9950] uvm ppid 8841" in text
    assert "event: stop: stop file" in text and "event: start: GPU 0 NVIDIA H200" in text
    last = text.split("t=")[-1]
    assert "memory.used 9733->9747 (max 9747) MiB" in last and "reserved 607" in last
    # the restarted server owns all of memory.used but 9 MiB; v1 adds the reserve
    assert "owned by no listed process (v2): 9 MiB" in last
    assert "owned by no listed process (v1): 616 MiB" in last


def test_a_process_mapping_libcuda_that_nvml_does_not_list_is_named() -> None:
    hidden = [4242, "python3", 4000, True]
    rows = vt.read_rows(io.StringIO(csv_text([
        row(0.0, 10340, [SERVER], [SERVER_CUDA, hidden]),
        row(0.1, 10340, [SERVER], None)])))
    [phase] = vt.phases(rows)
    text = "\n".join(vt.describe(phase))
    assert "maps libcuda, not in NVML's list: python3[4242]" in text
    assert "owned by no listed process (v2): 616 MiB" in text


def test_a_trace_without_v2_or_per_process_memory_still_summarises() -> None:
    rows = vt.read_rows(io.StringIO(csv_text([
        row(0.0, None, [[77, None, "llama-server", 1, ""]], [], reserved=None)])))
    rows[0].used_v1 = 10340.0
    text = vt.summary(rows)
    assert "memory.used - MiB" in text and "v1 10340" in text
    assert "llama-server[77] MiB not reported" in text
    assert "owned by no listed process (v1): 10340 MiB" in text
    assert vt.summary([]) == "no rows\n"


def fake_proc(root: Path) -> None:
    """pid 10 maps libcuda and holds /dev/nvidia-uvm, 11 maps only NVML's library, 12 is gone
    before its maps are read (no maps file), 13 is the tracer (skipped)."""
    for pid, maps in ((10, "7f00 r-xp /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n"),
                      (11, "7f00 r-xp /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"),
                      (12, None), (13, "7f00 r-xp /usr/lib/libcuda.so.1\n")):
        d = root / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "comm").write_text("llama-bench\n" if pid == 10 else "nvidia-smi\n")
        (d / "stat").write_text(f"{pid} (a (b) c) S 9 {pid} {pid} 0 -1\n")
        (d / "cmdline").write_bytes(b"/opt/x/llama-bench\0-m\0/m.gguf\0")
        if maps is not None:
            (d / "maps").write_text(maps)
    os.symlink("/dev/nvidia-uvm", root / "10" / "fd" / "5")
    os.symlink("/dev/nvidiactl", root / "11" / "fd" / "3")
    (root / "self").mkdir()


def test_the_libcuda_scan_reads_maps_comm_ppid_and_the_uvm_fd(tmp_path: Path) -> None:
    fake_proc(tmp_path)
    assert vt.cuda_holders(str(tmp_path), skip=13) == [[10, "llama-bench", 9, True]]
    assert vt.proc_info(10, str(tmp_path)) == ("llama-bench", 9, "/opt/x/llama-bench -m /m.gguf")
    assert vt.proc_info(99, str(tmp_path)) == ("?", None, "")


def test_it_imports_without_pynvml_and_says_so_when_asked_to_trace(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    monkeypatch.setitem(sys.modules, "vram_trace_bare", None)
    mod = load("vram_trace_bare")
    with pytest.raises(SystemExit, match="no pynvml here: pip install nvidia-ml-py"):
        mod.main(["--out", str(tmp_path / "t.csv")])


def fake_pynvml(gpu_pid: int | None = None) -> types.ModuleType:
    nv: Any = types.ModuleType("pynvml")
    nv.nvmlMemory_v2 = 0x02000028
    nv.nvmlInit = nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nv.nvmlSystemGetDriverVersion = lambda: "580.159.04"

    def memory(h: int, version: int | None = None) -> Any:
        if version is None:
            return types.SimpleNamespace(total=143_771 * MIB, used=10_340 * MIB)
        return types.SimpleNamespace(total=143_771 * MIB, used=9_733 * MIB, reserved=607 * MIB)

    nv.nvmlDeviceGetMemoryInfo = memory
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: [
        types.SimpleNamespace(pid=gpu_pid or os.getpid(), usedGpuMemory=9_724 * MIB)]
    nv.NVML_CLOCK_SM, nv.NVML_TEMPERATURE_GPU = 1, 0
    nv.nvmlDeviceGetClockInfo = lambda h, kind: 1980 if kind == 1 else 0
    nv.nvmlDeviceGetPowerUsage = lambda h: 412_345  # mW

    def not_supported(h: int) -> Any:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    nv.nvmlDeviceGetUtilizationRates = not_supported
    nv.nvmlDeviceGetTemperature = lambda h, sensor: 51
    return nv


def test_a_whole_trace_against_a_fake_nvml_stops_on_its_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # the GPU's one process: an idle child (its CPU time about 0), not this busy process
    child = subprocess.Popen(["sleep", "30"])
    try:
        monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(child.pid))
        out, stop = tmp_path / "trace.csv", tmp_path / "stop"
        stop.write_text("")  # left from an earlier run: removed at the start, not obeyed
        assert vt.main(["--out", str(out), "--stop-file", str(stop), "--duration", "0.3",
                        "--hz", "20"]) == 0
    finally:
        child.kill()
        child.wait()
    rows = vt.read_rows(out.open(newline=""))
    assert 3 <= len(rows) <= 10 and rows[0].event.startswith("start: GPU 0 NVIDIA H200")
    assert rows[-1].event == "stop: duration" and rows[0].cuda is not None
    assert (rows[0].used_v1, rows[0].used_v2, rows[0].reserved) == (10_340, 9_733, 607)
    assert rows[0].procs[0][:3] == [child.pid, 9_724, "sleep"]
    with out.open(newline="") as fh:
        raw = list(csv.DictReader(fh))
    # the load beside the memory: a reading NVML refuses is left empty, the rest written;
    # the listed process's CPU time (not the tracer's own) and the host's, which only grow
    assert (raw[0]["sm_mhz"], raw[0]["power_w"], raw[0]["gpu_util_pct"],
            raw[0]["temp_c"]) == ("1980", "412.3", "", "51")
    own = sum(os.times()[:2])
    assert float(raw[-1]["procs_cpu_s"]) < 0.1 < own
    for key in ("host_busy_s", "host_steal_s", "procs_cpu_s"):
        assert 0 <= float(raw[0][key]) <= float(raw[-1][key]), key
    capsys.readouterr()
    assert vt.main(["--summary", str(out)]) == 0
    assert "owned by no listed process (v2): 9 MiB" in capsys.readouterr().out


def test_cpu_seconds_come_from_proc_stat_fields_user_system_and_steal(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 5 50 1000 20 3 2 7 40 1\ncpu0 1 2 3 4\n")
    (tmp_path / "42").mkdir()
    # comm with a space and a parenthesis: fields are counted after the last ")"
    (tmp_path / "42" / "stat").write_text(
        "42 (llama (x) srv) S 1 42 42 0 -1 4194560 1 0 0 0 250 30 0 0 20 0 9 0 77\n")
    busy, steal = vt.host_cpu_s(str(tmp_path))
    assert (round(busy / vt.TICK_S), round(steal / vt.TICK_S)) == (160, 7)
    assert round(vt.proc_cpu_s(42, str(tmp_path)) / vt.TICK_S) == 280
    assert vt.proc_cpu_s(43, str(tmp_path)) is None


def test_the_load_summary_splits_each_step_by_its_gpu_processes() -> None:
    head = ",".join(vt.FIELDS)
    bench = json.dumps([[7, 9000.0, "llama-bench", 1, ""]])
    server = json.dumps([[8, 9700.0, "llama-server", 1, ""]])

    def row(t: float, procs: str, util: str, mhz: str, cpu: float, busy: float,
            event: str = "", temp: str = "50") -> str:
        values = {"t_unix": f"{1e9 + t}", "t_s": f"{t}", "procs": procs, "sm_mhz": mhz,
                  "power_w": "400.0", "gpu_util_pct": util, "temp_c": temp,
                  "procs_cpu_s": f"{cpu}", "host_busy_s": f"{busy}", "host_steal_s": "0",
                  "event": event}
        buf = io.StringIO()
        csv.writer(buf).writerow([values.get(f, "") for f in vt.FIELDS])
        return buf.getvalue().strip()

    lines = [head, row(0, bench, "0", "345", 0, 0, "step: verify1", temp="71"),
             row(1, bench, "100", "1980", 8, 8), row(2, bench, "100", "1755", 16, 16),
             row(3, server, "100", "1980", 30, 31), row(4, server, "100", "1980", 31, 32.5),
             row(5, server, "0", "345", 32, 34), row(5.5, server, "0", "", 32, 34.5,
                                                     "step: crash", temp=""),
             row(7, server, "0", "", 33, 35)]
    out = vt.load_summary(lines).splitlines()
    # llama-bench and the server in one step are two stretches: their CPU rates differ 8-fold
    assert out[0] == ("verify1 [llama-bench] t=0.0+2.0 s: 3 rows, 2 busy; SM clock median "
                      "1867.5 MHz (min 1755), power median 400.0 W, temperature max 50 C; "
                      "CPU cores: GPU processes 8.00, host 8.00, stolen 0.00")
    assert out[1].startswith("verify1 [llama-server] t=3.0+2.0 s: 3 rows, 2 busy; SM clock "
                             "median 1980.0") and "GPU processes 1.00, host 1.50" in out[1]
    assert out[2].startswith("crash [llama-server] t=5.5+1.5 s: 2 rows, 0 busy; SM clock "
                             "median - MHz (min -), power median - W, temperature max - C")
