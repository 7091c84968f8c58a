"""
One host's failure, in deploy.py and uninstall.py alike (tasks/hostfail.py, issue 42): an
error raised while one host's operations are prepared fails that host alone, as one redacted
line, and the run's summary names it. The uninstall had its own copy, which let any error
that was not the kit's stop every host, unredacted and missing from the summary.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pyinfra.api import Config, Inventory, State

from beekeeper.core.errors import BeekeeperError
from beekeeper.tasks.hostfail import print_summary

from .harness import DEFAULTS, deployed_host, prepare_each_host

SECRET_URL = "https://robot:s3cret-token@models.example.org/m.gguf"


def _unreadable(path: str) -> list[str]:
    """A fact value no parser expects: the kind of error that is no refusal of the kit."""
    raise ValueError(f"cannot read {path} from {SECRET_URL}\nsecond line")


def uninstall_hosts(hosts: dict[str, dict[str, Any]], data: dict[str, dict[str, Any]] | None = None
                    ) -> tuple[State, dict[str, Exception]]:
    """uninstall.py for each host of one inventory (each its own machine), one after another
    as pyinfra prepares them: `hosts` maps a name to its facts, `data` to its own host data.
    Returns the run's State and what each host raised out of uninstall.py."""
    base = {**DEFAULTS, "profile": "cpu-tiny"}
    inventory = Inventory(([(name, {**base, **(data or {}).get(name, {})}) for name in hosts],
                           {}))
    state = State(inventory, Config())
    for h in inventory:
        state.activate_host(h)
    errors = prepare_each_host(state, "uninstall.py", lambda name: hosts[name])
    return state, errors


def test_an_unexpected_error_in_one_hosts_uninstall_fails_that_host_alone(capsys):
    state, errors = uninstall_hosts({"bad": deployed_host(FileContents=_unreadable),
                                     "good": deployed_host()})
    assert errors == {}
    assert {h.name for h in state.failed_hosts} == {"bad"}
    assert {h.name for h in state.active_hosts} == {"good"}
    good = state.inventory.get_host("good")
    assert state.ops.get(good), "the other host's uninstall was not prepared"
    # one red line, redacted, saying it is a bug and where
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("host bad:")]
    assert len(err) == 1
    line = err[0]
    assert line.startswith("host bad: ValueError: cannot read ") and line.endswith(
        "this is a bug in beekeeper: please report it with this line (the other hosts go on)")
    assert "s3cret" not in line and "robot" not in line and "https://***@models" in line
    assert "second line" not in line and "(at " in line
    # and the run's last lines name it
    assert state.beekeeper_failures["bad"].startswith("ValueError: ")
    print_summary(state, state.beekeeper_failures)
    summary = capsys.readouterr().err.splitlines()
    assert summary[0] == "beekeeper: 1 of 2 hosts failed:"
    assert summary[1].startswith("  host bad: ValueError: cannot read ")
    # said once, and not that other hosts go on: the summary comes when none does
    assert summary[1].endswith("this is a bug in beekeeper: please report it with this line")
    assert summary[1].count("bug in beekeeper") == 1
    assert len(summary) == 2 and "s3cret" not in summary[1]


def test_the_last_host_left_raises_the_uninstalls_bug_line():
    """A one-host run (or the last host still active) ends with the line, as deploy.py's."""
    state, errors = uninstall_hosts({"bad": deployed_host(FileContents=_unreadable)})
    assert list(errors) == ["bad"] and isinstance(errors["bad"], BeekeeperError)
    assert str(errors["bad"]).startswith("host bad: ValueError: ")
    assert "this is a bug in beekeeper" in str(errors["bad"]) and "s3cret" not in str(
        errors["bad"])
    assert state.beekeeper_failures["bad"].startswith("ValueError: ")
    assert "go on" not in str(errors["bad"])  # the last host: no other host goes on


def test_bad_uninstall_data_fails_that_host_alone_and_is_summed_up(capsys):
    state, errors = uninstall_hosts({"bad": deployed_host(), "good": deployed_host()},
                                    data={"bad": {"keep_models": "yes"}})
    assert errors == {} and {h.name for h in state.failed_hosts} == {"bad"}
    assert state.beekeeper_failures["bad"].startswith("host data `keep_models`: ")


def test_a_one_host_runs_refusal_is_one_line_naming_no_path_of_the_kit(tmp_path):
    """Mutant (as it was): the last host left raised its line as pyinfra's error, which the
    pyinfra command printed as "pyinfra error in <the kit's path>/tasks/hostfail.py line N:
    host ...", and the run's summary printed it again. The real pyinfra command, a dry run on
    @local with a profile the kit has not (or, as a login that is not root, the login's
    refusal, which comes first): exit 1, the host's line once, the kit's files unnamed."""
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "-m", "pyinfra", "-y", "--dry", "@local", "deploy.py",
                        "--data", "profile=nope"], cwd=root, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "HOME": str(tmp_path)})
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    said = [line for line in out.splitlines() if "host @local: " in line]
    assert len(said) == 1 and ("host data `profile`" in said[0] or "login" in said[0]), out
    assert "fix: " in said[0] and "hostfail.py" not in out and "pyinfra error" not in out, out
