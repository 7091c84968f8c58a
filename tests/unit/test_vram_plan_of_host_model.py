"""Preflight's VRAM check plans a GGUF of the user's already on the host (host data
`model_host_path`), not the profile's model: the file's header is read there before any
change (its size, and its first bytes gzipped in base64 through pyinfra's Command fact), and
the planner reads it on the controller from a stand-in as long as the file. The refusal
names the file it planned (issue 43, point 3)."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from beekeeper.core import ggufhead
from beekeeper.core.errors import BeekeeperError, PreflightError, host_data
from beekeeper.core.planner import predict
from beekeeper.core.profiles import PROFILES
from beekeeper.tasks import preflight as pf

from .harness import H200_CARD, RTX4090, cfg, on_host, smi

PROFILE = "q8-turbo4-64k"


def _s(t: str) -> bytes:
    return struct.pack("<Q", len(t)) + t.encode()


def big_gguf(path: Path, tokens: int = 1000, weight_gib: float = 12.0,
             token_len: int = 8) -> Path:
    """A GGUF of an attention-only model (qwen2: 40 layers, 8 KV heads) whose tensor table
    holds `weight_gib` of F32 weights, sparse on disk: a model larger than the profile's."""
    arch = "qwen2"
    kv = [(b"general.architecture", 8, _s(arch))]
    for k, v in {"block_count": 40, "embedding_length": 5120, "attention.head_count": 40,
                 "attention.head_count_kv": 8, "context_length": 131072}.items():
        kv.append((f"{arch}.{k}".encode(), 4, struct.pack("<I", v)))
    kv.append((b"tokenizer.ggml.tokens", 9, struct.pack("<I", 8) + struct.pack("<Q", tokens)
               + b"".join(_s(f"tok{i}".ljust(token_len, "_")) for i in range(tokens))))
    rows = int(weight_gib * 2**30 / 4 / 5120)
    tensors = [("token_embd.weight", (5120, 1000)), ("blk.0.ffn_up.weight", (5120, rows))]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, typ, val in kv:
        out += struct.pack("<Q", len(key)) + key + struct.pack("<I", typ) + val
    offset = 0
    for name, dims in tensors:
        out += _s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        out += struct.pack("<IQ", 0, offset)  # F32, its offset in the data
        offset += -(-dims[0] * dims[1] * 4 // 32) * 32
    out += b"\0" * (-len(out) % 32)
    with open(path, "wb") as f:
        f.write(out)
        f.truncate(len(out) + offset)
    return path


def host_shell(seen: list[str]) -> Any:
    """pyinfra's Command fact, answered by running the command here (the test's files
    stand for the host's)."""
    def run(command: str, **_: Any) -> str:
        seen.append(command)
        return subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              check=True).stdout.rstrip("\n")
    return run


def host_cfg(path: Path, **kw: Any) -> Any:
    return cfg(profile=PROFILE, mode="native", model_host_path=str(path),
               model_sha256="ab" * 32, **kw)


def test_the_file_on_the_host_is_planned_and_named_not_the_profiles_model(tmp_path):
    gguf = big_gguf(tmp_path / "mine-Q8_0.gguf")
    mine = predict(PROFILES[PROFILE], gguf)  # as the controller would plan the file itself
    qwen = predict(PROFILES[PROFILE])
    assert mine.total_mib > qwen.total_mib * 1.2
    seen: list[str] = []
    with on_host(Command=host_shell(seen)):
        pf.check_vram(host_cfg(gguf, vram_budget_gib=mine.total_mib / 1024), RTX4090)
        # the profile's model fits this budget; the file served does not
        budget = (mine.total_mib - 1) / 1024
        with pytest.raises(PreflightError) as e:
            pf.check_vram(host_cfg(gguf, vram_budget_gib=budget), RTX4090)
    assert str(e.value).startswith(
        f"profile {PROFILE} with your model_host_path {gguf} needs {mine.total_mib:.0f} MiB "
        f"of VRAM, over vram_budget_gib {budget:g}")
    assert f"weights {mine.weights_mib:.0f} + KV {mine.kv_mib:.0f}" in str(e.value)
    # one read of its header, never the 12 GiB of weights
    assert seen and all(f"head -c {pf.GGUF_HEADER_FIRST} " in c for c in seen)
    assert "\n" not in str(e.value)


def test_a_header_longer_than_the_first_read_is_read_again_as_long_as_it_says(tmp_path):
    gguf = big_gguf(tmp_path / "vocab.gguf", tokens=60_000, token_len=80)  # 5.3 MiB
    seen: list[str] = []
    mine = predict(PROFILES[PROFILE], gguf)
    with on_host(Command=host_shell(seen)), pytest.raises(PreflightError) as e:
        pf.check_vram(host_cfg(gguf, vram_budget_gib=(mine.total_mib - 1) / 1024), RTX4090)
    assert f"needs {mine.total_mib:.0f} MiB" in str(e.value)
    lengths = [int(c.split("head -c ")[1].split()[0]) for c in seen]
    assert lengths[0] == pf.GGUF_HEADER_FIRST and len(lengths) == 2
    assert pf.GGUF_HEADER_FIRST < lengths[1] < 32 << 20  # what the header said, not 256 MiB


def test_a_host_file_that_is_no_gguf_is_one_line_naming_the_key_and_the_host_path(tmp_path):
    bad = tmp_path / "notes.gguf"
    bad.write_text("not a model\n")
    with on_host(Command=host_shell([])), pytest.raises(PreflightError) as e:
        pf.check_vram(host_cfg(bad), RTX4090)
    assert e.value.subject == host_data("model_host_path")
    assert e.value.problem.startswith(f"{bad}: not a GGUF file")
    assert "beekeeper-gguf-" not in str(e.value)  # the stand-in is never named


def test_a_host_file_that_cannot_be_read_leaves_the_profiles_plan_to_the_model_checks(tmp_path):
    """Not there, or not readable by the login: the VRAM check plans the profile's model (as
    before), and check_own_model's own line says what is wrong with the file."""
    qwen = predict(PROFILES[PROFILE])
    with on_host(Command=host_shell([])):
        pf.check_vram(host_cfg(tmp_path / "gone.gguf", vram_budget_gib=qwen.total_mib / 1024),
                      RTX4090)
    assert pf.parse_gguf_header("unreadable") is None
    assert pf.parse_gguf_header("12\nnot base64 gzip") is None
    assert pf.parse_gguf_header("12") is None  # its size, then nothing: no gzip came


def test_the_header_walk_stops_where_the_tensors_data_begins(tmp_path):
    gguf = big_gguf(tmp_path / "m.gguf", tokens=5000)
    with open(gguf, "rb") as f:
        head = f.read(1 << 20)
    end = ggufhead.parse(head).length
    assert end % 32 == 0 and head[end:] == b"\0" * (len(head) - end)
    from gguf import GGUFReader

    assert GGUFReader(str(gguf)).data_offset == end
    with pytest.raises(ggufhead.Short):
        ggufhead.parse(head[:end // 2])
    with pytest.raises(ValueError, match="^not a GGUF of version 2 or 3$"):
        ggufhead.parse(b"PK\x03\x04" + head[4:])


@pytest.mark.parametrize("missing", ["gzip", "base64"])
def test_a_host_without_gzip_or_base64_gets_the_profiles_plan_not_a_failed_command(
        tmp_path, missing):
    """A minimal host (no gzip, or no base64): the header's command says `unreadable` and
    exits 0, so the VRAM check plans the profile's model as before, where a failing command
    would fail the host with pyinfra's 'a command failed' (review of 9dd7211)."""
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "stat", "head", "gzip", "base64"):
        if tool != missing:
            (bin_dir / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    model = big_gguf(tmp_path / "m.gguf", weight_gib=0.01)
    p = subprocess.run([str(bin_dir / "sh"), "-c", pf.gguf_header_command(str(model), 4096)],
                       capture_output=True, text=True, env={"PATH": str(bin_dir)})
    assert (p.returncode, p.stdout) == (0, "unreadable\n"), p.stderr
    assert pf.parse_gguf_header(p.stdout) is None


def test_two_files_on_the_host_are_added_up_on_one_card(tmp_path):
    """Two services serving files already on the host (which the controller cannot plan
    before the facts), each within vram_budget_gib alone, over it together: preflight adds
    up their own plans and refuses, naming the sum."""
    a, b = big_gguf(tmp_path / "a-Q8_0.gguf"), big_gguf(tmp_path / "b-Q8_0.gguf")
    mine = predict(PROFILES[PROFILE], a).total_mib
    c = cfg(mode="native", vram_budget_gib=round(mine * 1.5 / 1024, 1), services=[
        {"profile": PROFILE, "model_host_path": str(a), "model_sha256": "ab" * 32,
         "model_alias": "a"},
        {"profile": PROFILE, "model_host_path": str(b), "model_sha256": "cd" * 32,
         "model_alias": "b", "service_name": "b", "port": 8084}])
    with on_host(Command=host_shell([])), pytest.raises(BeekeeperError) as e:
        pf.check_vram(c, smi(H200_CARD))
    assert f"the 2 GPU services on this host's card plan {2 * mine:.0f} MiB together" in \
        str(e.value), str(e.value)
