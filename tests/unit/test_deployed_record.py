"""
The deployment record (beekeeper/core/deployed.py, issue 42): deployed.json as the deploy
writes it (tasks/service.py record) reads back field for field, every key it writes is a
field; a record of an older kit (keys added since missing) reads with their defaults and one
of a newer kit (keys unknown) without them, for every reader. A record the kit did not write
(a key every kit writes missing) or a value of the wrong type is refused in one line naming
the record, the key and the fix, by every reader. Standard library only: verify's kit on the
host imports it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import fields

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.deployed import (
    RECORD_VERSION,
    REQUIRED,
    DeployedService,
    RecordError,
    read_record,
)
from beekeeper.tasks.service import record

from .harness import (
    MODEL,
    POD_DATA,
    ROOT,
    SHA,
    _python310,
    pod,
    requested_runtime,
    written_manifest,
)

CPU = {"profile": "cpu-tiny", "source": {"path": "/srv/src.tar.gz", "ref": "lcp0.3.36"}}
RECORD = ROOT / "beekeeper" / "core" / "deployed.py"
# what the first kit wrote (tasks/service.py at 58006fc): the keys every kit has written
FIRST_KIT = {"service": "llm", "unit": "beekeeper-llm.service", "container": "beekeeper-llm",
             "profile": "cpu-tiny", "mode": "container", "image": "beekeeper/llama-server:x",
             "bind_address": "127.0.0.1", "port": 8083,
             "model_path": "/srv/beekeeper/models/gemma-3-270m-it-Q4_K_M.gguf",
             "model_sha256": None}


def written(data: dict, image: str = "img:1") -> str:
    cfg = load_host_config(data)
    return record(cfg, requested_runtime(cfg), cfg.service, image).to_json()


def test_a_compose_record_reads_back_field_for_field():
    text = written({**CPU, "runtime": "compose", "ctx_size": 2048, "port": 8090})
    r = DeployedService.from_json(text)
    assert (r.service, r.unit, r.container, r.profile) == (
        "llm", "beekeeper-llm.service", "beekeeper-llm", "cpu-tiny")
    assert (r.mode, r.runtime, r.image, r.log) == ("container", "compose", "img:1", None)
    assert r.compose_file == "/etc/beekeeper/llm/compose.yaml"
    assert (r.bind_address, r.port, r.ctx_size_tokens) == ("127.0.0.1", 8090, 2048)
    assert r.vram_budget_gib is None  # a CPU server: no VRAM budget for verify to judge
    assert r.model_path == "/srv/beekeeper/models/gemma-3-270m-q4_k_m.gguf" and not r.model_is_users
    assert (r.draft_path, r.draft_sha256, r.version) == (None, None, RECORD_VERSION)
    # the text the deploy uploads is the record's own, byte for byte
    assert r.to_json() == text


def test_the_budget_verify_judges_is_recorded_for_a_hosts_only_gpu_service():
    """verify stops one service and measures its rise alone: the host's vram_budget_gib is
    that service's where it is the only GPU service; where several share the card's budget
    (each within it, all together too: config.py), none is recorded, and verify judges as
    before (the controller's budget) rather than let one service take the whole card's."""
    git = {"git": "https://github.com/Anbeeld/beellama.cpp", "ref": "a" * 40}
    one = load_host_config({"profile": "q8-turbo4-64k", "source": git, "vram_budget_gib": 24})
    assert record(one, requested_runtime(one), one.service, "i").vram_budget_gib == 24
    two = load_host_config({"source": git, "vram_budget_gib": 20, "services": [
        {"profile": "q8-turbo4-64k"}, {"profile": "q8-f16-4k", "service_name": "b",
                                       "port": 8084}]})
    assert [record(two, requested_runtime(two), s, "i").vram_budget_gib
            for s in two.services] == [None, None]


def test_every_key_the_deploy_writes_is_a_field_and_back():
    for data in ({**CPU}, {**CPU, "runtime": "compose"}, {**CPU, "profile": "cpu-tiny-draft"},
                 {**CPU, "mode": "native"}):
        d = json.loads(written(data))
        assert set(d) == set(DeployedService().to_dict()), data
        assert DeployedService.from_json(d).to_dict() == d
    # units in the names: the context in tokens, still "ctx_size" in deployed.json
    assert "ctx_size_tokens" in {f.name for f in fields(DeployedService)}


def test_a_draft_and_a_native_unit_read_back():
    r = DeployedService.from_json(written({**CPU, "profile": "cpu-tiny-draft", "mode": "native"},
                                          "/opt/beekeeper/llama-server/x/llama-server"))
    assert (r.mode, r.runtime, r.image) == ("native", None,
                                            "/opt/beekeeper/llama-server/x/llama-server")
    assert r.draft_path and r.draft_path.endswith(".gguf") and r.draft_sha256
    assert r.models() == [(r.model_path, r.model_sha256), (r.draft_path, r.draft_sha256)]


def test_a_supervisor_hosts_record_from_a_whole_deploy_reads_back():
    text = written_manifest({**POD_DATA, "vram_budget_gib": 24}, pod())
    r = DeployedService.from_json(text)
    assert r.vram_budget_gib == 24
    assert (r.runtime, r.unit, r.mode) == ("supervisor", "beekeeper-llm", "native")
    assert r.log and r.log.startswith("/var/log/beekeeper/")
    assert (r.model_path, r.model_sha256, r.model_is_users) == (MODEL, SHA, True)
    assert r.to_json() == text


def test_a_record_of_the_first_kit_reads_with_defaults():
    r = DeployedService.from_json(json.dumps(FIRST_KIT))
    assert (r.service, r.unit, r.profile, r.port, r.image) == (
        "llm", "beekeeper-llm.service", "cpu-tiny", 8083, "beekeeper/llama-server:x")
    # added since: read as what they meant then
    assert (r.runtime, r.log, r.compose_file, r.ctx_size_tokens) == (None, None, None, None)
    assert (r.model_is_users, r.draft_path, r.draft_sha256, r.version) == (False, None, None, 0)
    assert r.models() == [(FIRST_KIT["model_path"], None)]
    # the keys every kit wrote are the first kit's
    assert set(FIRST_KIT) == REQUIRED


def test_unknown_keys_of_a_newer_kit_are_ignored():
    r = DeployedService.from_json({**FIRST_KIT, "gpu_uuid": "GPU-1", "version": 7})
    assert (r.port, r.version) == (8083, 7) and "gpu_uuid" not in r.to_dict()


def refusal(data, source="/etc/beekeeper/llm/deployed.json") -> RecordError:
    with pytest.raises(RecordError) as e:
        DeployedService.from_json(data, source)
    line = str(e.value)
    assert "\n" not in line and line.startswith(source + ": ") and "redeploy" in line, line
    return e.value


@pytest.mark.parametrize("key", sorted(REQUIRED))
def test_a_record_without_a_key_every_kit_writes_is_refused_naming_it(key):
    e = refusal({k: v for k, v in FIRST_KIT.items() if k != key})
    assert e.key == key and f"has no key {key!r}" in str(e)
    assert read_record(json.dumps({k: v for k, v in FIRST_KIT.items() if k != key})) is None


def test_a_foreign_record_is_refused_in_one_line():
    """A record of something else (or a hand-made one): the first key it lacks is named."""
    e = refusal('{"service": "old", "port": 8090}')
    assert str(e) == ("/etc/beekeeper/llm/deployed.json: has no key 'container' (not a record "
                      "the kit wrote, or one cut short): redeploy the service with the kit "
                      "(pyinfra INVENTORY deploy.py) to rewrite it")


@pytest.mark.parametrize(("key", "value", "said"), [
    ("port", "8083", "key 'port' is \"8083\", not a whole number or null"),
    ("ctx_size", True, "key 'ctx_size' is true, not a whole number or null"),
    ("model_is_users", 1, "key 'model_is_users' is 1, not true or false"),
    ("mode", None, "key 'mode' is null, not a string"),
    ("image", ["a"], "key 'image' is [\"a\"], not a string"),
    ("version", 1.0, "key 'version' is 1.0, not a whole number"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_its_key(key, value, said):
    e = refusal({**FIRST_KIT, key: value})
    assert e.key == key and said in str(e), str(e)


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '"llm"', None])
def test_a_record_that_is_not_a_json_object_is_none_or_a_value_error(text):
    assert read_record(text) is None
    if text:
        with pytest.raises(ValueError):  # RecordError is one
            DeployedService.from_json(text)
        e = refusal(text)
        assert e.key is None and e.detail


def test_a_record_the_writer_wrote_loads_from_its_file_by_attribute(tmp_path):
    path = tmp_path / "deployed.json"
    path.write_text(written({**CPU, "runtime": "compose", "port": 8090}))
    r = DeployedService.load(str(path))
    assert (r.service, r.runtime, r.port, r.version) == ("llm", "compose", 8090, RECORD_VERSION)
    # the same file cut short by hand: refused by its path
    d = json.loads(path.read_text())
    del d["unit"]
    path.write_text(json.dumps(d))
    with pytest.raises(RecordError) as e:
        DeployedService.load(str(path))
    assert str(e.value).startswith(f"{path}: has no key 'unit' ")


def test_the_readers_take_a_first_kit_record():
    """verify's --profile/--port/--ctx-size from what was deployed, on a record with no
    ctx_size: the profile's context stays."""
    import argparse

    from beekeeper.verify_main import from_deployed

    args = argparse.Namespace(profile=None, port=None, ctx_size=None, service="llm")
    assert from_deployed(args, json.dumps(FIRST_KIT), "old-box") is None
    assert (args.profile, args.port, args.ctx_size) == ("cpu-tiny", 8083, None)
    assert from_deployed(argparse.Namespace(profile=None, port=None, ctx_size=None,
                                            service="llm"), "[]", "old-box").startswith(
        "the deployed.json on old-box is not JSON")


def test_every_reader_refuses_a_foreign_record_in_one_line():
    """verify's --profile/--port (from_deployed), its engine suite (read_deployed) and the
    host checks (verify/test_host.py) each say the record, the key and the fix."""
    import argparse

    from beekeeper.verify.engine import EngineError, read_deployed
    from beekeeper.verify.test_host import read_records

    from .harness import HostWithManifest

    foreign = json.dumps({k: v for k, v in FIRST_KIT.items() if k != "port"})
    from beekeeper.verify_main import from_deployed

    line = from_deployed(argparse.Namespace(profile=None, port=None, ctx_size=None,
                                            service="llm"), foreign, "gpu-box")
    assert line == ("the deployed.json on gpu-box: has no key 'port' (not a record the kit "
                    "wrote, or one cut short): redeploy the service with the kit, or give "
                    "--profile")
    with pytest.raises(EngineError) as e:
        read_deployed(HostWithManifest(foreign))
    assert str(e.value).startswith("/etc/beekeeper/llm/deployed.json on ") and \
        "has no key 'port'" in str(e.value) and "redeploy" in str(e.value)
    with pytest.raises(pytest.fail.Exception) as failed:
        read_records({"/etc/beekeeper/llm/deployed.json": FIRST_KIT,
                      "/etc/beekeeper/old/deployed.json": foreign})
    assert str(failed.value).startswith("/etc/beekeeper/old/deployed.json: has no key 'port'")
    assert [r.port for r in read_records({"/etc/beekeeper/llm/deployed.json": FIRST_KIT})] \
        == [8083]


def test_the_host_checks_read_every_record_by_its_path(tmp_path):
    """verify/test_host.py's command on this machine: {path: record} through jq, else
    {path: text} through python3 (a record that is not JSON; a host without jq)."""
    import shutil

    from beekeeper.verify.test_host import records_script

    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "deployed.json").write_text(written({**CPU}))
    pattern = f"{tmp_path}/*/deployed.json"

    def run(script: str) -> dict:
        p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
        return json.loads(p.stdout)

    assert run(records_script(f"{tmp_path}/none/*/deployed.json")) == {}
    found = run(records_script(pattern))
    assert list(found) == [str(tmp_path / "llm" / "deployed.json")]
    if shutil.which("jq"):
        assert isinstance(found[str(tmp_path / "llm" / "deployed.json")], dict)
    # python3's answer, as on a host without jq
    no_jq = run(records_script(pattern).replace("jq -n", "false"))
    assert DeployedService.from_json(no_jq[str(tmp_path / "llm" / "deployed.json")]).port == 8083
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "deployed.json").write_text("{not json")
    text = run(records_script(pattern))[str(tmp_path / "old" / "deployed.json")]
    assert text == "{not json"


def test_the_record_needs_only_the_standard_library():
    """It is loaded by path in an isolated interpreter with no site-packages (as on a host),
    and imports nothing outside the standard library."""
    tree = ast.parse(RECORD.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""]
            for n in names:
                top = n.split(".")[0]
                assert top in sys.stdlib_module_names or top == "__future__", n
    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('d', "
            f"{str(RECORD)!r}); m = importlib.util.module_from_spec(s); sys.modules['d'] = m; "
            "s.loader.exec_module(m); r = m.DeployedService.from_json(m.DeployedService(port=1)"
            ".to_json()); print(r.port, m.read_record('x'), m.read_record('{\"port\": 1}'))")
    # and on the oldest host Python (Ubuntu 22.04's 3.10) where this machine has one
    for python in filter(None, (sys.executable, _python310())):
        out = subprocess.run([python, "-I", "-S", "-c", code], capture_output=True,
                             text=True, timeout=60)
        assert out.stdout.split() == ["1", "None", "None"], (python, out.stderr)
