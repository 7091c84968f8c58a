"""
The GGUF header walk (tasks/preflight.py `header_walk`) that reads a model file's header for
the VRAM plan, from a host (`host_gguf`) or from the Hub (beekeeper/hubhead.py): how many
reads it makes and where it stops, on headers made here byte by byte (GGUF version 3: one
string array, the tokenizer's tokens, as a vocabulary makes a header long).
"""

from __future__ import annotations

import struct

import pytest

from beekeeper.tasks import preflight as pf

MIB = 1 << 20


def header(tokens: int, token_len: int = 80) -> bytes:
    """A GGUF header of one key, an array of `tokens` strings, padded to 32 bytes."""
    key = b"tokenizer.ggml.tokens"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 8, tokens)
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv + \
        (struct.pack("<Q", token_len) + b"t" * token_len) * tokens
    return body + bytes(-len(body) % 32)


def reader(head: bytes, size: int, reads: list[int], most: int = 12):
    """`first(length)` over a file of `size` bytes that starts with `head` (zeros after
    it), noting each length asked; a walk that asks more than `most` times is stopped."""
    def first(length: int) -> tuple[int, bytes]:
        reads.append(length)
        if len(reads) > most:
            raise AssertionError(f"the walk did not stop: {reads}")
        end = min(length, size)
        return size, (head + bytes(max(0, end - len(head))))[:end]
    return first


def test_a_header_three_times_the_first_read_is_read_in_two():
    """After the first 4 MiB the header says how long it is: the second read takes it all
    (doubling each time would take three reads: 4, 8, 16 MiB)."""
    head = header(150_000)
    assert 3 * pf.GGUF_HEADER_FIRST < len(head) < 4 * pf.GGUF_HEADER_FIRST
    reads: list[int] = []
    size, got = pf.header_walk(reader(head, len(head) + 100 * MIB, reads))  # type: ignore[misc]
    assert (size, got) == (len(head) + 100 * MIB, head)
    assert reads[0] == pf.GGUF_HEADER_FIRST and len(reads) == 2 and reads[1] >= len(head)
    assert all(isinstance(n, int) for n in reads)  # a length a shell's head -c or a Range takes


def test_a_file_that_ends_inside_its_header_is_read_once():
    """A file shorter than the first read, its header cut (a download still running): what
    it holds is returned at once, for the planner to say what it is."""
    head = header(70_000)[:MIB]
    reads: list[int] = []
    assert pf.header_walk(reader(head, MIB, reads)) == (MIB, head)
    assert reads == [pf.GGUF_HEADER_FIRST]


def test_a_header_longer_than_the_most_read_stops_there(monkeypatch):
    """The walk reads at most GGUF_HEADER_MAX: a header longer than that (a broken length
    field, or no model's) ends the walk with what was read, never a loop at the cap."""
    monkeypatch.setattr(pf, "GGUF_HEADER_FIRST", 256 << 10)
    monkeypatch.setattr(pf, "GGUF_HEADER_MAX", MIB)
    head = header(70_000)
    reads: list[int] = []
    size, got = pf.header_walk(reader(head, len(head) + MIB, reads))  # type: ignore[misc]
    assert reads[0] == 256 << 10 and reads[-1] == MIB and len(got) == MIB
    assert got == head[:MIB]


def test_an_unreadable_file_ends_the_walk_with_nothing():
    assert pf.header_walk(lambda length: None) is None


@pytest.mark.parametrize("start", [b"PK\x03\x04", b"GGUF\x01\x00\x00\x00"])
def test_bytes_that_are_no_gguf_header_are_returned_as_read(start):
    data = start + bytes(100)
    reads: list[int] = []
    assert pf.header_walk(reader(data, len(data), reads)) == (len(data), data)
    assert reads == [pf.GGUF_HEADER_FIRST]
