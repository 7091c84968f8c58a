"""
Smoke suite: the server is healthy, lists its model, and streams at least one token.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .client import RequestRecord, ServerClient, health_text
from .judge import Check, as_measured


@dataclass
class SmokeResult:
    checks: list[Check] = field(default_factory=list)
    record: RequestRecord | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)


def wait_healthy(client: ServerClient, deadline_s: float) -> tuple[bool, str]:
    """Poll /health until 200 (503 = loading) or the deadline; return the last state."""
    start, last = time.monotonic(), "no answer"
    while time.monotonic() - start < deadline_s:
        try:
            code = client.health()
            if code == 200:
                return True, f"200 after {time.monotonic() - start:.1f} s"
            last = health_text(code)
        except Exception as e:  # connection refused while starting
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.5)
    return False, last


def run_smoke(client: ServerClient, health_deadline_s: float = 60.0) -> SmokeResult:
    res = SmokeResult()
    ok, why = wait_healthy(client, health_deadline_s)
    res.checks.append(Check.of("health", ok, why))
    if not ok:
        return res
    models = client.models()
    res.checks.append(Check.of("models", len(models) == 1,
                            f"{len(models)} model(s): {[m.get('id') for m in models]}"))
    rec = client.stream_chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    res.record = rec
    n = rec.completion_tokens or 0
    res.checks.append(Check.of("stream", rec.ok and n >= 1,
                            f"{n} token(s), ttft {as_measured(rec.ttft_s, 's', '.3f')}"
                            + (f", error {rec.error}" if rec.error else "")))
    return res
