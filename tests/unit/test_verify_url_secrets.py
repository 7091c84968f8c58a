"""`beekeeper verify --url` with credentials in it (user information, a token in the query,
percent-encoded or raw): the server still gets them, and no report file, printed line or
host command line holds them."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from beekeeper import cli, verify_main
from beekeeper.verify_main import Keys, host_command, server_url, shown_url

PASSWORD, TOKEN = "s3cr3t-pass", "t0ken-value"


@pytest.fixture
def server() -> Iterator[tuple[int, list[tuple[str, str | None]]]]:
    """A loopback server: /health and /v1/models answer, a chat is refused (HTTP 401);
    every request's path and Authorization header recorded."""
    seen: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            path = self.path.split("?")[0]
            body, code = ((b'{"status": "ok"}', 200) if path == "/health" else
                          (b'{"data": [{"id": "cpu-tiny"}]}', 200) if path == "/v1/models"
                          else (b'{"error": "unauthorized"}', 401))
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = answer

        def log_message(self, *a: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1], seen
    srv.shutdown()


@pytest.mark.parametrize("userinfo, query", [
    (f"user:{PASSWORD}@", ""),
    (f"user:{PASSWORD.replace('-', '%2D')}@", f"?token={TOKEN}"),
    ("", f"?access_token={TOKEN}"),
])
def test_no_report_or_output_holds_the_urls_credentials(server, tmp_path, capsys, userinfo,
                                                       query):
    port, seen = server
    url = f"http://{userinfo}127.0.0.1:{port}/{query}"
    rc = cli.main(["verify", "--url", url, "--profile", "cpu-tiny", "--suite", "smoke",
                   "--out", str(tmp_path), "--settle-budget-s", "0", "--host-label", "box"])
    out = capsys.readouterr()
    assert rc == 1, out  # the chat was refused: a failed check, judged and reported
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"report.json", "report.md", "report.html"}
    for text in [out.out, out.err, *(p.read_text(errors="replace") for p in files)]:
        assert PASSWORD not in text and TOKEN not in text and "%2D" not in text
    report = json.loads(next(p for p in files if p.name == "report.json").read_text())
    assert report["url"] == f"http://127.0.0.1:{port}"
    # the server got what the URL carried: basic authentication, the query on each request
    assert seen and all(p.endswith(query) for p, _ in seen)
    if userinfo:
        import base64

        assert {a for _, a in seen} == {
            "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()}


def test_a_refused_request_is_one_line_without_the_credentials(server, tmp_path, capsys,
                                                               monkeypatch):
    """A request the suites do not judge refused (401 on /v1/models): one line, no traceback,
    and the URL in it has no secret."""
    port, _ = server
    from beekeeper.verify.client import ServerClient

    def refuse(self: ServerClient) -> list[dict[str, str]]:
        r = self.http.get("/v1/chat/completions")
        r.raise_for_status()
        return []

    monkeypatch.setattr(ServerClient, "models", refuse)
    rc = cli.main(["verify", "--url", f"http://u:{PASSWORD}@127.0.0.1:{port}/?token={TOKEN}",
                   "--profile", "cpu-tiny", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "answered HTTP 401 Unauthorized" in err and "--api-key-file" in err
    assert PASSWORD not in err and TOKEN not in err


@pytest.mark.parametrize("url", [
    f"http://user:pa#{PASSWORD}@127.0.0.1:8083",
    f"http://user:pa?{PASSWORD}@127.0.0.1:8083",
    f"http://user:pa/{PASSWORD}@127.0.0.1:8083",
])
def test_a_raw_reserved_character_in_the_password_is_refused_without_it(capsys, url):
    try:
        rc = cli.main(["verify", "--url", url, "--profile", "cpu-tiny"])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and PASSWORD not in err, err
    assert "percent-encode" in err


def test_urls_are_shown_without_their_secrets():
    assert shown_url(f"http://u:{PASSWORD}@h:1/v1?token={TOKEN}#x") == "http://***@h:1/v1?***"
    assert shown_url(f"u:{PASSWORD}@h:1") == "***@h:1"
    s = server_url(f"https://u:{PASSWORD}@h:8443/gw?token={TOKEN}")
    assert (s.base, s.auth, s.query) == ("https://h:8443/gw", ("u", PASSWORD), f"token={TOKEN}")


def test_a_direct_url_with_credentials_travels_on_standard_input_not_the_command_line(
        monkeypatch):
    ns = verify_main.parser().parse_args([
        "--url", "http://127.0.0.1:1", "--profile", "cpu-tiny", "--suite", "gateway",
        "--direct-url", f"http://u:{PASSWORD}@10.0.0.2:8083"])
    keys = Keys.from_files(ns)
    line = host_command(ns, "python3", 8083, "/out", "box", keys)
    assert PASSWORD not in line and "--direct-url" not in line and "--keys-on-stdin" in line
    sent = keys.to_stdin()
    assert sent is not None and PASSWORD in json.loads(sent)["direct_url"]
    plain = verify_main.parser().parse_args([
        "--url", "http://127.0.0.1:1", "--profile", "cpu-tiny", "--suite", "gateway",
        "--direct-url", "http://10.0.0.2:8083"])
    assert "--direct-url http://10.0.0.2:8083" in host_command(
        plain, "python3", 8083, "/out", "box", Keys.from_files(plain))


def test_the_host_entry_point_takes_the_direct_url_from_standard_input(monkeypatch, tmp_path):
    import io

    seen: dict[str, object] = {}

    def run_verify(args: object, url: str, **kw: object) -> int:
        seen["direct"] = getattr(args, "direct_url", None)
        return 0

    monkeypatch.setattr(verify_main, "run_verify", run_verify)
    monkeypatch.setattr(verify_main, "use_checkout_verify", lambda: None)
    secret = f"http://u:{PASSWORD}@10.0.0.2:8083"
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(
        {"api": None, "direct": None, "direct_url": secret})))
    assert verify_main.main(["--url", "http://127.0.0.1:1", "--profile", "cpu-tiny",
                             "--suite", "gateway", "--keys-on-stdin",
                             "--out", str(tmp_path)]) == 0
    assert seen["direct"] == secret
    assert Path(tmp_path).exists()
