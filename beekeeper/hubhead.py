"""
The GGUF header of a model of the user's on the Hub, read on the controller for the VRAM plan
(docs/own-model.md): HTTP range requests on the file's URL at its commit (the Hub redirects
to its CDN, which honours ranges), walked as preflight's `header_walk` walks a host file's,
kept by sha256 (`planner.hub_header`) sparse to the file's size.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from .core.errors import ConfigError, host_data
from .core.planner import PlanError, _read_gguf, hub_header
from .core.profiles import HfSource, ModelFile
from .core.redact import redact

# seconds a range request waits to connect or for the next bytes
TIMEOUT_S = 20.0

# the headers that could not be read in this run, by (endpoint, cached file): asked and warned
# once a run, however many hosts serve the model or times their configuration is made
_UNREAD: set[tuple[str, str]] = set()


class Unread(Exception):
    """The header could not be read; the reason, in a few words."""


def read_header(model: ModelFile, endpoint: str, role: str) -> Path | None:
    """The cached header of the Hub file `model` (pinned: its revision a commit, its sha256
    known), read from the Hub at `endpoint` when the cache lacks it; None, after one warning
    line, where it cannot be read. ConfigError: a header read that the planner cannot read."""
    src, sha, cached = model.source, model.sha256, hub_header(model)
    assert isinstance(src, HfSource) and sha and cached is not None
    if cached.is_file():
        return cached
    if (endpoint, str(cached)) in _UNREAD:
        return None
    from huggingface_hub import hf_hub_url

    name = f"{src.repo}/{model.filename} (commit {src.revision})"
    try:
        size, header = _fetch(hf_hub_url(src.repo, model.filename, revision=src.revision,
                                         endpoint=endpoint))
        return _keep(header, size, cached, name, role)
    except Unread as e:
        _UNREAD.add((endpoint, str(cached)))
        print(redact(f"[beekeeper] warning: host data `{role}_repo`: the GGUF header of {name} "
                     f"could not be read from {endpoint} ({e}); the VRAM check plans the "
                     "profile's model instead"), file=sys.stderr, flush=True)
        return None


def _fetch(url: str) -> tuple[int, bytes]:
    """(the file's size, its header's bytes): preflight's `header_walk`, as `host_gguf` reads
    a host file's, each range only the bytes not read yet. Unread: no GGUF of version 2 or 3."""
    from beekeeper.core.planner import gguf_problem
    from beekeeper.tasks.preflight import header_walk

    read, size = b"", -1

    def first(length: int) -> tuple[int, bytes]:
        nonlocal read, size
        if size < 0 or len(read) < min(length, size):  # nothing asked past the file's end
            more, size = _range(url, len(read), length)
            read += more
        return size, read

    got = header_walk(first)
    assert got is not None  # `first` raises Unread rather than return None
    problem = gguf_problem(got[1][:8])
    if problem is not None:
        raise Unread(problem)
    return got


def _range(url: str, start: int, end: int) -> tuple[bytes, int]:
    """Bytes `start` to `end` (exclusive, cut to the file) of the file at `url`, and the
    file's size, through huggingface_hub's own HTTP session (its proxy settings, offline
    mode and token headers; the token is not sent on to the CDN's other host)."""
    from huggingface_hub import get_session
    from huggingface_hub.utils import build_hf_headers

    try:
        headers = {**build_hf_headers(), "Range": f"bytes={start}-{end - 1}",
                   "Accept-Encoding": "identity"}
        with get_session().stream("GET", url, headers=headers, timeout=TIMEOUT_S) as r:
            if r.status_code != 206:
                raise Unread("no range requests: the whole file" if r.status_code == 200
                             else f"HTTP {r.status_code}")
            said = r.headers.get("Content-Range", "")
            first, _, total = said.removeprefix("bytes ").partition("/")
            if not total.isdigit() or first.partition("-")[0] != str(start):
                raise Unread(f"Content-Range {said!r} is not bytes {start}- of a known size")
            data = bytearray()
            for chunk in r.iter_bytes():
                data += chunk
                if len(data) >= end - start:
                    break
            want = min(end, int(total)) - start
            if len(data) < want:  # a capped or cut answer: not the file's end
                raise Unread(f"{len(data)} bytes of the {want} asked from byte {start}")
            return bytes(data[:want]), int(total)
    except Unread:
        raise
    except Exception as e:  # the client's errors are many (connection, offline, HTTP kinds)
        reason = str(e).splitlines()[0] if str(e) else ""
        raise Unread(f"{type(e).__name__}: {reason}" if reason else type(e).__name__) from None


def _keep(header: bytes, size: int, cached: Path, name: str, role: str) -> Path:
    """The header written sparse to the file's size (the planner counts the weights from the
    tensor table), kept where the planner reads it once the planner has read it; a header it
    cannot read is refused naming host data `<role>_repo` and the file, not kept."""
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cached.parent, prefix=f".{cached.name}.",
                                         suffix=".tmp", delete=False) as f:
            f.write(header)
            f.truncate(max(size, len(header)))
    except OSError as e:  # a read-only or full cache: planned as the profile's, and said
        raise Unread(f"the controller's cache cannot keep it ({e})") from None
    tmp = Path(f.name)
    try:
        _read_gguf(tmp)
    except PlanError as e:
        tmp.unlink()
        problem = e.problem.replace(str(tmp.resolve()), name).replace(str(tmp), name)
        raise ConfigError(host_data(f"{role}_repo"), f"{problem}, and the VRAM plan reads "
                          "its layout", f"name a GGUF model file "
                          f"(`{role}_repo`, `{role}_file`), the one llama-server loads, as "
                          "llama.cpp's convert_hf_to_gguf.py and the Hub's GGUF repositories "
                          "have them") from None
    tmp.replace(cached)
    return cached
