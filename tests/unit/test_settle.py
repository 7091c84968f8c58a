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


# ---- the rule's edges, one by one (each test names the edge it holds) ----

def _steady(values, wall=2.0, load=None):
    """A Round of `values`, `wall` s, quiet unless `load` is given."""
    return Round(list(values), wall, load if load is not None else quiet(wall))


def test_error_of_is_the_standard_error_over_the_mean_and_none_below_two_repeats():
    from beekeeper.verify.settle import error_of as err
    assert err([]) is None and err([60.0]) is None
    # 9 and 11: stdev sqrt(2), mean 10, over sqrt(2) repeats: 10%
    assert err([9.0, 11.0]) == pytest.approx(0.10)
    assert err([10.0, 10.0]) == 0.0
    assert err([-1.0, 1.0]) == 0.0  # a mean of zero: no relative error, not a crash
    # four repeats of the same spread: the error halves with sqrt(n) against two
    assert err([9.0, 11.0, 9.0, 11.0]) == pytest.approx(
        statistics.stdev([9.0, 11.0, 9.0, 11.0]) / 10 / 2)


def test_needed_asks_a_fifth_more_than_the_spread_says_and_always_one_more():
    from beekeeper.verify.settle import MARGIN, needed
    assert MARGIN == 1.2
    assert needed([], 0.05) == 2 and needed([60.0], 0.05) == 2
    # spread 14.1% (9 and 11): (0.141 / 0.05)^2 = 8 repeats, a fifth more is 9.6: 10
    assert needed([9.0, 11.0], 0.05) == 10
    # no spread: one more than it has, never fewer
    assert needed([10.0, 10.0], 0.05) == 3
    assert needed([10.0, 10.0, 10.0, 10.0], 0.05) == 5
    assert needed([-1.0, 1.0], 0.05) == 3  # a mean of zero
    # (0.141 / 0.1)^2 * 1.2 = 2.4: 3, which is also one more than two
    assert needed([9.0, 11.0, 9.0, 11.0, 9.0, 11.0], 0.1) == 7


def test_busy_is_over_the_share_not_at_it():
    assert BUSY_SHARE == 0.10
    at = HostLoad(1.0, 10.0, 1)
    assert at.share == 0.10 and not at.busy
    assert HostLoad(1.01, 10.0, 1).busy
    assert HostLoad(-3.0, 10.0, 1).share == 0.0  # the measured programs' over-count
    assert HostLoad(5.0, 0.0, 2).share == 0.0 and not HostLoad(5.0, 0.0, 2).busy


def test_host_load_text_says_cpus_and_share():
    assert HostLoad(0.75, 4.0, 2).text() == (
        "other processes used 0.38 of 2 CPUs, 19% of the host's CPU time (busy over 10%)")
    assert HostLoad(-1.0, 4.0, 2).text().startswith("other processes used 0.00 of 2 CPUs, 0%")
    assert HostLoad(1.0, 0.0, 4).text().startswith("other processes used 0.00 of 4 CPUs, 0%")


def _snap(busy, total, hz=100, cpus=2, measured=0):
    from beekeeper.verify.settle import Snapshot
    return Snapshot(busy, total, hz, cpus, measured)


def test_host_load_between_two_readings():
    from beekeeper.verify.settle import HostLoad as HL
    a, b = _snap(1000, 5000, measured=300), _snap(1600, 5800, measured=500)
    load = HL.between(a, b)
    # 600 busy ticks, 200 of them the measured programs': 4 s of other CPU in 8 s x 2 CPUs
    assert load == HostLoad(4.0, 8.0, 2)
    # told the measured programs' CPU time exactly: the counters' change is not used
    assert HL.between(a, b, 1.0) == HostLoad(5.0, 8.0, 2)
    assert HL.between(a, b, 0.0) == HostLoad(6.0, 8.0, 2)
    # a measured program that ended between the readings leaves its counter lower: not negative
    assert HL.between(a, _snap(1600, 5800, measured=100)) == HostLoad(6.0, 8.0, 2)
    # no time passed, or the counters went back, or no tick rate: no load
    assert HL.between(a, _snap(1600, 5000)) is None
    assert HL.between(a, _snap(1600, 4000)) is None
    assert HL.between(_snap(0, 0, hz=0), _snap(10, 10, hz=0)) is None
    assert HL.between(_snap(0, 0, hz=-1), _snap(10, 10, hz=-1)) is None
    # one tick of total time is enough
    assert HL.between(_snap(0, 0, hz=1, cpus=1), _snap(1, 1, hz=1, cpus=1)) == HostLoad(1.0, 1.0, 1)
    # the tick rate and CPUs are the first reading's
    assert HL.between(_snap(0, 0, hz=100, cpus=4), _snap(100, 400, hz=50, cpus=8)) == \
        HostLoad(1.0, 4.0, 4)


def test_parse_snapshots_reads_each_line_and_nothing_else():
    text = ("noise\nbeekeeper-load 1 2 100 4 5\nbeekeeper-load 6 7 100 4 8 extra\n"
            "beekeeper-load 9 10 100 4 11\n")
    assert parse_snapshots(text) == [_snap(1, 2, 100, 4, 5), _snap(9, 10, 100, 4, 11)]
    assert parse_snapshots("") == [] and parse_snapshots(None) == []


def test_a_round_is_recorded_with_its_load_rounded_and_without_one_as_none():
    from beekeeper.verify.settle import _record
    r = Round([1.0, 2.0, 3.0], 12.34567, HostLoad(1.23456, 7.654321, 2))
    assert _record(r, True) == {
        "repeats": 3, "wall_s": 12.35, "used": True, "error_after": None,
        "load_share": round(1.23456 / 7.654321, 4), "busy": True,
        "other_cpu_s": 1.235, "capacity_s": 7.654, "cpus": 2}
    assert round(1.23456 / 7.654321, 4) == 0.1613
    assert _record(Round([1.0], 2.0), False) == {
        "repeats": 1, "wall_s": 2.0, "used": False, "error_after": None, "load_share": None,
        "busy": False, "other_cpu_s": None, "capacity_s": None, "cpus": None}
    quiet_rec = _record(Round([1.0], 2.0, HostLoad(0.01, 4.0, 2)), True)
    assert quiet_rec["busy"] is False and quiet_rec["load_share"] == 0.0025


def test_settled_to_json_and_back_keeps_every_field():
    rounds = [{"repeats": 3, "busy": True}, {"repeats": 2, "busy": False}]
    s = Settled(samples=[9.0, 11.0], set_aside=[1.0, 2.0, 3.0], rounds=rounds, stop="budget",
                wall_s=41.23456, budget_s=30.0, limit=0.05, min_repeats=3)
    d = s.to_json()
    assert d == {"repeats": 2, "samples": [9.0, 11.0], "set_aside": [1.0, 2.0, 3.0],
                 "rounds": rounds, "stop": "budget", "wall_s": 41.23, "budget_s": 30.0,
                 "limit": 0.05, "min_repeats": 3, "error": error_of([9.0, 11.0])}
    assert d["error"] == pytest.approx(0.10)
    back = Settled.from_json(d)
    assert back == Settled(samples=[9.0, 11.0], set_aside=[1.0, 2.0, 3.0], rounds=rounds,
                           stop="budget", wall_s=41.23, budget_s=30.0, limit=0.05,
                           min_repeats=3)
    assert Settled.from_json(back.to_json()) == back
    assert Settled().to_json()["error"] is None and Settled().to_json()["repeats"] == 0


def test_settled_from_json_fills_what_an_older_report_lacks():
    assert Settled.from_json({}) == Settled(samples=[], set_aside=[], rounds=[], stop="settled",
                                           wall_s=0.0, budget_s=120.0, limit=0.0,
                                           min_repeats=0)
    nulls = {k: None for k in ("samples", "set_aside", "rounds", "wall_s", "budget_s",
                               "limit", "min_repeats")}
    got = Settled.from_json(nulls)
    assert (got.samples, got.set_aside, got.rounds) == ([], [], [])
    assert (got.wall_s, got.budget_s, got.limit, got.min_repeats) == (0.0, 120.0, 0.0, 0)
    typed = Settled.from_json({"samples": (1.0,), "wall_s": "3.5", "budget_s": 7,
                               "limit": "0.06", "min_repeats": "4", "stop": 5})
    assert typed.samples == [1.0] and typed.wall_s == 3.5 and typed.limit == 0.06
    assert type(typed.budget_s) is float and typed.budget_s == 7.0
    assert typed.min_repeats == 4 and typed.stop == "5"
    assert type(typed.samples) is list and type(Settled.from_json({"rounds": ()}).rounds) is list


def test_settled_from_json_copies_its_lists():
    d = {"samples": [1.0], "set_aside": [2.0], "rounds": [{"repeats": 1}]}
    got = Settled.from_json(d)
    got.samples.append(3.0)
    got.set_aside.append(3.0)
    got.rounds.append({})
    assert d == {"samples": [1.0], "set_aside": [2.0], "rounds": [{"repeats": 1}]}


# ---- settle's loop at its edges ----

def test_settle_keeps_the_rule_and_the_error_after_each_round():
    measure, calls = source(QUIET_VM)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=77.0))
    assert (got.budget_s, got.limit, got.min_repeats) == (77.0, NOISE_MAX, 3)
    assert got.wall_s == 2.0 * sum(calls)
    seen = []
    for rec, k in zip(got.rounds, calls, strict=True):
        seen += [QUIET_VM[len(seen) + i] for i in range(k)]
        assert rec["repeats"] == k and rec["used"] is True
        assert rec["error_after"] == round(error_of(seen), 4)
    assert got.rounds[-1]["error_after"] <= NOISE_MAX < got.rounds[0]["error_after"]


def test_an_error_exactly_at_the_limit_settles():
    limit = error_of([9.0, 11.0])
    got = settle(lambda k: pytest.fail("measured again"), Rule(2, limit),
                 first=_steady([9.0, 11.0]))
    assert got.stop == "settled" and got.repeats == 2
    assert got.rounds[0]["error_after"] == 0.1


def test_an_error_under_the_limit_with_fewer_than_the_minimum_repeats_goes_on():
    """A first round short of the minimum (llama-bench's first run gave two): settled only
    at the minimum repeats."""
    measure, calls = source([10.0] * 5)
    got = settle(measure, Rule(3, NOISE_MAX), first=_steady([10.0, 10.0]))
    assert calls == [1] and got.stop == "settled" and got.repeats == 3


def test_one_repeat_then_the_rest_of_the_minimum():
    measure, calls = source([10.0] * 5)
    got = settle(measure, Rule(3, NOISE_MAX), first=_steady([10.0]))
    assert calls == [2] and got.stop == "settled" and got.repeats == 3
    assert got.rounds[0]["error_after"] is None and got.rounds[1]["error_after"] == 0.0


def test_the_first_round_given_is_not_measured_again_and_not_charged_to_the_budget():
    wild = [40.0, 80.0] * 50
    measure, calls = source(wild)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=10), first=_steady([40.0, 80.0, 40.0], 6.0))
    # the given round (6 s) is not measured again nor counted: 10 s at 2 s a repeat is 5
    assert calls == [5] and got.stop == "budget" and got.wall_s == 16.0
    # a slow given round: its time a repeat leaves no repeat in the budget
    measure, calls = source(wild)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=10),
                 first=_steady([40.0, 80.0, 40.0], wall=500.0))
    assert calls == [] and got.stop == "budget" and got.rounds[0]["wall_s"] == 500.0


def test_the_budget_fits_repeats_by_the_last_rounds_time_a_repeat():
    wild = [40.0, 80.0] * 50
    measure, calls = source(wild)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=10))
    # first round 6 s (not counted), then 10 s at 2 s a repeat: 5, then nothing left
    assert calls == [3, 5] and got.stop == "budget" and got.repeats == 8
    assert got.wall_s == 16.0


def test_a_budget_short_of_one_repeat_stops_at_once():
    measure, calls = source([40.0, 80.0] * 50)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=1.99))
    assert calls == [3] and got.stop == "budget"
    measure, calls = source([40.0, 80.0] * 50)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=2.0))
    assert calls == [3, 1] and got.stop == "budget"
    measure, calls = source([40.0, 80.0] * 50)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=0.0))
    assert calls == [3] and got.stop == "budget"


def test_rounds_that_take_no_time_are_not_held_by_the_budget():
    measure, calls = source([40.0, 80.0] * 50, wall_per_repeat=0.0)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=5))
    assert got.stop == "cap" and got.repeats == 24 and sum(calls) == 24


def test_the_cap_is_eight_times_the_minimum_and_never_passed():
    from beekeeper.verify.settle import MAX_FACTOR
    assert MAX_FACTOR == 8 and Rule(3, 0.06).cap == 24 and Rule(1, 0.06).cap == 8
    measure, calls = source([40.0, 80.0] * 50)
    got = settle(measure, Rule(2, NOISE_MAX, budget_s=10_000))
    assert got.stop == "cap" and got.repeats == 16 and sum(calls) == 16
    assert calls[0] == 2 and calls[1] == 14  # the spread asks hundreds: capped at 16 in all


def test_a_busy_round_is_measured_again_once_only():
    from beekeeper.verify.settle import BUSY_RETRIES
    assert BUSY_RETRIES == 1
    measure, calls = source([60.0] * 10, load=lambda n, wall: busy(wall))
    got = settle(measure, Rule(3, NOISE_MAX))
    assert calls == [3, 3] and got.stop == "busy" and got.set_aside == [60.0] * 6
    assert [r["busy"] for r in got.rounds] == [True, True]
    assert [r["used"] for r in got.rounds] == [False, False]
    assert got.busy_load == busy(6.0)


def test_a_busy_round_with_no_budget_left_stops_busy_not_budget():
    measure, calls = source([60.0] * 10, load=lambda n, wall: busy(wall))
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=0.0))
    assert calls == [3] and got.stop == "busy" and got.samples == []


def test_a_quiet_round_then_a_busy_one_keeps_the_quiet_repeats():
    values = [40.0, 80.0, 40.0] + [60.0] * 100
    measure, calls = source(values, load=lambda n, wall: busy(wall) if n == 2 else quiet(wall))
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=10_000))
    assert got.samples[:3] == [40.0, 80.0, 40.0] and got.set_aside == values[3:3 + calls[1]]
    assert got.rounds[1]["busy"] and got.rounds[1]["used"] is False


def test_a_busy_round_that_gave_nothing_failed():
    got = settle(lambda k: Round([], 1.0, busy(1.0)), Rule(3, NOISE_MAX))
    assert got.stop == "failed" and len(got.rounds) == 1

    def then_nothing(k):
        return Round([], 1.0)
    got = settle(then_nothing, Rule(3, NOISE_MAX), first=_steady([40.0, 80.0, 40.0], 6.0))
    assert got.stop == "failed" and got.samples == [40.0, 80.0, 40.0] and len(got.rounds) == 2


def test_a_capacity_under_one_second_still_gives_a_share():
    assert HostLoad(0.1, 0.5, 1).share == pytest.approx(0.2) and HostLoad(0.1, 0.5, 1).busy


def test_a_minimum_of_one_repeat_asks_one_more_before_judging():
    """One repeat has no error: even with a minimum of one the loop measures another."""
    measure, calls = source([10.0] * 5)
    got = settle(measure, Rule(1, NOISE_MAX), first=_steady([10.0]))
    assert calls == [1] and got.stop == "settled" and got.repeats == 2


def test_rounds_that_take_no_time_with_no_budget_stop_on_the_budget():
    measure, calls = source([40.0, 80.0] * 50, wall_per_repeat=0.0)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=0.0))
    assert calls == [3] and got.stop == "budget"


def test_a_round_of_one_repeat_fits_the_budget_by_its_own_time():
    """A one-repeat round of 2 s with 3 s of budget left: one more repeat fits, not two."""
    measure, calls = source([80.0, 40.0] * 50)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=3.0), first=_steady([40.0], 2.0))
    assert calls == [1] and got.stop == "budget" and got.samples == [40.0, 80.0]


def test_repeats_under_a_second_fit_the_budget_by_their_time():
    """Half a second a repeat and 1 s of budget beyond the first round: two more repeats,
    then the budget is spent (not the spread's 21 more, and not none)."""
    measure, calls = source([40.0, 80.0] * 50, wall_per_repeat=0.5)
    got = settle(measure, Rule(3, NOISE_MAX, budget_s=1.0))
    assert calls == [3, 2] and got.stop == "budget" and got.repeats == 5
