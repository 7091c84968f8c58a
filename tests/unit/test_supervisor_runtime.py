"""
The runtime supervisor's moving parts on a real supervisord (the `supervisor` package the kit
packs for hosts without systemd), started here in a temporary folder: the program file the
kit renders is one supervisord reads and runs, with its quoting intact; the smoke check's
watch sees a crash loop at once (FATAL), not after its timeout; the package tarball is the
same bytes twice (a second deploy uploads nothing).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beekeeper.core import supervisor as sv
from beekeeper.core.render import render
from beekeeper.hostside import hostcheck

CONF = """[unix_http_server]
file={d}/sock
[supervisord]
logfile={d}/supervisord.log
pidfile={d}/pid
childlogdir={d}
[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface
[supervisorctl]
serverurl=unix://{d}/sock
[include]
files = {d}/programs/*.conf
"""


@pytest.fixture
def supervisord(tmp_path):
    (tmp_path / "programs").mkdir()
    conf = tmp_path / "supervisord.conf"
    conf.write_text(CONF.format(d=tmp_path))
    ctl = tmp_path / "ctl"
    ctl.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m supervisor.supervisorctl "
                   f"-c {shlex.quote(str(conf))} \"$@\"\n")
    ctl.chmod(0o755)
    subprocess.run([sys.executable, "-m", "supervisor.supervisord", "-c", str(conf)],
                   check=True)
    deadline = time.monotonic() + 10
    while subprocess.run([str(ctl), "pid"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "supervisord did not answer"
        time.sleep(0.1)
    yield tmp_path, ctl
    subprocess.run([str(ctl), "shutdown"], capture_output=True)


def program(tmp_path: Path, name: str, launch: str, binary: str, args: list[str]) -> None:
    """The kit's program template, with `launch` in place of the setpriv drop (no user
    beekeeper here) and this folder's log."""
    class Svc:
        class profile:  # noqa: N801 - the template reads svc.profile.name
            name = "cpu-tiny"
        class data:  # noqa: N801 - and svc.data's address and port
            bind_address, port = "127.0.0.1", 8083
        name = "llm"
    text = render("supervisor-program.conf.j2", svc=Svc, program=name, launch=launch,
                  binary=binary, args=args, log_file=str(tmp_path / f"{name}.log"),
                  env_file=None)
    (tmp_path / "programs" / f"{name}.conf").write_text(text)


def state(ctl: Path, name: str) -> str:
    out = subprocess.run([str(ctl), "status", name], capture_output=True, text=True).stdout
    return out.split()[1] if len(out.split()) > 1 else ""


def wait_state(ctl: Path, name: str, want: str, deadline_s: float = 20) -> None:
    end = time.monotonic() + deadline_s
    while state(ctl, name) != want:
        assert time.monotonic() < end, f"{name} is {state(ctl, name)}, not {want}"
        time.sleep(0.2)


def test_the_rendered_program_runs_with_its_arguments_as_given(supervisord):
    tmp, ctl = supervisord
    # an argument with a space, a quote, a % (supervisor's own expansion) and a $ (the
    # shell's): each reaches the program as one word, as given
    args = ["--system-prompt", "it's 100% $HOME", "--alias", "a b"]
    server = tmp / "server"  # stands for llama-server: prints its arguments, one a line
    server.write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\nexec sleep 60\n")
    server.chmod(0o755)
    program(tmp, "echoer", 'exec "$@"', str(server), args)
    subprocess.run([str(ctl), "update"], check=True, capture_output=True)
    wait_state(ctl, "echoer", "RUNNING")
    end = time.monotonic() + 10
    log = tmp / "echoer.log"
    while not (log.exists() and log.read_text().strip()):
        assert time.monotonic() < end, "the program wrote nothing"
        time.sleep(0.1)
    assert log.read_text().splitlines() == ["--host", "127.0.0.1", "--port", "8083", *args]


def test_a_crash_loop_fails_the_smoke_wait_at_once_not_at_its_timeout(supervisord):
    tmp, ctl = supervisord
    program(tmp, "crasher", 'exec "$@"', "/bin/sh", ["-c", "echo no such flag >&2; exit 1"])
    subprocess.run([str(ctl), "update"], capture_output=True)
    # the deploy's `supervisorctl start` has given up already when the smoke check begins
    wait_state(ctl, "crasher", "FATAL", 30)
    t0 = time.monotonic()
    ok, why, _ = hostcheck.wait_healthy("http://127.0.0.1:9", 120, "crasher",
                                        hostcheck.ProgramWatch("crasher", str(ctl),
                                                               str(tmp / "supervisord.log")))
    assert not ok and "FATAL" in why and "crasher" in why
    assert time.monotonic() - t0 < 15
    # the program's startretries (3): a server that cannot start is tried four times, then
    # left FATAL (a bad flag neither retried for ever nor given up on at its first exit)
    spawned = (tmp / "supervisord.log").read_text().count("spawned: 'crasher'")
    assert spawned == 4, spawned


def test_a_server_dying_just_after_startsecs_is_counted_from_supervisords_log(supervisord):
    """A server that lives a little over startsecs is RUNNING for a moment each time: never
    FATAL, and a `status` poll can miss every RUNNING (or `status` cannot be read at all).
    The exits supervisord logs are counted instead, so the wait fails in seconds, not at
    its deadline (on the H200 a bad flag waited the whole 300 s)."""
    tmp, ctl = supervisord
    program(tmp, "flapper", 'exec "$@"', "/bin/sh", ["-c", "sleep 1.2; exit 1"])
    subprocess.run([str(ctl), "update"], capture_output=True)
    watch = hostcheck.ProgramWatch("flapper", str(tmp / "no-such-ctl"),
                                   log=str(tmp / "supervisord.log"))
    t0 = time.monotonic()
    ok, why, _ = hostcheck.wait_healthy("http://127.0.0.1:9", 90, "flapper", watch)
    assert not ok and "restarted" in why, why
    assert watch.exits >= hostcheck.CRASH_LOOP_RESTARTS and not watch.pids
    assert time.monotonic() - t0 < 45


def test_a_restart_after_a_crash_is_counted(supervisord):
    tmp, ctl = supervisord
    program(tmp, "sleeper", "exec sleep 60", "/bin/sleep", [])  # its arguments ignored
    subprocess.run([str(ctl), "update"], capture_output=True)
    wait_state(ctl, "sleeper", "RUNNING")
    watch = hostcheck.ProgramWatch("sleeper", str(ctl), str(tmp / "supervisord.log"))
    assert watch("sleeper") == 0
    pid = subprocess.run([str(ctl), "pid", "sleeper"], capture_output=True, text=True).stdout
    subprocess.run(["kill", "-9", pid.strip()], check=True)
    end = time.monotonic() + 20
    while watch("sleeper") != 1:  # autorestart: a new pid
        assert time.monotonic() < end, "supervisord did not start it again"
        time.sleep(0.2)


def test_the_package_tarball_is_the_same_bytes_each_time():
    first = sv.package_tarball().read_bytes()
    assert sv.package_tarball().read_bytes() == first
    version, files = sv.package_files()
    assert version == "4.3.0" and any(n == "supervisor/supervisord.py" for n, _ in files)
