"""
Host data (issue 12), class by class: unknown keys, ctx_size applied, paths and values
quoted or refused, malformed structures as one line, the port held by another container,
`.prev` and the rollback, one bad host of several. Table-driven, with fuzzer-style values.
"""

import configparser
import hashlib
import json
import math
import os
import random
import re
import runpy
from pathlib import Path

import pytest
from pyinfra.api import Config, Inventory, State

from beekeeper.core.config import (
    KIT_KEYS,
    host_data_keys,
    load_host_config,
    pyinfra_keys,
)
from beekeeper.core.deployed import DeployedService
from beekeeper.core.errors import ConfigError, PreflightError
from beekeeper.core.planner import predict
from beekeeper.core.render import sd_join, sd_quote
from beekeeper.facts.docker import PortContainer, parse_port_containers
from beekeeper.tasks.service import record, render_unit

from .harness import (
    CPU,
    CPU_GIT,
    CPU_HOST,
    DEFAULTS,
    DOCKER_PROXY,
    NATIVE,
    ROOT,
    _deploy_hosts,
    facts,
    port_owners,
    refused,
    requested_runtime,
    run_deploy,
    run_rollback,
    uploaded,
    with_,
)

GPU = {**DEFAULTS, "profile": "q8-turbo4-64k"}


# ------------------------------------------------------------------ unknown keys

@pytest.mark.parametrize(("key", "close"), [
    ("prot", "port"), ("Port", "port"), ("profil", "profile"), ("porfile", "profile"),
    ("model_dri", "model_dir"), ("modeldir", "model_dir"), ("ctxsize", "ctx_size"),
    ("ctx-size", "ctx_size"), ("bind_adress", "bind_address"), ("cuda_arc", "cuda_arch"),
    ("health_timeout", "health_timeout_s"), ("stage", "stages"), ("servces", "services"),
    ("hf_endpiont", "hf_endpoint"), ("model_sha", "model_sha256"), ("ssh_usr", "ssh_user"),
    ("_suod", "_sudo"), ("allow_rebot", "allow_reboot"), ("base_image", "base_images"),
])
def test_misspelled_key_is_refused_with_the_closest_known_one(key, close):
    msg = refused(with_(**{key: 1}), key)
    assert f"did you mean `{close}`?" in msg


@pytest.mark.parametrize("key", ["zzz", "x", "gpu", "model", "ünïcode_kéy", "a" * 300,
                                 "key with spaces", "_private_helper", "draft", "name"])
def test_unknown_key_without_a_close_one_is_refused(key):
    # a key's name longer than SHOWN_MAX is echoed cut, with its length (test_echoes_cut)
    shown = key if len(key) <= 80 else f"{key[:60]}... ({len(key)} characters)"
    msg = refused(with_(**{key: "v"}), shown)
    assert "unknown key" in msg


@pytest.mark.parametrize("key", ["ssh_user", "ssh_port", "ssh_key", "ssh_hostname",
                                 "ssh_known_hosts_file", "ssh_strict_host_key_checking",
                                 "ssh_password", "ssh_connect_retries", "_sudo", "_sudo_user",
                                 "_su_user", "_use_su_login", "_preserve_sudo_env", "_env",
                                 "_shell_executable", "_chdir", "_retries", "_retry_delay",
                                 "_timeout", "_get_pty", "_stdin", "_success_exit_codes",
                                 "_continue_on_error", "_if", "_parallel", "_run_once",
                                 "_doas", "_temp_dir", "docker_identifier", "docker_platform",
                                 "chroot_directory"])
def test_pyinfra_own_keys_pass(key):
    load_host_config(with_(**{key: None}))
    assert key in pyinfra_keys()


def test_every_group_data_name_is_a_known_key():
    names = [k for k in runpy.run_path(str(ROOT / "group_data" / "all.py"))
             if not k.startswith("__")]
    assert set(names) <= KIT_KEYS, set(names) - KIT_KEYS
    load_host_config(DEFAULTS)  # and the defaults load as they are


def test_every_key_the_kit_reads_is_known_and_every_declared_key_is_read():
    """Each `data.get("k")` and `host.data.get("k")` in the kit is a declared key, the keys
    are the schema's, and each declared key is read somewhere: as validated host data
    (`cfg.data.k`, `hd.k`, a service entry's `entry.k` or `e.k`, the pins' `{role}_k`)."""

    text = ""
    for path in [ROOT / "deploy.py", *(ROOT / "tasks").glob("*.py"),
                 *(ROOT / "operations").glob("*.py"), *(ROOT / "beekeeper").rglob("*.py")]:
        text += path.read_text()
    read = set(re.findall(r"\bdata\.get\(\s*[\"']([a-z_0-9]+)[\"']", text))
    assert read <= KIT_KEYS | pyinfra_keys(), read - KIT_KEYS - pyinfra_keys()
    assert len(KIT_KEYS) == 51
    unread = {k for k in KIT_KEYS if not re.search(rf"\b(?:data|hd|entry|e)\.{k}\b", text)
              and f"{{role}}_{k.split('_', 1)[-1]}" not in text}
    assert unread == set(), unread


@pytest.mark.parametrize(("entry", "key", "close"), [
    ({"profile": "cpu-tiny", "prot": 1}, "services[0].prot", "port"),
    ({"profile": "cpu-tiny", "model_dir": "/x"}, "services[0].model_dir", None),
    ({"profile": "cpu-tiny", "servce_name": "a"}, "services[0].servce_name", "service_name"),
])
def test_unknown_key_inside_a_service_entry_is_refused(entry, key, close):
    msg = refused(with_(services=[entry]), key)
    if close:
        assert f"did you mean `services[0].{close}`?" in msg


@pytest.mark.parametrize(("data", "key"), [
    (with_(source={"path": "/s.tar.gz", "ref": "x", "rev": "y"}), "source.rev"),
    (with_(base_images={"buidl": "debian:bookworm"}), "base_images.buidl"),
    (with_(nvidia_repos={"cudaa": "https://m/x"}), "nvidia_repos.cudaa"),
])
def test_unknown_key_inside_a_mapping_is_refused(data, key):
    refused(data, key)


def test_pyinfra_host_data_layers_are_all_checked():
    """--data overrides, the inventory's host data and group data are all keys."""
    inventory = Inventory(([("h", {"profile": "cpu-tiny"})], {}),
                          override_data={"prot": 1}, all=([], {"source": CPU["source"]}))
    State(inventory, Config())
    host = inventory.get_host("h")
    keys = host_data_keys(host.data)
    assert {"profile", "prot"} <= set(keys)
    with pytest.raises(ConfigError, match="`prot`.*did you mean `port`"):
        load_host_config(host.data)


# ------------------------------------------------------------------ ctx_size

@pytest.mark.parametrize(("value", "words"), [
    ("8192", "is a string, not a number"), ("", "is a string, not a number"),
    (" 4096 ", "is a string, not a number"), ("4k", "is a string, not a number"),
    ("８１９２", "is a string, not a number"), (8192.0, "not a whole number"),
    (math.inf, "not a whole number"), (math.nan, "not a whole number"),
    (True, "not a whole number"), ([8192], "not a whole number"),
    ({"n": 1}, "not a whole number"), (b"8192", "not a whole number"),
    (0, "below 256"), (-1, "below 256"), (255, "below 256"), (-(2**63), "below 256"),
    (32_769, "exceeds the model's trained context 32768"), (10**6, "exceeds"),
    (2**64, "exceeds"), (10**100, "exceeds"),
])
def test_bad_ctx_size_is_refused_with_the_reason(value, words):
    msg = refused(with_(ctx_size=value), "ctx_size")
    assert words in msg


def test_string_ctx_size_message_shows_the_number_to_write():
    assert "write ctx_size = 8192 without quotes" in refused(with_(ctx_size="8192"),
                                                              "ctx_size")


def test_ctx_size_is_held_to_the_trained_context_per_slot_as_llama_cpp_holds_it():
    # llama.cpp compares each slot's share (n_ctx_seq, rounded up to 256) with n_ctx_train:
    # four slots of the tiny model's 32K each are 131,072 in all
    load_host_config(with_(profile="cpu-tiny-4slot", ctx_size=131_072))
    load_host_config(with_(slots=2, ctx_size=65_536))
    msg = refused(with_(profile="cpu-tiny-4slot", ctx_size=131_072 + 1024), "ctx_size")
    assert "trained context 32768 per slot (4 slots: 131072 in all)" in msg, msg
    assert "lower ctx_size to 131072 or less" in msg, msg


def test_four_slot_profile_needs_256_per_slot():
    assert "below 1024" in refused(with_(profile="cpu-tiny-4slot", ctx_size=512), "ctx_size")
    load_host_config(with_(profile="cpu-tiny-4slot", ctx_size=1024))


@pytest.mark.parametrize("ctx", [256, 1024, 2048, 4096, 32_768])
def test_ctx_size_reaches_the_server_the_manifest_and_verify(ctx):
    cfg = load_host_config(with_(ctx_size=ctx))
    svc = cfg.service
    args = svc.profile.server.args("/m/a.gguf")
    assert args[args.index("-c") + 1] == str(ctx)
    unit = render_unit(cfg, requested_runtime(cfg), svc, "img:1")
    assert f" -c {ctx} " in unit
    assert f'"ctx_size": {ctx}' in record(cfg, requested_runtime(cfg), svc, "img:1").to_json()
    e = svc.profile.expected
    assert 0 < e.niah_tokens < ctx and 0 < e.decode_ctx_tokens < ctx
    assert e.niah_tokens <= 500 and e.decode_ctx_tokens <= 1024  # never past the profile's


def test_ctx_size_of_the_profile_changes_nothing():
    cfg = load_host_config(with_(ctx_size=4096))
    assert cfg.service.profile == load_host_config(CPU).service.profile


def test_ctx_size_drives_the_planner_and_the_vram_budget_check():
    big = load_host_config({**GPU, "ctx_size": 262_144}).service.profile
    small = load_host_config({**GPU, "ctx_size": 4096}).service.profile
    base = load_host_config(GPU).service.profile
    assert predict(small).kv_mib < predict(base).kv_mib < predict(big).kv_mib
    fx = facts(Wsl=NATIVE)
    with pytest.raises(PreflightError, match=r"needs \d+ MiB of VRAM, over vram_budget_gib 10"):
        run_deploy({**GPU, "ctx_size": 262_144}, fx)
    ops = run_deploy({**GPU, "ctx_size": 8192}, fx)
    assert " -c 8192 " in uploaded(ops, "Render systemd unit")


# ------------------------------------------------------------------ paths and quoting

PATH_KEYS = [
    ("model_dir", lambda v: with_(model_dir=v)),
    ("state_dir", lambda v: with_(state_dir=v)),
    ("hf_token_file", lambda v: with_(hf_token_file=v)),
    ("source.path", lambda v: with_(source={"path": v, "ref": "x"})),
]
BAD_PATHS = [
    (None, "not a path"), (5, "not a path"), (["/srv"], "not a path"), (b"/srv", "not a path"),
    ("", "empty"), ("~", "home folder"), ("~/models", "home folder"),
    ("~root/models", "home folder"), ("models", "not an absolute path"),
    ("./models", "not an absolute path"), ("../models", "not an absolute path"),
    (" /srv/models", "not an absolute path"), ("/", "root folder"), ("//", "root folder"),
    ("/srv/../etc", "not a normalized path"), ("/srv/./m", "not a normalized path"),
    ("//srv/m", "not a normalized path"), ("/srv//m", "not a normalized path"),
    ("/srv/m\n", "control character"), ("/srv/m\nExecStartPre=/bin/sh", "control character"),
    ("/srv/\tm", "control character"), ("/srv/m\x00", "control character"),
    ("/srv/\x1b[31mm", "control character"), ("/srv/m\r", "control character"),
    ("/srv/m\u2028x", "control character"), ("/srv/m\u0085", "control character"),
    ("/srv/m\u200bx", "control character"), ("/srv/" + "m" * 2000, "characters long"),
]


@pytest.mark.parametrize(("key", "make"), PATH_KEYS, ids=[k for k, _ in PATH_KEYS])
@pytest.mark.parametrize(("value", "words"), BAD_PATHS, ids=[repr(v)[:24] for v, _ in BAD_PATHS])
def test_unrepresentable_path_is_refused(key, make, value, words):
    if key == "hf_token_file" and value is None:
        return  # None: not set
    assert words in refused(make(value), key)


HOSTILE = ["/srv/bee keeper/mod'els", '/srv/a"b', "/srv/$HOME/m", "/srv/${x}/m", "/srv/%h/%%",
           "/srv/back\\slash", "/srv/モデル/modèles", "/srv/a;b", "/srv/`id`", "/srv/$(id)",
           "/srv/trailing\\", "/srv/-flag", "/srv/*?[]", "/srv/a'b\"c $d %e \\f"]


def systemd_split(line: str, exec_line: bool = True) -> list[str]:
    """What systemd makes of an ExecStart= line (systemd.syntax(7) quoting, then
    systemd.service(5) `%%` and `$$`), for the quoting this kit emits; path settings
    (`exec_line=False`) expand specifiers but no variables."""
    words, cur, i, quote, started = [], "", 0, None, False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            cur += line[i + 1]
            i += 2
            started = True
            continue
        if quote:
            if c == quote:
                quote = None
            else:
                cur += c
        elif c in "\"'":
            quote, started = c, True
        elif c == " ":
            if started:
                words.append(cur)
            cur, started = "", False
        else:
            cur += c
            started = True
        i += 1
    assert quote is None, line
    if started:
        words.append(cur)
    out = []
    for w in words:
        assert not re.search(r"(?<!%)%(?!%)", w.replace("%%", "")), w  # no live specifier
        if exec_line:
            assert not re.search(r"\$(?!\$)", w.replace("$$", "")), w  # no live variable
            w = w.replace("$$", "$")
        out.append(w.replace("%%", "%"))
    return out


@pytest.mark.parametrize("value", HOSTILE + ["plain", "", ";", "a b", "100%", "$"])
def test_systemd_quoting_round_trips(value):
    assert systemd_split(sd_join(["x", value, "y"])) == ["x", value, "y"]


@pytest.mark.parametrize("value", ["a\nb", "\x00", "\t", "\u2028"])
def test_systemd_quoting_refuses_control_characters(value):
    with pytest.raises(ValueError, match="control character"):
        sd_quote(value)


@pytest.mark.parametrize("model_dir", HOSTILE)
@pytest.mark.parametrize("mode", ["container", "native"])
def test_hostile_model_dir_reaches_the_unit_as_one_argument(model_dir, mode):
    cfg = load_host_config(with_(model_dir=model_dir, mode=mode,
                                 server_extra_args=["--alias2", "a b'c$d%e"]))
    unit = render_unit(cfg, requested_runtime(cfg), cfg.service,
                       "img:1" if mode == "container" else "/opt/b/s")
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(unit)
    argv = systemd_split(parser["Service"]["ExecStart"].replace("\\\n", " ").replace("\n", " "))
    model = f"{model_dir}/gemma-3-270m-q4_k_m.gguf"
    if mode == "container":
        assert argv[argv.index("--volume") + 1] == f"{model_dir}:/models:ro"
    else:
        assert argv[argv.index("-m") + 1] == model
        assert systemd_split(parser["Service"]["ReadOnlyPaths"], exec_line=False) == [model_dir]
    assert argv[-2:] == ["--alias2", "a b'c$d%e"]


def test_model_dir_with_a_colon_is_refused_for_docker_volume():
    assert "--volume separator" in refused(with_(model_dir="/srv/a:b"), "model_dir")


def test_hostile_model_dir_reaches_shell_lines_quoted():
    ops = run_deploy({**CPU_GIT, "model_dir": "/srv/x'$(touch /tmp/pwn)",
                      "health_timeout_s": 10},
                     facts(**CPU_HOST))
    seen = 0
    for name, cmds in ops:
        for cmd in cmds:
            if "$(touch" in cmd and not cmd.startswith(("upload ", "FileUploadCommand(")):
                seen += 1
                # the value's `'` closes a single-quoted word only as shlex.quote writes it
                # ('"'"'), so what follows starts a new single-quoted word: never expanded
                assert cmd.count("$(touch") == cmd.count("'\"'\"'$(touch /tmp/pwn)"), \
                    (name, cmd)
    assert seen >= 3


# ------------------------------------------------------------------ malformed structures

MALFORMED = [
    (with_(services="llm"), "services"), (with_(services={}), "services"),
    (with_(services=5), "services"),
    (with_(services=[1]), "services[0]"), (with_(services=["llm"]), "services[0]"),
    (with_(services=[None]), "services[0]"), (with_(services=[["profile", "x"]]), "services[0]"),
    (with_(services=[{"profile": "cpu-tiny"}, 7]), "services[1]"),
    (with_(services=[{"profile": ["cpu-tiny"]}]), "services[0].profile"),
    (with_(services=[{"profile": {"x": 1}}]), "services[0].profile"),
    (with_(services=[{"profile": "cpu-tiny", "port": "80"}]), "services[0].port"),
    (with_(source="https://x/y"), "source"), (with_(source=["git", "x"]), "source"),
    (with_(source={"ref": "x"}), "source"), (with_(source={"git": 5, "ref": "a" * 40}),
                                             "source.git"),
    (with_(source={"git": "not a url", "ref": "a" * 40}), "source.git"),
    (with_(source={"git": "https://x/y\n", "ref": "a" * 40}), "source.git"),
    (with_(source={"git": "https://x/y", "ref": 5}), "source.ref"),
    (with_(source={"git": "https://x/y", "ref": ["a" * 40]}), "source.ref"),
    (with_(source={"path": 5, "ref": "x"}), "source.path"),
    (with_(source={"path": "/s.tgz", "ref": "a/b c"}), "source.ref"),
    (with_(source={"path": "/s.tgz", "ref": "x", "git": "https://x/y"}), "source"),
    (with_(base_images="debian:bookworm"), "base_images"), (with_(base_images=["x"]),
                                                            "base_images"),
    (with_(base_images={"build": 5}), "base_images.build"),
    (with_(base_images={"build": "debian bookworm"}), "base_images.build"),
    (with_(base_images={"build": "x\ny"}), "base_images.build"),
    (with_(preload_images="x"), "preload_images"), (with_(preload_images={"a:b": 5}),
                                                    "preload_images['a:b']"),
    (with_(preload_images={"a b": "/x.tar"}), "preload_images['a b']"),
    (with_(preload_images={"a:b": "rel.tar"}), "preload_images['a:b']"),
    (with_(stages="provision"), "stages"), (with_(stages=[1]), "stages"),
    (with_(stages=[]), "stages"), (with_(stages=["model"]), "stages"),
    (with_(profile=["cpu-tiny"]), "profile"), (with_(profile={"a": 1}), "profile"),
    (with_(profile=None), "profile"), (with_(profile=""), "profile"),
    (with_(mode=["container"]), "mode"), (with_(mode={"x": 1}), "mode"), (with_(mode=""),
                                                                          "mode"),
    (with_(port="8083"), "port"), (with_(port=8083.0), "port"), (with_(port=True), "port"),
    (with_(port=0), "port"), (with_(port=2**70), "port"), (with_(port=[8083]), "port"),
    (with_(bind_address=["127.0.0.1"]), "bind_address"), (with_(bind_address=2130706433),
                                                          "bind_address"),
    (with_(vram_budget_gib="10"), "vram_budget_gib"), (with_(vram_budget_gib=math.nan),
                                                       "vram_budget_gib"),
    (with_(vram_budget_gib=math.inf), "vram_budget_gib"), (with_(vram_budget_gib=True),
                                                           "vram_budget_gib"),
    (with_(vram_budget_gib=0), "vram_budget_gib"), (with_(vram_budget_gib=10**9),
                                                    "vram_budget_gib"),
    (with_(health_timeout_s="300"), "health_timeout_s"), (with_(health_timeout_s=5),
                                                          "health_timeout_s"),
    (with_(health_timeout_s=10**12), "health_timeout_s"), (with_(health_timeout_s=30.5),
                                                           "health_timeout_s"),
    (with_(build_jobs="4"), "build_jobs"), (with_(build_jobs=0), "build_jobs"),
    (with_(build_jobs=True), "build_jobs"), (with_(build_jobs=10**6), "build_jobs"),
    (with_(install_docker="false"), "install_docker"), (with_(install_docker=0),
                                                        "install_docker"),
    (with_(allow_reboot="yes"), "allow_reboot"), (with_(use_docker_desktop=1),
                                                   "use_docker_desktop"),
    (with_(install_cuda_toolkit="true"), "install_cuda_toolkit"),
    (with_(driver_branch="595"), "driver_branch"), (with_(driver_branch="abc"),
                                                     "driver_branch"),
    (with_(driver_branch=5), "driver_branch"), (with_(driver_branch=True), "driver_branch"),
    (with_(container_toolkit_version=1.18), "container_toolkit_version"),
    (with_(container_toolkit_version="1.18 ; rm"), "container_toolkit_version"),
    (with_(nvidia_repos="https://m"), "nvidia_repos"), (with_(nvidia_repos={"cuda": 5}),
                                                        "nvidia_repos.cuda"),
    (with_(cuda_version="latest"), "cuda_version"), (with_(cuda_version=["13.2"]),
                                                      "cuda_version"),
    (with_(cuda_version="13.2; id"), "cuda_version"), (with_(cuda_arch=["89"]), "cuda_arch"),
    (with_(cuda_arch=True), "cuda_arch"), (with_(api_key_file=5), "api_key_file"),
    (with_(api_key_file=""), "api_key_file"), (with_(server_extra_args="--x"),
                                                "server_extra_args"),
    (with_(server_extra_args=[1]), "server_extra_args"),
    (with_(server_extra_args=["--x\n--y"]), "server_extra_args"),
    (with_(hf_endpoint="https://m\x00"), "hf_endpoint"), (with_(hf_endpoint=5), "hf_endpoint"),
    (with_(service_name=5), "service_name"), (with_(service_name="LLM"), "service_name"),
    (with_(model_repo=["a/b"], model_file="x.gguf"), "model_repo"),
    (with_(model_revision=5, model_repo="a/b", model_file="x.gguf"), "model_revision"),
]


@pytest.mark.parametrize(("data", "key"), MALFORMED, ids=[k for _, k in MALFORMED])
def test_malformed_value_is_one_line_naming_the_key(data, key):
    refused(data, key)


FUZZ_VALUES = [None, 0, 1, -1, 2**70, 1.5, math.nan, True, False, "", "x", "/x",
               "~/x", "ü", "\n", "a\x00b", [], [1], ["x"], [{}], {}, {"a": 1},
               {"profile": "cpu-tiny"}, b"x", (), ("provision",), "8083", "/srv/a b"]


def test_fuzzed_host_data_gives_a_config_or_a_config_error_only():
    rng = random.Random(12)
    keys = sorted(KIT_KEYS)
    for _ in range(3000):
        data = dict(CPU)
        for key in rng.sample(keys, rng.randint(1, 4)):
            data[key] = rng.choice(FUZZ_VALUES)
        try:
            load_host_config(data)
        except ConfigError as e:
            assert "\n" not in str(e) and "; fix: " in str(e), (data, e)


# ------------------------------------------------------------------ port held by a container

def test_docker_ps_lines_parse():
    assert parse_port_containers(["web\t\tnginx:1", "beekeeper-llm\tllm\tbeekeeper/x:1", ""]) \
        == [PortContainer(name="web", service="", image="nginx:1"),
            PortContainer(name="beekeeper-llm", service="llm", image="beekeeper/x:1")]


@pytest.mark.parametrize(("containers", "refusal"), [
    ([PortContainer(name="web", service="", image="nginx:1")],
     "published by the Docker container 'web' (image nginx:1)"),
    ([PortContainer(name="beekeeper-chat", service="chat", image="beekeeper/x")],
     "published by the Docker container 'beekeeper-chat' (beekeeper service 'chat')"),
    ([PortContainer(name="beekeeper-llm", service="llm", image="b/x"),
      PortContainer(name="web", service="", image="nginx")], "container 'web'"),
])
def test_port_published_by_another_container_is_refused(containers, refusal):
    fx = facts(**CPU_HOST, PortOwners=port_owners(DOCKER_PROXY), PortContainers=containers)
    with pytest.raises(PreflightError, match=re.escape(refusal)):
        run_deploy(CPU_GIT, fx)


def test_port_published_by_our_own_container_passes():
    ours = [PortContainer(name="beekeeper-llm", service="llm", image="beekeeper/llama-server:x")]
    run_deploy(CPU_GIT, facts(**CPU_HOST, PortOwners=port_owners(DOCKER_PROXY),
                              PortContainers=ours))


def test_docker_proxy_with_no_container_of_ours_and_no_manifest_is_refused():
    with pytest.raises(PreflightError, match=re.escape(
            "in use by pid 812 (user root, program /usr/bin/docker-proxy)")):
        run_deploy(CPU_GIT, facts(**CPU_HOST, PortOwners=port_owners(DOCKER_PROXY)))


# ------------------------------------------------------------------ .prev and rollback

UNIT = "/etc/systemd/system/beekeeper-llm.service"


def _unit_sha(ops):
    body = uploaded(ops, "Render systemd unit")
    return hashlib.sha1(body.encode(), usedforsecurity=False).hexdigest()


def _ops(unit_sha, model_present):
    sha = load_host_config(CPU).service.model.sha256
    return run_deploy(CPU_GIT, facts(
        **CPU_HOST, Sha1File=lambda path: unit_sha if path == UNIT else None,
        Sha256File=lambda path, stamps: sha if model_present and path.endswith(".gguf") else None,
        Directory=lambda path: {"mode": 755, "user": "root", "group": "root"}
        if path == "/srv/beekeeper/models" else None))


def test_prev_is_the_running_unit_when_the_unit_changes():
    keep = dict(_ops("0" * 40, True))["Keep the running beekeeper-llm.service for rollback "
                                       "(beekeeper-llm.service.prev)"][0]
    # every old copy goes first: a stale manifest copy never outlives a new unit copy
    assert keep.startswith(f"rm -f {UNIT}.prev /etc/beekeeper/llm/deployed.json.prev "
                           "/etc/beekeeper/llm/compose.yaml.prev "
                           "/etc/beekeeper/supervisor/programs/beekeeper-llm.conf.prev && ")
    assert f"cp -p {UNIT} {UNIT}.prev" in keep


def test_prev_is_the_running_unit_when_only_the_model_changes():
    sha = _unit_sha(_ops(None, True))
    names = [n for n, _ in _ops(sha, False)]
    assert any(n.startswith("Keep the running beekeeper-llm.service") for n in names), names
    assert "Start and enable beekeeper-llm.service (restart: inputs changed)" in names


def test_no_prev_copy_is_made_when_nothing_changes():
    sha = _unit_sha(_ops(None, True))
    names = [n for n, _ in _ops(sha, True)]
    assert not any("for rollback" in n or "rollback copy" in n for n in names), names


def test_a_stale_prev_is_removed_when_no_unit_runs_yet():
    cmds = dict(_ops(None, True))
    assert cmds["Remove a stale rollback copy of beekeeper-llm.service (none runs yet)"] == \
        [f"rm -f {UNIT}.prev /etc/beekeeper/llm/deployed.json.prev "
         "/etc/beekeeper/llm/compose.yaml.prev "
         "/etc/beekeeper/supervisor/programs/beekeeper-llm.conf.prev"]


def hostcheck_calls(tmp_path) -> list[list[str]]:
    """The arguments of each health check run_rollback's rollback ran, in order."""
    log = tmp_path / "hostcheck.log"
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


MANIFEST_8083 = DeployedService(service="llm", profile="cpu-tiny", bind_address="127.0.0.1",
                                port=8083).to_json()
MANIFEST_8084 = DeployedService(service="llm", profile="cpu-tiny-4slot",
                                bind_address="127.0.0.1", port=8084).to_json()


def test_rollback_restores_the_previous_unit_and_says_what_serves(tmp_path):
    rc, after, err = run_rollback(tmp_path, {
        "unit": "unit new", "unit.prev": "unit old", "deployed.json": "{}",
        "deployed.json.prev": MANIFEST_8083, "compose.yaml.prev": "compose old"}, restore=True)
    assert rc == 0, err
    # the failed deploy's files are gone, the previous ones back, no .prev left
    assert after == {"unit": "unit old", "deployed.json": MANIFEST_8083,
                     "compose.yaml": "compose old"}
    assert "beekeeper: rolled back; the previous server is healthy" in err
    assert "beekeeper: serving cpu-tiny on 127.0.0.1:8083 (previous unit restored)" in err
    assert (tmp_path / "systemctl.log").read_text().split("\n")[:2] == \
        ["daemon-reload", "restart unit"]


def test_after_a_port_change_the_rollback_checks_the_port_the_restored_server_uses(tmp_path):
    """The failed deploy moved the service from 8083 to 8084: the restored server listens on
    8083 (its manifest's port), so that is the port the health and smoke check is asked for;
    `beekeeper rollback` run again swaps back to 8084 and checks that one."""
    rc, after, err = run_rollback(tmp_path, {
        "unit": "unit new", "unit.prev": "unit old", "deployed.json": MANIFEST_8084,
        "deployed.json.prev": MANIFEST_8083}, restore=False, listening=8083)
    assert rc == 0, err
    assert after["deployed.json"] == MANIFEST_8083
    [call] = hostcheck_calls(tmp_path)
    assert call[call.index("--port") + 1] == "8083" and call.count("--port") == 1
    assert "serving cpu-tiny on 127.0.0.1:8083 (previous unit restored)" in err
    (tmp_path / "hostcheck.log").unlink()
    # as `beekeeper rollback` runs it: the script on stdin
    rc, after, err = run_rollback(tmp_path, after, restore=False, listening=8084, on_stdin=True)
    assert rc == 0 and after["deployed.json"] == MANIFEST_8084, err
    [call] = hostcheck_calls(tmp_path)
    assert call[call.index("--port") + 1] == "8084"
    # nothing answers on the port it checks: no server is serving, said so
    rc, _, err = run_rollback(tmp_path, {"unit": "new", "unit.prev": "old",
                                         "deployed.json": MANIFEST_8083,
                                         "deployed.json.prev": MANIFEST_8084},
                              restore=True, listening=8083)
    assert rc == 1 and "no server is serving" in err


def oldest_python3() -> str | None:
    """A python3.8 (the oldest the kit deploys to: preflight's floor for runtime supervisor)
    as its real binary: BEEKEEPER_PYTHON38, on PATH, or pyenv's; None where none runs."""
    import shutil
    import subprocess

    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    for found in [os.environ.get("BEEKEEPER_PYTHON38"), shutil.which("python3.8"),
                  *map(str, sorted(pyenv.glob("versions/3.8*/bin/python3.8")))]:
        p = subprocess.run([found, "-c", "import sys; print(sys.executable)"],
                           capture_output=True, text=True) if found else None
        if p is not None and p.returncode == 0:
            return p.stdout.strip()
    return None


def test_the_rollback_reads_the_record_on_the_oldest_python3_the_kit_deploys_to(tmp_path):
    """The record module written into the script (hostside.text) reads deployed.json on
    Python 3.8: `X | None` is not evaluated there (typing.get_type_hints failed on it)."""
    python = oldest_python3()
    if python is None:
        pytest.skip("no python3.8 here (set BEEKEEPER_PYTHON38 to one)")
    rc, after, err = run_rollback(tmp_path, {
        "unit": "unit new", "unit.prev": "unit old", "deployed.json": MANIFEST_8084,
        "deployed.json.prev": MANIFEST_8083}, restore=False, listening=8083, python=python,
        on_stdin=True)
    assert rc == 0, err
    assert "serving cpu-tiny on 127.0.0.1:8083 (previous unit restored)" in err


def test_rollback_without_a_previous_unit_changes_nothing(tmp_path):
    files = {"unit": "unit new", "deployed.json": MANIFEST_8083}
    rc, after, err = run_rollback(tmp_path, files, restore=True)
    assert rc == 3 and after == files
    assert "no server is serving (no previous unit to restore" in err


def test_rollback_to_a_server_that_fails_its_check_says_so(tmp_path):
    rc, _, err = run_rollback(tmp_path, {"unit": "new", "unit.prev": "old",
                                         "deployed.json.prev": MANIFEST_8083},
                              restore=True, healthy=False)
    assert rc == 1
    assert "no server is serving: the previous unit was restored but did not pass" in err


def test_a_swap_keeps_the_manifest_when_no_older_one_was_kept(tmp_path):
    # as `beekeeper rollback` did before the one rollback: the unit swaps, the manifest stays
    rc, after, _ = run_rollback(tmp_path, {"unit": "new", "unit.prev": "old",
                                           "deployed.json": MANIFEST_8083}, restore=False)
    assert rc == 0 and after == {"unit": "old", "unit.prev": "new",
                                 "deployed.json": MANIFEST_8083}


def test_the_smoke_gate_and_the_cli_run_the_same_rollback():
    from beekeeper.core.paths import ServicePaths
    from beekeeper.hostside import rollback_command

    cmd = dict(_ops("0" * 40, True))["Wait for /health on port 8083 and smoke-check the API"][0]
    assert rollback_command(ServicePaths("llm"), restore=True) in cmd
    assert "beekeeper: serving cpu-tiny on 127.0.0.1:8083" in cmd
    cli = rollback_command(ServicePaths("llm"), restore=False, script="-")
    assert "--restore" not in cli and cli.startswith("python3 - --unit ")
    assert cli.split(" --unit")[1].split(" --timeout")[0] in cmd


# ------------------------------------------------------------------ one host of several


@pytest.mark.parametrize(("bad_data", "line"), [
    ({"prot": 8084}, "host bad: host data `prot`: unknown key"),
    ({"ctx_size": "8192"}, "host bad: host data `ctx_size`: '8192' is a string"),
    ({"services": ["llm"]}, "host bad: host data `services[0]`"),
])
def test_one_bad_host_fails_alone_named_and_the_others_are_prepared(bad_data, line, capsys):
    fx = facts(**CPU_HOST)
    state, errors = _deploy_hosts([("a", CPU_GIT), ("bad", {**CPU_GIT, **bad_data}),
                                   ("c", CPU_GIT)], fx)
    assert errors == {}
    assert {h.name for h in state.failed_hosts} == {"bad"}
    assert {h.name for h in state.active_hosts} == {"a", "c"}
    assert line in capsys.readouterr().err


def test_when_every_host_is_bad_the_last_one_fails_the_run_with_its_line():
    state, errors = _deploy_hosts([("a", {**CPU_GIT, "prot": 1}), ("b", {**CPU_GIT, "prot": 1})],
                                  facts(**CPU_HOST))
    assert list(errors) == ["b"] and str(errors["b"]).startswith("host b: host data `prot`")


def test_verify_sizes_follow_the_deployed_ctx_size():
    from beekeeper.core.profiles import PROFILES, with_ctx_size
    from beekeeper.verify.suites import Sizes

    base = Sizes.for_profile(PROFILES["q8-turbo4-64k"], quick=False)
    small = Sizes.for_profile(with_ctx_size(PROFILES["q8-turbo4-64k"], 16_384), quick=False)
    assert base.niah_tokens == 60_000 and max(base.decode_ctx_tokens) == 60_000
    assert small.niah_tokens == 14_336 and max(small.decode_ctx_tokens) == 12_288
    assert max(small.decode_ctx_tokens) < 16_384 and small.ttft_tokens < 16_384


def test_the_run_ends_with_a_line_for_each_failed_host_and_why(capsys):
    """Bad data and a host pyinfra could not reach, each named with its reason in the
    summary the pyinfra command prints when the run ends (print_summary, at exit)."""
    fx = facts(**CPU_HOST)
    state, errors = _deploy_hosts([("a", CPU_GIT), ("bad", {**CPU_GIT, "prot": 1}),
                                   ("gone", CPU_GIT)], fx, unreachable={"gone"})
    assert errors == {}
    assert state.beekeeper_failures == {
        "bad": "host data `prot`: unknown key: beekeeper and pyinfra do not read "
               "it; fix: did you mean `port`? (or remove it)"}
    capsys.readouterr()
    from beekeeper.tasks.hostfail import print_summary

    print_summary(state, state.beekeeper_failures)
    assert capsys.readouterr().err.splitlines() == [
        "beekeeper: 2 of 3 hosts failed:",
        "  host bad: host data `prot`: unknown key: beekeeper and pyinfra do not "
        "read it; fix: did you mean `port`? (or remove it)",
        "  host gone: unreachable: pyinfra could not connect to it"]


def test_a_gateway_with_no_service_to_route_anywhere_is_refused():
    bare = {k: v for k, v in CPU_GIT.items() if k != "profile"}  # no service, no profile
    state, errors = _deploy_hosts([("gw", {**bare, "services": [], "gateway": {}}),
                                   ("empty", {**bare, "services": []})], facts(**CPU_HOST))
    assert {h.name for h in state.failed_hosts} == {"gw"} or "gw" in errors
    line = state.beekeeper_failures.get("gw") or str(errors.get("gw"))
    assert "host data `gateway`: no inventory host has a service for this gateway" in line
    # a service of its own (or any host's) is a backend
    state, errors = _deploy_hosts([("gw", {**CPU_GIT, "gateway": {}}),
                                   ("empty", {**bare, "services": []})], facts(**CPU_HOST))
    assert errors == {} and not state.failed_hosts


@pytest.mark.parametrize("kept", ["program", "unit"])
def test_the_rollback_restarts_what_runs_the_kept_file(tmp_path, kept):
    """Given a supervisord program file (runtime supervisor), the rollback puts back the
    program's kept copy and has supervisord reread, update and restart it, no systemctl;
    where only the unit has a kept copy, systemd reloads and restarts the unit."""
    import subprocess
    import sys

    from beekeeper import hostside

    root, bin_dir = tmp_path / "host", tmp_path / "bin"
    root.mkdir()
    bin_dir.mkdir()
    files = {"deployed.json.prev": MANIFEST_8083, f"{kept}.conf": "new",
             f"{kept}.conf.prev": "old"}
    for name, text in files.items():
        (root / name).write_text(text)
    for tool in ("systemctl", "supervisorctl"):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {tmp_path}/ran.log\n")
        (bin_dir / tool).chmod(0o755)
    check = tmp_path / "hostcheck.py"
    check.write_text("import sys\nsys.exit(0)\n")
    (script := tmp_path / "rollback.py").write_text(hostside.text("rollback.py"))
    p = subprocess.run(
        [sys.executable, "-I", str(script), "--unit", str(root / "unit.conf"),
         "--manifest", str(root / "deployed.json"), "--compose", str(root / "compose.yaml"),
         "--program-conf", str(root / "program.conf"), "--supervisorctl", "supervisorctl",
         "--hostcheck", str(check), "--prev-suffix", ".prev", "--timeout", "5", "--restore"],
        capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert (root / f"{kept}.conf").read_text() == "old"
    assert f"rolling back to the previous {kept}\n" in p.stderr
    assert (tmp_path / "ran.log").read_text().splitlines() == (
        ["supervisorctl reread", "supervisorctl update program",
         "supervisorctl restart program"] if kept == "program"
        else ["systemctl daemon-reload", "systemctl restart unit.conf"])
