"""
The engine baseline: `llama-bench` of the server's own build, run on its host with the
profile's model, KV types, flash attention, GPU layers and the suite's depths (decode: `-p 0
-n <out> -d <d>`, the depth restored before the timer starts; prefill: `-p <n> -n 0`). The
served figures are judged against it (docs/verify.md), so a verdict holds on any card.

A server the kit deployed (`deployed_engine`) is stopped while it runs, through its runtime
(core/runtime.py: the unit owns the server in both container runtimes, so a compose project
is never left half-down), unless `--engine-gpu N` names a GPU it does not use. A server
started by hand (`user_engine`) is never stopped (verify could not start it again with the
user's arguments): llama-bench runs beside it, which is sound while nothing else uses it, as
an idle llama-server waits on a condition variable and runs no kernel; on a card too small
for two copies of the model llama-bench fails out of memory, and the engine check says so.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
import statistics
import subprocess
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from beekeeper.core.container import confined, model_path
from beekeeper.core.deployed import DeployedService, RecordError
from beekeeper.core.errors import VerifyError
from beekeeper.core.paths import ServicePaths
from beekeeper.core.profiles import Profile
from beekeeper.core.remote import NEEDS_ROOT_EXIT, as_root, ssh_as_root
from beekeeper.core.runtime import recorded_runtime

from .settle import SETTLE_BUDGET_S, SNAPSHOT_SH, HostLoad, Round, Rule, parse_snapshots, settle

BENCH_REPS = 3
BENCH_TIMEOUT_S = 3600
# WSL2 keeps nvidia-smi here, on the PATH of an interactive login only: root through sudo
# (secure_path) and SSH sessions lack it (microsoft/WSL#8794); a distro's own comes first
WSL_LIB = "/usr/lib/wsl/lib"


class EngineError(VerifyError):
    """The engine baseline could not be measured (the checks that need it say why)."""


class EngineFailed(EngineError):
    """llama-bench ran and failed on the served model (an exit, no JSON), or the server did
    not start again after it: a failure of the engine or server, not of verify's set-up."""


class Shell(Protocol):
    label: str

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]: ...


@dataclass
class LocalShell:
    """This machine is the host (`verify --on-host`, or a server on this box). `root`: run
    as root (through `sudo -n` for a login that is not root), as systemctl and the kit's
    Docker need; a hand-started server's llama-bench runs as the user."""

    label: str = "this machine"
    root: bool = False

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        cmd = as_root(f"bash -c {shlex.quote(script)}") if self.root else script
        return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                              timeout=timeout_s)


@dataclass
class SshShell:
    """The host over ssh (the sandbox, or `--ssh ARGS`); as root unless `root` is False."""

    ssh: list[str]
    label: str = "ssh host"
    root: bool = True

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        line = f"bash -c {shlex.quote(script)}"
        argv = ssh_as_root(self.ssh, line) if self.root else ["ssh", *self.ssh, line]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)


def read_deployed(shell: Shell, service: str = "llm") -> DeployedService:
    path = ServicePaths(service).manifest
    p = shell.run(f"cat {shlex.quote(path)}", timeout_s=30)
    if p.returncode == NEEDS_ROOT_EXIT:
        raise EngineError(p.stderr.strip()[:300])
    if p.returncode != 0:
        raise EngineError(f"no {path} on {shell.label}: deploy with the kit first, or "
                          "for a server you started give --llama-bench and --model "
                          f"({p.stderr.strip()[:200]})")
    try:
        dep = DeployedService.from_json(p.stdout, f"{path} on {shell.label}")
    except RecordError as e:
        if e.key is not None:  # one line: the record, the key, the fix
            raise EngineError(str(e)) from None
        raise EngineError(f"{path} on {shell.label} cannot be read ({e.detail}): deploy with "
                          "the kit again") from None
    missing = [k for k in ("unit", "image", "model_path") if not getattr(dep, k)]
    if missing:
        raise EngineError(f"{path} on {shell.label} names no {', '.join(missing)}: deploy "
                          "with the kit again")
    try:
        recorded_runtime(dep)
    except ValueError:
        raise EngineError(f"{path} on {shell.label} names mode {dep.mode!r} with runtime "
                          f"{dep.runtime!r}, which is no way the kit runs a server: deploy "
                          "with the kit again") from None
    return dep


@dataclass(frozen=True)
class BenchTest:
    """One llama-bench test (one line of its `-o json` array), units in the names."""

    n_prompt: int
    n_gen: int
    n_depth: int
    avg_tok_s: float
    stddev_tok_s: float
    avg_s: float
    samples_s: list[float]
    n_threads: int
    type_k: str
    type_v: str
    n_gpu_layers: int
    flash_attn: str
    backends: str
    gpu_info: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BenchTest:
        return cls(n_prompt=int(d["n_prompt"]), n_gen=int(d["n_gen"]),
                   n_depth=int(d.get("n_depth", 0)), avg_tok_s=float(d["avg_ts"]),
                   stddev_tok_s=float(d.get("stddev_ts", 0.0)),
                   avg_s=int(d["avg_ns"]) / 1e9,
                   samples_s=[int(x) / 1e9 for x in d.get("samples_ns", [])],
                   n_threads=int(d.get("n_threads", 0)), type_k=str(d.get("type_k", "")),
                   type_v=str(d.get("type_v", "")),
                   n_gpu_layers=int(d.get("n_gpu_layers", 0)),
                   flash_attn=str(d.get("flash_attn", "")), backends=str(d.get("backends", "")),
                   gpu_info=str(d.get("gpu_info", "")))


def parse_bench_json(text: str) -> list[BenchTest]:
    """llama-bench `-o json` stdout: one JSON array of tests."""
    start = text.find("[")
    if start < 0:
        raise EngineFailed(f"llama-bench printed no JSON: {text[-300:]!r}")
    try:
        return [BenchTest.from_json(d) for d in json.loads(text[start:])]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise EngineFailed(f"llama-bench JSON not understood ({e}): {text[-300:]!r}") from e


@dataclass
class EngineBaseline:
    """What the engine reaches on this host: decode by depth and prefill at the TTFT length."""

    placement: str
    commands: list[list[str]]
    decode: list[BenchTest] = field(default_factory=list)
    prefill: BenchTest | None = None
    idle_used_mib: float | None = None  # card memory with the service stopped (GPU hosts)
    wall_s: float | None = None
    gpu_name: str | None = None  # the card where the server runs (its host's nvidia-smi)
    # each test's repeats (verify/settle.py), by "decode@<depth>" / "prefill@<tokens>"
    settle: dict[str, dict[str, Any]] = field(default_factory=dict)

    def decode_tok_s_at(self, depth_tokens: int) -> float | None:
        """The engine's decode rate at this depth (the nearest measured depth)."""
        best = min(self.decode, key=lambda t: abs(t.n_depth - depth_tokens), default=None)
        return best.avg_tok_s if best else None

    @property
    def prefill_s(self) -> float | None:
        return self.prefill.avg_s if self.prefill else None

    def ttft_s(self, prompt_tokens: int) -> float | None:
        """Engine prefill time of the prompt plus its first generated token (one decode step
        at that depth: 1 / decode rate)."""
        rate = self.decode_tok_s_at(prompt_tokens)
        return self.prefill.avg_s + 1.0 / rate if self.prefill is not None and rate else None


def llama_bench_fa(server_value: str) -> str:
    """llama-server's `-fa on|off|auto` as llama-bench reads it: `1` or `0`.

    beellama's llama-bench at the pinned commit reads `-fa` through `string_split<bool>`
    (common/common.h: `istringstream >> bool` without boolalpha), so `on` reads as false
    (on an H200: "flash_attn": false; `-fa 1`: true); upstream's takes 1|0 too (common/arg.cpp
    is_truthy). `auto` is `1`: every build the kit makes has the kernel for its KV types.
    """
    mapping = {"on": "1", "auto": "1", "off": "0"}
    if server_value not in mapping:
        raise ValueError(f"flash_attn {server_value!r}: expected one of {sorted(mapping)}")
    return mapping[server_value]


def bench_commands(profile: Profile, model_path: str, *, depths_tokens: list[int],
                   out_tokens: int, prompt_tokens: int | None, reps: int = BENCH_REPS
                   ) -> list[list[str]]:
    """llama-bench arguments (without the binary): decode at every depth, then prefill.
    Threads, and batch sizes the profile does not set, are left at the defaults llama-bench
    shares with llama-server (common_cpu_get_num_math(), -b 2048, -ub 512)."""
    s = profile.server
    common = ["-m", model_path, *s.shared_flags(llama_bench_fa(s.flash_attn)),
              "-r", str(reps), "-o", "json"]
    out = [[*common, "-p", "0", "-n", str(out_tokens),
            "-d", ",".join(str(d) for d in depths_tokens)]]
    if prompt_tokens:
        out.append([*common, "-p", str(prompt_tokens), "-n", "0", "-d", "0"])
    return out


def _bench_at(bench: str, image: str | None, model: str, profile: Profile,
              engine_gpu: str | None) -> tuple[list[str], str, str]:
    """llama-bench `bench` on the host, or in `image` with the unit's container settings and
    the model's folder mounted: (its command lines' prefix, `model` as it sees it, a script
    that exits 0 when `bench` is there)."""
    if image is None:
        env = ["env", f"CUDA_VISIBLE_DEVICES={engine_gpu}"] if engine_gpu else []
        return [*env, bench], model, f"test -x {shlex.quote(bench)}"
    gpus = (None if profile.backend != "cuda" else
            f"device={engine_gpu}" if engine_gpu and engine_gpu != "all" else "all")
    out = ["docker", "run", "--rm",
           *[w for line in confined(posixpath.dirname(model), gpus) for w in line]]
    return ([*out, "--entrypoint", bench, image], model_path(posixpath.basename(model)),
            f"docker run --rm --entrypoint /bin/sh {shlex.quote(image)} -c "
            f"{shlex.quote('test -x ' + shlex.quote(bench))}")


@dataclass(frozen=True)
class Engine:
    """Where llama-bench runs and how the server gets out of its way: `prefix` + a
    bench_commands line is a command line in `shell`; `stop`/`start` are scripts there
    (None: the server keeps running, `placement` says so)."""

    shell: Shell
    prefix: list[str]
    model_arg: str
    check: str  # a script that exits 0 when llama-bench is there
    missing: str  # what to say when it is not
    placement: str
    stop: str | None = None
    start: str | None = None
    log_hint: str | None = None  # where the server's log is, said when it does not start


def deployed_engine(shell: Shell, profile: Profile, engine_gpu: str | None = None,
                    service: str = "llm") -> Engine:
    """The kit's service on `shell`'s host: llama-bench of the same build, the service
    stopped and started again through its runtime (core/runtime.py, Runtime.tell)."""
    dep = read_deployed(shell, service)
    rt = recorded_runtime(dep)
    server, image = rt.server_at(dep.image)
    bench = posixpath.join(posixpath.dirname(server), "llama-bench")
    prefix, model, check = _bench_at(bench, image, dep.model_path, profile, engine_gpu)
    owner = f"{dep.unit} ({dep.runtime or dep.mode})"
    stop = engine_gpu is None
    return Engine(
        shell=shell, prefix=prefix, model_arg=model, check=check,
        missing=f"no llama-bench beside the server in {dep.image} on {shell.label}: deploy "
                "again (the kit builds both)",
        placement=(f"{owner} stopped while llama-bench ran (started again after)" if stop
                   else f"GPU {engine_gpu}, not used by {dep.unit}, which kept running"),
        stop=rt.tell(dep.unit, "stop") if stop else None,
        start=rt.tell(dep.unit, "start") if stop else None,
        log_hint=rt.log_said(ServicePaths(dep.service)))


def user_engine(shell: Shell, profile: Profile, model: str, *, llama_bench: str | None,
                image: str | None = None, engine_gpu: str | None = None) -> Engine:
    """A server started by hand: its llama-bench (a binary, or inside `image`), run beside
    it or on `engine_gpu`; never stopped (module docstring)."""
    where = (f"GPU {engine_gpu}, beside the running server" if engine_gpu else
             "beside the running server, which verify did not start and did not stop (it was "
             "idle meanwhile: run nothing else against it while verify runs)")
    if not (image or llama_bench):
        raise EngineError("a server started by hand needs --llama-bench PATH (or "
                          "--engine-image IMAGE) for its engine baseline")
    binary = llama_bench or "/usr/local/bin/llama-bench"
    prefix, model_arg, check = _bench_at(binary, image or None, model, profile, engine_gpu)
    if image:
        return Engine(shell=shell, prefix=prefix, model_arg=model_arg, check=check,
                      missing=f"no {binary} in the image {image} on {shell.label}",
                      placement=f"{where}; llama-bench in {image}")
    return Engine(shell=shell, prefix=prefix, model_arg=model_arg,
                  check=f"{check} && test -r {shlex.quote(model)}",
                  missing=f"{llama_bench} is not an executable or {model} is not readable on "
                          f"{shell.label}",
                  placement=f"{where}; {llama_bench}")


def host_gpus(shell: Shell) -> list[tuple[str, float]]:
    """(name, memory.used MiB) of every GPU where `shell` runs, by index; [] without one."""
    try:
        q = shell.run(f'PATH="$PATH:{WSL_LIB}" nvidia-smi --query-gpu=name,memory.used '
                      "--format=csv,noheader,nounits",
                      timeout_s=60)
    except (OSError, subprocess.SubprocessError):
        return []
    out = []
    for line in q.stdout.splitlines() if q.returncode == 0 else []:
        name, _, used = line.rpartition(",")
        try:
            out.append((name.strip(), float(used)))
        except ValueError:
            continue
    return out


# llama-bench run by a shell that reads the host's CPU counters just before and after it and
# then prints its own CPU time (POSIX `times`: the shell's, then its children's), so the
# host's load over the run leaves llama-bench's own out (and, in a container, docker's start)
TIMED = (f'{{ {SNAPSHOT_SH}; }} >&2; "$0" "$@"; rc=$?; {{ {SNAPSHOT_SH}; }} >&2; '
         'echo beekeeper-cpu >&2; times >&2; exit $rc')
_TIMES_RE = re.compile(r"^beekeeper-cpu\n[^\n]*\n(\d+)m([\d.]+)s (\d+)m([\d.]+)s", re.M)


def timed(prefix: list[str]) -> list[str]:
    """`prefix` (a docker run ending `--entrypoint BINARY IMAGE`, or a native `[env...]
    BINARY`) with the binary run by `sh -c TIMED`."""
    if "--entrypoint" in prefix:
        i = prefix.index("--entrypoint")
        return [*prefix[:i], "--entrypoint", "/bin/sh", prefix[i + 2], "-c", TIMED,
                prefix[i + 1]]
    return [*prefix[:-1], "sh", "-c", TIMED, prefix[-1]]


def bench_cpu_s(stderr: str) -> float | None:
    """llama-bench's user + system CPU time, as its shell's `times` printed it."""
    m = _TIMES_RE.search(stderr or "")
    if not m:
        return None
    a, b, c, d = m.groups()
    return int(a) * 60 + float(b) + int(c) * 60 + float(d)


def _bench_once(engine: Engine, args: list[str]
                ) -> tuple[list[BenchTest], float, HostLoad | None]:
    """One llama-bench invocation: its tests, its wall time, the host's other load."""
    line = shlex.join([*timed(engine.prefix), *args])
    t0 = time.monotonic()
    p = engine.shell.run(line, timeout_s=BENCH_TIMEOUT_S)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise EngineFailed(f"llama-bench exit {p.returncode}: "
                              f"{(p.stderr or p.stdout).strip()[-400:]}")
    snaps, cpu = parse_snapshots(p.stderr), bench_cpu_s(p.stderr)
    load = (HostLoad.between(snaps[0], snaps[-1], cpu)
            if len(snaps) >= 2 and cpu is not None else None)
    return parse_bench_json(p.stdout), wall, load


def bench_key(t: BenchTest) -> str:
    """How a test is named in EngineBaseline.settle and the checks."""
    return f"prefill@{t.n_prompt}" if t.n_gen == 0 else f"decode@{t.n_depth}"


def _rates(t: BenchTest) -> list[float]:
    n = t.n_gen or t.n_prompt
    return [n / s for s in t.samples_s if s > 0]


def pooled(t: BenchTest, rates: list[float]) -> BenchTest:
    """`t` with its figure from these repeats (tok/s each): llama-bench's avg_ts (the mean
    of each repeat's rate), its stddev_ts, avg_ns and samples_ns."""
    if not rates:
        return t
    n = t.n_gen or t.n_prompt
    samples = [n / r for r in rates]
    return replace(t, avg_tok_s=statistics.mean(rates),
                   stddev_tok_s=statistics.stdev(rates) if len(rates) > 1 else 0.0,
                   avg_s=statistics.mean(samples), samples_s=samples)


def _run_bench(engine: Engine, args: list[list[str]], base: EngineBaseline,
               rule: Rule | None) -> None:
    """Every command once (the first round of every test), then, with a `rule`, more rounds
    of each test whose figure has not settled (verify/settle.py); the figures pooled."""
    firsts: list[tuple[BenchTest, Round]] = []
    for a in args:
        tests, wall, load = _bench_once(engine, a)
        for t in tests:
            firsts.append((t, Round(_rates(t), wall / max(len(tests), 1), load)))
    common = args[0][:args[0].index("-p")]  # bench_commands' arguments before -p, -n, -d
    for t, first in firsts:
        if rule is not None and len(first.samples) >= 2:

            def again(k: int, t: BenchTest = t) -> Round:  # `t` alone, `k` repeats
                one = [*common, "-p", str(t.n_prompt), "-n", str(t.n_gen), "-d", str(t.n_depth)]
                one[one.index("-r") + 1] = str(k)
                tests, wall, load = _bench_once(engine, one)
                mine = [x for x in tests if bench_key(x) == bench_key(t)]
                return Round(_rates(mine[0]) if mine else [], wall, load)

            got = settle(again, rule, first=first)
            base.settle[bench_key(t)] = got.to_json()
            t = pooled(t, got.figure_samples)
        if t.n_gen > 0:
            base.decode.append(t)
        elif t.n_prompt > 0:
            base.prefill = t


def measure(engine: Engine, profile: Profile, *, depths_tokens: list[int], out_tokens: int,
            prompt_tokens: int | None, wait_ready: Any = None, limit: float | None = None,
            budget_s: float = SETTLE_BUDGET_S) -> EngineBaseline:
    """Run llama-bench where the server runs, stopping and restarting the server when
    `engine` says so (`wait_ready()` after it is started again). `limit`: the error each
    test's figure must get under, with more repeats for at most `budget_s` a test
    (verify/settle.py); None: BENCH_REPS once."""
    args = bench_commands(profile, engine.model_arg, depths_tokens=depths_tokens,
                          out_tokens=out_tokens, prompt_tokens=prompt_tokens)
    cmds = [[*engine.prefix, *a] for a in args]
    rule = Rule(BENCH_REPS, limit, budget_s) if limit is not None else None
    if engine.shell.run(engine.check, timeout_s=120).returncode != 0:
        raise EngineError(engine.missing)
    base = EngineBaseline(placement=engine.placement, commands=cmds)
    t0 = time.monotonic()
    if engine.stop:
        p = engine.shell.run(engine.stop, timeout_s=120)
        if p.returncode != 0:
            raise EngineError(f"could not stop the server ({engine.stop}): "
                              f"{p.stderr.strip()[:300]}")
    try:
        gpus = host_gpus(engine.shell) if profile.backend == "cuda" else []
        if gpus:
            base.gpu_name = gpus[0][0]
            if engine.stop:  # the card with the server stopped: the VRAM check's idle
                base.idle_used_mib = gpus[0][1]
        _run_bench(engine, args, base, rule)
    finally:
        started = None
        if engine.start:
            started = engine.shell.run(engine.start, timeout_s=120)
            if started.returncode == 0 and wait_ready is not None:
                wait_ready()
    if started is not None and started.returncode != 0:
        said = (started.stderr or started.stdout).strip()[:300]
        raise EngineFailed(f"could not start the server again ({engine.start}, exit "
                          f"{started.returncode}): {said}"
                          + (f"; its log: {engine.log_hint}" if engine.log_hint else ""))
    base.wall_s = time.monotonic() - t0
    return base
