"""
The deployment record (beekeeper/core/deployed.py, issue 42): deployed.json as the deploy
writes it (tasks/service.py manifest) reads back field for field, every key it writes is a
field, and a record of an older kit (keys missing) or a newer one (keys unknown) reads with
defaults, for every reader. Standard library only: verify's kit on the host imports it.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import fields

import pytest

from beekeeper.core.config import load_host_config
from beekeeper.core.deployed import RECORD_VERSION, DeployedService, read_record
from beekeeper.tasks.service import manifest

from .harness import ROOT
from .test_architecture import _python310
from .test_engine_runtimes import written_manifest
from .test_gpu_containers import MODEL, POD_DATA, SHA, pod

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
    return manifest(cfg, cfg.service, image)


def test_a_compose_record_reads_back_field_for_field():
    text = written({**CPU, "runtime": "compose", "ctx_size": 2048, "port": 8090})
    r = DeployedService.from_json(text)
    assert (r.service, r.unit, r.container, r.profile) == (
        "llm", "beekeeper-llm.service", "beekeeper-llm", "cpu-tiny")
    assert (r.mode, r.runtime, r.image, r.log) == ("container", "compose", "img:1", None)
    assert r.compose_file == "/etc/beekeeper/llm/compose.yaml"
    assert (r.bind_address, r.port, r.ctx_size_tokens) == ("127.0.0.1", 8090, 2048)
    assert r.model_path == "/srv/beekeeper/models/gemma-3-270m-q4_k_m.gguf" and not r.model_is_users
    assert (r.draft_path, r.draft_sha256, r.version) == (None, None, RECORD_VERSION)
    # the text the deploy uploads is the record's own, byte for byte
    assert r.to_json() == text


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
    text = written_manifest(POD_DATA, pod())
    r = DeployedService.from_json(text)
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
    # fewer keys still (a hand-made or truncated record): defaults, no KeyError
    bare = DeployedService.from_json('{"service": "old", "port": 8090}')
    assert (bare.port, bare.mode, bare.unit, bare.profile, bare.models()) == (
        8090, "container", "", None, [])


def test_unknown_keys_and_wrong_types_are_ignored():
    r = DeployedService.from_json({**FIRST_KIT, "gpu_uuid": "GPU-1", "port": "8083",
                                   "ctx_size": True, "model_is_users": 1, "mode": None})
    assert (r.port, r.ctx_size_tokens, r.model_is_users, r.mode) == (
        None, None, False, "container")
    assert "gpu_uuid" not in r.to_dict()


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '"llm"', None])
def test_a_record_that_is_not_a_json_object_is_none_or_a_value_error(text):
    assert read_record(text) is None
    if text:
        with pytest.raises(ValueError):
            DeployedService.from_json(text)


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
            "s.loader.exec_module(m); r = m.DeployedService.from_json('{\"port\": 1}'); "
            "print(r.port, m.read_record('x'))")
    # and on the oldest host Python (Ubuntu 22.04's 3.10) where this machine has one
    for python in filter(None, (sys.executable, _python310())):
        out = subprocess.run([python, "-I", "-S", "-c", code], capture_output=True,
                             text=True, timeout=60)
        assert out.stdout.split() == ["1", "None"], (python, out.stderr)
