"""How many repeats a figure needs, and when the host was busy (verify/settle.py).

The loop is fed the spreads verify met: the quiet 2-vCPU demo VM's llama-bench, whose three
repeats spread 14% (error 8.2% against the 6% limit, issue 34: INCOMPLETE on a quiet host), a
steady H200 figure, and rounds measured while other processes held the CPU. The host-load
reading and llama-bench's CPU time are the real shell lines, run on this machine.
"""

import statistics
import subprocess
import time

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


def test_the_host_load_reading_sees_a_busy_loop_and_leaves_the_measured_programs_out(
        tmp_path):
    """LOAD_SNAPSHOT on this machine: a busy loop beside it shows in the host's busy CPU
    time; the same loop run as `llama-bench` (its comm) is counted as the measured
    program's too, so HostLoad leaves it out of the other processes' share."""
    import sys

    loop = "import time\nt = time.process_time()\nwhile time.process_time() - t < 3: pass\n"

    def reading():
        p = subprocess.run(["bash", "-c", LOAD_SNAPSHOT], capture_output=True, text=True,
                           check=True)
        return parse_snapshots(p.stdout)[0]

    def over(argv):
        proc = subprocess.Popen(argv)
        try:
            time.sleep(0.3)
            a = reading()
            time.sleep(1.0)
            b = reading()
        finally:
            proc.kill()
            proc.wait()
        return a, b

    a, b = over([sys.executable, "-c", loop])
    # (a llama-server of this machine's, such as a sandbox host's, counts too: an idle one)
    unnamed = (b.measured - a.measured) / a.hz
    assert (b.busy - a.busy) / a.hz >= 0.3 and unnamed < 0.2, (a, b)
    named = tmp_path / "llama-bench"  # a script's comm is its file's name
    named.write_text(f"#!{sys.executable}\n{loop}")
    named.chmod(0o755)
    a, b = over([str(named)])
    mine = (b.measured - a.measured) / a.hz
    assert mine >= unnamed + 0.3, (a, b)  # a share of one CPU, beside whatever else runs
    load = HostLoad.between(a, b)
    assert load is not None and load.cpus == a.cpus >= 1
    assert load.other_cpu_s == (b.busy - a.busy) / a.hz - mine


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
