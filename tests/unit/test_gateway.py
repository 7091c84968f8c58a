"""The gateway's host data, its plan from the inventory, its HAProxy config, and the prune
of services the inventory dropped."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from beekeeper.core import gateway as gw
from beekeeper.core.config import load_host_config
from beekeeper.core.deployed import DeployedService
from beekeeper.core.errors import ConfigError
from beekeeper.core.hostdata import GatewayData
from beekeeper.core.machines import kept_by_neighbours, leaving, machine_of
from beekeeper.operations.services import removal_script

from .harness import GATEWAY_GOOD as GOOD, _backend, gateway_with as with_

# ------------------------------------------------------------------ host data


def test_gateway_defaults_are_loopback_without_a_key():
    cfg = load_host_config(with_(gateway={}))
    assert cfg.data.gateway == GatewayData()
    assert (cfg.data.gateway.bind_address, cfg.data.gateway.port) == ("127.0.0.1", 4000)
    assert load_host_config(GOOD).data.gateway is None


@pytest.mark.parametrize(("gateway", "key", "fix"), [
    ("yes", "`gateway`", "gateway = {}"),
    ({"prot": 4000}, "`gateway.prot`", "did you mean `gateway.port`?"),
    ({"port": 0}, "`gateway.port`", "1 to 65535"),
    ({"bind_address": "0.0.0.0"}, "`gateway.bind_address`", "api_key_file"),
    ({"bind_address": "gw.lan"}, "`gateway.bind_address`", "127.0.0.1"),
    ({"check_interval_s": 0}, "`gateway.check_interval_s`", "check_interval_s = 2"),
    ({"check_interval_s": "2"}, "`gateway.check_interval_s`", "no quotes"),
    ({"max_body_kib": 10}, "`gateway.max_body_kib`", "from 64 to 65536"),
    ({"api_key_file": "/nonexistent/key"}, "`gateway.api_key_file`", "holds the key"),
])
def test_bad_gateway_data_is_one_line_naming_the_key(gateway, key, fix):
    with pytest.raises(ConfigError) as e:
        load_host_config(with_(gateway=gateway))
    msg = str(e.value)
    assert f"host data {key}" in msg and fix in msg and "\n" not in msg, msg


def test_gateway_key_file_must_be_private_and_one_word(keys, tmp_path):
    cfg = load_host_config(with_(gateway={"bind_address": "0.0.0.0", "api_key_file": keys["gw"]}))
    assert cfg.data.gateway is not None and cfg.data.gateway.api_key_file == keys["gw"]
    with pytest.raises(ConfigError, match="space or a control character"):
        load_host_config(with_(gateway={"api_key_file": keys["spaced"]}))
    loose = tmp_path / "loose.key"
    loose.write_text("k\n")
    loose.chmod(0o644)
    with pytest.raises(ConfigError, match=f"chmod 600 {loose}"):
        load_host_config(with_(gateway={"api_key_file": str(loose)}))


def test_gateway_address_is_an_ip_or_a_host_name():
    assert load_host_config(with_(gateway_address="10.0.0.5")).data.gateway_address == "10.0.0.5"
    assert load_host_config(with_(gateway_address="gpu-box.lan")).data.gateway_address == \
        "gpu-box.lan"
    for bad in ("gpu box", "http://x", "", 5, "a;b"):
        with pytest.raises(ConfigError, match="`gateway_address`"):
            load_host_config(with_(gateway_address=bad))


def test_a_service_marked_absent_is_only_a_name():
    cfg = load_host_config(with_(services=[
        {"service_name": "tiny", "profile": "cpu-tiny"},
        {"service_name": "old", "state": "absent"},  # no profile needed: it goes
    ]))
    assert [s.name for s in cfg.services] == ["tiny"] and cfg.absent == ("old",)
    one = load_host_config(with_(state="absent"))  # the one-service form
    assert one.services == () and one.absent == ("llm",)
    assert load_host_config(with_(services=[])).services == ()


@pytest.mark.parametrize(("data", "key", "fix"), [
    (with_(services=[{"service_name": "x", "state": "gone"}]), "`services[0].state`",
     "'absent'"),
    (with_(services=[{"service_name": "x", "state": "absent", "prot": 1}]),
     "`services[0].prot`", "did you mean"),
    (with_(services=[{"profile": "cpu-tiny"}, {"state": "absent"}]), "`services`",
     "name them apart"),
    (with_(service_name="gateway"), "`service_name`", "name the service otherwise"),
    (with_(gateway_port=0), "`gateway_port`", "1 to 65535"),
    (with_(port=4000, gateway={}), "`gateway.port`", "a port of its own"),
])
def test_bad_service_state_is_refused(data, key, fix):
    with pytest.raises(ConfigError) as e:
        load_host_config(data)
    assert f"host data {key}" in str(e.value) and fix in str(e.value), str(e.value)


# ------------------------------------------------------------------ the plan


def _host(services, **kw):
    return with_(services=services, **kw)


def test_plan_groups_services_by_model_and_reaches_each(keys):
    hosts = [
        ("gpu-a", _host([
            {"service_name": "tiny", "profile": "cpu-tiny", "bind_address": "0.0.0.0",
             "api_key_file": keys["be"]},
            {"service_name": "smol", "profile": "cpu-smollm", "port": 8084,
             "bind_address": "10.0.0.5", "api_key_file": keys["be"]}],
            ssh_hostname="gpu-a.lan")),
        ("gpu-b", _host([{"service_name": "tiny", "profile": "cpu-tiny", "port": 9000,
                          "gateway_port": 19000}], gateway_address="127.0.0.1")),
        ("gw", _host([{"service_name": "tiny", "profile": "cpu-tiny",
                       "bind_address": "0.0.0.0", "api_key_file": keys["be"]}],
                     gateway={})),
    ]
    plan = gw.plan("gw", hosts)
    assert plan.left_out == []
    assert [r.model for r in plan.routes] == ["cpu-smollm", "cpu-tiny"]
    tiny = plan.routes[1]
    assert [(u.server_name, u.haproxy_address) for u in tiny.upstreams] == [
        ("gpu-a.tiny", "gpu-a.lan:8083"),  # wildcard bind: the host's SSH name
        ("gpu-b.tiny", "127.0.0.1:19000"),  # an SSH forward on the gateway's side
        ("gw.tiny", "127.0.0.1:8083"),  # the gateway's own host: loopback
    ]
    assert plan.routes[0].upstreams[0].haproxy_address == "10.0.0.5:8084"
    assert tiny.key_file == keys["be"] and tiny.keyed


@pytest.mark.parametrize(("bind", "local"), [
    ("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("10.0.0.5", "10.0.0.5"), ("::1", "::1")])
def test_a_wildcard_bind_is_reached_on_ipv4_loopback_from_its_own_box(bind, local):
    """The gateway's upstream on its own host and the deploy's wait for the gateway ask the
    one rule the deploy's smoke check and verify ask (a record's reached_at): 127.0.0.1 for
    ::, which a host with IPv6 off on loopback still has; the gateway on :: takes IPv4 too."""
    from beekeeper.core.deployed import DeployedService
    from beekeeper.core.hostdata import GatewayData

    assert DeployedService.reached_at(bind) == local
    conf = gw.render_config(GatewayData(bind_address=bind, api_key_file=None), [])
    line = next(x.strip() for x in conf.splitlines() if x.strip().startswith("bind "))
    assert line == {"0.0.0.0": "bind 0.0.0.0:4000", "::": "bind [::]:4000 v4v6",
                    "10.0.0.5": "bind 10.0.0.5:4000", "::1": "bind [::1]:4000"}[bind]


def test_plan_refuses_what_the_gateway_cannot_reach(keys):
    loop = [("a", _host([{"service_name": "x", "profile": "cpu-tiny"}], ssh_hostname="a.lan"))]
    with pytest.raises(ConfigError, match="listens on 127.0.0.1 only.*ssh -L"):
        gw.plan("gw", loop)
    local = [("sandbox", _host([{"service_name": "x", "profile": "cpu-tiny",
                                 "bind_address": "0.0.0.0", "api_key_file": keys["be"]}],
                               ssh_hostname="127.0.0.1"))]
    with pytest.raises(ConfigError, match="`gateway_address`.*own loopback"):
        gw.plan("gw", local)
    # an inventory name that is no host name (an SSH alias with a space, say) cannot go
    # into haproxy.cfg as an address: one line naming gateway_address, not a failed check
    for name in ("gpu box #1", "a;b"):
        odd = [(name, _host([{"service_name": "x", "profile": "cpu-tiny",
                              "bind_address": "0.0.0.0", "api_key_file": keys["be"]}]))]
        with pytest.raises(ConfigError, match="`gateway_address`.*can resolve; fix"):
            gw.plan("gw", odd)
    ipv6 = [("a", _host([{"service_name": "x", "profile": "cpu-tiny",
                          "bind_address": "::", "api_key_file": keys["be"]}]))]
    # its own host's server on :: (llama-server takes IPv4 there too): IPv4 loopback
    assert gw.plan("a", ipv6).routes[0].upstreams[0].haproxy_address == "127.0.0.1:8083"


def test_one_model_one_key(keys):
    hosts = [(n, _host([{"service_name": "t", "profile": "cpu-tiny", "bind_address": "0.0.0.0",
                         "api_key_file": keys[k]}], gateway_address=f"{n}.lan"))
             for n, k in (("a", "be"), ("b", "be2"))]
    with pytest.raises(ConfigError, match=r"\(a/t, b/t\) want different API keys"):
        gw.plan("gw", hosts)


def test_a_host_with_bad_data_is_left_out_not_the_gateway():
    plan = gw.plan("gw", [("bad", with_(prot=1)),
                          ("gw", _host([{"service_name": "t", "profile": "cpu-tiny"}]))])
    assert [r.model for r in plan.routes] == ["cpu-tiny"]
    assert len(plan.left_out) == 1 and plan.left_out[0].startswith("bad: host data `prot`")


# ------------------------------------------------------------------ rendering


def _render(keys, gateway=None):
    hosts = [("a", _host([
        {"service_name": "tiny", "profile": "cpu-tiny", "bind_address": "0.0.0.0",
         "api_key_file": keys["be"]},
        {"service_name": "smol", "profile": "cpu-smollm", "port": 8084}],
        gateway_address="a.lan")),
        ("gw", _host([{"service_name": "tiny", "profile": "cpu-tiny"}]))]
    plan = gw.plan("gw", hosts)
    return gw.render_config(gateway or GatewayData(api_key_file=keys["gw"]), plan.routes), plan


def test_config_routes_balances_and_checks_each_model(keys):
    cfg, plan = _render(keys)
    backends = cfg.split("\nbackend ")[1:]
    tiny = next(b for b in backends if b.startswith("model_cpu-tiny"))
    assert "balance leastconn" in tiny and "http-check send meth GET uri /health" in tiny
    assert "check inter 2s fall 2 rise 2" in tiny
    assert "server a.tiny a.lan:8083" in tiny and "server gw.tiny 127.0.0.1:8083" in tiny
    assert "Authorization \"Bearer %[be_name,map(" in tiny  # its key, from the root-only map
    smol = next(b for b in backends if b.startswith("model_cpu-smollm"))
    assert "Authorization" not in smol  # no key: nothing set
    assert "use_backend model_cpu-tiny if { var(txn.model) -m str cpu-tiny }" in cfg
    assert "use_backend model_cpu-smollm if { path_beg /model/cpu-smollm/ }" in cfg
    assert "json_query('$.model')" in cfg and "option http-buffer-request" in cfg
    assert "option http-no-delay" in cfg  # SSE events go out one by one
    assert f"-f {gw.PATHS.client_key}" in cfg and "http-request del-header authorization" in cfg
    # with two models, a request that names none is not guessed
    assert "! { var(txn.model) -m found }" not in cfg
    # no secret in the config: keys are files beside it
    for k in ("gw-secret", "be-secret"):
        assert k not in cfg
    # the set-var rule comes before every use_backend (HAProxy runs it first anyway)
    assert cfg.index("set-var(txn.model)") < cfg.index("use_backend")


def test_config_without_a_key_has_no_key_check(keys):
    cfg, _ = _render(keys, GatewayData(max_body_kib=2048, timeout_s=30,
                                       check_interval_s=1))
    assert "authorized" not in cfg
    assert "tune.bufsize 2113536" in cfg and "timeout server 30s" in cfg
    assert "if { req.hdr_val(content-length) gt 2097152 }" in cfg
    assert "inter 1s" in cfg


def test_one_model_takes_requests_that_name_none():
    plan = gw.plan("gw", [("gw", _host([{"service_name": "t", "profile": "cpu-tiny"}]))])
    cfg = gw.render_config(GatewayData(), plan.routes)
    assert "use_backend model_cpu-tiny if ! { var(txn.model) -m found }" in cfg


def test_models_json_lists_every_model(keys):
    _, plan = _render(keys)
    data = json.loads(gw.models_json(plan.routes))
    assert data["object"] == "list"
    assert [(m["id"], m["servers"]) for m in data["data"]] == [("cpu-smollm", 1),
                                                              ("cpu-tiny", 2)]
    assert gw.upstream_keys_map(plan.routes) == [("model_cpu-tiny", keys["be"])]


def test_unit_is_hardened_and_reloads_after_a_config_check():
    unit = gw.render_unit()
    assert "ExecReload=/usr/sbin/haproxy -c -q -f /etc/beekeeper/gateway/haproxy.cfg" in unit
    assert "ExecReload=/bin/kill -USR2 $MAINPID" in unit
    # without CAP_KILL the root master cannot stop the old workers (user haproxy) after a
    # reload: they went on serving the old config (the old key) beside the new one
    assert "CAP_KILL" in unit.split("CapabilityBoundingSet=")[1].splitlines()[0]
    for line in ("NoNewPrivileges=yes", "ProtectSystem=strict", "Type=notify"):
        assert line in unit


# ------------------------------------------------------------------ prune


def test_stale_services_are_those_the_inventory_does_not_keep():
    cfg = load_host_config(with_(services=[{"service_name": "tiny", "profile": "cpu-tiny"},
                                           {"service_name": "old", "state": "absent"}]))
    assert leaving(cfg, ["llm", "old", "tiny"]) == ["llm", "old"]
    assert leaving(cfg, ["tiny"]) == []


def test_services_of_another_inventory_host_on_the_same_machine_are_kept():
    # two inventory entries over one SSH address and port (one per model): a deploy of
    # either must not remove what the other deploys there (CI found each removing the other)
    one = with_(ssh_hostname="10.0.0.5", ssh_port=2222)
    two = {**one, "service_name": "llm2", "port": 8085}
    other_box = {**one, "ssh_port": 22, "service_name": "far", "port": 8087}
    hosts = [("one", one), ("two", two), ("far", other_box)]
    assert kept_by_neighbours("one", hosts) == {"llm2"}
    assert kept_by_neighbours("two", hosts) == {"llm"}
    assert kept_by_neighbours("far", hosts) == frozenset()
    cfg = load_host_config(one)
    assert leaving(cfg, ["far", "llm", "llm2", "old"], kept_by_neighbours("one", hosts)) == \
        ["far", "old"]
    # a neighbour with bad data: what it keeps is unknown, so nothing is removed
    bad = [*hosts, ("bad", {**one, "prot": 8086})]
    assert kept_by_neighbours("one", bad) is None
    assert leaving(cfg, ["far", "llm", "llm2", "old"], kept_by_neighbours("one", bad)) == []
    # the host name is pyinfra's SSH address when ssh_hostname is not set
    assert machine_of("box", {}) == machine_of("other", {"ssh_hostname": "box"}) == "box:22"
    assert machine_of("@local", {}) == "@local"


def test_removal_touches_only_that_service_and_keeps_models():
    script = removal_script("old-1")
    words = shlex.split(script.replace(";", " ; "))
    assert "beekeeper-old-1.service" in words and "/etc/beekeeper/old-1" in words
    assert "/srv" not in script and "models" not in script.replace("model_dir", "")
    assert "rm -rf /etc/beekeeper/old-1" in script and "rm -rf /etc/beekeeper " not in script


# ------------------------------------------------------------------ the deploy, queued


def _deploy_gateway_beside_a_backend(keys, data, canned):
    """deploy.py over an inventory of the gateway-only host `gw` and the backend `gpu`."""
    from .harness import run_deploy_hosts_stdin

    return run_deploy_hosts_stdin({"gw": (data, canned), "gpu": _backend(keys)})


def test_a_gateway_only_host_installs_haproxy_and_nothing_of_a_gpu_host(keys):
    failed, hosts = _deploy_gateway_beside_a_backend(
        keys, with_(services=[], gateway={"api_key_file": keys["gw"]}),
        {"DeployedServices": ["llm"], "DebPackages": {"python3": ["3"]}})
    assert failed == set()
    ops = hosts["gw"]
    names = [n for n, _, _ in ops]
    assert "Install HAProxy from the distro" in names
    assert "Remove service llm (gone from the inventory): stop it, remove its unit, env " \
           "file and container; keep its model" in names
    # (the backend's key, stored for the gateway to send, is the one "model" it has)
    assert not any("Docker" in n or "image" in n.lower() or "model " in n.lower()
                   for n in names if not n.startswith(("Remove service",
                                                       "Store the API key of model "))), names
    # the GPU host beside it gets its build and its service (what the gateway host has not)
    assert any(n.startswith("Build server image") for n, _, _ in hosts["gpu"])
    cmds = "\n".join(c for _, cs, _ in ops for c in cs)
    assert "gw-secret" not in cmds  # the key is in no command and no upload shown
    assert "server gpu.tiny gpu.lan:8083" in cmds  # it routes to the other host's service
    check = next(cs for n, cs, _ in ops if n.startswith("Check the config with haproxy -c"))
    assert "haproxy -c -q -f /etc/beekeeper/gateway/haproxy.cfg.new" in check[0]


def test_a_lone_gateway_is_refused_before_any_operation():
    """A gateway with no service to route on any inventory host would answer every request
    with 503: one line naming `gateway` and the fix, and nothing of that host is queued."""
    from .harness import run_deploy

    with pytest.raises(ConfigError) as e:
        run_deploy(with_(services=[], gateway={}), {"DeployedServices": []})
    msg = str(e.value)
    assert msg.startswith("host canned: host data `gateway`: no inventory host has a service "
                          "for this gateway to route; fix: give this or another inventory host "
                          "a service, or remove `gateway`"), msg
    assert "\n" not in msg


def test_a_gateway_whose_only_backend_has_bad_data_names_it_and_fails_alone(capsys):
    from .harness import run_deploy_hosts_stdin

    failed, ops = run_deploy_hosts_stdin({
        "gw": (with_(services=[], gateway={}), {"DeployedServices": []}),
        "bad": (with_(prot=8083), {}),
        "empty": (with_(services=[]), {"DeployedServices": []}),  # a host to empty: no service
    })
    assert failed == {"gw", "bad"} and ops["gw"] == [] and ops["bad"] == []
    lines = capsys.readouterr().err.splitlines()
    gw_line = [ln for ln in lines if ln.startswith("host gw: ")]
    assert len(gw_line) == 1, lines
    assert "host data `gateway`: no inventory host has a service for this gateway to route " \
           "(left out, with bad data: bad: host data `prot`" in gw_line[0]


def test_a_kept_service_may_take_the_port_of_one_the_deploy_removes():
    from beekeeper.facts.docker import PortContainer
    from beekeeper.facts.gpu import NvidiaSmiInfo

    from .harness import DEFAULTS, NATIVE, facts, run_deploy

    canned = facts(Wsl=NATIVE, GpuInfo=NvidiaSmiInfo(path="/usr/bin/nvidia-smi"),
                   DeployedServices=["llm"],
                   PortContainers=[PortContainer(name="beekeeper-llm", service="llm",
                                                 image="beekeeper/llama-server:x")],
                   PortListeners=["docker-proxy"])
    ops = run_deploy({**DEFAULTS,
                      "services": [{"service_name": "tiny", "profile": "cpu-tiny"}]}, canned)
    names = [n for n, _ in ops]
    removal = next(i for i, n in enumerate(names) if n.startswith("Remove service llm"))
    start = next(i for i, n in enumerate(names) if n.startswith("Start and enable "
                                                               "beekeeper-tiny"))
    assert removal < start


def test_a_removed_service_on_its_own_port_goes_only_after_the_smoke_checks():
    """A failed new server stops the deploy at its smoke check: a service the inventory
    dropped, on a port nobody takes, must still be running then."""
    from .harness import DEFAULTS, NATIVE, facts, run_deploy

    def manifests(path):
        port = {"/etc/beekeeper/old/deployed.json": 8090}.get(path)
        return [DeployedService(service="old", port=port).to_json()] if port else None

    from beekeeper.facts.gpu import NvidiaSmiInfo

    canned = facts(Wsl=NATIVE, GpuInfo=NvidiaSmiInfo(path="/usr/bin/nvidia-smi"),
                   DeployedServices=["old"], FileContents=manifests)
    ops = run_deploy({**DEFAULTS,
                      "services": [{"service_name": "tiny", "profile": "cpu-tiny"}]}, canned)
    names = [n for n, _ in ops]
    removal = next(i for i, n in enumerate(names) if n.startswith("Remove service old"))
    smoke = max(i for i, n in enumerate(names) if "smoke-check" in n)
    assert removal > smoke, names


def test_keys_go_on_stdin_into_a_root_only_file_never_by_upload(keys, tmp_path):
    """pyinfra's upload writes a file with the default mode first (in /tmp under sudo):
    secrets go on the stdin of `umask 077; cat` instead, stripped as every reader strips
    them, and in no command."""
    spaced = tmp_path / "spaced.key"
    spaced.write_text("  gw-secret-spaced \n\n")
    failed, hosts = _deploy_gateway_beside_a_backend(
        keys, with_(services=[], gateway={"api_key_file": str(spaced)}),
        {"DeployedServices": [], "DebPackages": {"python3": ["3"]}})
    assert failed == set()
    ops = hosts["gw"]
    for name, secret in (("Store the gateway's API key (root-only file)", "gw-secret-spaced"),
                         ("Store the API key of model model_cpu-tiny (root-only file)",
                          "be-secret")):  # the backend's key, for the gateway to send it
        store = [(cs, stdin) for n, cs, stdin in ops if n == name]
        assert len(store) == 1, [n for n, _, _ in ops]
        cmds, stdin = store[0]
        assert stdin == f"{secret}\n"
        assert len(cmds) == 1 and "umask 077" in cmds[0] and secret not in cmds[0]
        assert not cmds[0].startswith("upload"), cmds
    for host_ops in hosts.values():
        assert not any(k in c for _, cs, _ in host_ops for c in cs
                       for k in ("gw-secret", "be-secret"))


def test_servers_of_one_model_name_must_serve_the_same_model(keys):
    """Two servers that answer as cpu-tiny, one with its own model file (or another context
    size), are not one model: the gateway refuses to balance them."""
    def tiny(**extra):
        return _host([{"service_name": "t", "profile": "cpu-tiny", "bind_address": "0.0.0.0",
                       "api_key_file": keys["be"], **extra}])

    same = [("a", tiny()), ("b", tiny())]
    assert [len(r.upstreams) for r in gw.plan("gw", same).routes] == [2]
    for extra in ({"ctx_size": 1024}, {"model_repo": "you/Other-GGUF",
                                       "model_file": "other.gguf"}):
        with pytest.raises(ConfigError, match="both answer as model cpu-tiny.*fix"):
            gw.plan("gw", [("a", tiny()), ("b", tiny(**extra))])


def test_servers_of_one_file_name_from_other_repositories_or_revisions_are_refused(keys):
    """Before the pin a Hub model has no sha256: a file of the profile's name from another
    repository, or at another revision, is other weights, and the gateway refuses to balance
    it with the profile's (it compared the file name and the sha256 alone: both equal)."""
    def q8(**extra):
        return _host([{"service_name": "q", "profile": "q8-turbo4-64k",
                       "bind_address": "0.0.0.0", "api_key_file": keys["be"], **extra}])

    same = [("gpu-a", q8()), ("gpu-b", q8(model_repo="unsloth/Qwen3.5-9B-GGUF"))]
    assert [len(r.upstreams) for r in gw.plan("gw", same).routes] == [2]
    for extra in ({"model_repo": "bob/qwen-finetune-GGUF", "model_file": "Qwen3.5-9B-Q8_0.gguf"},
                  {"model_revision": "a" * 40}):
        with pytest.raises(ConfigError, match=r"host data `profile`: service q on gpu-b and "
                           r"gpu-a/q both answer as model q8-turbo4-64k but serve different "
                           r"models.*repository, revision or sha256.*; fix: give them"):
            gw.plan("gw", [("gpu-a", q8()), ("gpu-b", q8(**extra))])
    # one sha256 given on both: the same bytes, wherever they are downloaded from
    sha = {"model_sha256": "b" * 64}
    pinned = [("gpu-a", q8(**sha)), ("gpu-b", q8(model_repo="bob/qwen-finetune-GGUF",
                                                 model_file="Qwen3.5-9B-Q8_0.gguf", **sha))]
    assert [len(r.upstreams) for r in gw.plan("gw", pinned).routes] == [2]


# ------------------------------------------------------------------ HAProxy's version

DATA = Path(__file__).parent / "data"


def test_apt_policy_is_read_from_real_output():
    """`apt-cache policy` as Debian 12 (the sandbox host) prints it, installed and not (the
    archive's address replaced by ARCHIVE)."""
    from beekeeper.facts.host import parse_apt_policy

    lines = (DATA / "apt-policy-haproxy-debian12.txt").read_text().splitlines()
    assert parse_apt_policy(lines).installed == "2.6.12-1+deb12u3"
    nginx = parse_apt_policy((DATA / "apt-policy-nginx-debian12.txt").read_text().splitlines())
    assert nginx.installed is None and nginx.candidate == "1.22.1-9+deb12u9"
    assert parse_apt_policy([]).candidate is None  # apt knows no such package


def test_haproxy_too_old_for_the_config_is_named_with_the_fix():
    """json_query needs HAProxy 2.4, and the gateway's key check (req.fhdr, word) no more
    since issue 43: Ubuntu 22.04's 2.4 serves a keyed gateway. Debian 12's 2.6 passed
    `haproxy -c` on the rendered config; Ubuntu 22.04's version string is written here by hand
    (Ubuntu's archive is not reachable from this machine)."""
    assert gw.haproxy_refusal("2.6.12-1+deb12u3") is None
    assert gw.haproxy_refusal("3.0.11-1") is None
    assert gw.haproxy_refusal("1:2.8.5-1ubuntu3") is None
    assert gw.haproxy_refusal("2.4.24-0ubuntu0.22.04.1") is None
    refusal = gw.haproxy_refusal("2.2.9-2+deb11u6")
    assert refusal is not None and refusal.subject == "host data `gateway`"
    bullseye = str(refusal)
    assert "older than 2.4" in bullseye and "json_query" in bullseye
    assert "HAProxy 2.4 or newer (Ubuntu 22.04" in refusal.fix
    assert gw.haproxy_refusal("") is None  # unreadable: haproxy -c decides


def test_an_old_haproxy_stops_the_host_before_any_operation(keys, capsys):
    from beekeeper.facts.host import AptPolicyInfo

    bullseye = AptPolicyInfo(installed=None, candidate="2.2.9-2+deb11u6")
    failed, hosts = _deploy_gateway_beside_a_backend(
        keys, with_(services=[], gateway={"api_key_file": keys["gw"]}),
        {"DeployedServices": ["llm"], "AptPolicy": bullseye})
    # the gateway host fails alone, with one line, while its operations are prepared: pyinfra
    # runs none of a failed host's (the prune queued before the check included), the other
    # host deploys
    assert failed == {"gw"}
    assert not any(n.startswith("Install HAProxy") for n, _, _ in hosts["gw"])
    assert any(n.startswith("Build server image") for n, _, _ in hosts["gpu"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("host gw: ")]
    assert len(lines) == 1 and re.search(r"host data `gateway`: .* 2\.2\.9", lines[0]), lines
    # Ubuntu 22.04's 2.4 serves, with a key (issue 43) and without: the deploy is queued
    jammy = AptPolicyInfo(installed=None, candidate="2.4.24-0ubuntu0.22.04.1")
    for gateway in ({"api_key_file": keys["gw"]}, {}):
        failed, hosts = _deploy_gateway_beside_a_backend(
            keys, with_(services=[], gateway=gateway),
            {"DeployedServices": [], "AptPolicy": jammy})
        assert failed == set()
        assert "Install HAProxy from the distro" in [n for n, _, _ in hosts["gw"]]
