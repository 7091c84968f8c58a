"""
How many repeats a figure needs, and whether the host was busy while it was measured
(docs/verify.md, "Enough repeats, and a busy host, measured": the rule, its limits, the runs).
`settle` is that loop, pure: the caller's `measure(k)` runs k repeats and says how long they
took and what else ran on the host.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# other processes' CPU over a round, as a share of the host's CPU capacity: over it the
# round was busy (the figures it was set from: docs/verify.md)
BUSY_SHARE = 0.10
BUSY_RETRIES = 1  # a busy round is measured again once, while the budget allows
SETTLE_BUDGET_S = 120.0  # default time a figure may take beyond its first round
MAX_FACTOR = 8  # a figure's repeats are capped at this many times its minimum
MARGIN = 1.2  # extra repeats asked for beyond what the spread so far says (it is an estimate)

# what the host prints for one reading (LOAD_SNAPSHOT): busy and total ticks of all CPUs,
# ticks a second, CPUs, and the ticks of the measured programs alive now
_SNAP_RE = re.compile(r"^beekeeper-load (\d+) (\d+) (\d+) (\d+) (\d+)$", re.M)
MEASURED = ("llama-server", "llama-bench")
_READ = "read -r _ u n s i w q sq st _ < /proc/stat; "
_ECHO = ("echo \"beekeeper-load $((u+n+s+q+sq+st)) $((u+n+s+i+w+q+sq+st)) "
         "$(getconf CLK_TCK 2>/dev/null || echo 100) $(grep -c '^cpu[0-9]' /proc/stat) {}\"")
# bash on the host: one reading; no programs beyond bash, awk-free (a minimal host has bash)
LOAD_SNAPSHOT = (
    _READ + "m=0; for d in /proc/[0-9]*; do read -r c < \"$d/comm\" 2>/dev/null || continue; "
    f"case $c in {'|'.join(MEASURED)}) read -ra f < \"$d/stat\" 2>/dev/null "
    "&& m=$((m + f[13] + f[14]));; esac; done; " + _ECHO.format("$m"))
# the same reading in POSIX sh without the process scan (measured: 0), for inside the image
# beside llama-bench (dash, no bash), where llama-bench's own CPU time comes from `times`:
# read there, it leaves out `docker run`'s start and teardown, which are not the host's load
SNAPSHOT_SH = _READ + _ECHO.format("0")


@dataclass(frozen=True)
class Snapshot:
    """One reading of the host's CPU counters (ticks)."""

    busy: int
    total: int
    hz: int
    cpus: int
    measured: int  # ticks of the measured programs alive at the reading


def parse_snapshots(text: str) -> list[Snapshot]:
    return [Snapshot(*(int(g) for g in m.groups())) for m in _SNAP_RE.finditer(text or "")]


@dataclass(frozen=True)
class HostLoad:
    """CPU time other processes used on the host over a round."""

    other_cpu_s: float
    capacity_s: float  # wall time x CPUs
    cpus: int

    @property
    def share(self) -> float:
        return max(self.other_cpu_s, 0.0) / self.capacity_s if self.capacity_s > 0 else 0.0

    @property
    def busy(self) -> bool:
        return self.share > BUSY_SHARE

    def text(self) -> str:
        used = max(self.other_cpu_s, 0.0) / (self.capacity_s / self.cpus) if self.capacity_s else 0
        return (f"other processes used {used:.2f} of {self.cpus} CPUs, {self.share:.0%} of "
                f"the host's CPU time (busy over {BUSY_SHARE:.0%})")

    @classmethod
    def between(cls, a: Snapshot, b: Snapshot, measured_s: float | None = None
                ) -> HostLoad | None:
        """The load from reading `a` to `b`. `measured_s`: the measured programs' CPU time
        over it when known exactly (a llama-bench run's own `times`), else the change in the
        counters of those alive at both readings."""
        if b.total <= a.total or a.hz <= 0:
            return None
        mine = measured_s if measured_s is not None else max(b.measured - a.measured, 0) / a.hz
        return cls((b.busy - a.busy) / a.hz - mine, (b.total - a.total) / a.hz, a.cpus)


@dataclass(frozen=True)
class Round:
    """What one round of k repeats gave."""

    samples: list[float]
    wall_s: float
    load: HostLoad | None = None


@dataclass(frozen=True)
class Rule:
    """When a figure has enough repeats: its error under `limit`, or `cap` repeats, or
    `budget_s` spent after the first round."""

    min_repeats: int
    limit: float
    budget_s: float = SETTLE_BUDGET_S

    @property
    def cap(self) -> int:
        return self.min_repeats * MAX_FACTOR


def error_of(samples: Sequence[float]) -> float | None:
    """Sample standard deviation / mean / sqrt(n); None for fewer than two."""
    if len(samples) < 2:
        return None
    mean = statistics.mean(samples)
    return statistics.stdev(samples) / mean / math.sqrt(len(samples)) if mean else 0.0


def needed(samples: Sequence[float], limit: float) -> int:
    """How many repeats the spread so far says the figure needs for an error under `limit`
    (MARGIN more, as the spread of a few repeats is itself rough)."""
    if len(samples) < 2:
        return 2
    mean = statistics.mean(samples)
    rel = statistics.stdev(samples) / mean if mean else 0.0
    return max(math.ceil((rel / limit) ** 2 * MARGIN), len(samples) + 1)


@dataclass
class Settled:
    """A figure's repeats: the ones it is judged on, those set aside (busy rounds), every
    round as it ran, and why the loop stopped: "settled" (error under the limit), "cap"
    (the repeats' cap), "budget" (time), "busy" (a busy round left), "failed" (a round
    gave nothing)."""

    samples: list[float] = field(default_factory=list)
    set_aside: list[float] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    stop: str = "settled"
    wall_s: float = 0.0
    budget_s: float = SETTLE_BUDGET_S
    limit: float = 0.0
    min_repeats: int = 0

    @property
    def repeats(self) -> int:
        return len(self.samples)

    @property
    def figure_samples(self) -> list[float]:
        """What the figure is computed from: the quiet repeats, or with none the busy ones
        (the figure is then not judged)."""
        return self.samples or self.set_aside

    @property
    def busy_load(self) -> HostLoad | None:
        """The load of the busy round that left the figure unjudged (stop "busy")."""
        if self.stop != "busy":
            return None
        last = next((r for r in reversed(self.rounds) if r.get("busy")), None)
        return HostLoad(last["other_cpu_s"], last["capacity_s"], last["cpus"]) if last else None

    def text(self) -> str:
        """e.g. `6 repeats (rounds of 3, then 3) in 41 s`, `3 repeats (rounds of 3 set aside:
        the host busy, then 3) in 59 s`."""
        if len(self.rounds) < 2 and not self.set_aside:
            return f"{self.repeats} repeats in {self.wall_s:.0f} s"
        said = [f"{r['repeats']}" + (" set aside: the host busy" if r.get("busy") else "")
                for r in self.rounds]
        return (f"{self.repeats} repeats (rounds of {', then '.join(said)}) in "
                f"{self.wall_s:.0f} s")

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Settled:
        return cls(samples=list(d.get("samples") or []), set_aside=list(d.get("set_aside") or []),
                   rounds=list(d.get("rounds") or []), stop=str(d.get("stop", "settled")),
                   wall_s=float(d.get("wall_s") or 0.0),
                   budget_s=float(d.get("budget_s") or SETTLE_BUDGET_S),
                   limit=float(d.get("limit") or 0.0), min_repeats=int(d.get("min_repeats") or 0))

    def to_json(self) -> dict[str, Any]:
        return {"repeats": self.repeats, "samples": self.samples, "set_aside": self.set_aside,
                "rounds": self.rounds, "stop": self.stop, "wall_s": round(self.wall_s, 2),
                "budget_s": self.budget_s, "limit": self.limit,
                "min_repeats": self.min_repeats, "error": error_of(self.samples)}


def _record(r: Round, used: bool) -> dict[str, Any]:
    load = r.load
    return {"repeats": len(r.samples), "wall_s": round(r.wall_s, 2), "used": used,
            "error_after": None,
            "load_share": round(load.share, 4) if load else None,
            "busy": bool(load and load.busy),
            "other_cpu_s": round(load.other_cpu_s, 3) if load else None,
            "capacity_s": round(load.capacity_s, 3) if load else None,
            "cpus": load.cpus if load else None}


def settle(measure: Callable[[int], Round], rule: Rule, *, first: Round | None = None
           ) -> Settled:
    """Rounds of `measure(k)` until the figure settles. `first`: a round already measured
    (llama-bench's first run covers every test at once)."""
    out = Settled(budget_s=rule.budget_s, limit=rule.limit, min_repeats=rule.min_repeats)
    busy_rounds = 0
    r = first if first is not None else measure(rule.min_repeats)
    while True:
        busy = bool(r.load and r.load.busy)
        rec = _record(r, used=not busy)
        out.rounds.append(rec)
        out.wall_s += r.wall_s
        if busy:
            out.set_aside += r.samples
            busy_rounds += 1
        else:
            out.samples += r.samples
        err = error_of(out.samples)
        rec["error_after"] = round(err, 4) if err is not None else None
        left = rule.budget_s - (out.wall_s - out.rounds[0]["wall_s"])
        if not r.samples:
            out.stop = "failed"
            break
        if busy and busy_rounds > BUSY_RETRIES:
            out.stop = "busy"
            break
        if not busy and err is not None and err <= rule.limit \
                and len(out.samples) >= rule.min_repeats:
            out.stop = "settled"
            break
        if len(out.samples) >= rule.cap:
            out.stop = "cap"
            break
        k = (min(needed(out.samples, rule.limit), rule.cap) - len(out.samples)
             if len(out.samples) >= 2 else rule.min_repeats - len(out.samples))
        per = r.wall_s / max(len(r.samples), 1)
        fit = int(left // per) if per > 0 else k
        if left <= 0 or fit < 1:
            out.stop = "busy" if busy else "budget"
            break
        r = measure(max(min(k, fit), 1))
    return out
