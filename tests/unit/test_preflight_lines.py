"""
Preflight's refusals of a model file on the host and of a model folder on a Windows drive,
each as the whole line a user reads (subject, problem, fix), and the host facts each reads
asked about the file the user named (survivors of the mutation run of tasks/preflight.py on
2026-12-05, issue 45: parts of these lines and the facts' arguments were never asserted).
"""

from __future__ import annotations

from typing import Any

import pytest

from beekeeper.core.errors import PreflightError
from beekeeper.core.paths import sha256_stamps
from beekeeper.core.runtime import runtime_of
from beekeeper.tasks import preflight as pf

from .harness import WSL, cfg, on_host

MINE = "/srv/m/mine.gguf"
SHA = "ab" * 32
HEAD = b"GGUF\x03\x00\x00\x00"


def refused(f: Any, *args: Any) -> str:
    with pytest.raises(PreflightError) as e:
        f(*args)
    return str(e.value)


def own(path: str = MINE, **over: Any) -> Any:
    return cfg(profile="q8-turbo4-64k", mode="native", model_host_path=path,
               model_sha256=SHA, **over)


def only(path: str, value: Any, other: Any = None, **want: Any) -> Any:
    """A canned fact that answers `value` about `path` (and the other arguments `want`),
    `other` about anything else: a fact asked about another file reads as that one."""
    def fact(**kw: Any) -> Any:
        return value if kw.get("path") == path and all(kw.get(k) == v
                                                       for k, v in want.items()) else other
    return fact


def test_a_model_under_home_with_a_native_systemd_service_is_the_whole_line():
    home = "/home/me/mine.gguf"
    with on_host(ModelTarget=""):
        line = refused(pf.check_own_model, own(home), runtime_of("native", "systemd"))
    assert line == (
        "host data `model_host_path`: /home/me/mine.gguf lies under /home, which the native "
        "service's systemd unit hides from the server (ProtectHome=yes hides /home, /root and "
        "/run/user), so it could never start; fix: move or copy the file out of them, e.g. "
        "into model_dir /srv/beekeeper/models, and set model_host_path to its new path (a "
        "symlink into them does not help: the server follows it)")


def test_a_model_whose_sha256_differs_is_the_whole_line_and_the_facts_read_that_file():
    """FileHead and Sha256File are asked about the path given, Sha256File with the state
    folder's stamps (a file as it was stamped is not hashed again): asked about anything
    else, these facts answer as for a file that is not there."""
    c = own()
    facts = {"ModelTarget": "", "File": only(MINE, {"size": 1}),
             "FileHead": only(MINE, HEAD),
             "Sha256File": only(MINE, "cd" * 32, stamps=sha256_stamps(c.data.state_dir)),
             "OthersCannotRead": ""}
    with on_host(**facts):
        line = refused(pf.check_own_model, c, runtime_of("native", "systemd"))
    assert line == (
        f"host data `model_sha256`: {MINE} has sha256 {'cd' * 32}, not {SHA}; fix: set "
        "model_sha256 to the file's (sha256sum on the host) if it is the file you mean")
    stamps = sha256_stamps(c.data.state_dir)
    with on_host(**{**facts, "Sha256File": only(MINE, SHA, stamps=stamps)}):
        pf.check_own_model(c, runtime_of("native", "systemd"))  # the file given: served


def test_a_model_folder_on_a_windows_drive_under_wsl2_is_the_whole_line():
    line = refused(pf.check_model_dir, cfg(model_dir="/mnt/d/models"), WSL)
    assert line == ("model_dir /mnt/d/models is on a Windows drive (9p, 3-5x slower loads): "
                    "use a folder on the WSL ext4 disk, e.g. /srv/beekeeper")


def test_a_model_file_that_is_no_gguf_is_read_at_the_path_given():
    """FileHead is asked about the path given: a zip saved as the model is refused before
    its sha256 is even read (asked about another file, FileHead answers None: unread)."""
    facts = {"ModelTarget": "", "File": only(MINE, {"size": 1}),
             "FileHead": only(MINE, b"PK\x03\x04\x14\x00\x00\x00")}
    with on_host(**facts):  # no Sha256File: reading it would be a KeyError
        line = refused(pf.check_own_model, own(), runtime_of("native", "systemd"))
    assert line.startswith(f"host data `model_host_path`: {MINE} is not a GGUF model file: it "
                           "does not start with GGUF's magic b'GGUF' (its first 8 bytes are "
                           "b'PK\\x03\\x04\\x14\\x00\\x00\\x00'); fix: give the path of a GGUF "
                           "model file"), line


# --- check_docker: container mode's engine, each refusal as the line a user reads ----------

def _docker_line(engine: Any, os_id: str = "ubuntu", **data: Any) -> str:
    from beekeeper.facts.host import OsReleaseInfo

    return refused(pf.check_docker, cfg(mode="container", **data),
                   OsReleaseInfo(id=os_id, version_id="1"), engine)


def test_each_docker_engine_the_kit_cannot_use_is_one_whole_line():
    from beekeeper.facts.docker import DockerEngineInfo as D

    cases = [
        (D(present=True, path="/snap/bin/docker", flavour="snap", server_version="27.0"), {},
         "Docker from snap cannot use the NVIDIA runtime or read /etc/docker: remove it (snap "
         "remove docker) and deploy again"),
        (D(present=True, path="/usr/bin/docker", flavour="docker-desktop",
           server_version="27.0"), {},
         "Docker Desktop's WSL integration is active: beekeeper will not install a second "
         "engine beside it; set use_docker_desktop = True to use it (on @local: `--data "
         "use_docker_desktop=true`), or turn the integration off for this distro"),
        (D(present=True, path="/usr/bin/docker", flavour="docker-desktop"),
         {"use_docker_desktop": True},
         "Docker Desktop's engine does not answer `docker info` (Docker Desktop is not running "
         "on Windows, or its WSL integration is off for this distro): start Docker Desktop "
         "(Settings > Resources > WSL integration on for this distro), then deploy again"),
        (D(present=True, path="/opt/x/docker", flavour="unknown"), {},
         "/opt/x/docker is a docker CLI of no package the kit knows, and no engine answers "
         "`docker info`: start that engine (or Docker Desktop on Windows), or remove that "
         "docker and let the kit install docker.io, then deploy again"),
        (D(), {"install_docker": False},
         "Docker is missing and install_docker is False: install Docker or set "
         "install_docker = True"),
    ]
    for engine, data, line in cases:
        assert _docker_line(engine, **data) == line
    assert _docker_line(D(), "fedora") == (
        "Docker cannot be installed by the kit on 'fedora' (Debian and Ubuntu are automated): "
        "install it by hand")
    assert _docker_line(D(), "") == (
        "Docker cannot be installed by the kit on None (Debian and Ubuntu are automated): "
        "install it by hand")


# --- check_tools: what the host itself must bring, each refusal as one whole line -----------

def test_each_tool_a_host_must_bring_is_one_whole_line():
    from beekeeper.facts.toolchain import HostToolsInfo as T

    sup = runtime_of("native", "supervisor")
    c = cfg(profile="cpu-tiny", mode="native", runtime="supervisor")
    assert refused(pf.check_supervisor_tools, T(setpriv="/usr/bin/setpriv"), sup) == (
        "runtime supervisor runs the kit's supervisord with the host's python3 (>= 3.8), and "
        "this host has none; fix: install python3 (apt-get install python3), then deploy again")
    old = T(python3="/usr/bin/python3", python3_version=(3, 7), setpriv="/usr/bin/setpriv")
    assert refused(pf.check_supervisor_tools, old, sup) == (
        "runtime supervisor runs the kit's supervisord with the host's python3 (>= 3.8), and "
        "this host has /usr/bin/python3 3.7; fix: install python3 (apt-get install python3), "
        "then deploy again")
    py = T(python3="/usr/bin/python3", python3_version=(3, 8))
    assert refused(pf.check_supervisor_tools, py, sup) == (
        "runtime supervisor starts the server as user beekeeper with setpriv, which this host "
        "lacks; fix: apt-get install util-linux, then deploy again")
    bare = T(python3="/usr/bin/python3", python3_version=(3, 12), setpriv="/usr/bin/setpriv",
             tools=(("make", "/usr/bin/make"), ("git", "/usr/bin/git")))
    assert refused(pf.check_tools, c, bare, sup) == (
        "the native build needs cmake, c++, which this host lacks, and apt has no package "
        "lists to install them from (apt-get update never ran here, or the host is offline); "
        "fix: install cmake, c++ on the host (apt-get update && apt-get install cmake g++), "
        "then deploy again")
    assert pf.check_tools(c, T(**{**bare.__dict__, "apt_lists": 3}), sup) == ["cmake", "g++"]
    # git only for a git source: a tree or tarball from the controller needs none
    no_git = T(**{**bare.__dict__, "tools": (("make", "/usr/bin/make"),), "apt_lists": 3})
    assert c.source.kind == "git"
    assert pf.check_tools(c, no_git, sup) == ["cmake", "g++", "git"]
    local = cfg(profile="cpu-tiny", mode="native", runtime="supervisor",
                source={"path": "/srv/src/llama.cpp.tar.gz", "ref": "lcp0.3.36"})
    assert pf.check_tools(local, no_git, sup) == ["cmake", "g++"]
    # nothing to build: no stage for it, the build there already, or an image build
    stop = cfg(profile="cpu-tiny", mode="native", runtime="supervisor", stages=["provision"])
    assert pf.check_tools(stop, no_git, sup) == []
    assert pf.check_tools(c, no_git, sup, built=True) == []
    assert pf.check_tools(cfg(profile="cpu-tiny"), no_git, runtime_of("container", "systemd")) \
        == []


def test_compose_without_its_plugin_or_a_package_that_brings_it_is_one_line():
    from beekeeper.facts.docker import DockerEngineInfo as D
    from beekeeper.facts.host import OsReleaseInfo

    c = cfg(profile="cpu-tiny", mode="container", runtime="compose")
    with on_host(ComposeVersion=None):
        line = refused(pf.check_compose, c, OsReleaseInfo(id="fedora", version_id="40"),
                       D(present=True, path="/usr/bin/docker", flavour="unknown",
                         server_version="27.0"))
    assert line.startswith("host data `runtime`: 'compose' needs the compose v2 plugin "
                           "(`docker compose`), which this host lacks; fix: "), line
