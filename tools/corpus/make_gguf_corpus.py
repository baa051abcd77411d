#!/usr/bin/env python3
"""Writes the GGUF test corpus: malformed files (one defect each) and two small valid files.

Usage: tools/corpus/make_gguf_corpus.py [repo_root]

Output (committed; rerun after changing this script, the output is deterministic):
  tests/data/gguf_malformed/<defect>.gguf  -- each must be rejected by the parser; the expected
                                             error substring per file is in
                                             tests/unit/gguf/gguf_malformed_test.cc
  tests/data/gguf_valid/tiny_v{2,3}.gguf    -- well-formed files written independently of the C++
                                             writer; the parser tests read them back

Only the standard library is used (struct), so the corpus does not depend on any GGUF library.
Layout (ggml docs/gguf.md): header {"GGUF", u32 version, u64 n_tensors, u64 n_kv}, n_kv
{string key, u32 type, value}, n_tensors {string name, u32 n_dims, u64 dims[], u32 type,
u64 offset}, zero padding to the alignment, tensor data. Strings are {u64 length, bytes}.
"""

import os
import struct
import sys

ALIGN = 32

# Metadata value type ids.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
# ggml tensor type ids.
T_F32, T_F16, T_Q4_0, T_Q4_1, T_Q8_0 = 0, 1, 2, 3, 8

SCALAR_FORMATS = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
                  BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return u64(len(b)) + b


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + u32(version) + u64(n_tensors) + u64(n_kv)


def value(vtype, v):
    """Encodes a value payload; arrays are (element_type, [elements])."""
    if vtype == STR:
        return gstr(v)
    if vtype == ARR:
        etype, elements = v
        return u32(etype) + u64(len(elements)) + b"".join(value(etype, e) for e in elements)
    return struct.pack(SCALAR_FORMATS[vtype], v)


def kv(key, vtype, v):
    return gstr(key) + u32(vtype) + value(vtype, v)


def tensor_info(name, dims, ttype, offset):
    return gstr(name) + u32(len(dims)) + b"".join(u64(d) for d in dims) + u32(ttype) + u64(offset)


def pad(blob, align=ALIGN):
    return blob + b"\0" * ((-len(blob)) % align)


def f32_tensor(values):
    return b"".join(struct.pack("<f", v) for v in values)


def q8_0_block(d_bits, qs):
    return struct.pack("<H", d_bits) + bytes(q & 0xFF for q in qs)


def valid_file(version):
    """A small well-formed file exercising every value type and three tensor types."""
    kvs = [
        kv("general.architecture", STR, "llama"),
        kv("general.name", STR, "tiny \u00e9"),
        kv("tiny.u8", U8, 200), kv("tiny.i8", I8, -100),
        kv("tiny.u16", U16, 60000), kv("tiny.i16", I16, -30000),
        kv("tiny.u32", U32, 4000000000), kv("tiny.i32", I32, -2000000000),
        kv("tiny.f32", F32, 0.5), kv("tiny.bool", BOOL, 1),
        kv("tiny.u64", U64, 2**63 + 5), kv("tiny.i64", I64, -2**62), kv("tiny.f64", F64, 0.25),
        kv("tiny.tokens", ARR, (STR, ["a", "bc", ""])),
        kv("tiny.scores", ARR, (F32, [1.5, -2.0])),
        kv("tiny.nested", ARR, (ARR, [(I32, [1, 2]), (I32, []), (I32, [3])])),
    ]
    f32_data = f32_tensor([1.0, -2.0, 0.5, 3.25, 0.0, -0.125, 8.0, 100.0])
    q8_data = q8_0_block(0x3400, [i - 16 for i in range(32)])  # d = 0.25
    tensors = [("f32", [4, 2], T_F32, f32_data), ("q8", [32], T_Q8_0, q8_data)]
    infos, data = b"", b""
    for name, dims, ttype, blob in tensors:
        infos += tensor_info(name, dims, ttype, len(data))
        data = pad(data + blob)
    meta = header(len(tensors), len(kvs), version) + b"".join(kvs) + infos
    return pad(meta) + data


def one_tensor_file(dims, ttype, offset=0, data=b"", extra_kvs=(), name="t"):
    """One tensor (plus optional extra metadata) with its data section."""
    meta = header(1, len(extra_kvs)) + b"".join(extra_kvs) + tensor_info(name, dims, ttype, offset)
    return pad(meta) + data


def one_kv_file(kv_bytes, n_kv=1):
    return header(0, n_kv) + kv_bytes


def nested(depth):
    """An array nested `depth` levels deep, the innermost holding one u8."""
    v = (U8, [7])
    for _ in range(depth - 1):
        v = (ARR, [v])
    return v


def malformed():
    good_tensor = one_tensor_file([8], T_F32, data=f32_tensor(range(8)))
    two_tensors = (pad(header(2, 0) + tensor_info("a", [8], T_F32, 0) +
                       tensor_info("b", [8], T_F32, 32)) + pad(f32_tensor(range(8))) +
                   f32_tensor(range(8)))
    cases = {
        "empty_file": b"",
        "truncated_header": b"GGUF\x03\x00",
        "truncated_counts": header(0, 0)[:20],
        "bad_magic": b"GGML" + good_tensor[4:],
        "version_0": header(0, 0, version=0),
        "version_1": header(0, 0, version=1),
        "version_4": header(0, 0, version=4),
        "version_big_endian": header(0, 0, version=0x03000000),
        "absurd_kv_count": header(0, 2**62),
        "absurd_tensor_count": header(2**40, 0) + kv("k", U8, 1),
        "empty_key": one_kv_file(kv("", U32, 1)),
        "key_len_past_end": one_kv_file(u64(1 << 40) + b"general.name" + u32(U8) + b"\x01"),
        "string_len_past_end": one_kv_file(gstr("general.name") + u32(STR) + u64(99999999) + b"x"),
        "unknown_value_type": one_kv_file(gstr("k") + u32(13) + u32(0)),
        "unknown_array_element_type": one_kv_file(gstr("k") + u32(ARR) + u32(99) + u64(1) + u32(0)),
        "array_len_absurd": one_kv_file(gstr("k") + u32(ARR) + u32(U32) + u64(2**32) + u32(1)),
        "string_array_len_absurd": one_kv_file(gstr("k") + u32(ARR) + u32(STR) + u64(2**61)),
        "nested_array_too_deep": one_kv_file(kv("k", ARR, nested(9))),
        "bool_invalid_byte": one_kv_file(gstr("flag") + u32(BOOL) + b"\x02"),
        "duplicate_key": one_kv_file(kv("a.b", U32, 1) + kv("a.b", U32, 2), n_kv=2),
        "truncated_in_metadata": one_kv_file(kv("general.architecture", STR, "llama"))[:-2],
        "truncated_in_metadata_value": one_kv_file(kv("llama.context_length", U64, 8192))[:-3],
        "alignment_zero": one_tensor_file([8], T_F32, extra_kvs=[kv("general.alignment", U32, 0)]),
        "alignment_not_pow2": one_tensor_file([8], T_F32,
                                              extra_kvs=[kv("general.alignment", U32, 48)]),
        "alignment_wrong_type": one_tensor_file([8], T_F32,
                                                extra_kvs=[kv("general.alignment", U64, 32)]),
        "unknown_tensor_type": one_tensor_file([8], 4, data=b"\0" * 32),
        "too_many_dims": one_tensor_file([1, 1, 1, 1, 8], T_F32, data=f32_tensor(range(8))),
        "zero_dims": one_tensor_file([], T_F32, data=f32_tensor([0])),
        "dim_negative": one_tensor_file([2**63], T_F32),
        "dim_overflow": one_tensor_file([2**32, 2**32], T_F32),
        "tensor_size_overflow": one_tensor_file([2**62], T_F32),
        "dims_not_multiple_of_block": one_tensor_file([33], T_Q4_0, data=b"\0" * 64),
        "tensor_offset_misaligned": one_tensor_file([8], T_F32, offset=16, data=b"\0" * 64),
        "tensor_offset_past_end": one_tensor_file([8], T_F32, offset=1 << 40, data=b"\0" * 32),
        "truncated_tensor_data": good_tensor[:-4],
        "truncated_in_tensor_infos": (header(1, 0) + gstr("t") + u32(4) + u64(8) * 4)[:-3],
        "data_section_past_end": header(1, 0) + tensor_info("t", [8], T_F32, 0),
        "duplicate_tensor_name": two_tensors.replace(b"\x01\x00\x00\x00\x00\x00\x00\x00b",
                                                     b"\x01\x00\x00\x00\x00\x00\x00\x00a"),
    }
    return cases


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    bad_dir = os.path.join(root, "tests", "data", "gguf_malformed")
    good_dir = os.path.join(root, "tests", "data", "gguf_valid")
    os.makedirs(bad_dir, exist_ok=True)
    os.makedirs(good_dir, exist_ok=True)
    for name, blob in sorted(malformed().items()):
        with open(os.path.join(bad_dir, name + ".gguf"), "wb") as f:
            f.write(blob)
    for version in (2, 3):
        with open(os.path.join(good_dir, "tiny_v%d.gguf" % version), "wb") as f:
            f.write(valid_file(version))
    print("wrote %d malformed files to %s and 2 valid files to %s" %
          (len(malformed()), bad_dir, good_dir))


if __name__ == "__main__":
    main()
