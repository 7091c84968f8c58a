"""
A GGUF file's header (versions 2 and 3, as ggml's gguf.cpp writes them), read once for both
of the kit's readers: the header walk that decides how many bytes of a host's or the Hub's
model file to fetch (tasks/preflight.py) and the VRAM planner's layout (core/planner.py).

A tokenizer's vocabulary is 150,000 to 260,000 strings in arrays: they are counted and
stepped over, never decoded, and an array of numbers is read by one struct call. gguf's
GGUFReader makes a numpy view of every value: 10 s for the 262,144-token header of
gemma-3-270m on a 2-core machine, on every plan, dry run and deploy that reads a model of the
user's (`benchmarks/gguf_header_read.py` prints both readers' times side by side).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

# the fixed-size value types by their number, as struct codes (8: a string, 9: an array)
_CODES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
          12: "d"}
STRING, ARRAY = 8, 9
MAGIC = b"GGUF"  # then a little-endian uint32 version: ggml's gguf.cpp reads 2 and 3
VERSIONS = (2, 3)
START = 24  # magic, version, tensor count, metadata count
DEFAULT_ALIGNMENT = 32
TENSOR_GUESS = 128  # bytes a tensor's entry looks to take, for a header read only in part


class Short(ValueError):
    """The bytes end inside the header; `need`: how many the header looks to have."""

    def __init__(self, need: int) -> None:
        super().__init__(f"the file ends inside its GGUF header (about {need} bytes)")
        self.need = need


@dataclass(frozen=True)
class Strings:
    """An array of strings (a vocabulary, its merges), as its length only."""

    count: int


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[int, ...]
    ggml_type: int

    @property
    def n_bytes(self) -> int:
        """Its data's bytes, by the type's block (gguf's GGML_QUANT_SIZES). KeyError: a
        type gguf does not know."""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        per_block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(self.ggml_type)]
        n = 1
        for d in self.dims:
            n *= d
        return n * block_bytes // per_block


@dataclass(frozen=True)
class Header:
    """The metadata (a number, a string, a tuple of numbers or Strings by key), the tensor
    table, and `length`: where the tensors' data begins (padded to the file's alignment)."""

    fields: dict[str, Any]
    tensors: tuple[Tensor, ...]
    length: int


class _Cursor:
    """Reads `data` from `pos` on; Short where it ends first."""

    def __init__(self, data: Any, n_tensors: int) -> None:
        self.data, self.pos, self.n_tensors = data, START, n_tensors

    def take(self, n: int) -> int:
        at = self.pos
        if at + n > len(self.data):
            raise Short(at + n + self.n_tensors * TENSOR_GUESS)
        self.pos = at + n
        return at

    def unpack(self, fmt: str) -> Any:
        return struct.unpack_from(fmt, self.data, self.take(struct.calcsize(fmt)))[0]

    def text(self) -> str:
        n = self.unpack("<Q")
        return bytes(self.data[self.take(n):self.pos]).decode("utf-8", "replace")

    def strings(self, count: int) -> Strings:
        """Steps over `count` strings; where the bytes end first, Short with the header's
        size as far as this array shows it (twice: a vocabulary's merges follow its tokens)."""
        start = self.pos
        for i in range(count):
            try:
                self.take(self.unpack("<Q"))
            except Short:
                per = (self.pos - start) / max(i, 1)
                raise Short(int(self.pos + per * (count - i) * 2
                                + self.n_tensors * TENSOR_GUESS)) from None
        return Strings(count)

    def value(self, kind: int) -> Any:
        if kind == STRING:
            return self.text()
        if kind == ARRAY:
            inner, count = self.unpack("<I"), self.unpack("<Q")
            if inner == STRING:
                return self.strings(count)
            if inner == ARRAY:
                raise ValueError("an array of arrays, which gguf.cpp does not read")
            code = _code(inner)
            return struct.unpack_from(f"<{count}{code}", self.data,
                                      self.take(struct.calcsize(code) * count))
        return self.unpack("<" + _code(kind))


def _code(kind: int) -> str:
    if kind not in _CODES:
        raise ValueError(f"GGUF value type {kind} is not one GGUF has")
    return _CODES[kind]


def parse(data: Any) -> Header:
    """The header at the start of `data` (bytes, or an mmap of the file). Short: it ends
    first; ValueError: no GGUF of version 2 or 3, or a value type GGUF does not have."""
    version = bytes(data[4:8])  # as far as the bytes go: it must begin one of VERSIONS'
    if bytes(data[:4]) != MAGIC[:len(data)] or not any(
            v.to_bytes(4, "little").startswith(version) for v in VERSIONS):
        raise ValueError("not a GGUF of version 2 or 3")
    if len(data) < START:
        raise Short(START)
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    cur = _Cursor(data, n_tensors)
    fields: dict[str, Any] = {}
    align = DEFAULT_ALIGNMENT
    for _ in range(n_kv):
        key, kind = cur.text(), cur.unpack("<I")
        fields[key] = cur.value(kind)
        if key == "general.alignment" and kind == 4:  # a uint32, as gguf.cpp reads it
            align = fields[key] or DEFAULT_ALIGNMENT
    tensors = []
    for _ in range(n_tensors):
        name, n_dims = cur.text(), cur.unpack("<I")
        # its dimensions, its type and its data's offset, as one piece
        *dims, ggml_type, _ = struct.unpack_from(f"<{n_dims}QIQ", data, cur.take(8 * n_dims + 12))
        tensors.append(Tensor(name, tuple(dims), ggml_type))
    return Header(fields, tuple(tensors), -(-cur.pos // align) * align)
