"""How many repeats a figure needs, and when the host was busy (verify/settle.py).

The loop is fed the spreads verify met: the quiet 2-vCPU demo VM's llama-bench, whose three
repeats spread 14% (error 8.2% against the 6% limit, issue 34: INCOMPLETE on a quiet host), a
steady H200 figure, and rounds measured while other processes held the CPU. The host-load
reading and llama-bench's CPU time are the real shell lines, run on this machine.
"""

import statistics
import subprocess

import pytest

from beekeeper.verify.engine import TIMED, bench_cpu_s, timed
from beekeeper.verify.judge import NOISE_MAX, UNSETTLED, Spread, judge_decode
from beekeeper.verify.settle import (
    BUSY_SHARE,
    LOAD_SNAPSHOT,
    HostLoad,
    Round,
    Rule,
    Settled,
    error_of,
    parse_snapshots,
    settle,
)

# a quiet 2-vCPU VM's llama-bench decode repeats, in the order they came: 14% spread
QUIET_VM = [60.1, 52.3, 68.9, 61.0, 57.2, 64.4, 59.8, 62.7, 55.1, 63.3, 60.6, 58.4, 61.9,
            59.0, 62.2, 60.3, 58.8, 61.4, 60.0, 59.5, 61.1, 60.7, 59.9, 60.4]


def source(values, wall_per_repeat=2.0, load=None):
    """measure(k): the next k values of `values`, 2 s each, with `load(round)` or quiet."""
    it = iter(values)
    calls = []

    def measure(k):
        got = [next(it) for _ in range(k)]
        calls.append(k)
        wall = wall_per_repeat * k
        return Round(got, wall, load(len(calls), wall) if load else quiet(wall))

    return measure, calls


def quiet(wall):
    return HostLoad(0.01 * wall, 2 * wall, 2)  # 0.5% of two CPUs: the sandbox's own client


def busy(wall):
    return HostLoad(1.0 * wall, 2 * wall, 2)  # one of two CPUs taken by something else


def test_the_quiet_vms_spread_gets_more_repeats_until_its_error_is_under_the_limit():
    """Three repeats give an error over 6% (the issue's INCOMPLETE); the loop asks for as
    many more as the spread says and stops when the error is under the limit."""
    assert error_of(QUIET_VM[:3]) > NOISE_MAX
    measure, calls = source(QUIET_VM)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=120))
    assert got.stop == "settled" and got.repeats > 3 and calls[0] == 3 and len(calls) >= 2
    assert error_of(got.samples) <= NOISE_MAX
    assert got.samples == QUIET_VM[:got.repeats]
    assert all(r["load_share"] < BUSY_SHARE and not r["busy"] for r in got.rounds)
    assert got.text().startswith(f"{got.repeats} repeats (rounds of 3, then ")


def test_a_steady_figure_stops_after_its_first_round():
    measure, calls = source([165.5, 165.9, 165.1, 165.0])
    got = settle(measure, Rule(3, NOISE_MAX))
    assert got.stop == "settled" and calls == [3] and got.text() == "3 repeats in 6 s"


def test_the_budget_bounds_the_repeats_and_the_check_says_so_not_busy():
    """A spread that needs far more time than the budget: the loop stops on the budget,
    and the check is not judged saying the figures did not settle, the host quiet."""
    wild = [40.0, 80.0] * 50  # 47% spread: hundreds of repeats for 6%
    measure, calls = source(wild)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=10))
    assert got.stop == "budget" and sum(calls[1:]) * 2.0 <= 10
    spread = Spread("llama-bench decode@1024", statistics.mean(got.samples),
                    statistics.stdev(got.samples), "tok/s", n_repeats=got.repeats,
                    settled=got)
    v = judge_decode(50.0, 60.0, 1024, floor=0.8, spreads=[spread])
    assert v.status == "SKIP" and v.detail.startswith(UNSETTLED)
    assert "the 10 s budget spent" in v.detail and "the host quiet" in v.detail
    assert "busy" not in v.detail.split("ratio")[0]


def test_the_repeats_are_capped():
    measure, _ = source([40.0, 80.0] * 50)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=10_000))
    assert got.stop == "cap" and got.repeats == 24


def test_a_busy_round_is_set_aside_and_measured_again_on_a_quiet_host():
    """The first round ran while another process held a CPU: its repeats are set aside and
    the figure is measured again; the second round is quiet and judged alone."""
    values = [20.0, 35.0, 28.0, 60.2, 60.0, 59.8]
    measure, calls = source(values, load=lambda n, wall: busy(wall) if n == 1 else quiet(wall))
    got = settle(measure, Rule(3, NOISE_MAX))
    assert got.stop == "settled" and got.set_aside == values[:3] and got.samples == values[3:]
    assert [r["used"] for r in got.rounds] == [False, True] and got.busy_load is None
    assert got.text() == "3 repeats (rounds of 3 set aside: the host busy, then 3) in 12 s"


def test_a_host_busy_throughout_is_not_judged_with_its_load():
    measure, _ = source([60.0] * 10, load=lambda n, wall: busy(wall))
    got = settle(measure, Rule(3, NOISE_MAX))
    assert got.stop == "busy" and got.samples == [] and got.figure_samples == [60.0] * 6
    load = got.busy_load
    assert load is not None and load.busy and round(load.share, 2) == 0.5
    assert load.text().startswith("other processes used 1.00 of 2 CPUs, 50% of the host's")
    # the record survives report.json
    again = Settled.from_json(got.to_json())
    assert again.stop == "busy" and again.busy_load == load


def test_a_round_with_no_figure_stops_the_loop():
    got = settle(lambda k: Round([], 1.0), Rule(3, NOISE_MAX))
    assert got.stop == "failed" and got.repeats == 0


# Run inside a PID namespace of its own (its own /proc): the scan there sees this test's
# processes only, so nothing else on the machine (a sandbox's llama-server, a build, another
# test) can add to the measured programs' figure. Both loops are stopped at each reading,
# so their counters and the reading's agree to the tick whatever the machine's load.
_LOAD_DRIVER = r"""
import json, os, signal, subprocess, sys, time
named, unnamed, snapshot = sys.argv[1:4]

def ticks(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime + stime (fields 14 and 15)

procs = [subprocess.Popen([named]), subprocess.Popen([sys.executable, unnamed])]

def reading():
    for p in procs:
        os.kill(p.pid, signal.SIGSTOP)
    time.sleep(0.05)
    own = [ticks(p.pid) for p in procs]
    out = subprocess.run(["bash", "-c", snapshot], capture_output=True, text=True).stdout
    for p in procs:
        os.kill(p.pid, signal.SIGCONT)
    return {"own": own, "out": out}

def after(first, need):  # until each loop ran `need` ticks more (a busy machine is slower)
    deadline = time.monotonic() + 60
    while True:
        time.sleep(0.2)
        r = reading()
        if all(b - a >= need for a, b in zip(first["own"], r["own"])) or \
                time.monotonic() > deadline:
            return r

a = after({"own": [0, 0]}, 1)
b = after(a, 30)
for p in procs:
    p.kill()
print(json.dumps([a, b]))
"""


def _in_own_pid_namespace(tmp_path, argv):
    """`argv` run as PID 1's child in a new PID namespace with its own /proc (as root, or
    as a mapped root in a user namespace); None where the machine allows neither."""
    for how in (["unshare", "--pid", "--fork", "--mount-proc"],
                ["unshare", "--map-root-user", "--pid", "--fork", "--mount-proc"]):
        try:
            p = subprocess.run([*how, *argv], capture_output=True, text=True, timeout=120)
        except FileNotFoundError:
            return None
        if p.returncode == 0:
            return p.stdout
    return None


def test_the_host_load_reading_sees_a_busy_loop_and_leaves_the_measured_programs_out(
        tmp_path):
    """LOAD_SNAPSHOT: two busy loops run beside each other, one as `llama-bench` (its comm);
    the reading counts the named one's CPU time, to the tick, as the measured programs' and
    the other's not at all; the host's busy time holds both; HostLoad leaves the named one
    out of the other processes' share. Exact on a busy machine as on an idle one."""
    import json
    import sys

    loop = "import time\nwhile True: pass\n"
    named = tmp_path / "llama-bench"  # a script's comm is its file's name
    named.write_text(f"#!{sys.executable}\n{loop}")
    named.chmod(0o755)
    unnamed = tmp_path / "busy.py"
    unnamed.write_text(loop)
    driver = tmp_path / "driver.py"
    driver.write_text(_LOAD_DRIVER)
    out = _in_own_pid_namespace(
        tmp_path, [sys.executable, str(driver), str(named), str(unnamed), LOAD_SNAPSHOT])
    if out is None:
        pytest.skip("no PID namespace of its own here (unshare refused): the reading would "
                    "count every llama-server and llama-bench on the machine")
    a_run, b_run = json.loads(out)
    a, b = (parse_snapshots(r["out"])[0] for r in (a_run, b_run))
    (named_a, unnamed_a), (named_b, unnamed_b) = a_run["own"], b_run["own"]
    assert named_b - named_a >= 30 and unnamed_b - unnamed_a >= 30, (a_run, b_run)
    # the measured programs' figure is the named loop's own counter, nothing else's
    assert (a.measured, b.measured) == (named_a, named_b), (a, b, a_run, b_run)
    # the host's busy time holds both loops (and whatever else ran meanwhile)
    assert b.busy - a.busy >= (named_b - named_a) + (unnamed_b - unnamed_a), (a, b)
    load = HostLoad.between(a, b)
    assert load is not None and load.cpus == a.cpus >= 1
    assert load.other_cpu_s == (b.busy - a.busy) / a.hz - (named_b - named_a) / a.hz
    assert load.other_cpu_s >= (unnamed_b - unnamed_a) / a.hz


def test_llama_benchs_own_cpu_time_is_read_from_its_shells_times(tmp_path):
    """`timed()` runs the binary under `sh -c TIMED` (POSIX sh: the image's is dash); bench_cpu_s
    reads the CPU time of the children from `times`: a program that burns 0.5 s of CPU is read
    as about that, and the host's CPU counters are read around it."""
    import sys

    prog = tmp_path / "burn"
    prog.write_text(f"#!{sys.executable}\nimport time, sys\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.5: pass\nprint('[]')\n")
    prog.chmod(0o755)
    argv = timed([str(prog)])
    assert argv[:3] == ["sh", "-c", TIMED]
    p = subprocess.run([*argv, "-o", "json"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "[]"
    cpu = bench_cpu_s(p.stderr)
    assert cpu is not None and 0.45 <= cpu <= 1.5, p.stderr
    # the host's counters read by the same POSIX shell just before and after the program
    snaps = parse_snapshots(p.stderr)
    assert len(snaps) == 2 and snaps[1].busy - snaps[0].busy >= 0.3 * snaps[0].hz, p.stderr
    load = HostLoad.between(snaps[0], snaps[1], cpu)
    assert load is not None and load.capacity_s > 0 and load.cpus >= 1
    docker = timed(["docker", "run", "--rm", "--entrypoint", "/usr/local/bin/llama-bench",
                    "img:tag"])
    assert docker == ["docker", "run", "--rm", "--entrypoint", "/bin/sh", "img:tag", "-c",
                      TIMED, "/usr/local/bin/llama-bench"]
