"""
Run verification suites against a server and write the reports.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from beekeeper.profiles import Profile

from .client import ServerClient
from .smoke import Check, run_smoke

ALL_SUITES = ["smoke", "decode", "ttft", "niah", "vram", "load"]


@dataclass
class Report:
    """A verify run: config echo, every check, raw records per suite."""

    profile: str
    url: str
    started_utc: str
    checks: list[Check] = field(default_factory=list)
    suites: dict[str, Any] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    out_dir: str | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks if c.required)


def run_suites(client: ServerClient, profile: Profile, names: list[str], *,
               out_dir: str | None = None, quick: bool = False,
               host_label: str = "local") -> Report:
    if names == ["all"]:
        names = list(ALL_SUITES)
    now = datetime.now(UTC)
    report = Report(profile=profile.name, url=str(client.http.base_url),
                    started_utc=now.isoformat(timespec="seconds"))
    smoke = run_smoke(client)
    report.checks += [Check(f"smoke.{c.name}", c.passed, c.detail) for c in smoke.checks]
    report.suites["smoke"] = {"record": smoke.record.to_json() if smoke.record else None}
    if smoke.passed:
        try:
            report.server = client.props()
        except Exception as e:  # /props may be off; the report says so
            report.server = {"error": str(e)}
    for c in report.checks:
        print(f"  [{'PASS' if c.passed else 'FAIL'}] {c.name}: {c.detail}", flush=True)
    if out_dir:
        from .report import write_reports

        folder = Path(out_dir) / host_label / now.strftime("%Y%m%dT%H%M%SZ")
        write_reports(report, folder)
        report.out_dir = str(folder)
        print(f"report: {folder}/report.md", flush=True)
    print(f"verify {'PASSED' if report.passed else 'FAILED'} "
          f"({sum(c.passed for c in report.checks)}/{len(report.checks)} checks)",
          file=sys.stdout, flush=True)
    return report
