"""Where a long command's time went: named phases with their wall times, printed as one
line at the end (the demo's timeline). Pure: the caller says when each phase ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

# pyinfra's line as an operation starts (`--> Starting operation: <name>`)
OPERATION_START = "--> Starting operation: "


@dataclass
class Timeline:
    """Phases in the order they ended, each with its wall seconds."""

    clock: Callable[[], float] = time.monotonic
    phases: list[tuple[str, float]] = field(default_factory=list)
    _since: float = field(init=False)  # when the last phase ended (or the line began)

    def __post_init__(self) -> None:
        self._since = self.clock()

    def add(self, name: str, seconds: float) -> None:
        """A phase timed elsewhere (the set-up before this process started)."""
        self.phases.append((name, seconds))

    def end(self, name: str) -> float:
        """The phase `name` ends now: it lasted since the previous one ended."""
        now = self.clock()
        took = now - self._since
        self.phases.append((name, took))
        self._since = now
        return took

    def text(self) -> str:
        total = sum(s for _, s in self.phases)
        parts = " | ".join(f"{n} {s:.0f} s" for n, s in self.phases)
        return f"timeline: {parts} | total {total:.0f} s"


def operation_walls(lines: Iterable[tuple[float, str]]) -> Iterator[tuple[str, float]]:
    """(operation name, wall seconds) for each pyinfra operation in a timed stream of its
    output lines ((monotonic time the line came, line)): an operation lasts from its start
    line to the next one's, the last to the stream's last line."""
    name: str | None = None
    started = last = 0.0
    for when, line in lines:
        last = when
        if line.startswith(OPERATION_START):
            if name is not None:
                yield name, when - started
            name, started = line[len(OPERATION_START):].strip(), when
    if name is not None:
        yield name, last - started
