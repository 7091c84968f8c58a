"""
core/ggufhead.py: where a GGUF's header ends, or how much more to read (the header walk of
a host's or the Hub's model file), and its metadata and tensor table as gguf's own reader
reads them (the planner's layout).
"""

from __future__ import annotations

import pytest

from beekeeper.core.ggufhead import START, Short, Strings, parse


def parse_length(data: bytes) -> int:
    return parse(data).length


def _head(*kv: bytes, n_tensors: int = 0, version: int = 3, n_kv: int | None = None) -> bytes:
    """A GGUF's first bytes: magic, version, tensor and key counts, then the keys given."""
    import struct

    count = len(kv) if n_kv is None else n_kv
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, count) + b"".join(kv)


def _kv(key: str, kind: int, value: bytes) -> bytes:
    import struct

    return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", kind) + value


def _u32(n: int) -> bytes:
    import struct

    return struct.pack("<I", n)


def _text(t: str) -> bytes:
    import struct

    return struct.pack("<Q", len(t)) + t.encode()


def need_of(data: bytes) -> int:
    with pytest.raises(Short) as e:
        parse_length(data)
    return e.value.need


def test_gguf_versions_2_and_3_are_walked_and_1_is_not_a_header_this_walk_knows():
    one = _kv("llama.block_count", 4, _u32(40))  # 24 + 8 + 17 + 4 + 4 = 57 bytes
    assert parse_length(_head(one, version=3)) == 64
    assert parse_length(_head(one, version=2)) == 64
    for other in (_head(one, version=1), _head(one, version=258), b"GGUF\x04",
                  b"GGUF\x03\x01"):
        with pytest.raises(ValueError) as e:
            parse_length(other)
        assert not isinstance(e.value, Short), other  # no GGUF, not one cut short


def test_a_header_that_ends_where_the_bytes_read_end_is_whole():
    """The last byte read is the header's last: nothing more to read (57 bytes, aligned
    to 64; a header of no keys and no tensors is its 24 bytes, aligned to 32)."""
    data = _head(_kv("llama.block_count", 4, _u32(40)))
    assert len(data) == 57 and parse_length(data) == 64
    assert parse_length(_head()) == 32


def test_the_first_bytes_of_a_gguf_ask_for_the_first_read_whole():
    """Fewer bytes than GGUF's fixed 24 (the magic, as far as it goes, and the version):
    more bytes are needed (the walk then reads twice its first read), never refused as no
    GGUF."""
    for cut in (b"", b"GG", b"GGUF", b"GGUF\x03", _head()[:23]):
        assert need_of(cut) == START


def test_a_header_cut_inside_a_value_asks_for_that_value_and_128_bytes_a_tensor():
    """The bytes end inside a string: the next read takes that string whole, and 128
    bytes for each tensor of the table after the keys (the header's own numbers)."""
    value = "x" * 1000
    whole = _head(_kv("general.name", 8, _text(value)), n_tensors=3)
    at = 24 + 8 + len("general.name") + 4 + 8  # where the string's bytes begin
    assert need_of(whole[:at + 10]) == at + 1000 + 3 * 128
    assert need_of(whole[:-1]) == at + 1000 + 3 * 128
    # the tensor table's bytes counted as read: its first name's length cut
    assert need_of(whole + b"\0" * 4) == len(whole) + 8 + 3 * 128


def test_a_header_that_counts_more_keys_than_2_to_the_63_is_read_on_not_ended():
    """GGUF's counts are unsigned: a count of 2**63 keys is a header longer than the bytes
    read (a damaged file the planner then refuses), not a header of none."""
    assert need_of(_head(n_kv=2**63)) == 24 + 8
    assert need_of(_head(n_tensors=2**63)) == 24 + 8 + 2**63 * 128


def test_a_length_or_count_of_2_to_the_63_inside_the_header_is_read_on_not_ended():
    """A key's length, an array's count and a string's length in an array are unsigned
    too: each of 2**63 asks for more bytes rather than ending the header early (a list cut
    before its first string has no string to size the rest by: it asks for the bytes read,
    and the next read doubles the last)."""
    import struct

    long_key = _head(struct.pack("<Q", 2**63) + b"k")
    assert need_of(long_key) == 32 + 2**63
    strings = _head(_kv("tokenizer.ggml.tokens", 9, _u32(8) + struct.pack("<Q", 2**63)))
    assert need_of(strings) == 69
    one_long = _head(_kv("tokenizer.ggml.tokens", 9, _u32(8) + struct.pack("<Q", 2)
                         + struct.pack("<Q", 2**63) + b"tok"))
    # the list sized by what was read of it (the first string's 8-byte length): the
    # string's length at 69, read to 77, 8 bytes for each of 2 strings, twice over: 109
    assert need_of(one_long) == 109


def test_an_array_of_numbers_is_stepped_over_by_its_size_not_read_as_strings():
    """An array of 3 u32 (12 bytes) and one of 2 u64, then a key after them: the walk
    steps over each array by its element's size and reads the key after it."""
    import struct

    data = _head(_kv("a.ints", 9, _u32(4) + struct.pack("<Q", 3) + struct.pack("<3I", 7, 8, 9)),
                 _kv("a.longs", 9, _u32(10) + struct.pack("<Q", 2) + struct.pack("<2Q", 1, 2)),
                 _kv("a.name", 8, _text("qwen")))
    # 24 + (8+6+4+4+8+12) + (8+7+4+4+8+16) + (8+6+4+8+4) = 24 + 42 + 47 + 30 = 143
    assert len(data) == 143 and parse_length(data) == 160
    assert need_of(data[:-1]) == 143


def test_a_header_cut_inside_its_token_list_asks_for_the_list_as_the_tokens_read_show_it():
    """Cut in the second of 100 tokens of 10 bytes (18 with their length), with 2 tensors
    after the keys: the tokens read so far take 26 bytes each (the one cut counted whole
    with the length read), 99 more of them, twice over (the merges follow the tokens),
    and 128 bytes a tensor: 95 + 26 * 99 * 2 + 256 = 5,499 bytes."""
    import struct

    tokens = b"".join(_text(f"tok{i:07d}") for i in range(100))
    data = _head(_kv("tokenizer.ggml.tokens", 9, _u32(8) + struct.pack("<Q", 100) + tokens),
                 n_tensors=2)
    # the list's first token at 24 + 8 + 21 + 4 + 4 + 8 = 69; the second's string at 95
    assert need_of(data[:100]) == 5499


def test_the_tensor_table_is_walked_name_dimensions_type_and_offset():
    """Two tensors after one key: each its name, its count of dimensions (8 bytes each),
    its type (4) and its offset (8); the header ends after the last, at the alignment."""
    import struct

    def tensor(name: str, *dims: int) -> bytes:
        return _text(name) + _u32(len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) \
            + struct.pack("<IQ", 0, 0)

    data = _head(_kv("llama.block_count", 4, _u32(1)), n_tensors=2) \
        + tensor("token_embd.weight", 4096, 32000) + tensor("output_norm.weight", 4096)
    # 57 + (8+17+4+16+12) + (8+18+4+8+12) = 57 + 57 + 50 = 164, aligned to 32: 192
    assert len(data) == 164 and parse_length(data) == 192
    assert need_of(data[:-1]) == 164 + 2 * 128


def test_the_alignment_the_header_gives_as_a_u32_is_where_the_data_begins():
    """general.alignment as a u32 (GGUF's type 4): the header is padded to it; 0 is the
    default 32; the same key of another type is stepped over and leaves 32."""
    import struct

    def with_alignment(kind: int, value: bytes) -> int:
        return parse_length(_head(_kv("general.alignment", kind, value)))

    # 24 + 8 + 17 + 4 + 4 = 57 bytes
    assert with_alignment(4, _u32(64)) == 64
    assert with_alignment(4, _u32(256)) == 256
    assert with_alignment(4, _u32(0)) == 64  # 57 padded to 32: 64
    assert with_alignment(4, _u32(2**31)) == 2**31
    assert with_alignment(5, struct.pack("<i", 256)) == 64  # an int32: not the alignment


def test_a_string_or_a_tensor_name_or_dimensions_counted_past_the_bytes_read_read_on():
    """A string value of 2**63 bytes, a tensor's name of 2**63 and a tensor of 2**31
    dimensions: each unsigned, each asks for as many bytes as it says."""
    import struct

    value = _head(_kv("general.name", 8, struct.pack("<Q", 2**63) + b"x"))
    assert need_of(value) == 24 + 8 + 12 + 4 + 8 + 2**63
    name = _head(n_tensors=1) + struct.pack("<Q", 2**63) + b"t"
    assert need_of(name) == 32 + 2**63 + 128
    dims = _head(n_tensors=1) + _text("t") + _u32(2**31) + b"\0" * 8
    assert need_of(dims) == 24 + 9 + 4 + 8 * 2**31 + 12 + 128


def test_every_value_type_and_tensor_reads_as_ggufs_own_reader_reads_it(tmp_path):
    """A GGUF written by gguf's GGUFWriter with a key of every value type, arrays of numbers,
    booleans and strings, tensors of four types and an alignment of 64: every key, every
    tensor's name, dimensions, type and bytes, and where the data begins, as gguf's
    GGUFReader reads them (the reader the planner used before; it is the oracle here)."""
    import numpy as np
    from gguf import GGMLQuantizationType as Q, GGUFReader, GGUFValueType, GGUFWriter

    path = tmp_path / "every-type.gguf"
    w = GGUFWriter(str(path), "qwen35")
    scalars = {"u8": (GGUFValueType.UINT8, 200), "i8": (GGUFValueType.INT8, -100),
               "u16": (GGUFValueType.UINT16, 60000), "i16": (GGUFValueType.INT16, -30000),
               "u32": (GGUFValueType.UINT32, 4_000_000_000), "i32": (GGUFValueType.INT32, -7),
               "f32": (GGUFValueType.FLOAT32, 0.5), "bool": (GGUFValueType.BOOL, True),
               "u64": (GGUFValueType.UINT64, 2**40 + 3), "i64": (GGUFValueType.INT64, -2**40),
               "f64": (GGUFValueType.FLOAT64, 1e-9), "str": (GGUFValueType.STRING, "héllo")}
    for name, (kind, value) in scalars.items():
        w.add_key_value(f"t.{name}", value, kind)
    w.add_custom_alignment(64)  # general.alignment, and the writer pads to it
    w.add_array("qwen35.attention.head_count_kv", [0, 0, 0, 4] * 8)
    w.add_array("t.floats", [0.25, -1.5])
    w.add_array("t.one", [7])
    w.add_key_value("t.bools", [True, False, True], GGUFValueType.ARRAY, GGUFValueType.BOOL)
    w.add_token_list([f"tok{i}" for i in range(3000)] + ["ünï"])
    # shapes in bytes (gguf's raw tensors): rows of 64, 64, 256 and 64 values
    for name, shape, kind in (("token_embd.weight", (32, 128), Q.F16),
                              ("blk.0.attn_q.weight", (64, 68), Q.Q8_0),
                              ("blk.0.ffn_up.weight", (16, 144), Q.Q4_K),
                              ("output_norm.weight", (256,), Q.F32)):
        w.add_tensor(name, np.zeros(shape, np.uint8), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    oracle = GGUFReader(str(path))
    head = parse(path.read_bytes())
    assert head.length == oracle.data_offset and head.length % 64 == 0
    assert set(head.fields) == set(oracle.fields) - {"GGUF.version", "GGUF.tensor_count",
                                                     "GGUF.kv_count"}
    for key, field in oracle.fields.items():
        if key.startswith("GGUF."):
            continue
        mine = head.fields[key]
        if field.types[0] == GGUFValueType.ARRAY and field.types[-1] == GGUFValueType.STRING:
            assert mine == Strings(len(field.data)), key
        elif field.types[0] == GGUFValueType.ARRAY:
            assert mine == pytest.approx(tuple(field.contents())), key
        else:
            assert mine == pytest.approx(field.contents()), key
    assert head.fields["t.str"] == "héllo" and head.fields["t.one"] == (7,)
    assert [(t.name, t.dims, t.ggml_type, t.n_bytes) for t in head.tensors] == \
        [(t.name, tuple(int(d) for d in t.shape), int(t.tensor_type), int(t.n_bytes))
         for t in oracle.tensors]


def test_what_ends_a_read_is_said_in_words_the_planners_refusal_shows():
    """The planner's refusal of a GGUF it cannot read quotes these words (core/planner.py,
    `_read_gguf`): a file cut inside its header, a version other than 2 or 3, a value type
    GGUF does not have."""
    import struct

    with pytest.raises(Short) as cut:
        parse(_head()[:20])
    assert str(cut.value) == "the file ends inside its GGUF header (about 24 bytes)"
    with pytest.raises(ValueError) as v1:
        parse(_head(version=1))
    assert str(v1.value) == "not a GGUF of version 2 or 3"
    with pytest.raises(ValueError) as kind:
        parse(_head(_kv("general.name", 13, struct.pack("<I", 0))))
    assert str(kind.value) == "GGUF value type 13 is not one GGUF has"
    with pytest.raises(ValueError) as nested:  # gguf.cpp refuses one too
        parse(_head(_kv("a.nested", 9, struct.pack("<IQ", 9, 1))))
    assert str(nested.value) == "an array of arrays, which gguf.cpp does not read"


def test_a_string_that_is_not_utf_8_is_read_as_gguf_cpp_reads_it_not_refused():
    """gguf.cpp takes a string's bytes as they are: a model whose name holds bytes that are
    not UTF-8 loads in llama-server, so its plan reads it (the bytes replaced) rather than
    refusing the file."""
    import struct

    data = _head(_kv("general.name", 8, struct.pack("<Q", 1) + b"\xff"))
    assert parse(data).fields["general.name"] == "\ufffd"
