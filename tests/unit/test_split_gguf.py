"""A split GGUF (`NAME-00001-of-00003.gguf`, as llama-gguf-split and many Hub repositories
write a large model): llama-server loads its first file and looks for the others beside it
under the same name pattern. The kit places one file per model (uploaded from the
controller, `model_path`, or downloaded from the Hub, `model_file`/`draft_file`), so the
server could never load a split model placed that way: the deploy would pin, plan (the first
file's tensors only) and place it, then fail its smoke check. Refused in host data, naming
the key and how to make one file of it; a one-part "split" (`-00001-of-00001`) is one file."""

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
        "GGUF of 2 files, and the kit places one file per model, so the server could not load "
        "it; fix: merge the parts into one file (`llama-gguf-split --merge FIRST-PART "
        "OUT.gguf`) and give that file as model_path or model_host_path (a draft: put the "
        "merged file in a Hub repository of yours and name it in draft_file)"), msg


def test_a_one_part_split_name_is_one_file(tmp_path):
    only = tmp_path / "my-model-Q8_0-00001-of-00001.gguf"
    only.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert load_host_config({**CPU, "model_path": str(only)}).service.model.filename == only.name
