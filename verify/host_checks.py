"""
What each post-deploy host check (verify/test_host.py) checks: plain functions of the
services' records, each returning what to check or why there is nothing, so a wrong decision
fails a unit test instead of turning into a skip (pytest.skip is called in test_host.py only).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from beekeeper.core.deployed import DeployedService as Service
from beekeeper.core.profiles import PROFILES
from beekeeper.core.runtime import Runtime, recorded_runtime


@dataclass(frozen=True)
class Applies:
    """The services a check looks at (`items`), or why it has none (`skip`, else None)."""

    items: tuple[Any, ...] = ()
    skip: str | None = None


def _pick(items: list[Any], skip: str) -> Applies:
    return Applies(items=tuple(items)) if items else Applies(skip=skip)


def _run_by(services: list[Service], asks: Callable[[Runtime], bool], skip: str) -> Applies:
    """The services whose Runtime (core/runtime.py) `asks` says yes of."""
    return _pick([s for s in services if asks(recorded_runtime(s))], skip)


def containers(services: list[Service]) -> Applies:
    """The container-mode services (Docker engine, image, hardening checks)."""
    return _run_by(services, lambda rt: rt.container,
                   "no container-mode service: the container checks have nothing to check")


# the CUDA image tag core/build.py writes: <repo>:<ref>-cuda<major.minor>-sm<arch>-<hash>
CUDA_TAG = re.compile(r":[^:/]*-cuda[0-9]+\.[0-9]+-sm[0-9]")


def uses_gpu(service: Service) -> bool:
    """A CUDA server: its profile's backend, or for a profile this kit does not know (one
    of the user's, or of a newer kit), its image tag (`<ref>-cuda13.2-sm89-<hash>`)."""
    profile = PROFILES.get(service.profile or "")
    if profile is not None:
        return profile.backend == "cuda"
    return CUDA_TAG.search(service.image) is not None


def gpu_checked(services: list[Service]) -> Applies:
    """The container-mode CUDA services whose image gets the GPU-in-a-container check."""
    found = containers(services)
    if found.skip:
        return found
    return _pick([s for s in found.items if uses_gpu(s)],
                 "no container-mode service with a CUDA profile: no GPU to look for")


def native(services: list[Service]) -> Applies:
    """The native-mode services (the installed binary's hardening check)."""
    return _run_by(services, lambda rt: rt.native, "no native-mode service")


def hashed(services: list[Service]) -> Applies:
    """(path, sha256) of every model and draft whose sha256 the deploy recorded."""
    found = [(s.model_path, s.model_sha256) for s in services if s.model_sha256]
    found += [(s.draft_path, s.draft_sha256) for s in services
              if s.draft_path and s.draft_sha256]
    return _pick(found, "no sha256 recorded for any model (a Hub model deployed unpinned): "
                        "nothing to check the files against")


def compose(services: list[Service]) -> Applies:
    """The compose-runtime services (the compose project's checks)."""
    return _run_by(services, lambda rt: rt.compose, "no compose-runtime service")
