"""
Model paths as users have them (host data `model_host_path`): a Hugging Face cache snapshot
path is a symlink into the cache's blobs, and is served when its target is a regular file
the server's user can reach (readability judged on the target's folders as well as the
link's); a native systemd service cannot open a file under /home, /root or /run/user (its
unit has ProtectHome=yes), so such a path is refused before any change; a file name the
kit cannot carry says which characters it can. Preflight runs on canned facts.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from beekeeper.core.errors import ConfigError, PreflightError
from beekeeper.tasks.preflight import ModelTarget

from .harness import POD_DATA, SHA, SYSTEMD, pod, run_deploy

SNAP = ("/root/.cache/huggingface/hub/models--unsloth--Qwen3.5-9B-GGUF/snapshots/"
        "3f1c0e6a/Qwen3.5-9B-Q8_0.gguf")
BLOB = "/root/.cache/huggingface/hub/models--unsloth--Qwen3.5-9B-GGUF/blobs/9f3c" + "0" * 60
LINKED = "/workspace/hf/snapshots/3f1c0e6a/Qwen3.5-9B-Q8_0.gguf"
LINKED_BLOB = "/workspace/hf/blobs/9f3c" + "0" * 60


def linked_host(link: str, target: str, **over):
    """A host where `link` is a symlink to the regular file `target` (pyinfra's File fact is
    False for a link, a dict for the file)."""
    files = {link: False, target: {"size": 1}}
    return pod(**{"ModelTarget": lambda path=None, **_: target if path == link else path,
                  "File": lambda path=None, **_: files.get(path),
                  "Sha256File": lambda path=None, **_: SHA if path in (link, target) else None,
                  "FileHead": b"GGUF\x03\x00\x00\x00", **over})


def test_a_symlink_to_a_readable_gguf_is_served():
    run_deploy({**POD_DATA, "model_host_path": LINKED}, linked_host(LINKED, LINKED_BLOB))


def test_readability_is_judged_on_the_targets_folders_too():
    blocked = {LINKED_BLOB: "folder /workspace/hf/blobs is mode 700, others cannot pass "
                            "through it"}
    with pytest.raises(PreflightError) as e:
        run_deploy({**POD_DATA, "model_host_path": LINKED}, linked_host(
            LINKED, LINKED_BLOB,
            OthersCannotRead=lambda path=None, **_: blocked.get(path, "")))
    assert str(e.value).endswith(
        f"host data `model_host_path`: the server runs as user beekeeper and cannot read "
        f"{LINKED} (a symlink to {LINKED_BLOB}) (folder /workspace/hf/blobs is mode 700, "
        "others cannot pass through it); fix: chmod o+r on the file and o+x on each folder "
        "above it, or move it into model_dir")


def test_a_dangling_symlink_is_not_a_file():
    with pytest.raises(PreflightError, match="is not a file on the host"):
        run_deploy({**POD_DATA, "model_host_path": LINKED},
                   linked_host(LINKED, LINKED_BLOB, ModelTarget=""))


def test_the_model_target_fact_follows_links(tmp_path):
    blob = tmp_path / "blobs" / "9f3c"
    blob.parent.mkdir()
    blob.write_bytes(b"GGUF\x03\x00\x00\x00")
    snap = tmp_path / "snap dir" / "m.gguf"
    snap.parent.mkdir()
    os.symlink("../blobs/9f3c", snap)

    def run(path):
        out = subprocess.run(["sh", "-c", ModelTarget().command(str(path))],
                             capture_output=True, text=True).stdout.splitlines()
        return ModelTarget().process(out)
    assert run(snap) == str(blob.resolve())
    assert run(blob) == str(blob.resolve())
    os.remove(blob)
    assert run(snap) == ""


@pytest.mark.parametrize("path,target", [
    ("/home/ana/models/Qwen3.5-9B-Q8_0.gguf", None),
    ("/root/models/Qwen3.5-9B-Q8_0.gguf", None),
    (LINKED, SNAP),  # a link outside /home into the root's Hugging Face cache
])
def test_a_native_systemd_service_refuses_a_model_its_unit_hides(path, target):
    canned = linked_host(path, target, InitSystem=SYSTEMD) if target else pod(
        InitSystem=SYSTEMD, File=lambda path=None, **_: {"size": 1},
        Sha256File=SHA, FileHead=b"GGUF\x03\x00\x00\x00")
    data = {**POD_DATA, "model_host_path": path}
    data.pop("persistent_root", None)
    with pytest.raises(PreflightError) as e:
        run_deploy(data, canned)
    line = str(e.value)
    assert "host data `model_host_path`: " + path in line
    assert "ProtectHome=yes" in line and "fix: move or copy the file out of them" in line
    assert "/srv/beekeeper/models" in line  # model_dir, where it can go


def test_the_supervisor_runtime_serves_a_model_under_root():
    """No unit, no ProtectHome: a pod's supervised server reads /root when others may."""
    run_deploy({**POD_DATA, "model_host_path": SNAP}, linked_host(SNAP, BLOB))


@pytest.mark.parametrize("name,said", [
    ("my model-Q8_0.gguf", "' ' (a space)"),
    ("modèle-Q8_0.gguf", "'è'"),
    ("-model.gguf", "starts with '-'"),
])
def test_a_file_name_the_kit_cannot_carry_says_what_it_can(name, said):
    from beekeeper.core.config import load_host_config
    with pytest.raises(ConfigError) as e:
        load_host_config({**POD_DATA, "model_host_path": f"/workspace/models/{name}"})
    line = str(e.value)
    assert said in line, line
    assert "letters, digits and . _ + -" in line
    assert "is not a .gguf file name" not in line


@pytest.mark.parametrize("key,data", [
    ("model_file", {"model_repo": "o/r", "model_file": "My Model Q8_0.gguf"}),
    ("model_path", {"model_path": "/srv/gguf/My Model Q8_0.gguf"}),
    ("model_host_path", {"model_host_path": "/srv/gguf/My Model Q8_0.gguf",
                         "model_sha256": "b" * 64}),
])
def test_a_space_in_any_model_file_name_is_refused_saying_which_characters_are_allowed(key, data):
    """A space is refused, not carried (the name is one plain word in every runtime's command
    line, the shell lines that check and place it, the verify's engine commands and the Hub
    download): the line names the space and the characters a name may hold."""
    from beekeeper.core.config import load_host_config
    with pytest.raises(ConfigError) as e:
        load_host_config({"profile": "cpu-tiny", "source": {"path": "/s.tgz", "ref": "x"},
                          **data})
    line = str(e.value)
    assert line.startswith(f"host data `{key}`: "), line
    assert "' ' (a space)" in line and "letters, digits and . _ + -" in line, line
    assert "is not a .gguf file name" not in line


@pytest.mark.parametrize("name,said", [
    ("my model-Q8_0.gguf", "' ' (a space)"), ("modèle-Q8_0.gguf", "'è'"),
    ("-model.gguf", "starts with '-'"), ("model.bin", "does not end .gguf"),
    ("sub/model.gguf", "'/'"),
])
@pytest.mark.parametrize("role", ["model", "draft"])
def test_a_hub_file_name_the_kit_cannot_carry_says_what_it_can(role, name, said):
    from beekeeper.core.config import load_host_config
    with pytest.raises(ConfigError) as e:
        load_host_config({"profile": "q8-dflash-32k",
                          "source": {"git": "https://x/y", "ref": "a" * 40},
                          f"{role}_repo": "o/r", f"{role}_file": name})
    line = str(e.value)
    assert line.startswith(f"host data `{role}_file`: "), line
    assert said in line and "letters, digits and . _ + -" in line, line
    assert "model_path" in line  # what to do with a Hub file so named: a renamed copy
