"""
Reports: report.json (everything), report.md (summary table).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else str(o)))


def write_reports(report: Any, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = _jsonable(asdict(report))
    data["passed"] = report.passed
    (folder / "report.json").write_text(json.dumps(data, indent=2))
    lines = [f"# beekeeper verify: {report.profile}", "",
             f"- server: {report.url}", f"- started (UTC): {report.started_utc}",
             f"- result: **{'PASS' if report.passed else 'FAIL'}**", "",
             "| check | result | detail |", "|---|---|---|"]
    for c in report.checks:
        lines.append(f"| {c.name} | {'PASS' if c.passed else 'FAIL'} | {c.detail} |")
    (folder / "report.md").write_text("\n".join(lines) + "\n")
