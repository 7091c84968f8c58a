#!/usr/bin/env python3
"""
Deploy gate run on the host itself (standard library only, so any host with python3
can run it): wait for /health, then smoke-check the OpenAI API.

    python3 hostcheck.py --port 8083 --timeout 300 [--api-key-file F] [--unit U] [--host A]

With --unit, a server that keeps exiting before /health answers (the unit restarted
CRASH_LOOP_RESTARTS times since the wait began, systemd's NRestarts) fails at once rather
than at the deadline: it will not get better by waiting.

Prints one JSON line; exit 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def _request(url: str, key: str | None, body: dict | None = None, timeout: float = 30.0):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    return urllib.request.urlopen(req, timeout=timeout)  # noqa: S310 (this host's own URL)


CRASH_LOOP_RESTARTS = 3


def _number(argv: list[str]) -> int | None:
    """The number a command prints, None where it cannot run or prints none."""
    try:
        return int(subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def restarts(unit: str) -> int | None:
    """The unit's automatic restarts so far (systemd's NRestarts), None if unreadable."""
    return _number(["systemctl", "show", "-p", "NRestarts", "--value", unit])


class ProgramWatch:
    """Runtime supervisor: a program's restarts since the wait began (supervisord keeps no
    count), the most of the exits its log shows (which counts a server dying soon after
    startsecs, whose RUNNING a poll can miss) and the new pids `status` shows; and FATAL."""

    def __init__(self, program: str, ctl: str, log: str) -> None:
        self.program, self.ctl, self.log = program, ctl, log
        self.pids: list[int] = []
        self.fatal = False
        self.exits = 0
        self._offset = self._size()

    def _size(self) -> int:
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def _logged_exits(self) -> int:
        """`exited: NAME (...)` lines supervisord wrote since the last reading."""
        if self._size() < self._offset:  # rotated: the new file from its start
            self._offset = 0
        try:
            with open(self.log, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return 0
        done = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += done
        mark = f"exited: {self.program} (".encode()
        return sum(1 for line in data[:done].splitlines() if mark in line)

    def __call__(self, _unit: str) -> int | None:
        self.exits += self._logged_exits()
        try:
            out = subprocess.run([self.ctl, "status", self.program], capture_output=True,
                                 text=True, timeout=10).stdout.split()
        except (OSError, subprocess.SubprocessError):
            out = []
        if len(out) >= 2 and out[1] == "FATAL":
            self.fatal = True
        if len(out) >= 2 and out[1] == "RUNNING" and "pid" in out:
            pid = int(out[out.index("pid") + 1].rstrip(","))
            if pid not in self.pids:
                self.pids.append(pid)
        if len(out) < 2 and not self.exits and not self.pids:
            return 0 if os.path.exists(self.log) else None
        return max(len(self.pids) - 1, self.exits, 0) + (
            CRASH_LOOP_RESTARTS if self.fatal else 0)


def wait_healthy(base: str, deadline_s: float, unit: str | None = None,
                 restarts_of: Callable[[str], int | None] = restarts) -> tuple[bool, str, float]:
    """Poll /health until 200; 503 means the model is still loading. With `unit`, give up
    when it restarted CRASH_LOOP_RESTARTS times since the wait began (`restarts_of` reads
    the restarts: systemd's NRestarts by default, a ProgramWatch for supervisord)."""
    start = time.monotonic()
    last = "no answer yet"
    first = restarts_of(unit) if unit else None
    while time.monotonic() - start < deadline_s:
        try:
            with _request(f"{base}/health", None, timeout=5) as resp:
                if resp.status == 200:
                    return True, "ok", time.monotonic() - start
        except urllib.error.HTTPError as e:
            last = f"HTTP {e.code} ({'loading' if e.code == 503 else 'error'})"
        except (urllib.error.URLError, OSError) as e:
            last = f"connection: {getattr(e, 'reason', e)}"
        now = restarts_of(unit) if unit and first is not None else None
        if unit and getattr(restarts_of, "fatal", False):  # supervisord gave up on it
            return False, (f"{unit} exited as it started, again and again, and supervisord "
                           "gave up on it (FATAL): the server stops as it starts, waiting "
                           f"longer will not help ({last})"), time.monotonic() - start
        if now is not None and first is not None and now - first >= CRASH_LOOP_RESTARTS:
            return False, (f"{unit} exited and was restarted {now - first} times: the server "
                           f"stops as it starts, waiting longer will not help ({last})"), \
                time.monotonic() - start
        time.sleep(1.0)
    return False, last, time.monotonic() - start


def listeners(port: int, proc: str = "/proc") -> tuple[set[int], bool]:
    """The pids that hold a listening TCP socket on `port` (IPv4 or IPv6), read from /proc
    (no `ss` on many pods), and whether they are exact: where the holder's fds are hidden (a
    container's root lacks CAP_SYS_PTRACE), every process of the socket's user stands for it."""
    sockets: dict[str, int] = {}  # socket:[inode] -> its user's uid
    for table in ("net/tcp", "net/tcp6"):
        try:
            with open(f"{proc}/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                sockets[f"socket:[{cols[9]}]"] = int(cols[7])
    pids: set[int] = set()
    for entry in _pids(proc) if sockets else []:
        try:
            fds = os.listdir(f"{proc}/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"{proc}/{entry}/fd/{fd}") in sockets:
                    pids.add(entry)
                    break
            except OSError:
                continue
    if pids or not sockets:
        return pids, True
    uids = set(sockets.values()) - {0}
    return {p for p in _pids(proc) if _uid(p, proc) in uids}, False


def _pids(proc: str) -> list[int]:
    return [int(e) for e in os.listdir(proc) if e.isdigit()]


def _uid(pid: int, proc: str) -> int | None:
    for line in _read(f"{proc}/{pid}/status").splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _describe(pid: int, proc: str = "/proc") -> str:
    import pwd

    comm = _read(f"{proc}/{pid}/comm") or "?"
    try:
        user = pwd.getpwuid(os.stat(f"{proc}/{pid}").st_uid).pw_name
    except (OSError, KeyError):
        user = "?"
    return f"pid {pid} ({comm}, user {user})"


def container_publishes(container: str, port: int) -> bool:
    """Whether the runtime's container runs and publishes `port` on the host."""
    try:
        out = subprocess.run(["docker", "port", container], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and any(line.rstrip().endswith(f":{port}")
                                       for line in out.stdout.splitlines())


def answering_is_ours(port: int, program: str | None = None, unit: str | None = None,
                      container: str | None = None, proc: str = "/proc",
                      ctl: str = "") -> str | None:
    """None when the process answering on `port` is the one the runtime started (the
    supervisord program's pid, a process of the unit, or the unit's container behind
    Docker's proxy); else why not, in one line. `ctl`: supervisorctl's path."""
    found, exact = listeners(port, proc)
    if container:
        others = [p for p in found if _read(f"{proc}/{p}/comm") != "docker-proxy"]
        if others and exact:
            return (f"port {port} is held by {_describe(others[0], proc)}, not by the "
                    f"container {container}")
        if not container_publishes(container, port):
            return f"the container {container} does not run or does not publish port {port}"
        return None
    held = ", ".join(_describe(p, proc) for p in sorted(found)) or "nothing found"
    if not exact:
        held = f"one of {held} (the processes of the socket's user: its own fds are hidden)"
    if program:
        pid = _number([ctl, "pid", program])  # supervisord's pid of it, 0 for none
        if not pid:
            return f"supervisord runs no process for {program}"
        if found != {pid} if not exact else pid not in found:
            return (f"port {port} is not held by {program}'s server (pid {pid}) alone but by "
                    f"{held}: another server answers there")
        return None
    if unit:  # the unit's own processes: those in its cgroup
        ours = [p for p in found if any(line.rstrip().endswith(f"/{unit}") for line in
                                        _read(f"{proc}/{p}/cgroup").splitlines())]
        if not ours or (not exact and len(ours) != len(found)):
            return (f"port {port} is not held by a process of {unit} but by {held}: "
                    "another server answers there")
    return None


def smoke(base: str, key: str | None, model: str | None = None) -> dict:
    with _request(f"{base}/v1/models", key) as resp:
        models = json.load(resp)
    ids = [m.get("id") for m in models.get("data", [])]
    if len(ids) != 1:
        raise RuntimeError(f"/v1/models lists {len(ids)} models, expected 1")
    if model is not None and ids[0] != model:
        raise RuntimeError(f"/v1/models names {ids[0]!r}, not the deployed model {model!r}: "
                           "another server answers there")
    body = {"model": ids[0], "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    tokens, content, usage = 0, "", None
    t0 = time.monotonic()
    first = None
    with _request(f"{base}/v1/chat/completions", key, body, timeout=120) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            chunk = json.loads(payload)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    tokens += 1
                    content += piece
                    first = first if first is not None else time.monotonic() - t0
    n = usage.get("completion_tokens", tokens) if usage else tokens
    if n < 1:
        raise RuntimeError("the streamed chat completion returned no token")
    return {"model": ids[0], "completion_tokens": n, "first_token_s": first, "text": content}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1",
                    help="the address the server is reached at on this host: its bind "
                         "address where it listens on one address only (default 127.0.0.1)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--api-key-file")
    ap.add_argument("--health-only", action="store_true")
    ap.add_argument("--unit", help="the server's systemd unit: a crash loop fails at once")
    ap.add_argument("--program", help="the server's supervisord program (runtime supervisor): "
                    "a crash loop fails at once")
    ap.add_argument("--supervisorctl", help="with --program: the kit's supervisorctl launcher")
    ap.add_argument("--supervisord-log", help="with --program: supervisord's log, whose lines "
                    "count the program's exits")
    ap.add_argument("--container", help="the unit's container (runtime systemd or compose "
                    "in container mode): it, behind Docker's proxy, must hold the port")
    ap.add_argument("--model", help="the model name the server must list on /v1/models")
    ap.add_argument("--out", help="also write the result to this JSON file")
    args = ap.parse_args(argv)
    if args.program and not (args.supervisorctl and args.supervisord_log):
        ap.error("--program needs --supervisorctl and --supervisord-log")
    key = None
    if args.api_key_file:
        with open(args.api_key_file) as f:
            key = f.read().strip()
    base = f"http://{f'[{args.host}]' if ':' in args.host else args.host}:{args.port}"
    watch = (ProgramWatch(args.program, args.supervisorctl, args.supervisord_log)
             if args.program else restarts)
    ok, why, waited = wait_healthy(base, args.timeout, args.program or args.unit, watch)
    result: dict = {"ok": ok, "url": base, "health_wait_s": round(waited, 2)}
    if not ok:
        result["error"] = f"/health not 200 after {waited:.0f} s: {why}"
    elif args.health_only:
        pass
    elif (whose := answering_is_ours(args.port, args.program, args.unit, args.container,
                                          ctl=args.supervisorctl or "")):
        result.update(ok=False, error=f"not the deployed server: {whose}")
    else:
        try:
            result.update(smoke(base, key, args.model))
        except Exception as e:  # a failed check is reported, not raised
            result.update(ok=False, error=f"smoke: {e}")
    result["checked_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(result))
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
        print(f"smoke result: {args.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
