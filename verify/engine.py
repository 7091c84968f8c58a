"""
The engine baseline: `llama-bench`, built beside `llama-server` from the same cmake build, run
on the same host with the profile's model, KV types, flash attention, GPU layers and the
suite's context depths. The served figures are judged against it (verify/judge.py), so a
verdict holds on any card without a table of cards.

- decode at depth d: `llama-bench -p 0 -n <out> -d <d>` (tg test: the depth is prefilled and
  restored before the timer starts, so only the n generated tokens are timed)
- prefill at the TTFT length: `llama-bench -p <n> -n 0 -d 0` (pp test)

The service is stopped while it runs (the server would share the cores or the GPU), unless
a GPU the service does not use is named (`--engine-gpu N`); the report says which.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from beekeeper.core.errors import VerifyError
from beekeeper.core.paths import ServicePaths
from beekeeper.core.profiles import Profile
from beekeeper.core.remote import NEEDS_ROOT_EXIT, ssh_as_root

BENCH_REPS = 3


class EngineError(VerifyError):
    """The engine baseline could not be measured (the checks that need it say why)."""


class EngineNotInstalled(EngineError):
    """No llama-bench beside the deployed server (a deploy from before it was built)."""


class EngineRunFailed(EngineError):
    """llama-bench ran and failed, or printed no JSON."""


class Shell(Protocol):
    """Runs a bash script on the host that serves the model."""

    label: str

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]: ...


@dataclass
class LocalShell:
    """This machine is the host (`verify --on-host`, or a server on this box)."""

    label: str = "this machine"

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              timeout=timeout_s)


@dataclass
class SshShell:
    """The host over ssh (the sandbox, or `--ssh ARGS`)."""

    ssh: list[str]
    label: str = "ssh host"

    def run(self, script: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(ssh_as_root(self.ssh, f"bash -c {shlex.quote(script)}"),
                              capture_output=True, text=True, timeout=timeout_s)


@dataclass(frozen=True)
class Deployed:
    """What the kit deployed on the host (its manifest, ServicePaths.manifest)."""

    service: str
    unit: str
    mode: str  # "container" | "native"
    image: str  # the image tag, or in native mode the server binary
    model_path: str

    @classmethod
    def read(cls, shell: Shell, service: str = "llm") -> Deployed:
        path = ServicePaths(service).manifest
        p = shell.run(f"cat {shlex.quote(path)}", timeout_s=30)
        if p.returncode == NEEDS_ROOT_EXIT:
            raise EngineError(p.stderr.strip()[:300])
        if p.returncode != 0:
            raise EngineError(f"no {path} on {shell.label}: deploy with the kit first "
                              f"({p.stderr.strip()[:200]})")
        d = json.loads(p.stdout)
        return cls(service=d["service"], unit=d["unit"], mode=d.get("mode", "container"),
                   image=d["image"], model_path=d["model_path"])


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
        raise EngineRunFailed(f"llama-bench printed no JSON: {text[-300:]!r}")
    try:
        return [BenchTest.from_json(d) for d in json.loads(text[start:])]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise EngineRunFailed(f"llama-bench JSON not understood ({e}): {text[-300:]!r}") from e


@dataclass
class EngineBaseline:
    """What the engine reaches on this host: decode by depth and prefill at the TTFT length."""

    placement: str  # where it ran, said in the report
    commands: list[list[str]]
    decode: list[BenchTest] = field(default_factory=list)
    prefill: BenchTest | None = None
    idle_used_mib: float | None = None  # card memory with the service stopped (GPU hosts)
    wall_s: float | None = None

    def decode_tok_s_at(self, depth_tokens: int) -> float | None:
        """The engine's decode rate at this depth (the nearest measured depth)."""
        if not self.decode:
            return None
        best = min(self.decode, key=lambda t: abs(t.n_depth - depth_tokens))
        return best.avg_tok_s

    @property
    def prefill_s(self) -> float | None:
        return self.prefill.avg_s if self.prefill else None

    def first_token_s(self, depth_tokens: int) -> float | None:
        """One decode step after the prefill: 1 / decode rate at that depth."""
        rate = self.decode_tok_s_at(depth_tokens)
        return 1.0 / rate if rate else None

    def ttft_s(self, prompt_tokens: int) -> float | None:
        """Engine prefill time of the prompt plus its first generated token."""
        first = self.first_token_s(prompt_tokens)
        return (self.prefill.avg_s + first
                if self.prefill is not None and first is not None else None)


def bench_commands(profile: Profile, model_path: str, *, depths_tokens: list[int],
                   out_tokens: int, prompt_tokens: int | None, reps: int = BENCH_REPS
                   ) -> list[list[str]]:
    """llama-bench arguments (without the binary): decode at every depth, then prefill.

    Threads are left at llama-bench's default, which is llama-server's
    (common_cpu_get_num_math()); batch and ubatch are the profile's, or when it sets none
    the defaults the two share (-b 2048, -ub 512), so a baseline is the engine as the
    profile serves it.
    """
    s = profile.server
    common = ["-m", model_path, "-ctk", s.cache_type_k, "-ctv", s.cache_type_v,
              "-fa", s.flash_attn, "-ngl", str(s.n_gpu_layers), "-r", str(reps), "-o", "json"]
    if s.batch_size is not None:
        common += ["-b", str(s.batch_size)]
    if s.ubatch_size is not None:
        common += ["-ub", str(s.ubatch_size)]
    out = [[*common, "-p", "0", "-n", str(out_tokens),
            "-d", ",".join(str(d) for d in depths_tokens)]]
    if prompt_tokens:
        out.append([*common, "-p", str(prompt_tokens), "-n", "0", "-d", "0"])
    return out


def _docker_prefix(dep: Deployed, gpu: str | None) -> list[str]:
    """The unit's container settings (model mount, read-only root, dropped capabilities)."""
    model_dir = posixpath.dirname(dep.model_path)
    out = ["docker", "run", "--rm", "--init", "--volume", f"{model_dir}:/models:ro",
           "--read-only", "--tmpfs", "/tmp",  # noqa: S108 (the unit's own tmpfs) "--security-opt", "no-new-privileges",
           "--cap-drop", "ALL"]
    if gpu is not None:
        out += ["--gpus", "all" if gpu == "all" else f"device={gpu}"]
    return [*out, "--entrypoint", "/usr/local/bin/llama-bench", dep.image]


def host_commands(dep: Deployed, profile: Profile, args: list[list[str]],
                  gpu: str | None) -> list[list[str]]:
    """Full command lines on the host: inside the image, or the installed binary."""
    if dep.mode == "native":
        binary = posixpath.join(posixpath.dirname(dep.image), "llama-bench")
        return [[binary, *a] for a in args]
    return [[*_docker_prefix(dep, gpu), *a] for a in args]


def _model_arg(dep: Deployed) -> str:
    if dep.mode == "native":
        return dep.model_path
    return "/models/" + posixpath.basename(dep.model_path)


def measure(shell: Shell, profile: Profile, *, depths_tokens: list[int], out_tokens: int,
            prompt_tokens: int | None, engine_gpu: str | None = None,
            wait_ready: Any = None, service: str = "llm", reps: int = BENCH_REPS,
            timeout_s: float = 3600) -> EngineBaseline:
    """Run llama-bench on the host; stops and restarts the service unless a free GPU is named.

    `wait_ready()` is called after the service is started again (the suites need it up).
    """
    dep = Deployed.read(shell, service)
    gpu = None if profile.backend != "cuda" else (engine_gpu or "all")
    args = bench_commands(profile, _model_arg(dep), depths_tokens=depths_tokens,
                          out_tokens=out_tokens, prompt_tokens=prompt_tokens, reps=reps)
    cmds = host_commands(dep, profile, args, gpu)
    binary = cmds[0][0] if dep.mode == "native" else None
    check = (f"test -x {shlex.quote(binary)}" if binary else
             f"docker run --rm --entrypoint /bin/sh {shlex.quote(dep.image)} -c "
             "'test -x /usr/local/bin/llama-bench'")
    if shell.run(check, timeout_s=120).returncode != 0:
        raise EngineNotInstalled(f"no llama-bench beside the server in {dep.image} on "
                                 f"{shell.label}: deploy again (the kit builds both)")
    stop = engine_gpu is None
    placement = (f"{dep.unit} stopped while llama-bench ran (started again after)" if stop
                 else f"GPU {engine_gpu}, not used by {dep.unit}, which kept running")
    base = EngineBaseline(placement=placement, commands=cmds)
    t0 = time.monotonic()
    if stop:
        p = shell.run(f"systemctl stop {shlex.quote(dep.unit)}", timeout_s=120)
        if p.returncode != 0:
            raise EngineError(f"could not stop {dep.unit}: {p.stderr.strip()[:300]}")
    try:
        if stop and profile.backend == "cuda":
            q = shell.run("nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits "
                          "-i 0", timeout_s=60)
            if q.returncode == 0 and q.stdout.strip():
                base.idle_used_mib = float(q.stdout.split()[0])
        for cmd in cmds:
            p = shell.run(" ".join(shlex.quote(a) for a in cmd), timeout_s=timeout_s)
            if p.returncode != 0:
                raise EngineRunFailed(f"llama-bench exit {p.returncode}: "
                                      f"{(p.stderr or p.stdout).strip()[-400:]}")
            tests = parse_bench_json(p.stdout)
            for t in tests:
                if t.n_gen > 0:
                    base.decode.append(t)
                elif t.n_prompt > 0:
                    base.prefill = t
    finally:
        if stop:
            shell.run(f"systemctl start {shlex.quote(dep.unit)}", timeout_s=120)
            if wait_ready is not None:
                wait_ready()
    base.wall_s = time.monotonic() - t0
    return base
