"""A gateway with a key on HAProxy 2.4 (issue 43: Ubuntu 22.04's haproxy is 2.4.x, and
`http_auth_bearer` is 2.5's). One rendering for every version: the key is read from
`Authorization` with `req.fhdr` and the `word` converter (both in 2.4's configuration manual)
and compared with the root-only key file through an ACL's `-f`, as before.

The config is checked with `haproxy -c -f`, then served on loopback in front of a stub
llama-server, by each HAProxy this machine has: `haproxy` on PATH, and any binaries named in
BEEKEEPER_TEST_HAPROXY (separated by os.pathsep; e.g. a 2.4 built from HAProxy's source, a
distro package unpacked with `dpkg-deb -x`). With none, those two tests are skipped."""

from __future__ import annotations

import http.client
import json
import os
import pwd
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from beekeeper.core import gateway as gw
from beekeeper.core.hostdata import GatewayData

CLIENT_KEY, BACKEND_KEY = "gw-Secret-0123", "be-secret-456"
SOURCE = {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}

# the versions the kit meets (apt's strings): Ubuntu 22.04, Debian 12, Ubuntu 24.04, Debian 13
VERSIONS = ["2.4.24-0ubuntu0.22.04.1", "2.6.12-1+deb12u3", "2.8.5-1ubuntu3", "3.0.11-1"]

KEY_RULES = [
    "acl bearer req.fhdr(authorization),word(1,' ') -m str -i bearer",
    f"acl authorized req.fhdr(authorization),word(2,' ',0) -m str -f {gw.PATHS.client_key}",
]


def _keyfile(path: Path, text: str) -> str:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return str(path)


def _render(tmp: Path, keyed: bool, port: int = 4000, backend_port: int = 8083,
            check_interval_s: int = 2) -> tuple[str, list[gw.Route]]:
    svc: dict = {"service_name": "t", "profile": "cpu-tiny", "port": backend_port}
    if keyed:
        svc["api_key_file"] = _keyfile(tmp / "backend.key", BACKEND_KEY)
    plan = gw.plan("gw", [("gw", {"source": SOURCE, "services": [svc]})])
    assert plan.routes and not plan.left_out, plan.left_out
    gcfg = GatewayData(port=port, check_interval_s=check_interval_s,
                       api_key_file=_keyfile(tmp / "gateway.key", CLIENT_KEY) if keyed
                       else None)
    return gw.render_config(gcfg, plan.routes), plan.routes


@pytest.mark.parametrize("version", VERSIONS)
def test_a_keyed_gateway_is_accepted_and_rendered_once_for_every_version(tmp_path, version):
    assert gw.haproxy_refusal(version) is None
    cfg, _ = _render(tmp_path, keyed=True)
    lines = [ln.strip() for ln in cfg.splitlines()]
    assert all(rule in lines for rule in KEY_RULES)
    assert not [ln for ln in lines if "http_auth_bearer" in ln and not ln.startswith("#")]
    # a request without the scheme and the key is answered 401 before anything else
    # reads it (only the gateway's own /health comes first)
    check = next(i for i, ln in enumerate(lines) if ln.startswith("http-request return "
                                                                 "status 401"))
    assert lines[check].endswith("unless bearer authorized")
    rules = [ln for ln in lines if ln.startswith(("http-request", "use_backend"))]
    assert rules[0].endswith("if { path /health }") and rules[1] == lines[check]
    assert rules[2] == "http-request del-header authorization"
    # no key in the config: HAProxy reads the root-only files beside it
    assert CLIENT_KEY not in cfg and BACKEND_KEY not in cfg


def test_the_only_version_refused_is_older_than_json_query():
    assert gw.HAPROXY_NEEDS[0] == (2, 4)
    bullseye = gw.haproxy_refusal("2.2.9-2+deb11u6")
    assert bullseye and "older than 2.4" in str(bullseye) and "api_key_file" not in str(bullseye)


def test_without_a_key_there_is_no_key_check(tmp_path):
    cfg, _ = _render(tmp_path, keyed=False)
    assert "acl bearer" not in cfg and "authorized" not in cfg and "status 401" not in cfg


# ------------------------------------------------ with a real HAProxy, when this machine has one


def _binaries() -> list[str]:
    found = [shutil.which("haproxy")]
    found += os.environ.get("BEEKEEPER_TEST_HAPROXY", "").split(os.pathsep)
    return [b for b in dict.fromkeys(found) if b and os.access(b, os.X_OK)]


HAPROXIES = _binaries()
needs_haproxy = pytest.mark.skipif(not HAPROXIES, reason="no haproxy on this machine (PATH, "
                                                         "BEEKEEPER_TEST_HAPROXY)")


def _laid_out(tmp: Path, cfg: str, routes: list[gw.Route]) -> Path:
    """The rendered config with its files as the gateway task lays them out on the host
    (root-only keys, the backends' map, the model list), in `tmp` instead of /etc."""
    conf = tmp / "conf"
    conf.mkdir()
    _keyfile(conf / "client.key", CLIENT_KEY)
    _keyfile(conf / "upstream-keys.map", "\n".join(
        f"{backend} {BACKEND_KEY}" for backend, _ in gw.upstream_keys_map(routes)))
    (conf / "models.json").write_text(gw.models_json(routes))
    cfg = cfg.replace(gw.PATHS.conf_dir, str(conf))
    try:  # where there is no haproxy user (an unpacked package), it runs as this user
        pwd.getpwnam("haproxy")
        has_user = os.geteuid() == 0 and Path("/var/lib/haproxy").is_dir()
    except KeyError:
        has_user = False
    if not has_user:
        cfg = "\n".join(ln for ln in cfg.splitlines() if ln.strip() not in (
            "user haproxy", "group haproxy", "chroot /var/lib/haproxy"))
    path = tmp / "haproxy.cfg"
    path.write_text(cfg + "\n")
    return path


@needs_haproxy
@pytest.mark.parametrize("haproxy", HAPROXIES)
@pytest.mark.parametrize("keyed", [True, False], ids=["key", "no-key"])
def test_haproxy_checks_the_rendered_config(tmp_path, haproxy, keyed):
    cfg, routes = _render(tmp_path, keyed)
    path = _laid_out(tmp_path, cfg, routes)
    got = subprocess.run([haproxy, "-c", "-f", str(path)], capture_output=True, text=True,
                         timeout=30)
    assert got.returncode == 0, got.stdout + got.stderr


class _Stub(BaseHTTPRequestHandler):
    """llama-server's /health, and any request answered with the Authorization it got."""

    def _answer(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.dumps({"auth": self.headers.get_all("authorization")}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except ConnectionError:  # HAProxy's health check hangs up on a 200 status line
            pass

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port: int, authorization: list[str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    body = json.dumps({"model": "cpu-tiny", "messages": []}).encode()
    conn.putrequest("POST", "/v1/chat/completions", skip_accept_encoding=True)
    for value in authorization:
        conn.putheader("Authorization", value)
    conn.putheader("content-type", "application/json")
    conn.putheader("content-length", str(len(body)))
    conn.endheaders(body)
    resp = conn.getresponse()
    try:
        return resp.status, resp.read()
    finally:
        conn.close()


K = CLIENT_KEY
ANSWERS = [  # (the client's Authorization headers, the gateway's status)
    ([f"Bearer {K}"], 200), ([f"bearer {K}"], 200), ([f"BEARER {K}"], 200),
    ([f"Bearer   {K}"], 200),  # RFC 7235: one or more spaces after the scheme
    ([f"Bearer {K}", "Bearer wrong"], 200), (["Bearer wrong", f"Bearer {K}"], 200),
    ([], 401), ([""], 401), (["Bearer"], 401), (["Bearer "], 401), ([K], 401),
    ([f"Basic {K}"], 401), ([f"Bearerx {K}"], 401), ([f"Bearer {K.lower()}"], 401),
    ([f"Bearer {K}x"], 401), ([f"Bearer {K[:-1]}"], 401), ([f"Bearer {K} extra"], 401),
    ([f"Bearer x {K}"], 401), ([f"Bearer {K},x"], 401), (["Bearer wrong"], 401),
]


@needs_haproxy
@pytest.mark.parametrize("haproxy", HAPROXIES)
def test_haproxy_lets_in_only_the_bearer_key_and_sends_the_backends_own(tmp_path, haproxy):
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    port = _free_port()
    cfg, routes = _render(tmp_path, True, port=port, backend_port=stub.server_address[1],
                          check_interval_s=1)
    path = _laid_out(tmp_path, cfg, routes)
    proc = subprocess.Popen([haproxy, "-db", "-f", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 15
        while True:  # listening, and the backend's health check has passed
            try:
                if _post(port, [f"Bearer {K}"])[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "gateway not up"
            time.sleep(0.2)
        for headers, want in ANSWERS:
            status, body = _post(port, headers)
            assert status == want, (headers, status, body)
            if status == 200:  # the client's key never travels on: the backend's does
                assert json.loads(body)["auth"] == [f"Bearer {BACKEND_KEY}"], headers
    finally:
        proc.terminate()
        log, _ = proc.communicate(timeout=10)
        stub.shutdown()
        stub.server_close()
    assert "401" in log and CLIENT_KEY not in log and BACKEND_KEY not in log
