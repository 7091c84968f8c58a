"""core/runtime.py: each way of running the server is picked once from mode and runtime,
and what it says (its file, its name to the runtime, its control line, its log) is the
same thing the deploy writes and the record keeps."""

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.deployed import DeployedService
from beekeeper.core.errors import ConfigError
from beekeeper.core.paths import ServicePaths
from beekeeper.core.render import TEMPLATES_DIR
from beekeeper.core.runtime import RUNTIMES, recorded_runtime, requested, runtime_of, ways_named
from beekeeper.tasks.service import record

from .harness import requested_runtime, with_

# host data -> (way, file that runs it, its name to the runtime, the record's runtime, a
# compose file, a server log file, the control line's start)
WAYS = [
    ({"mode": "container"}, "docker unit", "/etc/systemd/system/beekeeper-llm.service",
     "beekeeper-llm.service", "systemd", False, False, "systemctl restart"),
    ({"mode": "container", "runtime": "compose"}, "compose",
     "/etc/systemd/system/beekeeper-llm.service", "beekeeper-llm.service", "compose", True,
     False, "systemctl restart"),
    ({"mode": "native"}, "native unit", "/etc/systemd/system/beekeeper-llm.service",
     "beekeeper-llm.service", None, False, False, "systemctl restart"),
    ({"mode": "native", "runtime": "supervisor"}, "supervisor",
     "/etc/beekeeper/supervisor/programs/beekeeper-llm.conf", "beekeeper-llm", "supervisor",
     False, True, "/usr/local/sbin/beekeeper-supervisorctl restart"),
]


@pytest.mark.parametrize("data,name,unit_file,known_by,recorded,compose,log,control", WAYS)
def test_host_data_picks_one_way_and_the_record_keeps_it(data, name, unit_file, known_by,
                                                         recorded, compose, log, control):
    cfg = load_host_config(with_(**data))
    rt, svc = requested_runtime(cfg), cfg.service
    p = ServicePaths(svc.name)
    assert rt.name == name and (TEMPLATES_DIR / rt.template).is_file()
    assert (rt.unit_file(p), rt.known_by(p)) == (unit_file, known_by)
    assert rt.tell(rt.known_by(p), "restart") == f"{control} {known_by}"
    # the user's files beside it: a compose override, a drop-in folder for a systemd unit
    assert rt.overrides(p) == ([p.compose_override] if compose else [])
    assert rt.dropins(p) == ([] if log else [p.dropin_dir])
    # where the server finds its model: on the host, or in the container's model mount
    assert rt.model_arg(svc.model, "/srv/m") == (
        f"/srv/m/{svc.model.filename}" if rt.native else f"/models/{svc.model.filename}")
    rec = record(cfg, rt, svc, "img")
    assert (rec.unit, rec.runtime) == (known_by, recorded)
    # and the record gives the way back (verify stops and starts the server by it)
    assert recorded_runtime(rec) is rt and rt.tell(rec.unit, "stop") == \
        rt.tell(rt.known_by(p), "stop")
    assert (rec.compose_file is not None, rec.log is not None) == (compose, log)
    # the file the deploy renders for this way is the one its template names
    assert (rt.template == "supervisor-program.conf.j2") == log


def test_every_way_is_a_distinct_pair_and_no_other_pair_is_one():
    assert len({(r.mode, r.runtime) for r in RUNTIMES}) == len(RUNTIMES) == 4
    for mode, runtime in (("native", "compose"), ("container", "supervisor")):
        with pytest.raises(ValueError, match="no way to run a server"):
            runtime_of(mode, runtime)


def test_a_record_of_the_first_kits_is_a_docker_unit():
    # no runtime written: a container under a systemd unit around `docker run`
    assert recorded_runtime(DeployedService(service="llm", unit="beekeeper-llm.service")
                            ).name == "docker unit"


def test_a_runtime_is_told_only_start_stop_or_restart():
    rt = runtime_of("native", "supervisor")
    assert rt.tell("beekeeper-llm", "stop") == \
        "/usr/local/sbin/beekeeper-supervisorctl stop beekeeper-llm"
    assert runtime_of("container", "systemd").tell("a b", "start") == "systemctl start 'a b'"
    with pytest.raises(ValueError, match="not an action: 'reload'"):
        rt.tell("beekeeper-llm", "reload")


def test_the_built_server_is_the_binary_natively_and_the_images_entry_point_in_a_container():
    binary = "/opt/beekeeper/llama-server/b1/llama-server"
    assert runtime_of("native", "supervisor").server_at(binary) == (binary, None)
    assert runtime_of("container", "compose").server_at("beekeeper/llama-server:t") == (
        "/usr/local/bin/llama-server", "beekeeper/llama-server:t")


TRIXIE = {"id": "debian", "version_id": "13"}


@pytest.mark.parametrize("way,engine,plugin,service", [
    ("docker unit", ["docker.io", "docker-cli"], [], ["docker.service"]),
    ("compose", ["docker.io", "docker-cli"], ["docker-compose"], ["docker.service"]),
    ("native unit", [], [], []),
    ("supervisor", [], [], []),
])
def test_only_a_container_needs_dockers_packages_and_engine_and_only_compose_its_plugin(
        way, engine, plugin, service):
    rt = next(r for r in RUNTIMES if r.name == way)
    # a bare Debian 13 host: no engine, no compose
    assert rt.docker_packages(TRIXIE, False, None, None) == engine + plugin
    # what the host has is not installed again
    assert rt.docker_packages(TRIXIE, True, "distro", "2.26.1") == []
    assert rt.docker_packages(TRIXIE, True, "distro", None) == plugin
    assert rt.docker_services("distro") == service
    # Docker Desktop runs its own engine: no docker.service to enable
    assert rt.docker_services("docker-desktop") == []


@pytest.mark.parametrize("data,name", [(w[0], w[1]) for w in WAYS])
def test_the_host_checks_of_a_service_are_those_of_the_way_its_record_names(data, name):
    """verify/host_checks.py picks the services a check looks at by the Runtime their record
    names: the container checks for a docker unit and compose, the compose project's for
    compose, the installed binary's for a native unit and a supervisord program."""
    from beekeeper.verify import host_checks as hc

    cfg = load_host_config(with_(**data))
    rec = record(cfg, requested_runtime(cfg), cfg.service, "img")
    applies = {f.__name__ for f in (hc.containers, hc.native, hc.compose) if f([rec]).items}
    assert applies == {"docker unit": {"containers"}, "compose": {"containers", "compose"},
                       "native unit": {"native"}, "supervisor": {"native"}}[name]


@pytest.mark.parametrize("way,serves_outside,carries_quote,carries_backslash,runs", [
    ("docker unit", False, True, True, "a container"),
    ("compose", False, False, False, "a container"),
    ("native unit", True, True, False, "the native server"),
    ("supervisor", True, True, True, "the native server"),
])
def test_config_asks_each_way_where_it_serves_a_model_from_and_what_its_env_file_carries(
        way, serves_outside, carries_quote, carries_backslash, runs):
    """config.py's rules ask the way (issue 42): a container opens a model on the host in
    model_dir alone (rule_model_in_model_dir), compose's env file carries no ' or \\ and
    the native unit's (systemd's EnvironmentFile, unquoted) no \\ nor a leading quote
    (rule_env_keys), and a runtime beside the wrong mode is refused naming what it runs."""
    rt = next(r for r in RUNTIMES if r.name == way)
    assert rt.serves_from("/srv/m", "/srv/m")
    assert rt.serves_from("/data/models", "/srv/m") is serves_outside
    assert rt.env_carries("plain-key_1$x")
    assert rt.env_carries("it's") is carries_quote
    assert rt.env_carries("back\\slash") is carries_backslash
    assert rt.env_carries("'quoted'") is (carries_quote and way != "native unit")
    assert rt.runs == runs
    assert rt in ways_named(rt.runtime)


@pytest.mark.parametrize("mode,runtime,desktop,way", [
    ("container", None, False, "docker unit"),
    ("container", None, True, "compose"),
    ("native", None, False, "native unit"),
    ("native", None, True, "native unit"),
    ("container", "systemd", True, "docker unit"),
    ("container", "compose", False, "compose"),
    ("native", "systemd", False, "native unit"),
    ("native", "supervisor", True, "supervisor"),
])
def test_host_data_asks_for_one_way_and_an_unset_runtime_is_compose_only_under_docker_desktop(
        mode, runtime, desktop, way):
    assert requested(mode, runtime, desktop).name == way
    cfg = load_host_config(with_(mode=mode, use_docker_desktop=desktop,
                                 **({"runtime": runtime} if runtime else {})))
    assert requested_runtime(cfg).name == way


def test_a_runtime_names_the_ways_it_runs_and_a_pair_that_is_none_is_refused():
    assert [r.name for r in ways_named("systemd")] == ["docker unit", "native unit"]
    assert [r.name for r in ways_named("compose")] == ["compose"]
    assert [r.name for r in ways_named("supervisor")] == ["supervisor"]
    for mode, runtime, fix in (("native", "compose", "container"),
                               ("container", "supervisor", "native")):
        with pytest.raises(ValueError, match="no way to run a server"):
            requested(mode, runtime)
        with pytest.raises(ConfigError) as e:
            load_host_config(with_(mode=mode, runtime=runtime))
        assert f"set mode = '{fix}', or runtime = 'systemd' (or remove it)" in str(e.value)


# way -> (needs Docker's engine, compose's plugin, builds an image, builds on the host, the
# container runtime checks NVIDIA_REQUIRE_CUDA, cuda_follows_driver applies, ProtectHome,
# systemd runs it, the host starts it again, the way without systemd)
QUESTIONS = [
    ("docker unit", True, False, True, False, True, True, False, True, True, None),
    ("compose", True, True, True, False, True, True, False, True, True, None),
    ("native unit", False, False, False, True, False, False, True, True, True, "supervisor"),
    ("supervisor", False, False, False, True, False, False, False, False, False, "supervisor"),
]


@pytest.mark.parametrize("way,docker,plugin,image,on_host,require_cuda,follows,protects_home,"
                         "systemd,restarts,without_systemd", QUESTIONS)
def test_preflight_asks_each_way_what_it_needs_builds_and_hides(
        way, docker, plugin, image, on_host, require_cuda, follows, protects_home, systemd,
        restarts, without_systemd):
    """tasks/preflight.py and driver_preflight.py ask the way (issue 42) instead of comparing
    mode and runtime: what of Docker it needs, where the server is built, whether the
    NVIDIA container runtime judges the image's CUDA (and cuda_follows_driver applies), what
    the unit hides, what runs it and starts it again, and what runs it without systemd."""
    rt = next(r for r in RUNTIMES if r.name == way)
    assert rt.needs_docker is docker
    assert rt.needs_compose_plugin is plugin
    assert rt.builds_image is image
    assert rt.builds_on_host is on_host
    assert rt.checks_require_cuda is require_cuda
    assert rt.follows_driver is follows
    assert rt.protects_home is protects_home
    assert rt.under_systemd is systemd
    assert rt.restarts_with_host is restarts
    fallback = rt.without_systemd
    assert (fallback.name if fallback is not None else None) == without_systemd
    # the answers agree with what the way writes and installs
    template = (TEMPLATES_DIR / rt.template).read_text()
    assert ("ProtectHome=yes" in template) is protects_home
    assert rt.template.endswith(".service.j2") is systemd
    assert bool(rt.docker_packages(TRIXIE, False, None, "2.26.1")) is docker
    assert bool(rt.docker_packages(TRIXIE, True, "distro", None)) is plugin
    # without systemd the server is the same (native or in a container) or none is picked
    assert fallback is None or (fallback.mode == rt.mode and not fallback.under_systemd)


@pytest.mark.parametrize("way,in_supervisord,in_unit", [
    ("docker unit", False, True),
    ("compose", False, True),
    ("native unit", False, True),
    ("supervisor", True, False),
])
def test_the_process_that_is_the_server_is_supervisords_child_or_in_the_units_cgroup(
        way, in_supervisord, in_unit):
    """A listener on a service's port is its server as the way runs it (preflight's
    classify_port_owner): the kit's supervisord's child under supervisor, one in the unit's
    cgroup under systemd or compose, and never the other."""
    rt = next(r for r in RUNTIMES if r.name == way)
    assert rt.runs_process(under_supervisord=True, in_unit=False) is in_supervisord
    assert rt.runs_process(under_supervisord=False, in_unit=True) is in_unit
    assert rt.runs_process(under_supervisord=True, in_unit=True)
    assert not rt.runs_process(under_supervisord=False, in_unit=False)


@pytest.mark.parametrize("data,name", [(w[0], w[1]) for w in WAYS])
def test_a_host_config_gives_the_way_host_data_asks_for(data, name):
    cfg = load_host_config(with_(**data))
    assert cfg.requested_way.name == name
    assert cfg.requested_way is requested_runtime(cfg)


@pytest.mark.parametrize("mode,runtime,key,refused_as", [
    ("native", "systemd", "back\\slash", "native unit"),  # systemd would read "backslash"
    ("native", "systemd", "'quoted'", "native unit"),  # ... and quoted ('"': hostdata's)
    ("native", None, "back\\slash", "native unit"),  # where systemd is PID 1: the unit
    ("native", "supervisor", "back\\slash", None),  # its launcher reads the file itself
    ("native", "systemd", "it's-a-key", None),  # a quote inside: literal to systemd
    ("container", "compose", "it's-a-key", "compose"),  # single quotes in compose's file
    ("container", "compose", "back\\slash", "compose"),
    ("container", "systemd", "back\\slash", None),  # docker run --env-file: as it is
])
def test_a_key_the_ways_env_file_would_change_is_refused_in_one_line(tmp_path, mode, runtime,
                                                                     key, refused_as):
    """Refused by preflight, before any change, for the way that runs the server there."""
    from .harness import CPU_GIT, CPU_HOST, facts, run_deploy

    path = tmp_path / "key"
    path.write_text(key + "\n")
    path.chmod(0o600)
    data = {**CPU_GIT, "mode": mode, "api_key_file": str(path),
            **({"runtime": runtime} if runtime else {})}
    host = facts(**CPU_HOST)
    if refused_as is None:
        assert run_deploy(data, host)
        return
    with pytest.raises(ConfigError) as e:
        run_deploy(data, host)
    msg = str(e.value)
    assert "host data `api_key_file`" in msg and "\n" not in msg, msg
    assert f"which the {refused_as}'s env file cannot carry literally" in msg, msg


def test_a_pods_server_under_supervisord_takes_a_key_the_native_unit_would_change(tmp_path):
    """A pod (no systemd; runtime unset, as docs/gpu-containers.md says) runs the native
    server under supervisord, whose launcher reads the key file itself (`read -r`)."""
    from .harness import POD_DATA, pod, run_deploy

    path = tmp_path / "key"
    path.write_text("back\\slash-key\n")
    path.chmod(0o600)
    ops = run_deploy({**POD_DATA, "api_key_file": str(path)}, pod())
    assert any(n.startswith("Write the server's secrets env file") for n, _ in ops)
