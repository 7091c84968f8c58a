"""
The server's container, one spec (beekeeper/core/container.py) rendered twice: the plain
unit's `docker run` and the compose file's service. What the container carries follows the
host data (an API key's env file, a GPU request, the published address); every value reaches
the unit and the compose file quoted, and comes back from them as it was.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex

import pytest
import yaml

from beekeeper.core.config import load_host_config
from beekeeper.core.container import (
    IMAGE,
    PORT,
    UID,
    ContainerSpec,
    compose_service,
    docker_run,
)
from beekeeper.core.render import render, sd_quote, yaml_plain
from beekeeper.tasks.service import container, render_compose, render_unit

from .harness import requested_build, requested_runtime


def docker_run_args(spec):
    """docker_run's lines as one argument list, unquoted: what docker receives."""
    return [word for line in docker_run(spec) for word in line]

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/s.tar.gz", "ref": "lcp0.3.36"}}
GPU = {"profile": "q8-turbo4-64k", "source": {"git": "https://x/y", "ref": "a" * 40}}
TAG = "beekeeper/llama-server:x"
# what systemd, a shell and compose would each read otherwise: a space, a quote, a variable,
# a specifier, a backslash, a command separator, an interpolation, a letter beyond ASCII
HOSTILE = "a b\"c$d %h \\ 'q' ;${X} ü"
TMP = "/tmp"  # noqa: S108 (the container's own tmpfs)


def spec(**over) -> ContainerSpec:
    base = dict(name="beekeeper-llm", image=TAG, args=("-m", "/models/x.gguf"),
                model_dir="/srv/beekeeper/models", bind_address="127.0.0.1", port=8083,
                service="llm", profile="cpu-tiny")
    return ContainerSpec(**{**base, **over})  # type: ignore[arg-type]


def hostile() -> ContainerSpec:
    """Every value of the spec that is a string, hostile."""
    return spec(name=HOSTILE, image=HOSTILE, args=("-m", HOSTILE, HOSTILE, ";"),
                model_dir=HOSTILE, service=HOSTILE, profile=HOSTILE, env_file=HOSTILE,
                gpu=True)


def key_file(tmp_path) -> str:
    path = tmp_path / "api_key"
    path.write_text("k3y-0123456789\n")
    path.chmod(0o600)
    return str(path)


def unit_words(unit: str, key: str = "ExecStart") -> list[str]:
    """A command line of a unit, split and unescaped as systemd does it with the quoting
    the kit writes (double quotes, backslash escapes, `$$` and `%%`); a lone `$` or `%`
    would be expanded (a variable, a specifier), which nothing the kit writes may hold."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    words = shlex.split(parser["Service"][key].replace("\\\n", " "))
    return [re.sub(r"\$\$|%%|\$|%", lambda m: m.group()[0] if len(m.group()) == 2
                   else "<EXPANDED>", w) for w in words]


def server_unit(s: ContainerSpec) -> str:
    return render("beekeeper-server.service.j2", spec=s, run=docker_run(s, sd_quote),
                  unit="beekeeper-llm.service", docker_flavour=None)


def compose_read_back(text: str) -> tuple[str, dict]:
    """The compose file as compose reads it: YAML, then `$$` as `$`, and a lone `$` as the
    start of a variable (which nothing the kit writes may hold)."""
    def unescape(v):
        if isinstance(v, str):
            return re.sub(r"\$\$|\$", lambda m: "$" if m.group() == "$$" else "<VARIABLE>", v)
        if isinstance(v, list):
            return [unescape(x) for x in v]
        if isinstance(v, dict):
            return {k: unescape(x) for k, x in v.items()}
        return v

    doc = unescape(yaml.safe_load(text))
    assert list(doc["services"]) == ["server"]
    return doc["name"], doc["services"]["server"]


# ------------------------------------------------------------------ built from host data

@pytest.mark.parametrize("data", [CPU, {**CPU, "runtime": "compose"}])
def test_the_api_key_env_file_is_in_both_only_when_a_key_is_set(tmp_path, data):
    plain = container(cfg := load_host_config(data), requested_runtime(cfg), cfg.service, TAG)
    assert plain.env_file is None
    assert "--env-file" not in docker_run_args(plain)
    assert "env_file" not in compose_service(plain)
    keyed = load_host_config({**data, "api_key_file": key_file(tmp_path)})
    rt = requested_runtime(keyed)
    s = container(keyed, rt, keyed.service, TAG)
    assert s.env_file == "/etc/beekeeper/llm/secrets.env"
    args = docker_run_args(s)
    assert args[args.index("--env-file") + 1] == s.env_file
    assert compose_service(s)["env_file"] == [s.env_file]
    # and in what the deploy writes
    assert unit_words(render_unit(keyed, rt, keyed.service, TAG)).count("--env-file") == (
        1 if keyed.requested_way.runtime == "systemd" else 0)
    assert compose_read_back(render_compose(keyed, rt, keyed.service, TAG))[1]["env_file"] == \
        [s.env_file]


def test_the_gpu_is_requested_only_on_a_gpu_host():
    cpu, gpu = load_host_config(CPU), load_host_config(GPU)
    assert not container(cpu, requested_runtime(cpu), cpu.service, TAG).gpu
    assert container(gpu, requested_runtime(gpu), gpu.service, TAG).gpu
    assert "--gpus" not in docker_run_args(spec())
    assert "deploy" not in compose_service(spec())
    args = docker_run_args(spec(gpu=True))
    assert args[args.index("--gpus") + 1] == "all"
    assert compose_service(spec(gpu=True))["deploy"]["resources"]["reservations"][
        "devices"] == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]


def test_the_model_folder_is_mounted_read_only_and_the_server_reads_it_there():
    cfg = load_host_config({**CPU, "model_dir": "/data/m"})
    s = container(cfg, requested_runtime(cfg), cfg.service, TAG)
    assert s.args[:2] == ("-m", "/models/gemma-3-270m-q4_k_m.gguf")
    args = docker_run_args(s)
    assert args[args.index("--volume") + 1] == "/data/m:/models:ro"
    assert compose_service(s)["volumes"] == [{"type": "bind", "source": "/data/m",
                                              "target": "/models", "read_only": True}]


@pytest.mark.parametrize(("address", "publish"), [
    ("127.0.0.1", "127.0.0.1:9001:8083"), ("0.0.0.0", "0.0.0.0:9001:8083"),
    ("::", "9001:8083"), ("::1", "[::1]:9001:8083")])
def test_the_port_is_published_on_the_configured_address_only(address, publish):
    """`::` is every address, IPv4 too, as for the kit's other listeners: Docker publishes
    on all of them where no address is given (its `[::]` alone is IPv6 only)."""
    s = spec(bind_address=address, port=9001)
    args = docker_run_args(s)
    assert args[args.index("--publish") + 1] == publish
    on = {} if address == "::" else {"host_ip": address}
    assert compose_service(s)["ports"] == [{"target": PORT, **on, "published": "9001",
                                            "protocol": "tcp"}]


def test_the_container_is_hardened_in_both():
    s = spec()
    args = docker_run_args(s)
    for flag in ("--read-only", "--init", "--rm"):
        assert flag in args
    pairs = set(zip(args, args[1:], strict=False))
    assert {("--tmpfs", TMP), ("--security-opt", "no-new-privileges"),
            ("--cap-drop", "ALL")} <= pairs
    c = compose_service(s)
    assert c["read_only"] is True and c["init"] is True and c["tmpfs"] == [TMP]
    assert c["security_opt"] == ["no-new-privileges"] and c["cap_drop"] == ["ALL"]
    # non-root: the image's user, said again in compose; the same health check
    assert c["user"] == f"{UID}:{UID}" and c["restart"] == "no"
    assert c["healthcheck"]["test"] == ["CMD", *IMAGE.healthcheck.test]
    assert "--user" not in args and "--health-cmd" not in args  # the image's, in docker run


def test_the_image_runs_as_the_spec_user_and_serves_on_the_spec_port():
    text = requested_build(load_host_config(CPU), None).dockerfile()
    assert f"USER {UID}:{UID}\n" in text and f"EXPOSE {PORT}\n" in text
    entry = json.loads(text.split("\nENTRYPOINT ", 1)[1].splitlines()[0])
    assert entry[-2:] == ["--port", str(PORT)] and entry == list(IMAGE.entrypoint)
    health = json.loads(text.split("\n    CMD ", 1)[1].splitlines()[0])
    assert health == list(IMAGE.healthcheck.test) and f"127.0.0.1/{PORT}" in health[-1]
    assert "--interval=10s --timeout=5s --start-period=300s --retries=3" in text


# ------------------------------------------------------------------ quoting, both ways

def test_every_value_survives_the_unit_as_it_was():
    s = hostile()
    unit = server_unit(s)
    assert unit_words(unit) == ["/usr/bin/docker", "run", *docker_run_args(s)]
    assert unit_words(unit, "ExecStop")[-1] == s.name
    assert unit_words(unit, "ExecStartPre")[-1] == s.name


def test_every_value_survives_the_compose_file_as_it_was():
    s = hostile()
    name, service = compose_read_back(render("compose.yaml.j2", project=s.name,
                                             unit="beekeeper-llm.service",
                                             s=compose_service(s)))
    assert name == s.name
    assert service == compose_service(s)


@pytest.mark.parametrize("data", [
    CPU, {**CPU, "runtime": "compose"}, {**GPU, "bind_address": "::1", "port": 9001},
    {**CPU, "model_dir": "/srv/bee keeper/mod'els $HOME %h a b\"c$d"},
    {**GPU, "runtime": "compose", "model_dir": "/srv/a\"b\\c ${X}/$$/ü;"}])
def test_what_the_deploy_writes_is_the_spec(data):
    cfg = load_host_config(data)
    rt = requested_runtime(cfg)
    s = container(cfg, rt, cfg.service, HOSTILE)
    _, service = compose_read_back(render_compose(cfg, rt, cfg.service, HOSTILE))
    assert service == compose_service(s)
    if cfg.requested_way.runtime == "systemd":
        assert unit_words(render_unit(cfg, rt, cfg.service, HOSTILE)) == \
            ["/usr/bin/docker", "run", *docker_run_args(s)]


def test_the_quoting_is_the_callers_and_only_on_values():
    """docker_run quotes values with what it is given: a shell's quoting reads back too."""
    s = hostile()
    line = " ".join(w for words in docker_run(s, shlex.quote) for w in words)
    assert shlex.split(line) == docker_run_args(s)


@pytest.mark.parametrize("text", [TMP, "ALL", "no-new-privileges", "never", "10s", "300s",
                                  "io.beekeeper.service", "gpu"])
def test_yaml_plain_leaves_a_safe_word_plain(text):
    assert yaml_plain(text) == text


@pytest.mark.parametrize("text", ["no", "On", "null", "true", "10", "1e3", "0x1f", "-x", "a b",
                                  "a: b", "#c", HOSTILE, "", "~", ".inf", "[x]"])
def test_yaml_plain_quotes_what_a_reader_would_take_for_something_else(text):
    out = yaml_plain(text)
    assert out.startswith('"')
    assert yaml.safe_load(f"k: {out}")["k"].replace("$$", "$") == text
