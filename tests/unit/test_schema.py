"""
Host data as a declared schema (issue 24): the classes of bad input that got past the
hand-written checks, one test each, and the README's key table rendered from the schema.
"""

import os
import re
import runpy
import subprocess
import sys

import pytest

from beekeeper.core.config import SERVICE_KEYS, group_all, load_host_config

from .harness import CPU, ROOT, refused

GIT = {"git": "https://x/y", "ref": "a" * 40}
GPU = {"profile": "q8-turbo4-64k", "source": GIT}


def with_(**kw):
    """CPU with `kw`; with `services`, less CPU's top-level profile (refused beside them)."""
    base = {k: v for k, v in CPU.items() if not ("services" in kw and k == "profile")}
    return {**base, **kw}



def key_file(tmp_path, text, name="key", mode=0o600):
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return str(path)


# ------------------------------------------------------------------ Hub repository ids

@pytest.mark.parametrize("repo", ["acme/tiny-", "acme/tiny.", "acme/ti..ny", "acme/ti--ny",
                                  "acme/tiny\n", "-acme/tiny", "acme/" + "x" * 100])
def test_a_repo_id_the_hub_client_refuses_is_one_line_not_its_traceback(repo):
    msg = refused(with_(model_repo=repo, model_file="x.gguf"), "model_repo")
    assert "Hub repository id" in msg


def test_a_repo_id_the_hub_takes_passes():
    cfg = load_host_config(with_(model_repo="unsloth/Qwen3.5-9B-GGUF", model_file="a.gguf"))
    assert cfg.service.model.source.repo == "unsloth/Qwen3.5-9B-GGUF"


# ------------------------------------------------------------------ a final newline

NEWLINE = [
    ("source.ref", {"source": {**GIT, "ref": "a" * 40 + "\n"}}),
    ("source.ref", {"source": {"path": "/srv/s.tgz", "ref": "lcp0.3.36\n"}}),
    ("service_name", {"service_name": "llm\n"}),
    ("services[0].service_name", {"services": [{"profile": "cpu-tiny",
                                                "service_name": "llm\n"}]}),
    ("model_sha256", {"model_sha256": "a" * 64 + "\n"}),
    ("model_file", {"model_repo": "a/b", "model_file": "m.gguf\n"}),
    ("model_repo", {"model_repo": "a/b\n", "model_file": "m.gguf"}),
    ("model_revision", {"model_repo": "a/b", "model_file": "m.gguf", "model_revision": "main\n"}),
    ("cuda_version", {"cuda_version": "13.2.1\n"}),
    ("cuda_arch", {"cuda_arch": "89\n"}),
    ("container_toolkit_version", {"container_toolkit_version": "1.17.8-1\n"}),
    ("base_images.build", {"base_images": {"build": "debian:bookworm\n"}}),
    ("preload_images['debian:bookworm\\n']", {"preload_images": {"debian:bookworm\n": "/a.tar"}}),
    ("gateway_address", {"gateway_address": "gpu-box.lan\n"}),
    ("hf_endpoint", {"hf_endpoint": "https://mirror\n"}),
    ("source.git", {"source": {"git": "https://x/y\n", "ref": "a" * 40}}),
]


@pytest.mark.parametrize(("key", "data"), NEWLINE, ids=[k for k, _ in NEWLINE])
def test_a_final_newline_is_refused_on_every_pattern_checked_key(key, data):
    refused({**CPU, **data}, key)


# ------------------------------------------------------------------ server_extra_args

@pytest.mark.parametrize(("args", "owner"), [
    (["--host", "0.0.0.0"], "bind_address"), (["--port", "9000"], "port"),
    (["--port=9000"], "port"), (["-c", "262144"], "ctx_size"), (["--ctx-size", "8"], "ctx_size"),
    (["--api-key", "k"], "api_key_file"), (["-m", "/other.gguf"], "model_repo"),
    (["-np", "4"], "slots"), (["--parallel", "4"], "slots"), (["-ctk", "f16"], "KV types"),
    (["--cache-type-v=f16"], "KV types"), (["--alias", "x"], "model_alias"),
    (["-md", "/d.gguf"], "draft_repo"), (["--threads", "8", "-ngl", "0"], "the profile"),
])
def test_extra_args_may_not_set_what_the_kit_sets(args, owner):
    msg = refused(with_(server_extra_args=args), "server_extra_args")
    assert owner in msg and "never replace" in msg


def test_extra_args_that_add_pass():
    cfg = load_host_config(with_(server_extra_args=["--threads", "8", "--alias2", "x"]))
    assert cfg.service.data.server_extra_args == ("--threads", "8", "--alias2", "x")


def test_extra_args_in_a_services_entry_are_checked_too():
    refused(with_(services=[{"profile": "cpu-tiny", "server_extra_args": ["--host", "::"]}]),
            "services[0].server_extra_args")


# ------------------------------------------------------------------ keys read by nothing

@pytest.mark.parametrize("key", ["ctx_size", "server_extra_args", "service_name",
                                 "model_sha256", "gateway_port", "state", "port",
                                 "bind_address"])
def test_a_service_key_beside_services_is_refused_naming_where_it_belongs(key):
    value = {"ctx_size": 4096, "server_extra_args": [], "service_name": "x",
             "model_sha256": "a" * 64, "gateway_port": 9000, "state": "present",
             "port": 9999, "bind_address": "0.0.0.0"}[key]
    msg = refused(with_(services=[{"profile": "cpu-tiny"}], **{key: value}), key)
    assert f"services[i].{key}" in msg and "beside `services`" in msg


def test_the_issues_top_level_port_beside_services_is_refused_not_served_on_8083():
    """{'port': 9999, 'services': [...]} was accepted and served on 8083."""
    msg = refused({"source": CPU["source"], "port": 9999,
                   "services": [{"profile": "cpu-tiny"}]}, "port")
    assert "move it into each `services` entry" in msg and "services[i].port" in msg


def test_group_datas_profile_beside_services_is_left_unread_and_another_is_refused():
    """Host data merged from every layer (as uninstall.py and tests give it): the profile
    group_data/all.py gives every host is the kit's choice for a host of one service, unread
    beside `services`; another profile there is the user's, read by no entry: refused."""
    given = {k: v for k, v in group_all().items() if k in SERVICE_KEYS}
    assert set(given) == {"profile"}  # all.py gives no other service key
    cfg = load_host_config({**CPU, **given, "services": [{"profile": "cpu-tiny",
                                                           "port": 8084}]})
    assert [(s.data.port, s.data.bind_address) for s in cfg.services] == [(8084, "127.0.0.1")]
    msg = refused({**CPU, "profile": "cpu-smollm", "services": [{"profile": "cpu-tiny"}]},
                  "profile")
    assert "beside `services`" in msg


def _cli_host(host_data, group_data=None, override=None):
    """host.data of `box` as `pyinfra inventories/home.py ...` builds it (pyinfra_cli's
    make_inventory_from_files, whose import patches the process with gevent): the names of
    group_data/all.py are the `all` data every host gets, `box` is in the inventory's group
    `gpus` with `host_data`, and group_data/gpus.py's names are that group's data."""
    from pyinfra.api import Config, Inventory, State

    defaults = {k: v for k, v in runpy.run_path(str(ROOT / "group_data" / "all.py")).items()
                if not k.startswith("__")}
    inv = Inventory(([("box", host_data)], defaults), override_data=override,
                    gpus=(["box"], group_data or {}))
    State(inv, Config())
    return inv.get_host("box").data


SERVICES = {"source": CPU["source"], "services": [{"profile": "cpu-tiny", "port": 8090}]}


@pytest.mark.parametrize("group_data", [None, {"profile": "q8-turbo4-64k"}],
                         ids=["all.py", "all.py's-profile-again"])
def test_group_data_all_alone_beside_services_passes(group_data):
    """The kit's profile comes from group_data/all.py for every host: beside `services` it is
    unread, never refused; given again with the same value elsewhere it changes nothing an
    entry reads. The port and address are the schema's defaults, which no layer gives."""
    data = _cli_host(SERVICES, group_data)
    assert data.get("profile") == "q8-turbo4-64k" and data.get("port") is None
    assert [s.data.port for s in load_host_config(data).services] == [8090]


@pytest.mark.parametrize(("where", "key", "host_data", "group_data", "override"), [
    ("in this host's data", "port", {**SERVICES, "port": 9999}, None, None),
    ("in a group's data", "port", SERVICES, {"port": 9999}, None),
    ("in a group's data", "bind_address", SERVICES, {"bind_address": "0.0.0.0"}, None),
    # the default's own value, given by a group beside `services`: read by no entry
    ("in a group's data", "port", SERVICES, {"port": 8083}, None),
    ("in --data", "port", SERVICES, None, {"port": 9999}),
], ids=["host", "group-port", "group-bind", "group-default-port", "--data"])
def test_a_port_or_bind_beside_services_from_the_host_or_a_users_group_is_refused(
        where, key, host_data, group_data, override):
    msg = refused(_cli_host(host_data, group_data, override), key)
    assert f"beside `services` ({where})" in msg and f"services[i].{key}" in msg


@pytest.mark.parametrize(("override", "host_data", "fix"), [
    ({"cuda_follows_driver": "yes"}, {}, "fix: --data cuda_follows_driver=true or --data "
     "cuda_follows_driver=false"),
    ({"install_docker": 1}, {}, "fix: --data install_docker=true or --data "
     "install_docker=false"),
    # a number's word that is not one: what to type instead (--data reads digits as a number)
    ({"vram_budget_gib": "ten"}, {}, "fix: e.g. --data vram_budget_gib=10"),
    ({"ctx_size": "32k"}, {}, "fix: write --data ctx_size=8192"),
    ({"slots": "two"}, {}, "fix: give a whole number from 1 to 16, e.g. --data slots=2"),
    # the same word in a Python file: what to write there
    (None, {"cuda_follows_driver": "yes"}, "fix: write True or False (no quotes)"),
    (None, {"vram_budget_gib": "ten"}, "fix: e.g. vram_budget_gib = 10 (no quotes)"),
], ids=["--data", "--data-1", "--data-number", "--data-ctx", "--data-slots", "host-file",
        "host-file-number"])
def test_a_flag_or_number_from_the_command_line_is_fixed_on_the_command_line(
        override, host_data, fix):
    """pyinfra's --data reads only true and false as True and False, and digits as a number:
    `--data cuda_follows_driver=yes` was told to "write True or False (no quotes)", and
    `--data vram_budget_gib=ten` "vram_budget_gib = 10 (no quotes)", a Python file's words,
    which the command line cannot take."""
    key = next(iter(override or host_data))
    msg = refused(_cli_host({**CPU, **host_data}, None, override), key)
    assert msg.endswith(fix), msg


def test_a_flag_set_during_the_deploy_is_fixed_where_it_was_set():
    """Only the layer that gives the value read is the command line's: one set during the
    deploy (pyinfra's first layer) hides --data's."""
    data = _cli_host(dict(CPU), None, {"allow_reboot": True})
    data.allow_reboot = "yes"
    assert refused(data, "allow_reboot").endswith("fix: write True or False (no quotes)")


@pytest.mark.parametrize("entry", ["deploy.py", "uninstall.py"])
def test_the_pyinfra_command_tells_a_bad_data_flag_what_to_type(tmp_path, entry):
    """The real command (a dry run on @local; `--su-user root` lets a login that is not root
    reach the host data's check, nothing runs): the line's fix is for the command line, in
    the uninstall too (it read a copy of host data, whose layers say nothing of --data)."""
    p = subprocess.run([sys.executable, "-m", "pyinfra", "-y", "--dry", "--su-user", "root",
                        "@local", entry, "--data", "cuda_follows_driver=yes"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HOME": str(tmp_path)})
    out = p.stdout + p.stderr
    said = [line.strip() for line in out.splitlines() if "host @local: " in line]
    assert p.returncode == 1 and said == [
        "host @local: host data `cuda_follows_driver`: 'yes' is not True or False; fix: "
        "--data cuda_follows_driver=true or --data cuda_follows_driver=false"], out


def test_a_top_level_profile_beside_services_is_refused():
    """Every present entry names its own profile (one without is refused as missing); a
    top-level profile beside them is read by none: refused, as the other service keys."""
    cfg = load_host_config(with_(services=[{"profile": "cpu-tiny", "service_name": "a"}]))
    assert [s.profile.name for s in cfg.services] == ["cpu-tiny"]
    refused({"source": CPU["source"], "services": [{}]}, "services[0].profile")
    msg = refused({**CPU, "services": [{"profile": "cpu-smollm"}]}, "profile")
    assert "services[i].profile" in msg and "beside `services`" in msg


@pytest.mark.parametrize("key", ["draft_repo", "draft_file", "draft_revision", "draft_sha256"])
def test_draft_keys_on_a_profile_without_a_draft_are_refused(key):
    value = {"draft_repo": "a/b", "draft_file": "d.gguf", "draft_revision": "main",
             "draft_sha256": "a" * 64}[key]
    msg = refused(with_(**{key: value}), key)
    assert "has no draft model" in msg and "q8-dflash-32k" in msg


def test_draft_keys_on_a_profile_with_a_draft_apply():
    sha = "c" * 64
    cfg = load_host_config({**GPU, "profile": "q8-dflash-32k", "draft_sha256": sha})
    assert cfg.service.draft is not None and cfg.service.draft.sha256 == sha


def test_a_cpu_and_a_gpu_service_on_one_host_are_refused():
    msg = refused({**GPU, "services": [{"profile": "q8-turbo4-64k"},
                                       {"profile": "cpu-tiny", "service_name": "b",
                                        "port": 8084}]}, "services[1].profile")
    assert "one build" in msg


# ------------------------------------------------------------------ key files

def test_a_servers_key_file_with_a_line_break_inside_is_refused(tmp_path):
    path = key_file(tmp_path, "first\nsecond\n")
    msg = refused(with_(bind_address="0.0.0.0", api_key_file=path), "api_key_file")
    assert "more than one line" in msg and "the gateway's api_key_file" in msg, msg


def test_the_gateways_key_file_holds_a_key_a_line_one_a_user(tmp_path):
    """HAProxy reads the gateway's key file as an ACL's patterns, a line each: one key per
    user, each checked as the single key is; a bad line is named by its number."""
    path = key_file(tmp_path, "alice-0123456789\nbob-9876543210\n")
    assert load_host_config(with_(gateway={"api_key_file": path})).data.gateway.api_key_file == path
    crlf = key_file(tmp_path, "alice-0123456789\r\nbob-9876543210\r\n")  # Windows' ends
    assert load_host_config(with_(gateway={"api_key_file": crlf})).data.gateway.api_key_file
    # HAProxy splits at LF alone: a lone CR, a form feed or U+2028 stay inside a pattern
    for text, words in (("alice-1\nbob 2\n", "the key on line 2 in "),
                        ("alice-1\n#bob\n", "the key on line 2 in "),
                        ("alice-1\rbob-2\n", "control character"),
                        ("alice-1\x0cbob-2\n", "control character"),
                        ("alice-1\u2028bob-2\n", "control character")):
        bad = key_file(tmp_path, text)
        msg = refused(with_(gateway={"api_key_file": bad}), "gateway.api_key_file")
        assert words in msg, msg


def test_a_key_file_under_a_tilde_is_refused_saying_nothing_expands_it():
    msg = refused(with_(bind_address="0.0.0.0", api_key_file="~/key"), "api_key_file")
    assert "nothing expands" in msg and os.path.expanduser("~/key") in msg


def test_a_relative_key_file_says_what_it_is_relative_to(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    msg = refused(with_(bind_address="0.0.0.0", api_key_file="keys/k"), "api_key_file")
    assert f"relative to the folder pyinfra runs in: {tmp_path / 'keys/k'}" in msg
    (tmp_path / "keys").mkdir()
    key_file(tmp_path / "keys", "s3cret\n", "k")
    assert load_host_config(with_(bind_address="0.0.0.0", api_key_file="keys/k")
                            ).service.data.api_key_file == "keys/k"


# ------------------------------------------------------------------ VRAM per card

def test_two_gpu_services_over_the_budget_together_are_refused():
    """q8-turbo4-64k and q8-f16-4k plan 9,749 and 9,850 MiB: each within 10 GiB, together
    not."""
    data = {**GPU, "services": [{"profile": "q8-turbo4-64k"},
                                {"profile": "q8-f16-4k", "service_name": "b", "port": 8084}]}
    msg = refused(data, "vram_budget_gib")
    assert re.search(r"plan 19\d\d\d MiB together \(llm 9749 \+ b 9850 MiB\)", msg), msg
    load_host_config({**data, "vram_budget_gib": 20})


# ------------------------------------------------------------------ the README's key table

def test_unknown_key_points_at_a_readme_section_that_exists():
    msg = refused(with_(zzz=1), "zzz")
    assert "README, Host data keys" in msg
    assert "## Host data keys" in (ROOT / "README.md").read_text()


def test_the_key_table_has_every_key_with_its_type_default_and_doc():
    from beekeeper.core.hostdata import HostData, markdown_table

    table = markdown_table()
    for name in HostData.model_fields:
        assert f"| `{name}` |" in table, name
    for sub in ("gateway.port", "source.ref", "base_images.build", "nvidia_repos.cuda"):
        assert f"| `{sub}` |" in table, sub
    assert "| `port` | integer 1-65535 | `8083` |" in table


# ------------------------------------------------------------------ the recorded battery

def test_the_recorded_host_data_cases_decide_as_recorded():
    """15,660 cases (tests/unit/host_data_cases.py): each still accepted with the same values
    or refused naming the same key. A change on purpose rewrites the file
    (`python -m tests.unit.host_data_cases --write`) and its diff lists what changed."""
    from . import host_data_cases as cases

    recorded = {ln.split(" ", 1)[0]: ln.split(" ")[1:]
                for ln in cases.FILE.read_text().splitlines()}
    now = {ln.split(" ", 1)[0]: ln.split(" ")[1:]
           for ln in cases.lines(load_host_config)}
    assert recorded.keys() == now.keys()
    changed = [f"{group}={cases.VALUES[i]!r}: {was} -> {words[i]}"
               for group, words in now.items()
               for i, was in enumerate(recorded[group]) if was != words[i]]
    assert not changed, changed[:20]
    assert sum(len(w) for w in now.values()) == len(cases.cases()) > 10_000


def test_a_key_file_that_cannot_be_read_is_one_line(tmp_path):
    binary = tmp_path / "bin.key"
    binary.write_bytes(b"\xff\xfe\x00key")
    binary.chmod(0o600)
    msg = refused(with_(bind_address="0.0.0.0", api_key_file=str(binary)), "api_key_file")
    assert "is not text" in msg


@pytest.mark.parametrize(("text", "given"), [
    ("import os\ndef helper():\n    return 1\nclass C:\n    pass\n_private = 1\n"
     "profile = 'cpu-tiny'\n", {"profile": "cpu-tiny"}),
    ("__all__ = ['port']\nport = 8090\nprofile = 'cpu-tiny'\n", {"port": 8090}),
], ids=["module-level-names", "__all__"])
def test_group_all_reads_the_names_a_group_file_exports(tmp_path, monkeypatch, text, given):
    """group_data/all.py as the kit reads it for the leniency beside `services`: its
    `__all__`, else its names but private ones, modules, functions and classes."""
    import beekeeper.core.config as config

    (tmp_path / "group_data").mkdir()
    (tmp_path / "group_data" / "all.py").write_text(text)
    monkeypatch.setattr(config, "KIT_ROOT", tmp_path)
    config.group_all.cache_clear()
    try:
        assert dict(config.group_all()) == given
    finally:
        config.group_all.cache_clear()
