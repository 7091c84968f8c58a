"""
Stand-ins for two edges this machine cannot reach, for the tests only (never in the kit):

- GitForge: a git smart-HTTP server (git's own `git http-backend`) on loopback that, like
  GitHub, lets a client fetch any reachable commit by its full hash
  (`uploadpack.allowReachableSHA1InWant`), and nothing by an abbreviated one.
- HubStandIn: a Hugging Face Hub-compatible endpoint on loopback for the real
  `huggingface_hub` client (`HF_ENDPOINT`): `/<repo>/resolve/<revision>/<file>` answers
  with the headers the client reads (X-Repo-Commit, X-Linked-Etag = the sha256,
  X-Linked-Size) and redirects to storage on another port that serves byte ranges. It counts the
  body bytes it sends, can cut a transfer short once, and can corrupt a file's bytes.

The sandbox host reaches both through an SSH reverse tunnel onto its own loopback, so the
URLs are the same on the controller and on the host.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# fixed identity and dates: the same tree gives the same commit on every run
GIT_ENV = {"GIT_AUTHOR_NAME": "beekeeper tests", "GIT_AUTHOR_EMAIL": "tests@beekeeper.invalid",
           "GIT_COMMITTER_NAME": "beekeeper tests",
           "GIT_COMMITTER_EMAIL": "tests@beekeeper.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class GitForge:
    """Bare repositories under `root`, served over git's smart HTTP protocol."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.requests: list[str] = []
        forge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:
                self._cgi()

            def do_POST(self) -> None:
                self._cgi()

            def _cgi(self) -> None:
                path, _, query = self.path.partition("?")
                forge.requests.append(f"{self.command} {self.path}")
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                env = {**os.environ, "GIT_PROJECT_ROOT": str(forge.root),
                       "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": self.command,
                       "PATH_INFO": path, "QUERY_STRING": query,
                       "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                       "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
                       "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
                out = subprocess.run(["git", "http-backend"], input=body, env=env,
                                     capture_output=True).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                status = 200
                headers = []
                for line in head.decode().split("\r\n"):
                    k, _, v = line.partition(":")
                    if k.lower() == "status":
                        status = int(v.split()[0])
                    elif k:
                        headers.append((k, v.strip()))
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = _serve(Handler)
        self.port = self.server.server_address[1]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}.git"

    def publish_tarball(self, name: str, tarball: Path, work: Path) -> str:
        """Commit a source tarball's tree (one top folder) as `main`; return the commit."""
        tree = work / name
        tree.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as tar:
            for m in tar.getmembers():
                m.name = m.name.split("/", 1)[1] if "/" in m.name else ""
            tar.extractall(tree, members=[m for m in tar.getmembers() if m.name],
                           filter="data")
        _git("init", "-q", "-b", "main", cwd=tree)
        _git("add", "-A", cwd=tree)
        _git("commit", "-q", "-m", "llama.cpp tree for the beekeeper tests", cwd=tree)
        bare = self.root / f"{name}.git"
        _git("clone", "-q", "--bare", str(tree), str(bare))
        _git("config", "uploadpack.allowReachableSHA1InWant", "true", cwd=bare)
        _git("config", "http.receivepack", "false", cwd=bare)
        return _git("rev-parse", "HEAD", cwd=tree)

    def close(self) -> None:
        self.server.shutdown()


@dataclass
class HubFile:
    repo: str
    filename: str
    data: bytes
    commit: str
    corrupt: bool = False  # serve bytes that do not match the advertised sha256

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def blob_id(self) -> str:
        """Where the storage redirect points (one per repo file, as on the Hub's CDN)."""
        return hashlib.sha1(f"{self.repo}/{self.filename}".encode(),
                            usedforsecurity=False).hexdigest()


@dataclass
class HubLog:
    """What the stand-in served: every request line, and body bytes per file."""

    requests: list[str] = field(default_factory=list)
    body_bytes: dict[str, int] = field(default_factory=dict)
    ranges: list[str] = field(default_factory=list)


class HubStandIn:
    def __init__(self) -> None:
        self.files: dict[tuple[str, str], HubFile] = {}
        self.log = HubLog()
        self.cut_next_after: int | None = None  # close the next body transfer after N bytes
        # False: the storage answers a Range request with the whole file (200), as a server
        # without range requests does; the Hub's CDN honours them
        self.honour_ranges = True
        self.range_cap: int | None = None  # bytes a range answer holds at most (a CDN's cap)
        # gated repositories and the token each lets in: without it, 401 as the Hub answers
        self.gated: dict[str, str] = {}
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._route(body=False)

            def do_GET(self) -> None:
                self._route(body=True)

            def _route(self, body: bool) -> None:
                hub.log.requests.append(f"{self.command} {self.path}")
                parts = self.path.split("?")[0].strip("/").split("/")
                if len(parts) == 2 and parts[0] == "cdn":
                    return self._cdn(parts[1], body)
                if len(parts) == 5 and parts[2] == "resolve":
                    return self._resolve(f"{parts[0]}/{parts[1]}", parts[3], parts[4])
                self._error(404, "EntryNotFound")

            def _error(self, code: int, kind: str) -> None:
                self.send_response(code)
                self.send_header("X-Error-Code", kind)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _resolve(self, repo: str, revision: str, filename: str) -> None:
                f = hub.files.get((repo, filename))
                if f is None:
                    return self._error(404, "EntryNotFound")
                if revision not in ("main", f.commit):
                    return self._error(404, "RevisionNotFound")
                token = hub.gated.get(repo)
                if token and self.headers.get("Authorization") != f"Bearer {token}":
                    return self._error(401, "GatedRepo")
                # as the Hub does for LFS files: metadata headers and a redirect to storage
                self.send_response(302)
                # another host name, as the Hub's CDN has (huggingface_hub 1.x compares
                # host names only, 2.x whole origins): the client stops at this redirect
                self.send_header("Location",
                                 f"http://localhost:{hub.storage_port}/cdn/{f.blob_id}")
                self.send_header("X-Repo-Commit", f.commit)
                self.send_header("X-Linked-Etag", f'"{f.sha256}"')
                self.send_header("X-Linked-Size", str(len(f.data)))
                self.send_header("ETag", f'"{f.sha256}"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _cdn(self, blob: str, body: bool) -> None:
                f = next((x for x in hub.files.values() if x.blob_id == blob), None)
                if f is None:
                    return self._error(404, "EntryNotFound")
                data = f.data
                if f.corrupt:  # a byte of the weights (the header stays whole: the
                    # controller plans the file from it; the host's sha256 check finds it)
                    at = len(data) - 100
                    data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
                start, end = 0, len(data) - 1
                rng = self.headers.get("Range") if hub.honour_ranges else None
                if rng:  # bytes=START- or bytes=START-END (END inclusive, cut to the file)
                    hub.log.ranges.append(rng)
                    first, _, last = rng.split("=")[1].partition("-")
                    start = int(first)
                    end = min(int(last), end) if last else end
                    if hub.range_cap:  # a shorter answer, its Content-Range saying so
                        end = min(end, start + hub.range_cap - 1)
                chunk = data[start:end + 1]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.send_header("Content-Length", str(len(chunk)))
                self.send_header("ETag", f'"{f.sha256}"')
                self.end_headers()
                if not body:
                    return
                limit = hub.cut_next_after
                if limit is not None:
                    hub.cut_next_after = None
                    chunk = chunk[:limit]
                # each piece counted before it is written, so that a client which has read
                # the whole body finds it counted (counted after, the count raced the
                # client's next step: a unit test once read the log before this thread
                # wrote it); a piece the client did not take is taken back
                log = hub.log.body_bytes
                for i in range(0, len(chunk), 1 << 16):
                    piece = chunk[i:i + (1 << 16)]
                    log[f.filename] = log.get(f.filename, 0) + len(piece)
                    try:
                        self.wfile.write(piece)
                    except (BrokenPipeError, ConnectionResetError):  # the client stopped
                        log[f.filename] -= len(piece)
                        self.close_connection = True
                        break
                if limit is not None:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)

        self.server = _serve(Handler)
        self.port = self.server.server_address[1]
        # storage on another origin, as the Hub's CDN is: the client does not follow the
        # redirect for metadata, and downloads from there
        self.storage = _serve(Handler)
        self.storage_port = self.storage.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, repo: str, filename: str, data: bytes, corrupt: bool = False) -> HubFile:
        commit = hashlib.sha1(f"{repo}@{len(data)}".encode(), usedforsecurity=False).hexdigest()
        f = HubFile(repo=repo, filename=filename, data=data, commit=commit, corrupt=corrupt)
        self.files[(repo, filename)] = f
        return f

    def close(self) -> None:
        """Stopped and its ports closed: a client is refused, not left waiting."""
        for server in (self.server, self.storage):
            server.shutdown()
            server.server_close()


class ReverseTunnel:
    """`ssh -R`: the sandbox host's 127.0.0.1:<port> reaches the controller's same port."""

    def __init__(self, ssh_options: list[str], ports: list[int]):
        self.args = ["ssh", "-N", "-o", "ExitOnForwardFailure=yes",
                     "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        for p in ports:
            self.args += ["-R", f"127.0.0.1:{p}:127.0.0.1:{p}"]
        self.args += ssh_options
        self.proc: subprocess.Popen[bytes] | None = None

    def ensure(self) -> None:
        """(Re)start the tunnel when it is not running (the host may have restarted)."""
        if self.proc is not None and self.proc.poll() is None:
            return
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
