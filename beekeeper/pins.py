"""
Model pins: every Hub model resolved, on the controller, to a commit, a sha256 and a size,
kept in a lock file (docs/models.md).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from .core.cache import CACHE
from .core.errors import ConfigError, host_data
from .core.hostdata import GIT_SHA
from .core.profiles import SHA256_RE, HfSource, ModelFile

COMMIT_RE = re.compile(GIT_SHA)  # a full commit, as host data spells one
LOCK = Path(os.environ.get("BEEKEEPER_MODEL_PINS", CACHE / "model-pins.json"))


@dataclass(frozen=True)
class Pin:
    """What the Hub said for one (endpoint, repo, file, revision)."""

    commit: str
    sha256: str
    size_bytes: int


def is_pinned(model: ModelFile) -> bool:
    """A Hub model needs no look-up when its commit and sha256 are known (host data's pin,
    or the profile's): the size, where not known, is the lock file's, the length of its
    header kept for a VRAM plan (pin_model), or else read by the host's download (preflight
    warns that its free-disk check leaves such a file out)."""
    if not isinstance(model.source, HfSource):
        return True
    return bool(COMMIT_RE.fullmatch(model.source.revision) and model.sha256)


def _key(endpoint: str, source: HfSource, filename: str) -> str:
    return f"{endpoint} {source.repo} {filename} @{source.revision}"


def _load(lock: Path) -> dict[str, dict[str, object]]:
    try:
        return dict(json.loads(lock.read_text()))
    except FileNotFoundError:
        return {}


def _ask_hub(endpoint: str, source: HfSource, filename: str, key: str) -> Pin:
    """HEAD the file on the Hub: X-Repo-Commit, X-Linked-Etag (the LFS sha256), size."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(source.repo, filename, revision=source.revision, endpoint=endpoint)
    try:
        meta = get_hf_file_metadata(url, endpoint=endpoint, retry_on_errors=True)
    except Exception as e:  # the client's errors are many (HTTP, connection, 404 kinds)
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if _unreachable(e):
            raise ConfigError(
                host_data(f"{key}_revision"), f"cannot reach {endpoint} from this controller "
                f"to pin {source.repo}/{filename}@{source.revision} ({type(e).__name__}: "
                f"{reason})", "check this controller's network (behind a proxy: HTTPS_PROXY "
                f"in pyinfra's environment), or pin {key}_revision (a commit) and "
                f"{key}_sha256 in host data so no look-up is needed") from None
        raise ConfigError(
            host_data(f"{key}_revision"), f"cannot pin {source.repo}/{filename}@"
            f"{source.revision} on {endpoint} ({type(e).__name__}: {reason})", "check the "
            "repository, file and revision (a gated or private repository: a token on the "
            "controller, in HF_TOKEN or from `hf auth login`), or pin "
            f"{key}_revision (a commit) and {key}_sha256 in host data so no look-up is "
            "needed") from None
    commit, sha = meta.commit_hash or "", (meta.etag or "").strip('"')
    if not COMMIT_RE.fullmatch(commit):
        raise ConfigError(host_data(f"{key}_revision"), "the Hub gave no commit for "
                          f"{source.repo}@{source.revision}", f"pin {key}_revision to a commit")
    if not SHA256_RE.fullmatch(sha) or not meta.size:
        raise ConfigError(host_data(f"{key}_sha256"), f"the Hub gives no sha256 for {filename} "
                          "(not an LFS file?)", f"set {key}_sha256 (sha256sum of the file)")
    return Pin(commit=commit, sha256=sha, size_bytes=int(meta.size))


def _unreachable(error: BaseException) -> bool:
    """Whether the Hub gave no answer at all (a name not resolved, a connection refused or
    timed out), by the error or what caused it: not a refusal of the repository's."""
    import httpx

    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, (httpx.TransportError, ConnectionError, TimeoutError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _known(model: ModelFile, lock: Path, endpoint: str) -> ModelFile:
    """A model pinned by commit and sha256: its size from the lock where it holds this very
    file, else as given (0: the host's download reads it)."""
    if not isinstance(model.source, HfSource) or model.size_bytes:
        return model
    entry = _load(lock).get(_key(endpoint, model.source, model.filename))
    if not entry or entry.get("sha256") != model.sha256:
        return model
    size = entry.get("size_bytes")
    return replace(model, size_bytes=size if isinstance(size, int) else 0)


def pin_model(model: ModelFile, endpoint: str, role: str = "model", plans: bool = True,
              lock: Path | None = None) -> ModelFile:
    """The model with its revision as a commit, its sha256 and its size filled in. A model
    without a size (config's `_model_file`: the user's own, not the profile's) that a VRAM
    plan reads (`plans`: a GPU profile's served model, never a draft) also has its GGUF
    header read into the controller's cache (hubhead.py); one pinned by hand in host data,
    whose size no Hub request gave, takes the size from that header, kept sparse at the
    file's length (preflight's free-disk check counts it)."""
    pinned = _pin(model, endpoint, role, lock or LOCK)
    if plans and not model.size_bytes and isinstance(pinned.source, HfSource) \
            and pinned.sha256:
        from .hubhead import read_header

        header = read_header(pinned, endpoint, role)
        if header is not None and not pinned.size_bytes:
            pinned = replace(pinned, size_bytes=header.stat().st_size)
    return pinned


def _pin(model: ModelFile, endpoint: str, role: str, lock: Path) -> ModelFile:
    """pin_model's pin: from host data, the lock file or the Hub."""
    if is_pinned(model):
        return _known(model, lock, endpoint)
    assert isinstance(model.source, HfSource)
    pins = _load(lock)
    key = _key(endpoint, model.source, model.filename)
    if key in pins:
        pin = Pin(**pins[key])  # type: ignore[arg-type]
        # a sha256 given in host data is never replaced by the lock file's: they differ, the
        # deploy stops naming both
        if model.sha256 and model.sha256 != pin.sha256:
            raise ConfigError(
                host_data(f"{role}_sha256"), f"{model.sha256} is not the {pin.sha256} that "
                f"{lock} pinned for {model.source.repo}/{model.filename}@"
                f"{model.source.revision} (commit {pin.commit})", f"correct {role}_sha256, or "
                f"pin {role}_revision to the commit the file came from (or remove that entry "
                f"from {lock} to ask the Hub again)")
    else:
        pin = _ask_hub(endpoint, model.source, model.filename, role)
        if model.sha256 and model.sha256 != pin.sha256:
            raise ConfigError(
                host_data(f"{role}_sha256"), f"{model.sha256} does not match the Hub's "
                f"{pin.sha256} for {model.filename} at commit {pin.commit}", "correct "
                f"{role}_sha256, or pin {role}_revision to the commit that file came from")
        pins[key] = pin.__dict__
        lock.parent.mkdir(parents=True, exist_ok=True)
        tmp = lock.with_suffix(".tmp")
        tmp.write_text(json.dumps(pins, indent=2, sort_keys=True) + "\n")
        tmp.replace(lock)
        print(f"[beekeeper] pinned {model.source.repo}/{model.filename}: revision "
              f"{model.source.revision} -> commit {pin.commit}, sha256 {pin.sha256}, "
              f"{pin.size_bytes} bytes (kept in {lock}; to pin it in the inventory: "
              f"{role}_revision = {pin.commit!r}, {role}_sha256 = {pin.sha256!r})",
              file=sys.stderr, flush=True)
    return replace(model, source=HfSource(repo=model.source.repo, revision=pin.commit),
                   sha256=pin.sha256, size_bytes=pin.size_bytes)
