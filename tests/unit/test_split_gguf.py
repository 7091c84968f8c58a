"""A split GGUF (`NAME-00001-of-00003.gguf`, as llama-gguf-split and many Hub repositories
write a large model): llama-server loads its first file and looks for the others beside it
under the same name pattern. The kit places one file per model (uploaded from the
controller, `model_path`, or downloaded from the Hub, `model_file`/`draft_file`), so the
server could never load a split model placed that way: the deploy would pin, plan (the first
file's tensors only) and place it, then fail its smoke check. A split already on the host
(`model_host_path`) would load, but its sha256 and its VRAM plan would cover the first part
alone. Refused in host data, naming the key and how to make one file of it; a one-part
"split" (`-00001-of-00001`) is one file."""

from __future__ import annotations

import pytest

from beekeeper.core.config import load_host_config

from .harness import CPU, refused

GIT = {"git": "https://x/y", "ref": "a" * 40}


def test_a_split_gguf_on_the_controller_is_refused_naming_model_path(tmp_path):
    first = tmp_path / "my-model-Q8_0-00001-of-00003.gguf"
    first.write_bytes(b"GGUF\x03\x00\x00\x00")
    msg = refused({**CPU, "model_path": str(first)}, "model_path")
    assert "3 files" in msg and "llama-gguf-split --merge" in msg, msg


@pytest.mark.parametrize("role", ["model", "draft"])
def test_a_split_gguf_on_the_hub_is_refused_naming_its_file_key(role):
    msg = refused({"profile": "q8-dflash-32k", "source": GIT, f"{role}_repo": "o/r",
                   f"{role}_file": "Big-Model-Q4_K_M-00001-of-00002.gguf"}, f"{role}_file")
    assert msg == (
        f"host data `{role}_file`: 'Big-Model-Q4_K_M-00001-of-00002.gguf' is part 1 of a split "
        "GGUF of 2 files, and the kit places, checks (sha256) and plans (VRAM) one file per "
        "model, so the server could not load it or would load more than was planned; fix: "
        "merge the parts into one file (`llama-gguf-split --merge FIRST-PART OUT.gguf`) and "
        "give that file as model_path or model_host_path (a draft: put the merged file in a "
        "Hub repository of yours and name it in draft_file)"), msg


def test_a_split_gguf_on_the_host_is_refused_naming_model_host_path():
    # served where it is, the server would load every part; the sha256 and the VRAM plan (the
    # header read on the host) would see the first part's tensors alone
    msg = refused({**CPU, "model_host_path": "/srv/models/big-Q4_K_M-00001-of-00003.gguf",
                   "model_sha256": "0" * 64}, "model_host_path")
    assert "part 1 of a split GGUF of 3 files" in msg and "--merge" in msg, msg


def test_a_one_part_split_name_is_one_file(tmp_path):
    only = tmp_path / "my-model-Q8_0-00001-of-00001.gguf"
    only.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert load_host_config({**CPU, "model_path": str(only)}).service.model.filename == only.name
