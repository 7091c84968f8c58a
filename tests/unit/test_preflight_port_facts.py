"""
Preflight's port rule on a host whose facts answer for the port, the pidfile and the folder
asked (issue 45: `check_port` and `check_ports` through scripts/mutation.py). The deploy's
harness cans PortContainers and PortOwners as one answer whatever is asked, so a rule that
asked for another port, no pidfile or another service's record read the same facts and
no test saw it (26 survivors of `check_port` at 5e6f39a). Here the host holds port 8083 and
nothing else: the containers and listeners of that port, the kit's supervisord read from
the kit's pidfile, the native build folder as the kit's prefix resolves, and each service's
record at its own path. Each test holds whether the deploy stops, what it refuses (the
refusal's subject, problem and fix, and its line) and the orphans it ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.deployed import DeployedService
from beekeeper.core.errors import PreflightError
from beekeeper.core.paths import NATIVE_PREFIX, SUPERVISOR_PIDFILE, ServicePaths
from beekeeper.facts.docker import DockerEngineInfo, PortContainer
from beekeeper.facts.host import PortOwner, PortOwnersInfo
from beekeeper.tasks import preflight as pf

from .harness import DEFAULTS, DOCKER_PROXY, on_host, runtime_named

PORT = 8083  # the port the host's listeners and containers hold
FREE = 9090  # a port nothing holds
SUPERVISORD = 700  # the kit's supervisord, as its pidfile names it
# a persistent root the host resolves the kit's native prefix into (a link under /opt)
RESOLVED = "/workspace/beekeeper/llama-server"
NOBODY: frozenset[str] = frozenset()


def kit_server(pid: int, exe: str = f"{NATIVE_PREFIX}/b1/bin/llama-server", ppid: int = 1,
               cgroups: tuple[str, ...] = ("/user.slice",)) -> PortOwner:
    """A llama-server of the kit's (user beekeeper, a binary of the native build)."""
    return PortOwner(pid=pid, ppid=ppid, user="beekeeper", exe=exe, comm="llama-server",
                     cgroups=cgroups, inode=str(40000 + pid))


HAND = PortOwner(pid=999, ppid=1, user="alice", exe="/usr/bin/python3", comm="python3",
                 cgroups=("/user.slice/user-1000.slice",), inode="40999")
UNSEEN = PortOwner(pid=None, inode="4711")
WEB = PortContainer(name="web", service="", image="nginx:1")
CHAT = PortContainer(name="beekeeper-chat", service="chat", image="beekeeper/x:1")
OURS = PortContainer(name="beekeeper-llm", service="llm", image="beekeeper/x:1")


def host(*, containers: Sequence[PortContainer] = (), owners: Sequence[PortOwner] = (),
         records: dict[str, int] | None = None, docker: bool = True,
         deployed: Sequence[str] = (),
         elsewhere: dict[int, Sequence[PortOwner]] | None = None) -> dict[str, Any]:
    """The canned facts of a host where `containers` publish port 8083 and `owners` listen
    on it (`elsewhere`: the listeners of other ports); `records`: service -> the port its
    deployed record says. A fact asked for
    another port answers as a free port does; the supervisord is read from the kit's pidfile
    only and the prefix resolved from the kit's prefix only. Without Docker the container
    list is never read (`docker ps` of no Docker)."""
    def port_containers(port: int) -> list[PortContainer]:
        assert docker, "the containers of a port read on a host without Docker"
        return list(containers) if port == PORT else []

    def port_owners(port: int, pidfile: str, native_prefix: str) -> PortOwnersInfo:
        return PortOwnersInfo(
            owners=tuple(owners) if port == PORT else tuple((elsewhere or {}).get(port, ())),
            supervisord=SUPERVISORD if pidfile == SUPERVISOR_PIDFILE else None,
            native_prefix_real=RESOLVED if native_prefix == NATIVE_PREFIX else "")

    def file_contents(path: str) -> list[str] | None:
        for name, port in (records or {}).items():
            if path == ServicePaths(name).manifest:
                return DeployedService(service=name, port=port).to_json().splitlines()
        return None

    return {"PortContainers": port_containers, "PortOwners": port_owners,
            "FileContents": file_contents, "DeployedServices": list(deployed)}




def port(facts: dict[str, Any], name: str = "llm", at: int = PORT, docker: bool = True,
         leaving: frozenset[str] = NOBODY, runtime: str = "systemd") -> tuple[int, ...]:
    with on_host(**facts):
        return pf.check_port(name, at, docker, leaving, runtime_named(runtime))


def refusal(facts: dict[str, Any], **kw: Any) -> PreflightError:
    with pytest.raises(PreflightError) as e:
        port(facts, **kw)
    assert e.value.subject == f"port {kw.get('at', PORT)} on the host"
    assert str(e.value) == f"{e.value.subject} {e.value.problem}: {e.value.fix}"
    return e.value


# --- containers that publish the port -----------------------------------------------------

def test_a_container_of_anything_else_on_the_port_is_refused_by_name_and_image():
    e = refusal(host(containers=[WEB]))
    assert e.problem == ("is published by the Docker container 'web' (image nginx:1), not by "
                         "this service's container")
    assert e.fix == "stop it (docker stop web), or set `port` to a free port"
    assert str(e) == ("port 8083 on the host is published by the Docker container 'web' (image "
                      "nginx:1), not by this service's container: stop it (docker stop web), or "
                      "set `port` to a free port")


def test_a_container_of_another_service_is_named_by_its_service_and_the_first_one_is_told():
    e = refusal(host(containers=[OURS, CHAT, WEB]))
    assert e.problem == ("is published by the Docker container 'beekeeper-chat' (beekeeper "
                         "service 'chat'), not by this service's container")
    assert e.fix == "stop it (docker stop beekeeper-chat), or set `port` to a free port"


def test_the_containers_are_those_of_the_port_asked_for():
    facts = host(containers=[WEB])
    assert port(facts, at=FREE) == ()
    assert refusal(facts).subject == "port 8083 on the host"


def test_the_services_own_container_or_one_the_deploy_removes_first_passes():
    assert port(host(containers=[OURS])) == ()
    assert port(host(containers=[CHAT]), leaving=frozenset({"chat"})) == ()
    # the service's own name among those removed first changes nothing
    assert port(host(containers=[OURS]), leaving=frozenset({"llm"})) == ()
    assert "'web'" in refusal(host(containers=[WEB, OURS]), leaving=frozenset({"chat"})).problem


def test_without_docker_no_container_list_is_read():
    assert port(host(containers=[WEB], docker=False), docker=False) == ()


# --- listeners /proc shows, or does not ---------------------------------------------------

def test_a_listener_proc_does_not_show_passes_only_where_this_services_record_has_the_port():
    assert port(host(owners=[UNSEEN], records={"llm": PORT})) == ()
    for records in (None, {"llm": FREE}, {"chat": PORT}):
        e = refusal(host(owners=[UNSEEN], records=records))
        assert e.problem == ("is in use by a process /proc does not show (listening socket "
                             "inode 4711; another PID namespace, or no root)"), records
        assert e.fix == "stop it, or set `port` to a free port"
    e = refusal(host(owners=[PortOwner(pid=None)]))
    assert "(listening socket inode ?; another PID namespace" in e.problem
    # the service's own server seen from outside its namespace, and a process beside it
    e = refusal(host(owners=[UNSEEN, HAND], records={"llm": PORT}))
    assert e.problem.startswith("is in use by pid 999 (user alice, program /usr/bin/python3)")


def test_dockers_proxy_is_the_services_own_only_with_its_container_or_its_record_and_docker():
    assert port(host(owners=[DOCKER_PROXY], containers=[OURS])) == ()
    assert port(host(owners=[DOCKER_PROXY], records={"llm": PORT})) == ()
    e = refusal(host(owners=[DOCKER_PROXY]))
    assert e.problem == ("is in use by pid 812 (user root, program /usr/bin/docker-proxy), not "
                         "by this service's server")
    assert e.fix == "stop it (kill 812), or set `port` to a free port"
    # the record says the port, but no Docker runs here: its proxy is not the service's
    refusal(host(owners=[DOCKER_PROXY], records={"llm": PORT}, docker=False), docker=False)
    refusal(host(owners=[DOCKER_PROXY], records={"llm": FREE}))


def test_a_process_beside_the_services_own_server_is_refused():
    ours = kit_server(501, cgroups=("/system.slice/beekeeper-llm.service",))
    assert port(host(owners=[ours])) == ()
    e = refusal(host(owners=[ours, HAND]))
    assert e.problem == ("is in use by pid 999 (user alice, program /usr/bin/python3), not by "
                         "this service's server")
    assert e.fix == "stop it (kill 999), or set `port` to a free port"


def test_a_kit_server_in_another_services_unit_is_refused_naming_the_unit():
    other = kit_server(502, cgroups=("/system.slice/beekeeper-chat.service",))
    e = refusal(host(owners=[other]))
    assert e.problem == (f"is in use by pid 502 (user beekeeper, program {NATIVE_PREFIX}/b1/bin/"
                         "llama-server, in beekeeper-chat.service), not by this service's server")
    # the unit a service the deploy removes first runs in is this deploy's to stop
    assert port(host(owners=[other]), leaving=frozenset({"chat"})) == ()
    nameless = PortOwner(pid=503, ppid=1, user="", exe="", comm="", inode="1")
    assert refusal(host(owners=[nameless])).problem == (
        "is in use by pid 503 (user ?, program ?), not by this service's server")


# --- the kit's servers no supervisor owns -------------------------------------------------

def test_kit_servers_no_supervisor_owns_are_returned_and_each_is_told(capsys):
    first = kit_server(601)
    second = kit_server(602, exe=f"{RESOLVED}/b2/bin/llama-server")  # the prefix resolved
    assert port(host(owners=[first, second])) == (601, 602)
    err = capsys.readouterr().err
    assert err.count("warning: port 8083 is held by pid") == 2
    assert (f"host canned: warning: port 8083 is held by pid 601 ({NATIVE_PREFIX}/b1/bin/"
            "llama-server, user beekeeper), a server of the kit's that no supervisor owns "
            "(its supervisor ended without it): the deploy ends it and starts beekeeper-llm "
            "under supervision") in err
    assert f"held by pid 602 ({RESOLVED}/b2/bin/llama-server, user beekeeper)" in err


def test_under_the_supervisor_runtime_the_child_of_the_kits_supervisord_is_supervised(capsys):
    child = kit_server(701, ppid=SUPERVISORD)
    assert port(host(owners=[child]), runtime="supervisor") == ()
    assert "warning" not in capsys.readouterr().err
    # under systemd it is in no unit of the service, and not an orphan either (the kit's
    # supervisord is above it): not the deploy's to end, refused
    e = refusal(host(owners=[child]))
    assert "is in use by pid 701 (user beekeeper" in e.problem


# --- each service's port (check_ports) ----------------------------------------------------

TWO = {**DEFAULTS, "services": [{"service_name": "llm", "profile": "cpu-tiny", "port": PORT},
                                {"service_name": "chat", "profile": "cpu-tiny", "port": FREE}]}
DOCKER = DockerEngineInfo(present=True, path="/usr/bin/docker", flavour="docker-ce")


def ports(facts: dict[str, Any], data: dict[str, Any] = TWO, runtime: str = "systemd",
          kept: frozenset[str] | None = NOBODY) -> tuple[int, ...]:
    with on_host(**facts):
        return pf.check_ports(load_host_config(data), DOCKER, runtime_named(runtime), kept)


def test_each_services_port_is_checked_and_each_orphan_returned_once():
    one, other = kit_server(601), kit_server(602)
    # llm's port held by both orphans, chat's by the first again: each pid once, in order
    assert ports(host(owners=[one, other], elsewhere={FREE: [one]})) == (601, 602)
    # one orphan on each port: the second service's adds to the first's
    assert ports(host(owners=[one], elsewhere={FREE: [other]})) == (601, 602)


def test_a_container_of_a_service_another_host_keeps_still_holds_the_port():
    """chat is deployed here and gone from this host's data: the deploy removes it first,
    unless a neighbour on the machine keeps it (or its data cannot be read: `kept` None)."""
    one = {**DEFAULTS, "services": [{"service_name": "llm", "profile": "cpu-tiny",
                                     "port": PORT}]}
    facts = host(containers=[CHAT], deployed=["llm", "chat"])
    assert ports(facts, one) == ()
    for kept in (frozenset({"chat"}), None):
        with pytest.raises(PreflightError) as e:
            ports(facts, one, kept=kept)
        assert "'beekeeper-chat'" in e.value.problem, kept


def test_no_port_is_checked_without_the_service_stage():
    facts = host(containers=[WEB])
    assert ports(facts, {**TWO, "stages": ["provision", "build", "model"]}) == ()
    with pytest.raises(PreflightError):
        ports(facts)
