"""
The whole deploy path on a real sandbox host (systemd, sshd, its own Docker engine),
reached over SSH on 127.0.0.1. Tests run in order and build on each other.
"""

import base64
import io
import json
import re
import subprocess
import tarfile
from dataclasses import replace

import pytest

from beekeeper.core.container import IMAGE
from beekeeper.core.engine_flags import parse_help, refusal, unaccepted
from beekeeper.core.profiles import PROFILES
from beekeeper.facts.engine import ServerHelp
from beekeeper.sandbox import load_state, ssh_options, state_dir
from beekeeper.tunnel import ssh_tunnel
from beekeeper.verify.client import ServerClient
from beekeeper.verify.judge import BUSY
from beekeeper.verify.suites import Sizes, run_suites

from .helpers import (
    BIN,
    ROOT,
    deploy,
    detected_changes,
    first_deploy,
    grand_total,
    results,
    sandbox_exec,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def first(fresh_sandbox):
    return first_deploy("from nothing")


def test_first_deploy_provisions_builds_places_and_starts(first, standins):
    rows = results(first.out)
    assert rows["Install host packages: docker.io"][0] == "1"
    # the source: fetched on the host from the git server by its full commit, checked
    fetch = f"Fetch the server source {standins.git_url} at {standins.commit[:12]}"
    assert rows[fetch][0] == "1", rows
    head = sandbox_exec(f"git -C /var/lib/beekeeper/src/{standins.commit} rev-parse HEAD")
    assert head.stdout.strip() == standins.commit
    assert any(k.startswith("Build server image") and v[0] == "1" for k, v in rows.items())
    # a long step reaches the user's terminal (no -v) with a line every 30 s
    assert "[beekeeper] building beekeeper/llama-server:" in first.out
    assert any(k.startswith("Place model gemma") and v[0] == "1" for k, v in rows.items())
    assert rows["Wait for /health on port 8083 and smoke-check the API"][0] == "1"
    tag = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]
    size = sandbox_exec(f"docker image inspect --format '{{{{.Size}}}}' {tag}").stdout.strip()
    print(f"[figure] server image {tag}: {int(size) / 2**20:.1f} MiB")


def test_the_built_server_takes_every_cpu_profile_and_refuses_a_turbo_one(first, standins):
    """The engine check on a real server (issue 43, point 5). The first deploy read the
    server it built with its --help, after the build and before the service, and went on;
    the same fact's command, run on the sandbox host against that image, reads a help in
    which every CPU profile's flags are taken and the production profile's turbo KV types
    are refused in one line (no host data puts a KV type the stock server lacks on a CPU
    profile's command line, so the refusal is shown on the real help, not by a deploy).
    Main tier: it reuses the module's build; the help read is 0.5 s, the dry run about as
    long as test_dry_run_tells_the_truth_about_a_profile_change's."""
    ran = {k: v for k, v in results(first.out).items()
           if k.startswith(f"Check that the server built from {standins.commit[:12]} takes "
                           "the flags of cpu-tiny")}
    assert list(ran.values()) == [("1", "-", "-")], results(first.out)
    tag = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]
    read = sandbox_exec(ServerHelp().command(binary=IMAGE.entrypoint[0], image=tag))
    offered = parse_help(read.stdout)
    assert offered is not None, read.stdout[-2000:] + read.stderr[-2000:]
    for name, p in PROFILES.items():
        if p.backend == "cpu":
            assert unaccepted(p.server.args("/m/a.gguf", "/m/b.gguf"), offered) == [], name
    turbo = PROFILES["q8-turbo4-64k"]
    line = str(refusal("profile `q8-turbo4-64k`", f"source.ref {standins.commit[:12]}",
                       turbo.name, turbo.engine_refs,
                       unaccepted(turbo.server.args("/m/a.gguf"), offered)))
    assert "does not accept `-ctk turbo4`, `-ctv turbo4` (it offers f32, f16" in line, line
    print(f"\n[figure] the stock server's refusal of the turbo profile: {line}")
    # a server built before a run is read while that run prepares, so a dry run says it
    # (a beellama-only flag in server_extra_args: a warning, the smoke gate judges it)
    dry = deploy("--data", 'server_extra_args=["--spec-dflash-cross-ctx","512"]', dry=True)
    assert dry.rc == 0, dry.out[-3000:]
    assert ("host sandbox: warning: profile `cpu-tiny`: the server built from source.ref "
            f"{standins.commit[:12]} does not list `--spec-dflash-cross-ctx` of "
            "server_extra_args") in dry.out, dry.out[-3000:]


def test_the_image_holds_no_instruction_beyond_its_cpu_baseline(first, tmp_path):
    """The binaries in the image use no AVX-512 (zmm) and no AMX (tmm) register, whatever
    the CPU that built them: on an AMX Xeon a native build segfaulted in its first compute,
    and an image copied to an older CPU would die with SIGILL (beekeeper/core/cpu.py)."""
    tag = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]
    assert "-cpu-x86-64-v3-" in tag
    label = sandbox_exec("docker image inspect --format "
                         f"'{{{{index .Config.Labels \"io.beekeeper.cpu-baseline\"}}}}' {tag}")
    assert label.stdout.strip() == "x86-64-v3", label
    for binary in ("llama-server", "llama-bench"):
        r = sandbox_exec(f"c=$(docker create {tag}) && docker cp $c:/usr/local/bin/{binary} - "
                         "| base64 -w0; s=$?; docker rm $c >/dev/null; exit $s")
        assert r.returncode == 0, r.stderr
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r.stdout))) as tar:
            tar.extract(binary, tmp_path, filter="data")
        local = tmp_path / binary
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(local)],
                              capture_output=True, text=True, check=True).stdout
        counts = {reg: len(re.findall(rf"%{reg}\d", text)) for reg in ("zmm", "tmm", "ymm")}
        print(f"[figure] {binary}: {counts['ymm']} AVX2 (ymm) operands, "
              f"{counts['zmm']} AVX-512, {counts['tmm']} AMX")
        assert counts["ymm"] > 0 and counts["zmm"] == 0 and counts["tmm"] == 0, counts


def test_the_planners_kv_cells_are_the_servers_for_a_sliding_window_model(first):
    """The tiny model is Gemma 3: 15 of its 18 layers attend over a 512-token window, and
    llama.cpp gives those a cache of the window and a ubatch (llama-kv-cache-iswa.cpp), not
    the context. The image's own llama-server, started on the deployed file with two slots
    at 8K, allocates the cells and layers the planner plans for each kind, stream by stream
    (its `llama_kv_cache: size = ...` lines at log verbosity 4)."""
    from pathlib import PurePosixPath

    from beekeeper.core.cache import pypi_model
    from beekeeper.core.planner import kv_cells, layout_from_gguf, swa_cells

    record = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)
    model = PurePosixPath(record["model_path"])
    r = sandbox_exec(
        f"docker run --rm -v {model.parent}:/m:ro --entrypoint sh {record['image']} -c "
        f"'timeout 10 /usr/local/bin/llama-server -m /m/{model.name} -c 8192 -np 2 -ub 512 "
        "--port 18099 --host 127.0.0.1 --no-jinja --chat-template gemma -lv 4 2>&1 | "
        "grep -m 2 \"llama_kv_cache: size\"'")
    got = [tuple(int(x) for x in m) for m in re.findall(
        r"\(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/\d+ seqs\)", r.stdout)]
    assert len(got) == 2, (r.stdout[-2000:], r.stderr[-2000:])
    layout, _ = layout_from_gguf(pypi_model(PROFILES["cpu-tiny"].model))
    cells = kv_cells(8192, 2)
    window = swa_cells(cells, layout, 2, False, 512)
    planned = [(cells // 2, layout.attention_layers - layout.swa_layers, 2),
               (window // 2, layout.swa_layers, 2)]
    print(f"[figure] server's KV cache (cells a stream, layers, streams): {got}; planned "
          f"{planned}")
    assert got == planned, (got, planned)


# Programs of one instruction each, built with the controller's cc: the emulated CPU must run
# the AVX2/FMA one and refuse the AVX-512 one, or the check below proves nothing.
_AVX2_FMA = ('int main(void){__attribute__((aligned(32))) float a[8]={1};'
             '__asm__ volatile("vmovaps %0,%%ymm0\\n\\tvfmadd231ps %%ymm0,%%ymm0,%%ymm0"'
             '::"m"(a):"xmm0");return 0;}')
_AVX512 = ('int main(void){__asm__ volatile("vpxord %%zmm0,%%zmm0,%%zmm0":::"xmm0");'
           'return 0;}')


def test_the_image_runs_on_a_cpu_with_its_baseline_and_nothing_more(first, tmp_path):
    """The image's llama-bench generates with the real model on an emulated x86-64-v3 CPU
    (QEMU's Haswell: AVX2, FMA, F16C, BMI2; no AVX-512, no AMX), the oldest CPU the baseline
    admits, here on an AMX Xeon or any other: what a host without this machine's
    instructions gets."""
    import os
    import shutil

    from beekeeper.core.cache import pypi_model

    qemu, cc = shutil.which("qemu-x86_64"), shutil.which("cc")
    if not (qemu and cc):
        if os.environ.get("CI"):
            pytest.fail("qemu-user and a C compiler are needed (scripts/setup.sh test)")
        pytest.skip("qemu-x86_64 or cc missing: scripts/setup.sh test installs them")
    ran = {}
    for name, code in (("avx2", _AVX2_FMA), ("avx512", _AVX512)):
        (tmp_path / f"{name}.c").write_text(code)
        subprocess.run([cc, "-O0", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c")],
                       check=True)
        ran[name] = subprocess.run([qemu, "-cpu", "Haswell", str(tmp_path / name)],
                                   capture_output=True).returncode
    if ran["avx2"] != 0 and not os.environ.get("CI"):  # QEMU before 7.2 emulates no AVX2
        pytest.skip(f"{qemu} cannot emulate AVX2 (QEMU 7.2 or newer can)")
    assert ran["avx2"] == 0 and ran["avx512"] != 0, ran  # -4 (SIGILL) for AVX-512
    tag = json.loads(sandbox_exec("cat /etc/beekeeper/llm/deployed.json").stdout)["image"]
    r = sandbox_exec(f"c=$(docker create {tag}) && docker cp $c:/usr/local/bin/llama-bench - "
                     "| base64 -w0; s=$?; docker rm $c >/dev/null; exit $s")
    assert r.returncode == 0, r.stderr
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r.stdout))) as tar:
        tar.extract("llama-bench", tmp_path, filter="data")
    model = pypi_model(PROFILES["cpu-tiny"].model)
    # a 4-token prompt (the batched kernels) and one generated token (the decode kernels):
    # about 30 s emulated on a 2-core VM, where 8 and 4 with warm-up took 130 s
    bench = subprocess.run([qemu, "-cpu", "Haswell", str(tmp_path / "llama-bench"),
                            "-m", str(model), "-p", "4", "-n", "1", "-r", "1", "-t", "1",
                            "--no-warmup", "-o", "json"],
                           capture_output=True, text=True, timeout=600)
    assert bench.returncode == 0, bench.stderr[-2000:]
    rows = {(row["n_prompt"], row["n_gen"]): row["avg_ts"] for row in json.loads(bench.stdout)}
    print(f"[figure] llama-bench on QEMU's Haswell (x86-64-v3, no AVX-512/AMX), emulated: "
          f"prompt {rows.get((4, 0), 0):.3f} tok/s, generation {rows.get((0, 1), 0):.3f} tok/s")
    assert rows.get((4, 0), 0) > 0 and rows.get((0, 1), 0) > 0, rows


def test_smoke_through_a_loopback_port(first):
    with ssh_tunnel(ssh_options(load_state()), 8083) as url:
        assert url.startswith("http://127.0.0.1:")
        with ServerClient(url) as client:
            report = run_suites(client, PROFILES["cpu-tiny"], ["smoke"])
    assert report.passed, [c for c in report.checks if not c.passed]


def test_product_host_checks_pass(first):
    p = subprocess.run([str(BIN / "python"), "-m", "pytest", "verify/test_host.py", "-q",
                        "--hosts=ssh://sandbox", f"--ssh-config={state_dir() / 'ssh_config'}",
                        "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "6 passed" in p.stdout


def test_second_deploy_changes_nothing(first):
    run = deploy()
    print(f"\n[figure] second deploy (no change): {run.wall_s:.1f} s")
    assert run.rc == 0, run.out[-3000:]
    hosts, success, error, no_change = grand_total(run.out)
    assert (success, error) == ("-", "-"), run.out[-3000:]
    assert no_change == hosts


def test_bad_host_data_fails_before_any_change(first):
    before = sandbox_exec("stat -c %Y /etc/systemd/system/beekeeper-llm.service").stdout
    run = deploy("--data", "port=70000")
    assert run.rc != 0
    assert "host data `port`" in run.out and "1 to 65535" in run.out
    assert "--> Starting operation" not in run.out
    assert sandbox_exec("stat -c %Y /etc/systemd/system/beekeeper-llm.service").stdout == before


def test_dry_run_tells_the_truth_about_a_profile_change(first):
    dry = deploy("--data", "profile=cpu-smollm", dry=True)
    assert dry.rc == 0, dry.out[-3000:]
    planned = detected_changes(dry.out)
    assert any(n.startswith("Place model SmolLM2") for n in planned), planned
    real = deploy("--data", "profile=cpu-smollm")
    assert real.rc == 0, real.out[-3000:]
    made = {name for name, (ok, _, _) in results(real.out).items() if ok != "-"}
    assert made == planned


def test_weak_model_fails_niah_and_the_report_says_so(first, tmp_path):
    # as many cases as a pass needs (each must find its needle): the 135M model found none
    # of 10 in every run, and 5 prove the verdict in half the time
    smol = PROFILES["cpu-smollm"]
    sizes = replace(Sizes.for_profile(smol, quick=True), niah_cases=smol.expected.niah_min_pass)
    with ssh_tunnel(ssh_options(load_state()), 8083) as url, ServerClient(url) as client:
        report = run_suites(client, smol, ["niah"], quick=True, sizes=sizes,
                            out_dir=str(tmp_path))
    niah = next(c for c in report.checks if c.name == "niah.pass")
    assert not niah.passed and not report.passed
    md = next(tmp_path.rglob("report.md")).read_text()
    assert "| niah.pass | FAIL |" in md


def test_switch_back_and_run_every_suite(first, tmp_path):
    run = deploy()
    assert run.rc == 0, run.out[-3000:]
    # decode and TTFT are not judged here (no engine baseline through a tunnel alone), so
    # their first round is enough: no more repeats while another lane's work makes noise,
    # 64 tokens a decode request, 3 TTFT requests; the load suite's 4 clients for 3 s, not
    # 20 (its check: no request failed). The CI's 2 cores are busy after the build: what
    # this test's server computes, the other lane waits for.
    sizes = replace(Sizes.for_profile(PROFILES["cpu-tiny"], quick=True), settle_budget_s=0,
                    decode_out_tokens=64, ttft_requests=3, load_seconds=3.0)
    with ssh_tunnel(ssh_options(load_state()), 8083) as url, ServerClient(url) as client:
        report = run_suites(client, PROFILES["cpu-tiny"], ["all"], quick=True, sizes=sizes,
                            out_dir=str(tmp_path), host_label="sandbox")
    assert report.passed, [c for c in report.checks if not c.passed]
    folder = next(tmp_path.rglob("report.json")).parent
    data = json.loads((folder / "report.json").read_text())
    for rec in [r["record"] for r in data["suites"]["decode"]] + data["suites"]["ttft"]["records"]:
        assert rec["usage"]["completion_tokens"] == rec["timings"]["predicted_n"]
        assert rec["timings"]["cache_n"] == 0
    assert all(c["prompt_tokens"] == 500 for c in data["suites"]["niah"]["cases"])
    assert data["suites"]["vram"]["skipped"] == ("skipped: cpu-tiny runs on the CPU: no GPU "
                                                 "memory to judge")
    html = (folder / "report.html").read_text()
    # charts inline, nothing fetched from anywhere (the SVG namespace URI is not a fetch)
    assert html.count("<svg") >= 3  # TTFT, per-token latency, NIAH by depth (no GPU: no VRAM)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)


@pytest.mark.quiet  # a decode verdict
def test_verify_runs_on_the_host_and_the_report_comes_back(first, tmp_path):
    p = subprocess.run([str(BIN / "beekeeper"), "verify", "--on-host", "--sandbox",
                        "--profile", "cpu-tiny", "--suite", "engine,smoke,decode,vram", "--quick",
                        "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    # a machine busy with other work (a shared CI runner) may spread llama-bench's repeats
    # over judge.NOISE_MAX: then decode is not judged (exit 3) and says so; anything else
    # is a failure. The report comes back either way.
    busy = p.returncode == 3 and f"not judged: decode: {BUSY}" in p.stdout
    assert p.returncode == 0 or busy, (p.stdout + p.stderr)[-3000:]
    reports = list(tmp_path.glob("sandbox/*/report.json"))
    assert len(reports) == 1, list(tmp_path.rglob("*"))
    data = json.loads(reports[0].read_text())
    assert "runs on the CPU" in data["suites"]["vram"]["skipped"]
    if busy:
        print("[figure] verify --on-host: decode not judged, the host was busy")
        assert not data["passed"] and "verify INCOMPLETE" in p.stdout
    else:
        assert data["passed"] and "verify PASSED (judged: decode" in p.stdout, p.stdout[-2000:]
    assert (reports[0].parent / "report.html").exists()
